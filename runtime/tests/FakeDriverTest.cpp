//===- FakeDriverTest.cpp - A libcuda that lacks symbols ------------------===//
//
// QOPT_CUDA_LIBRARY points at libqopt_fake_cuda.so (beside this binary), which
// exports cuInit and nothing else: the runtime names every missing symbol
// instead of crashing on a null function pointer.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cstdlib>

using namespace qopt::test;

namespace {

TEST(FakeDriver, MissingSymbolsAreNamed) {
  EXPECT_EQ(qopt_cuda_driver_load(), QOPT_ERROR_NO_DRIVER);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("libqopt_fake_cuda.so is too old or not a CUDA driver: missing "
                     "symbol(s) cuDriverGetVersion, cuGetErrorName"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cuLaunchKernel"), std::string::npos) << msg;
  // The lookup of a GPU module's own manifest (docs/abi.md) is required.
  EXPECT_NE(msg.find("cuModuleGetGlobal"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("cuInit,"), std::string::npos) << msg;
  qopt_context *ctx = nullptr;
  EXPECT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_ERROR_NO_DRIVER);
}

} // namespace

int main(int argc, char **argv) {
  std::string lib = exeDir() + "/libqopt_fake_cuda.so";
  ::setenv("QOPT_CUDA_LIBRARY", lib.c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

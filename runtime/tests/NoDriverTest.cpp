//===- NoDriverTest.cpp - The runtime without libcuda ---------------------===//
//
// Runs with QOPT_CUDA_LIBRARY pointing at a library that does not exist (set
// in main, before the first call), as on a machine without an NVIDIA driver:
// every CUDA request fails with QOPT_ERROR_NO_DRIVER and a clear message, and
// everything host-side keeps working.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cstdlib>

using namespace qopt::test;

namespace {

TEST(NoDriver, CudaRequestsFailCleanly) {
  EXPECT_EQ(qopt_cuda_driver_load(), QOPT_ERROR_NO_DRIVER);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("CUDA driver not available: cannot load /nonexistent/libcuda.so.1"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the host backend works without one"), std::string::npos) << msg;

  int32_t n = -1;
  EXPECT_EQ(qopt_cuda_device_count(&n), QOPT_ERROR_NO_DRIVER);
  EXPECT_EQ(std::string(qopt_last_error()), msg);
  int32_t v = -1;
  EXPECT_EQ(qopt_cuda_driver_version(&v), QOPT_ERROR_NO_DRIVER);

  qopt_context *ctx = reinterpret_cast<qopt_context *>(0x1);
  EXPECT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_ERROR_NO_DRIVER);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(std::string(qopt_last_error()), msg);
  // Asking twice gives the same answer (the load is attempted once).
  EXPECT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_ERROR_NO_DRIVER);
}

TEST(NoDriver, HostSideStillWorks) {
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS);
  qopt_device_info info;
  ASSERT_EQ(qopt_context_get_device_info(ctx, &info), QOPT_SUCCESS);
  EXPECT_STREQ(info.arch, "host");
  EXPECT_EQ(info.driver_version, 0);
  qopt_manifest *m = parseOrDie(sgdManifestJson());
  float u = 0;
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 1, &u, 1), QOPT_SUCCESS);
  EXPECT_EQ(u, 0.25f);
  // A kernel image needs CUDA: the message says so, not a crash.
  qopt_kernel *k = nullptr;
  const char ptx[] = ".version 8.0\n";
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_PTX, ptx, sizeof ptx, &k),
            QOPT_ERROR_UNSUPPORTED);
  qopt_manifest_destroy(m);
  qopt_context_destroy(ctx);
}

} // namespace

int main(int argc, char **argv) {
  ::setenv("QOPT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

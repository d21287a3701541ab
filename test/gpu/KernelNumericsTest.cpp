//===- KernelNumericsTest.cpp - Shipped kernels vs the C++ reference ------===//
//
// Each shipped spec's strict kernel, as qopt-opt compiled it, steps a list of
// tensors of very different sizes (partial tiles, groups and blocks included)
// for several steps on the GPU; the C++ reference (test/reference), which
// shares no code with the compiler, steps copies of the same buffers. Every
// byte of every stream (parameter, error bits, codes, scales, absmax) must
// agree after every step.
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"
#include "qopt/reference/Codebook.h"
#include "qopt/reference/Step.h"
#include "ShippedSpecCases.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ref = qopt::ref;
namespace cu = qopt::rt::cu;

namespace {

std::string kernelDir() {
  const char *dir = std::getenv("QOPT_TEST_KERNEL_DIR");
  return dir && *dir ? dir : QOPT_DEFAULT_KERNEL_DIR;
}

using qopt::test::DeviceBuffer;
using qopt::test::haveGpu;

using Case = qopt::test::SpecCase;
using qopt::test::adamHyper;

std::vector<Case> cases() { return qopt::test::shippedSpecCases(); }

class KernelNumerics : public ::testing::TestWithParam<Case> {};

TEST_P(KernelNumerics, StrictKernelMatchesReferenceByteForByte) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const Case &c = GetParam();
  ref::StepSpec spec = c.make();

  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  // The test's own allocations use the device's primary context, as PyTorch's do.
  cu::CUdevice dev = 0;
  cu::CUcontext primary = nullptr;
  CU_CHECK(cu::driver().cuDeviceGet(&dev, 0));
  CU_CHECK(cu::driver().cuDevicePrimaryCtxRetain(&primary, dev));
  CU_CHECK(cu::driver().cuCtxPushCurrent(primary));
  auto loaded = std::make_unique<qopt::test::LoadedKernel>();
  qopt::test::loadKernel(ctx, kernelDir() + "/" + c.spec + ".manifest.json", *loaded);
  ASSERT_FALSE(HasFatalFailure());
  const qopt_manifest_info &info = loaded->info;
  qopt_kernel *kernel = loaded->kernel;

  // Sizes: one element, a partial group, a full tile, a tile and a bit,
  // several tiles with a partial block, a larger tensor, and one of more
  // tiles than the grid has blocks (at least 1280 tiles against at most 528
  // blocks on an H200), so that blocks step runs of several tiles: the async
  // copies' copy-ahead into both stages, waits with a group pending.
  const std::vector<int64_t> sizes = {1,     31,    4096, 4097, 3 * 4096 + 17,
                                      70001, 5 * 1024 * 1024 + 3};
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<ref::TensorBuffers> tensors;
  for (int64_t n : sizes) {
    tensors.push_back(ref::makeTensor(spec, n));
    std::vector<float> x(n);
    for (float &v : x)
      v = 0.5f * normal(rng);
    ref::setMaster(spec, tensors.back(), x);
  }

  // Device copies of every stream, in ABI order.
  std::vector<std::vector<DeviceBuffer>> device(sizes.size());
  std::vector<void *> pointers;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<ref::Buffer *> streams = tensors[k].streams();
    ASSERT_EQ(streams.size(), info.num_streams) << "reference and manifest disagree on streams";
    device[k].resize(streams.size());
    for (size_t s = 0; s < streams.size(); ++s) {
      DeviceBuffer &d = device[k][s];
      d.bytes = streams[s]->bytes();
      CU_CHECK(cu::driver().cuMemAlloc(&d.ptr, std::max<size_t>(d.bytes, 16)));
      pointers.push_back(reinterpret_cast<void *>(d.ptr));
    }
  }
  // Codebook tables, one per codebook state, in state order.
  std::vector<DeviceBuffer> tables;
  std::vector<const void *> tablePointers;
  for (const ref::StateScheme &st : spec.states)
    if (st.kind == ref::StateKind::Codebook) {
      tables.emplace_back();
      tables.back().bytes = 1024;
      CU_CHECK(cu::driver().cuMemAlloc(&tables.back().ptr, 1024));
      CU_CHECK(cu::driver().cuMemcpyHtoD(tables.back().ptr, st.qmap.data(), 1024));
      tablePointers.push_back(reinterpret_cast<void *>(tables.back().ptr));
    }
  auto upload = [&](size_t k, size_t s) {
    ref::Buffer *b = tensors[k].streams()[s];
    if (b->bytes()) {
      ASSERT_EQ(cu::driver().cuMemcpyHtoD(device[k][s].ptr, b->data(), b->bytes()),
                cu::CUDA_SUCCESS);
    }
  };
  for (size_t k = 0; k < sizes.size(); ++k)
    for (size_t s = 0; s < device[k].size(); ++s)
      upload(k, s);

  qopt_tensor_list list{};
  list.num_tensors = sizes.size();
  list.num_streams = info.num_streams;
  list.numels = sizes.data();
  list.data = pointers.data();

  const int gradStream = spec.master == ref::Master::None ? 1 : 2;
  for (int64_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float> g(sizes[k]);
      float scale = step == 3 ? 1e-3f : 1e-2f; // a step with smaller gradients
      for (float &v : g)
        v = scale * normal(rng);
      ref::setGrad(spec, tensors[k], g);
      upload(k, gradStream);
    }
    ref::step(spec, tensors, step);
    ASSERT_EQ(qopt_step(kernel, &list, c.hypers.data(), c.hypers.size(), step,
                        tablePointers.data(), tablePointers.size(), nullptr),
              QOPT_SUCCESS)
        << qopt_last_error();
    CU_CHECK(cu::driver().cuCtxSynchronize());
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<ref::Buffer *> streams = tensors[k].streams();
      std::vector<std::string> names = tensors[k].streamNames(spec);
      for (size_t s = 0; s < streams.size(); ++s) {
        const ref::Buffer &want = *streams[s];
        std::vector<uint8_t> got(want.bytes());
        if (!got.empty())
          CU_CHECK(cu::driver().cuMemcpyDtoH(got.data(), device[k][s].ptr, got.size()));
        if (got == want.raw())
          continue;
        size_t esize = ref::dtypeSize(want.dtype());
        size_t mismatches = 0;
        std::string examples;
        for (size_t i = 0; i < got.size(); i += esize)
          if (std::memcmp(&got[i], &want.raw()[i], esize) != 0) {
            if (++mismatches <= 4) {
              examples += " [" + std::to_string(i / esize) + "] got 0x";
              char hex[8];
              for (size_t b = esize; b-- > 0;) {
                std::snprintf(hex, sizeof hex, "%02x", got[i + b]);
                examples += hex;
              }
              examples += " want 0x";
              for (size_t b = esize; b-- > 0;) {
                std::snprintf(hex, sizeof hex, "%02x", want.raw()[i + b]);
                examples += hex;
              }
            }
          }
        ADD_FAILURE() << c.spec << ": tensor of " << sizes[k] << " elements, stream "
                      << names[s] << ": " << mismatches << " of " << want.count()
                      << " elements differ:" << examples;
      }
    }
    if (HasFailure())
      break;
  }

  device.clear();
  tables.clear();
  loaded.reset();
  qopt_context_destroy(ctx);
  cu::CUcontext popped = nullptr;
  (void)cu::driver().cuCtxPopCurrent(&popped);
  (void)cu::driver().cuDevicePrimaryCtxRelease(dev);
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, KernelNumerics, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.spec;
                         });

std::string readFile(const std::string &path) {
  std::string text;
  if (FILE *f = std::fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

// The staged kernels ask for up to 160 KiB of dynamic shared memory (4
// stages); a device that allows less per block (consumer Ampere and Ada: 99
// KiB) must refuse the kernel at load, naming both sizes, and hand out no
// kernel. Here FlashAdamW's manifest asks for 1 MiB, more than any device.
TEST(KernelLoad, MoreSharedMemoryThanTheDeviceAllowsIsRefused) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  std::string json = readFile(kernelDir() + "/flash_adamw.manifest.json");
  std::string ptx = readFile(kernelDir() + "/flash_adamw.ptx");
  ASSERT_FALSE(json.empty() || ptx.empty()) << "no FlashAdamW in " << kernelDir();
  const std::string key = "\"shared_bytes\": ";
  size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos);
  size_t end = json.find_first_not_of("0123456789", at + key.size());
  ASSERT_GT(std::stoll(json.substr(at + key.size(), end - at - key.size())), 0)
      << "FlashAdamW is staged: it has dynamic shared memory";
  json.replace(at + key.size(), end - at - key.size(), "1048576");

  qopt_manifest *manifest = nullptr;
  ASSERT_EQ(qopt_manifest_parse(json.data(), json.size(), "flash_adamw (1 MiB)",
                                &manifest),
            QOPT_SUCCESS)
      << qopt_last_error();
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  qopt_kernel *kernel = nullptr;
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, manifest, QOPT_BINARY_PTX, ptx.data(),
                                          ptx.size(), &kernel),
            QOPT_ERROR_UNSUPPORTED);
  std::string error = qopt_last_error();
  EXPECT_NE(error.find("needs 1048576 bytes of shared memory per block"), std::string::npos)
      << error;
  EXPECT_NE(error.find("allows"), std::string::npos) << error;
  EXPECT_EQ(kernel, nullptr);
  if (kernel)
    qopt_kernel_destroy(kernel);
  qopt_manifest_destroy(manifest);
  qopt_context_destroy(ctx);
}

} // namespace

//===- EccEncodeExhaustiveTest.cpp - The lowered §3 encode on every float -===//
//
// numerics.md §3's encode of a bf16 parameter with int8 error bits, as the
// compiler lowers it (integer arithmetic on the bit patterns, StreamCodecs.cpp
// splitMasterBf16I8), against the C++ reference's eccEncode (float formulas
// as written) on every one of the 2^32 float32 bit patterns. The kernel is
// test/host/specs/ecc_encode.qopt (p = g, g an f32 gradient), so the stored
// bf16 value and rho are the encode of g. The host backend runs in CI; the
// CUDA backend (the same spec's PTX) where there is a GPU. A NaN stores the
// GPU's canonical bf16 NaN (0x7fff) where the reference and the host store
// 0x7fc0 (docs/numerics-notes.md, "Known differences"): on CUDA a NaN input
// must give a bf16 NaN and the reference's rho (0).
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Ecc.h"
#include "qopt/reference/Float.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace ref = qopt::ref;

namespace {

std::string manifestPath(qopt_backend backend) {
  const char *dir = std::getenv("QOPT_TEST_EXTRA_KERNEL_DIR");
  std::string base = dir && *dir ? dir : QOPT_EXTRA_KERNEL_DIR;
  return base + (backend == QOPT_BACKEND_HOST ? "/ecc_encode.manifest.json"
                                              : "/ptx/ecc_encode.manifest.json");
}

class EccEncodeExhaustive : public ::testing::TestWithParam<qopt_backend> {};

TEST_P(EccEncodeExhaustive, EveryFloatEncodesAsTheReference) {
  const qopt_backend backend = GetParam();
  if (backend == QOPT_BACKEND_CUDA) {
    int32_t n = 0;
    if (qopt_cuda_device_count(&n) != QOPT_SUCCESS || n == 0)
      GTEST_SKIP() << "GPU test skipped: no CUDA device";
  }
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(backend, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  qopt_registry *registry = nullptr;
  ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
  const std::string path = manifestPath(backend);
  ASSERT_EQ(qopt_registry_add_manifest_file(registry, path.c_str()), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_kernel *kernel = nullptr;
  ASSERT_EQ(qopt_kernel_create(ctx, registry, "EccEncode", &kernel), QOPT_SUCCESS)
      << qopt_last_error();

  // Chunks of 2^25 patterns: streams p (bf16), p.ecc (int8), g (f32).
  const int64_t chunk = int64_t(1) << 25;
  void *dev[3] = {};
  ASSERT_EQ(qopt_buffer_alloc(ctx, chunk * 2, &dev[0]), QOPT_SUCCESS);
  ASSERT_EQ(qopt_buffer_alloc(ctx, chunk, &dev[1]), QOPT_SUCCESS);
  ASSERT_EQ(qopt_buffer_alloc(ctx, chunk * 4, &dev[2]), QOPT_SUCCESS);
  std::vector<uint32_t> g(chunk);
  std::vector<uint16_t> x16(chunk);
  std::vector<int8_t> rho(chunk);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  uint64_t mismatches = 0;
  uint32_t firstBad = 0;
  for (uint64_t start = 0; start < (uint64_t(1) << 32); start += chunk) {
    for (int64_t i = 0; i < chunk; ++i)
      g[i] = static_cast<uint32_t>(start + i);
    ASSERT_EQ(qopt_buffer_upload(ctx, dev[2], g.data(), chunk * 4), QOPT_SUCCESS);
    qopt_tensor_list list{};
    list.num_tensors = 1;
    list.num_streams = 3;
    list.numels = &chunk;
    list.data = dev;
    ASSERT_EQ(qopt_step(kernel, &list, nullptr, 0, 1, nullptr, 0, nullptr), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_buffer_download(ctx, x16.data(), dev[0], chunk * 2), QOPT_SUCCESS);
    ASSERT_EQ(qopt_buffer_download(ctx, rho.data(), dev[1], chunk), QOPT_SUCCESS);
    std::vector<uint64_t> bad(threads, 0);
    std::vector<uint32_t> first(threads, 0);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (int64_t i = t; i < chunk; i += threads) {
          const ref::EccSplit s =
              ref::eccEncode(ref::bitsToFloat(g[i]), ref::DType::BF16, ref::DType::I8);
          const bool nanOnGpu = backend == QOPT_BACKEND_CUDA &&
                                (g[i] & 0x7FFFFFFFu) > 0x7F800000u &&
                                (x16[i] & 0x7F80u) == 0x7F80u && (x16[i] & 0x7Fu) != 0;
          if ((s.x16 != x16[i] && !nanOnGpu) || s.rho != rho[i]) {
            if (!bad[t]++)
              first[t] = g[i];
          }
        }
      });
    for (std::thread &th : pool)
      th.join();
    for (unsigned t = 0; t < threads; ++t) {
      if (bad[t] && !mismatches)
        firstBad = first[t];
      mismatches += bad[t];
    }
  }
  EXPECT_EQ(mismatches, 0u) << "first differing float32 pattern 0x" << std::hex << firstBad;
  for (void *p : dev)
    qopt_buffer_free(ctx, p);
  qopt_kernel_destroy(kernel);
  qopt_registry_destroy(registry);
  qopt_context_destroy(ctx);
}

INSTANTIATE_TEST_SUITE_P(Backends, EccEncodeExhaustive,
                         ::testing::Values(QOPT_BACKEND_HOST, QOPT_BACKEND_CUDA),
                         [](const ::testing::TestParamInfo<qopt_backend> &info) {
                           return std::string(info.param == QOPT_BACKEND_HOST ? "Host" : "Cuda");
                         });

} // namespace

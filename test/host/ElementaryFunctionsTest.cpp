//===- ElementaryFunctionsTest.cpp - exp, log, tanh, atan2, pow as lowered -===//
//
// The DSL's elementary functions as the compiler lowers them
// (lib/Codegen/ElementaryFunctions.cpp) against the C++ reference's
// (test/reference/lib/Elementary.cpp), bit for bit: test/host/specs/
// elementary.qopt stores exp, log, tanh of the gradient, atan2(g, p), g ** c
// (c a hyperparameter, stepped at several values), g ** 2 and g ** 0.5 (both
// constant exponents) in f32 states. The inputs: a stride over all float32
// bit patterns with a pseudo-random offset in each stride, then the special
// values (+-0, +-inf, NaNs with payloads, the functions' thresholds); atan2's
// x is a pseudo-random pattern, for half the elements of a magnitude near g's.
// Strict and fast kernels alike (fast mode emits the same sequence). The host
// backend in CI (2^18 inputs; QOPT_TEST_ELEMENTARY_LOG2 sets the log2 of the
// count); the CUDA backend, where there is a GPU, its PTX (2^24 inputs).
// Where both are NaN, the GPU's product x * x (the exponent 2) gives its
// canonical NaN and the reference the input's: there NaN against NaN passes;
// every other result, NaN payloads included, must be the same bits.
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Elementary.h"
#include "qopt/reference/Float.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace ref = qopt::ref;

namespace {

uint64_t mix(uint64_t z) { // splitmix64
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The special values every run includes.
std::vector<float> specialValues() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,        -0.0f,         inf,           -inf,
                          1.0f,        -1.0f,         2.0f,          0.5f,
                          88.7228394f, 88.7228317f,   -103.972084f,  -87.3365479f,
                          9.01091290f, -9.01091290f,  10.0f,         0x1p-149f,
                          -0x1p-149f,  0x1p-126f,     3.4028235e38f, -3.4028235e38f,
                          4097.0f,     257.0f,        0.171875f,     1.0000001f,
                          0.99999994f, 0.41666666f,   -0.41666666f,  1e-30f};
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7FC12345u, 0x7F800001u, 0xFFBFFFFFu})
    v.push_back(ref::bitsToFloat(nan));
  return v;
}

std::string manifestPath(qopt_backend backend, bool fast) {
  const char *dir = std::getenv("QOPT_TEST_EXTRA_KERNEL_DIR");
  std::string base = dir && *dir ? dir : QOPT_EXTRA_KERNEL_DIR;
  std::string sub = std::string(fast ? "/fast" : "") + (backend == QOPT_BACKEND_HOST ? "" : "/ptx");
  return base + sub + "/elementary.manifest.json";
}

using Param = std::tuple<qopt_backend, bool>; // backend, fast mode

class ElementaryFunctions : public ::testing::TestWithParam<Param> {
protected:
  void SetUp() override {
    backend = std::get<0>(GetParam());
    fast = std::get<1>(GetParam());
    if (backend == QOPT_BACKEND_CUDA) {
      int32_t n = 0;
      if (qopt_cuda_device_count(&n) != QOPT_SUCCESS || n == 0)
        GTEST_SKIP() << "GPU test skipped: no CUDA device";
    }
    ASSERT_EQ(qopt_context_create(backend, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
    ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
    const std::string path = manifestPath(backend, fast);
    ASSERT_EQ(qopt_registry_add_manifest_file(registry, path.c_str()), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_kernel_create(ctx, registry, "Elementary", &kernel), QOPT_SUCCESS)
        << qopt_last_error();
  }
  void TearDown() override {
    for (void *p : buffers)
      qopt_buffer_free(ctx, p);
    if (kernel)
      qopt_kernel_destroy(kernel);
    if (registry)
      qopt_registry_destroy(registry);
    if (ctx)
      qopt_context_destroy(ctx);
  }
  void *alloc(uint64_t bytes) {
    void *p = nullptr;
    EXPECT_EQ(qopt_buffer_alloc(ctx, bytes, &p), QOPT_SUCCESS) << qopt_last_error();
    buffers.push_back(p);
    return p;
  }
  int64_t count() const {
    const char *env = std::getenv("QOPT_TEST_ELEMENTARY_LOG2");
    int log2 = env && *env ? std::atoi(env) : backend == QOPT_BACKEND_CUDA ? 24 : 18;
    return int64_t(1) << std::max(4, std::min(log2, 30));
  }

  qopt_backend backend{};
  bool fast = false;
  qopt_context *ctx = nullptr;
  qopt_registry *registry = nullptr;
  qopt_kernel *kernel = nullptr;
  std::vector<void *> buffers;
};

/// Counts the elements where `got` is not `want`'s bits (NaN against NaN
/// passes only where `nanOk`), and keeps the first.
struct Mismatches {
  uint64_t count = 0;
  int64_t first = -1;
  void check(int64_t i, float want, uint32_t got, bool nanOk) {
    bool same = ref::floatBits(want) == got ||
                (nanOk && std::isnan(want) && std::isnan(ref::bitsToFloat(got)));
    if (!same && !count++)
      first = i;
  }
};

TEST_P(ElementaryFunctions, EqualTheReferenceBitForBit) {
  const int64_t n = count();
  std::vector<float> g(n), x(n);
  const std::vector<float> special = specialValues();
  const int64_t stride = n - static_cast<int64_t>(special.size() * special.size());
  ASSERT_GT(stride, 0);
  const int shift = 32 - static_cast<int>(std::log2(static_cast<double>(n)));
  for (int64_t i = 0; i < stride; ++i) {
    const uint64_t r = mix(static_cast<uint64_t>(i));
    g[i] = ref::bitsToFloat(static_cast<uint32_t>((uint64_t(i) << shift) | (r & ((1u << shift) - 1))));
    x[i] = ref::bitsToFloat(static_cast<uint32_t>(r >> 32));
    if (i & 1) // a magnitude near g's, either sign
      x[i] = std::ldexp(std::fabs(g[i]) + 0x1p-149f, static_cast<int>(r % 17) - 8) *
             ((r >> 20) & 1 ? -1.0f : 1.0f);
  }
  // Every pair of special values (atan2 takes both operands from the list).
  for (size_t a = 0; a < special.size(); ++a)
    for (size_t b = 0; b < special.size(); ++b) {
      g[stride + a * special.size() + b] = special[a];
      x[stride + a * special.size() + b] = special[b];
    }

  const int kStates = 7; // e, l, t, a, w, w2, wh
  void *pDev = alloc(n * 4), *gDev = alloc(n * 4);
  std::vector<void *> streams = {pDev, gDev};
  for (int s = 0; s < kStates; ++s)
    streams.push_back(alloc(n * 4));
  ASSERT_EQ(qopt_buffer_upload(ctx, gDev, g.data(), n * 4), QOPT_SUCCESS);

  const bool gpu = backend == QOPT_BACKEND_CUDA;
  const float exponents[] = {1.5f, 2.0f, 0.5f, -1.0f, 3.0f, 1.0f / 3.0f, -2.5f, 0.0f, 1.0f, 7.0f,
                             -0.75f, std::numeric_limits<float>::infinity()};
  for (size_t k = 0; k < std::size(exponents); ++k) {
    const float c = exponents[k];
    ASSERT_EQ(qopt_buffer_upload(ctx, pDev, x.data(), n * 4), QOPT_SUCCESS);
    qopt_tensor_list list{};
    list.num_tensors = 1;
    list.num_streams = static_cast<int32_t>(streams.size());
    list.numels = &n;
    list.data = streams.data();
    const qopt_hyper hyper{"c", c};
    ASSERT_EQ(qopt_step(kernel, &list, &hyper, 1, 1, nullptr, 0, nullptr), QOPT_SUCCESS)
        << qopt_last_error();
    std::vector<std::vector<uint32_t>> out(kStates, std::vector<uint32_t>(n));
    for (int s = 0; s < kStates; ++s)
      ASSERT_EQ(qopt_buffer_download(ctx, out[s].data(), streams[2 + s], n * 4), QOPT_SUCCESS);
    std::vector<uint32_t> p(n);
    ASSERT_EQ(qopt_buffer_download(ctx, p.data(), pDev, n * 4), QOPT_SUCCESS);

    const char *names[] = {"exp", "log", "tanh", "atan2", "pow", "pow2", "pow0.5"};
    // The reference on every hardware thread, each over its own contiguous range.
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::array<Mismatches, kStates + 1>> part(threads);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        Mismatches *bad = part[t].data();
        for (int64_t i = n * t / threads, end = n * (t + 1) / threads; i < end; ++i) {
          if (k == 0) { // the functions of g alone, once
            bad[0].check(i, ref::expF32(g[i]), out[0][i], false);
            bad[1].check(i, ref::logF32(g[i]), out[1][i], false);
            bad[2].check(i, ref::tanhF32(g[i]), out[2][i], false);
            bad[3].check(i, ref::atan2F32(g[i], x[i]), out[3][i], false);
            bad[5].check(i, ref::powF32(g[i], 2.0f), out[5][i], gpu);
            bad[6].check(i, ref::powF32(g[i], 0.5f), out[6][i], false);
          }
          bad[4].check(i, ref::powF32(g[i], c), out[4][i], gpu && c == 2.0f);
          bad[kStates].check(i, x[i], p[i], false);
        }
      });
    for (std::thread &th : pool)
      th.join();
    Mismatches bad[kStates + 1];
    for (const auto &m : part) // in thread order: the first mismatch is the lowest index
      for (int s = 0; s <= kStates; ++s) {
        if (bad[s].first < 0)
          bad[s].first = m[s].first;
        bad[s].count += m[s].count;
      }
    const Mismatches &param = bad[kStates];
    for (int s = 0; s < kStates; ++s)
      EXPECT_EQ(bad[s].count, 0u)
          << names[s] << " (c = " << c << ") differs from the reference on " << bad[s].count
          << " of " << n << " inputs; first: g = " << std::hexfloat << g[std::max<int64_t>(bad[s].first, 0)]
          << ", p = " << x[std::max<int64_t>(bad[s].first, 0)] << ", kernel "
          << ref::bitsToFloat(out[s][std::max<int64_t>(bad[s].first, 0)]);
    EXPECT_EQ(param.count, 0u) << "p = p changed the parameter";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backends, ElementaryFunctions,
    ::testing::Combine(::testing::Values(QOPT_BACKEND_HOST, QOPT_BACKEND_CUDA),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<Param> &info) {
      return std::string(std::get<0>(info.param) == QOPT_BACKEND_HOST ? "Host" : "Cuda") +
             (std::get<1>(info.param) ? "Fast" : "Strict");
    });

} // namespace

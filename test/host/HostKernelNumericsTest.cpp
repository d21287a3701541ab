//===- HostKernelNumericsTest.cpp - Host kernels vs the C++ reference -----===//
//
// Each shipped spec's strict host kernel, as qopt-opt compiled it (the same
// qopt IR as the GPU kernel, lowered by convert-qopt-to-host), steps a list of
// tensors on host memory through the runtime's C API; the C++ reference
// (test/reference), which shares no code with the compiler, steps copies of
// the same buffers. Every byte of every stream (parameter, error bits, codes,
// scales, absmax) must agree after every step: on the cases of the GPU suite
// (test/gpu/KernelNumericsTest.cpp), and on edge cases: all-zero gradients,
// NaN and infinities in the gradient (any NaN payload), values near the
// float16 and bfloat16 limits, and the tile range split across two threads.
// The same for every spec's f16 and f32 variants (<spec>.f16, <spec>.f32:
// parameter and gradient of that type, no error bits for f32). The numerics
// counters (saturated and non-finite groups, docs/abi.md) equal the
// reference's counts after every step; a gradient spike (1e6, 1e10,
// infinities) leaves every state and the parameters finite, and tiny
// gradients keep f16 scales nonzero (docs/numerics.md "Overflow"). The
// fixture and the cases: HostKernelNumerics.h; the grad-scaling variants:
// HostGradScalingTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "HostKernelNumerics.h"
#include "FourBitTableValues.h"
#include "GradientSpike.h"

#include <dlfcn.h>

using namespace qopt::host_test;
using namespace qopt::test;

namespace {

TEST_P(HostKernelNumerics, StrictKernelMatchesReferenceByteForByte) {
  // Sizes: empty, one element, a partial group, a full tile, a tile and a
  // bit, several tiles with a partial block, and a larger tensor.
  run(randomTensors({0, 1, 31, 4096, 4097, 3 * 4096 + 17, 70001}),
      [&](int64_t step, size_t, int64_t n) {
        std::vector<float> g(n);
        float scale = step == 3 ? 1e-3f : 1e-2f; // a step with smaller gradients
        for (float &v : g)
          v = scale * normal(rng);
        return g;
      });
}

TEST_P(HostKernelNumerics, SeedBatteryGradients) {
  // One launch over tensors whose gradients follow seed 004's battery
  // (numerics.md §5), at reduced sizes: normal, heavy_tail (randn *
  // exp(3 randn)), tiny (randn * 1e-20), adam_v_like ((1e-3 randn)^2),
  // nonmult32 (2^16 + 17 elements), const_groups (all 0.37), with_zeros (30%
  // exact zeros).
  enum Kind { Normal, HeavyTail, Tiny, AdamVLike, NonMult32, ConstGroups, WithZeros };
  const std::vector<int64_t> sizes = {1 << 14, 1 << 14, 1 << 12, 1 << 14,
                                      (1 << 16) + 17, 1 << 12, 1 << 14};
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  run(randomTensors(sizes), [&](int64_t, size_t k, int64_t n) {
    std::vector<float> g(n);
    for (float &v : g) {
      float r = normal(rng);
      switch (static_cast<Kind>(k)) {
      case Normal:
      case NonMult32:
        v = r;
        break;
      case HeavyTail:
        v = r * std::exp(3.0f * normal(rng));
        break;
      case Tiny:
        v = r * 1e-20f;
        break;
      case AdamVLike:
        v = (1e-3f * r) * (1e-3f * r);
        break;
      case ConstGroups:
        v = 0.37f;
        break;
      case WithZeros:
        v = uniform(rng) < 0.3f ? 0.0f : r;
        break;
      }
    }
    return g;
  });
}

TEST_P(HostKernelNumerics, ReductionOrderOnCancellingGradients) {
  // docs/numerics.md, "Reductions": each 2048-element chunk (and, with an offset, each
  // 1024-element half) starts with +-2^60, alternating, among N(0, 1) values, so that the float64
  // sums lose the small values to the large ones in an order-dependent way: the chunk size, the
  // tree's shape and the fold's order show in the result (a reference with chunks of 1024, or
  // with a sequential sum inside the chunk, fails here).
  if (!readsReductions(spec))
    GTEST_SKIP() << "reads no reduction";
  run(randomTensors({1, 2047, 2049, 3 * 2048 + 5, 70001}), [&](int64_t step, size_t, int64_t n) {
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t at = (i + (step % 2) * 1024) % 2048;
      g[i] = at == 0 ? std::ldexp((i / 2048) % 2 ? -1.0f : 1.0f, 60) : normal(rng);
    }
    return g;
  });
}

TEST_P(HostKernelNumerics, AllZeroGradient) {
  // A zero master (all-zero state) and a random one; every gradient is 0.
  std::vector<ref::TensorBuffers> tensors = randomTensors({33, 5000});
  ref::setMaster(spec, tensors[0], std::vector<float>(33, 0.0f));
  run(tensors, [](int64_t, size_t, int64_t n) { return std::vector<float>(n, 0.0f); });
}

TEST_P(HostKernelNumerics, NonFiniteGradient) {
  // NaN, +inf and -inf scattered, a group of 32 all NaN, a group all +inf;
  // then raw bf16 NaNs of other payloads and signs (a signalling one too).
  const float inf = std::numeric_limits<float>::infinity();
  run(randomTensors({4096 + 100, 300}),
      [&](int64_t step, size_t k, int64_t n) {
        std::vector<float> g(n);
        for (int64_t i = 0; i < n; ++i) {
          g[i] = 1e-2f * normal(rng);
          if (step == 4 && k == 1)
            continue; // finite again: the state keeps what the earlier steps left
          if (i % 97 == 5 || (i >= 64 && i < 96))
            g[i] = std::nanf("");
          else if (i % 101 == 7 || (i >= 128 && i < 160))
            g[i] = inf;
          else if (i % 103 == 9)
            g[i] = -inf;
        }
        return g;
      },
      [](size_t, ref::Buffer &grad) {
        if (grad.dtype() != ref::DType::BF16 || grad.count() < 300)
          return;
        uint16_t *bits = grad.as<uint16_t>();
        bits[200] = 0xffc1; // negative quiet NaN with a payload
        bits[201] = 0x7f81; // signalling NaN
        bits[233] = 0xff80; // -inf
      });
}

TEST_P(HostKernelNumerics, NearFloat16AndBFloat16Limits) {
  // Masters near the bf16 and f16 limits and gradients of magnitudes that
  // overflow f16 scales, land in f16 subnormals, or are f32/bf16 subnormal.
  // An infinite scale dequantizes a zero code to NaN.
  const std::vector<float> masters = {3.3895314e38f, -3.38e38f, 65504.0f, 65520.0f,
                                      -65536.0f,     6.1035156e-5f, 5.9604645e-8f,
                                      1.1754944e-38f, 1e-40f,   0.0f};
  const std::vector<float> magnitudes = {3e38f,   1e6f,  65504.0f, 65520.0f, 1e4f,
                                         6.1e-5f, 6e-8f, 1e-10f,   1.2e-38f, 1e-40f};
  std::vector<ref::TensorBuffers> tensors;
  for (size_t k = 0; k < masters.size(); ++k) {
    int64_t n = 64 + 7 * int64_t(k); // two groups, the second partial
    tensors.push_back(ref::makeTensor(spec, n));
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = masters[k] * (i % 3 == 0 ? 1.0f : i % 3 == 1 ? -0.999f : 0.5f);
    ref::setMaster(spec, tensors.back(), x);
  }
  run(tensors, [&](int64_t step, size_t k, int64_t n) {
    std::vector<float> g(n);
    float m = magnitudes[(k + size_t(step)) % magnitudes.size()];
    for (int64_t i = 0; i < n; ++i)
      g[i] = m * (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.25f * std::fabs(normal(rng)));
    return g;
  });
}

TEST_P(HostKernelNumerics, GradientSpikeLeavesStatesAndModelFinite) {
  // GradientSpike.h: one spike step, three ordinary ones; byte for byte the reference, the
  // counters its counts, every state finite and every parameter but the infinite spike's.
  if (std::string skip = qopt::test::spikeSkipReason(spec); !skip.empty())
    GTEST_SKIP() << skip;
  for (float spike : qopt::test::gradientSpikes()) {
    SCOPED_TRACE("spike " + std::to_string(spike));
    counters = {};
    refCounts = {};
    run(randomTensors({4096 + 100, 300}), [&](int64_t step, size_t, int64_t n) {
      return qopt::test::spikeGradient(step, n, spike, rng);
    });
    if (HasFailure())
      return;
    for (const ref::TensorBuffers &t : lastStepped)
      ASSERT_TRUE(qopt::test::finiteAfterSpike(spec, t, spike));
    // The reference's counts are what the counters were compared with.
    qopt::test::expectSpikeCounted(spec, spike, refCounts);
  }
}

TEST_P(HostKernelNumerics, TinyGradientsKeepFloat16ScalesNonzero) {
  // docs/numerics.md "Overflow": gradients of 1e-9 to 1e-7 give group absmaxes at or below 2^-25
  // (sqrt(v) after the first step is about 3e-2 |g|), which a float16 scale rounds to 0. Under
  // saturate they store 2^-24, uncounted (byte for byte the reference, counters its counts:
  // run()); for a spec with a saturating f16 group state the reference's own `underflowed` must
  // have seen some here, where its gradient type holds them (not f16, which rounds 1e-8 to 0). Weight decay 0: an L2 term
  // (FlashSGD's, FlashAdam's d = g + wd p) would make the states as large as the parameters.
  for (size_t i = 0; i < info.num_hypers; ++i) {
    qopt_hyper_info h{};
    ASSERT_EQ(qopt_manifest_get_hyper(manifest, i, &h), QOPT_SUCCESS);
    if (std::string(h.name) == "weight_decay") {
      spec.hyper.weightDecay = 0.0;
      extraHypers = {{"weight_decay", 0.0}};
    }
  }
  for (float scale : {1e-9f, 1e-8f, 1e-7f}) {
    SCOPED_TRACE("gradient scale " + std::to_string(scale));
    counters = {};
    refCounts = {};
    run(randomTensors({4096 + 100, 300}), [&](int64_t, size_t, int64_t n) {
      std::vector<float> g(n);
      for (int64_t i = 0; i < n; ++i)
        g[i] = scale * normal(rng);
      return g;
    });
    if (HasFailure())
      return;
    bool f16Groups = false;
    for (const ref::StateScheme &st : spec.states)
      f16Groups |= st.kind == ref::StateKind::Group &&
                   st.group.overflow == ref::Overflow::Saturate &&
                   st.group.scaleDType == ref::ScaleDType::F16;
    if (f16Groups && scale <= 1e-8f && spec.grad != ref::DType::F16) {
      EXPECT_GT(refCounts.underflowed, 0) << "no f16 scale underflowed at this gradient scale";
    }
  }
}

/// The host function of the kernel under test, for the splitting trampoline.
qopt_host_kernel_fn gHostFunction = nullptr;
/// Where the kernel reads per-tensor reductions, a part of the range holds
/// whole tensors (docs/abi.md, "Reductions"): the descriptors' size, to find
/// the first tile of the tensor in the middle; 0 splits anywhere.
int64_t gDescriptorBytes = 0;

/// The middle of [begin, end), moved to its tensor's first tile where the
/// kernel needs whole tensors.
int64_t splitPoint(const void *descs, const int32_t *tileMap, int64_t begin, int64_t end) {
  int64_t mid = begin + (end - begin) / 2;
  if (gDescriptorBytes == 0 || mid >= end)
    return mid;
  int64_t first = 0;
  std::memcpy(&first,
              static_cast<const char *>(descs) + tileMap[mid] * gDescriptorBytes + 8,
              sizeof first);
  return std::max(first, begin);
}

/// Calls the host function on two halves of the tile range, from two threads
/// at once, as a runtime may.
void splitTiles(const void *descs, const int32_t *tileMap, int64_t numTiles,
                const float *uniforms, const float *const *tables, int64_t begin,
                int64_t end) {
  int64_t mid = splitPoint(descs, tileMap, begin, end);
  std::thread second(gHostFunction, descs, tileMap, numTiles, uniforms, tables, mid, end);
  gHostFunction(descs, tileMap, numTiles, uniforms, tables, begin, mid);
  second.join();
}

/// The same for a kernel that takes numerics counters: both halves add to
/// them at once.
void splitCountedTiles(const void *descs, const int32_t *tileMap, int64_t numTiles,
                       const float *uniforms, const float *const *tables, int64_t begin,
                       int64_t end, int64_t *counters) {
  auto fn = reinterpret_cast<qopt_host_counted_kernel_fn>(gHostFunction);
  int64_t mid = splitPoint(descs, tileMap, begin, end);
  std::thread second(fn, descs, tileMap, numTiles, uniforms, tables, mid, end, counters);
  fn(descs, tileMap, numTiles, uniforms, tables, begin, mid, counters);
  second.join();
}

TEST_P(HostKernelNumerics, FourBitTableCodesOnAndBesideEveryMidpoint) {
  // test/common/FourBitTableValues.h: c on, and a float beside, each
  // midpoint of the 4-bit tables, in groups of absmax 1 and (every third
  // group) 3, where c = x / 3 takes the division.
  bool table = false;
  for (const ref::StateScheme &st : spec.states)
    table |= st.kind == ref::StateKind::Group && st.group.isTable();
  if (!table)
    GTEST_SKIP() << "no 4-bit table state";
  ASSERT_TRUE(qopt::test::fourBitTableValuesHitTies());
  spec.hyper.beta1 = 0.0;
  spec.hyper.beta2 = 0.0;
  extraHypers = {{"beta1", 0.0}, {"beta2", 0.0}};
  const int64_t group = spec.states[0].group.group;
  const std::vector<float> values = qopt::test::fourBitTableValues();
  const int64_t n = (int64_t(values.size()) * 2 / group + 2) * group + 45;
  run(randomTensors({n, 3 * group + 7}), [&](int64_t step, size_t k, int64_t count) {
    std::vector<float> g(count);
    size_t at = size_t(step) * 131 + k * 7;
    for (int64_t i = 0; i < count; ++i) {
      g[i] = i % group == 0 ? ((i / group) % 2 ? -1.0f : 1.0f) : values[at++ % values.size()];
      if ((i / group) % 3 == 2)
        g[i] *= 3.0f;
    }
    return g;
  });
}

TEST_P(HostKernelNumerics, StochasticRoundingRefusesASeedOrStepItCannotHold) {
  // The key is (seed, step) as float32 (docs/numerics.md, "Stochastic
  // rounding"): a seed that is not an integer in [0, 2^24) and a step past
  // 2^24 would round onto another key's bits; both are refused before the
  // launch, and every tensor is left as it was.
  if (spec.master != ref::Master::Stochastic)
    GTEST_SKIP() << "no stochastic rounding";
  std::vector<ref::TensorBuffers> tensors = randomTensors({300, 4097});
  for (ref::TensorBuffers &t : tensors)
    ref::setGrad(spec, t, std::vector<float>(t.numel, 1e-2f));
  const std::vector<ref::TensorBuffers> before = tensors;
  auto refused = [&](double seed, int64_t step, const std::string &why) {
    extraHypers = {{"seed", seed}};
    qopt_status status = QOPT_SUCCESS;
    tryHostStep(tensors, step, nullptr, &status);
    EXPECT_NE(status, QOPT_SUCCESS) << "seed " << seed << ", step " << step;
    EXPECT_NE(std::string(qopt_last_error()).find(why), std::string::npos)
        << qopt_last_error();
    for (size_t k = 0; k < tensors.size(); ++k) {
      std::vector<ref::Buffer *> got = tensors[k].streams();
      std::vector<ref::Buffer *> want =
          const_cast<ref::TensorBuffers &>(before[k]).streams();
      for (size_t s = 0; s < got.size(); ++s)
        EXPECT_EQ(got[s]->raw(), want[s]->raw()) << "tensor " << k << " stream " << s;
    }
  };
  for (double seed : {1.5, -1.0, 16777216.0, 1e30})
    refused(seed, 1, "stochastic rounding's seed is an integer in [0, 2^24)");
  refused(7.0, (int64_t(1) << 24) + 1, "holds steps up to 2^24");
  extraHypers = {{"seed", 16777215.0}};
  hostStep(tensors, int64_t(1) << 24);
}

TEST_P(HostKernelNumerics, TileRangeSplitAcrossThreads) {
  std::string library = kernelDir(GetParam().shipped) + "/" + GetParam().spec + ".so";
  void *handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  std::string symbol = std::string(info.kernel) + "_host";
  gHostFunction = reinterpret_cast<qopt_host_kernel_fn>(dlsym(handle, symbol.c_str()));
  ASSERT_NE(gHostFunction, nullptr) << symbol << " not in " << library;
  gDescriptorBytes = readsReductions(spec) ? 16 + 8 * int64_t(info.num_streams) : 0;
  qopt_kernel *split = nullptr;
  qopt_host_kernel_fn trampoline =
      info.num_numerics_counters ? reinterpret_cast<qopt_host_kernel_fn>(splitCountedTiles)
                                 : splitTiles;
  ASSERT_EQ(qopt_kernel_create_host(ctx, manifest, trampoline, &split), QOPT_SUCCESS)
      << qopt_last_error();
  // Gradients that saturate some groups in each half: the counters are
  // added to from both threads.
  run(randomTensors({31, 4097, 70001}),
      [&](int64_t step, size_t, int64_t n) {
        std::vector<float> g(n);
        for (float &v : g)
          v = (step == 2 ? 1e7f : 1e-2f) * normal(rng);
        return g;
      },
      nullptr, split);
  qopt_kernel_destroy(split);
  dlclose(handle);
}


INSTANTIATE_TEST_SUITE_P(Specs, HostKernelNumerics, ::testing::ValuesIn(cases()), caseName);

} // namespace

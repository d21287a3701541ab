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
// parameter and gradient of that type, no error bits for f32), and for the
// grad-scaling variants (<spec>[.f16|.f32].scaled): the fused unscale equals
// GradScaler.unscale_ (written out here) followed by the reference's step,
// and found_inf leaves every stream byte-identical. The numerics counters
// (saturated and non-finite groups, docs/abi.md) equal the reference's
// counts after every step, and a gradient spike (1e6, 1e10, infinities)
// leaves every state and the parameters finite (docs/numerics.md
// "Overflow").
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Codebook.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Step.h"
#include "FourBitTableValues.h"
#include "GradientSpike.h"
#include "ShippedSpecCases.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ref = qopt::ref;

namespace {

/// Where the host libraries of the shipped specs, or of the test-only specs
/// of test/host/specs, are.
std::string kernelDir(bool shipped) {
  const char *dir = std::getenv(shipped ? "QOPT_TEST_KERNEL_DIR" : "QOPT_TEST_EXTRA_KERNEL_DIR");
  return dir && *dir ? dir : shipped ? QOPT_DEFAULT_KERNEL_DIR : QOPT_EXTRA_KERNEL_DIR;
}

/// A spec and the reference step that specifies it.
struct Case {
  std::string spec;                    // file stem in specs/ (or test/host/specs/)
  std::function<ref::StepSpec()> make; // the reference's description
  std::vector<qopt_hyper> hypers;      // values given to the kernel
  bool shipped = true;                 // false: a test-only spec
};

using namespace qopt::test;

/// test/host/specs/adamw_seed003.qopt: seed 003's group options on groups
/// of 8 (overflow = ieee) and 64 (overflow = saturate, f32 scales), an f16
/// parameter with int16 error bits, an f32 gradient.
ref::StepSpec seed003Groups() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI16);
  s.param = ref::DType::F16;
  s.grad = ref::DType::F32;
  s.states[0].group = ref::GroupScheme::seed003(/*isSigned=*/true, ref::Companding::Softsign);
  s.states[0].group.group = 8;
  s.states[1].group = ref::GroupScheme::seed003(/*isSigned=*/false, ref::Companding::Sqrt);
  s.states[1].group.group = 64;
  s.states[1].group.scaleDType = ref::ScaleDType::F32;
  s.states[1].group.overflow = ref::Overflow::Saturate;
  return s;
}

/// test/host/specs/adamw_plain.qopt: plain bf16 and f32 states, an f32
/// parameter, an f16 gradient.
ref::StepSpec plainStates() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::None);
  s.param = ref::DType::F32;
  s.grad = ref::DType::F16;
  s.states = {ref::StateScheme::plainBF16("m"), ref::StateScheme::plainF32("v")};
  return s;
}

/// test/host/specs/reduction_probe.qopt: every reduction of the gradient.
ref::StepSpec reductionProbe() {
  ref::StepSpec s = plainBf16(ref::Optimizer::ReductionProbe, ref::Hyper(),
                              {"a", "b", "c", "d"}, {}, /*state32=*/true);
  s.param = ref::DType::F32;
  s.grad = ref::DType::F32;
  return s;
}

/// A shipped spec's --param-type variant (specs/CMakeLists.txt builds
/// <spec>.f16 and <spec>.f32): the parameter and the gradient of type `t`;
/// an f32 parameter is its own master weight, without error bits.
ref::StepSpec retyped(ref::StepSpec s, ref::DType t) {
  s.param = t;
  s.grad = t;
  // Stochastic rounding and the Kahan compensation are bf16's: the f16
  // variant rounds to nearest.
  if (t == ref::DType::F32 || s.master == ref::Master::Stochastic ||
      s.master == ref::Master::KahanBF16)
    s.master = ref::Master::None;
  return s;
}

/// Every shipped spec as `<spec>.<suffix>` in parameter type `t`.
void addVariants(std::vector<Case> &all, const std::string &suffix, ref::DType t) {
  std::vector<SpecCase> specs = shippedSpecCases();
  for (const SpecCase &c : reductionSpecCases())
    specs.push_back(c);
  for (const SpecCase &c : specs) {
    std::function<ref::StepSpec()> make = c.make;
    all.push_back({c.spec + "." + suffix, [make, t] { return retyped(make(), t); }, c.hypers});
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const SpecCase &c : shippedSpecCases())
    all.push_back({c.spec, c.make, c.hypers});
  for (const SpecCase &c : reductionSpecCases())
    all.push_back({c.spec, c.make, c.hypers});
  addVariants(all, "f16", ref::DType::F16);
  addVariants(all, "f32", ref::DType::F32);
  all.push_back({"adamw_seed003", seed003Groups, kAdamHypers, /*shipped=*/false});
  all.push_back({"adamw_plain", plainStates, kAdamHypers, /*shipped=*/false});
  all.push_back({"reduction_probe", reductionProbe, {}, /*shipped=*/false});
  return all;
}

/// Fills the gradient of tensor `k` at step `step`.
using GradFn = std::function<std::vector<float>(int64_t step, size_t k, int64_t n)>;
/// Rewrites raw gradient bytes after the values are set (special NaN payloads).
using PokeFn = std::function<void(size_t k, ref::Buffer &grad)>;

/// Whether two f32 or f16 elements are both NaN. IEEE 754 fixes neither the
/// sign nor the payload of a NaN that an operation produces; on x86 it is the
/// first NaN operand's, and LLVM may commute the operands of + and * where g++
/// does not, so an f32 parameter (stored as computed) or an f16 one (which
/// keeps a NaN's sign) can hold a NaN of the other sign than the reference's.
/// Such elements count as equal; every other byte must agree. (A bf16
/// parameter stores every NaN as 0x7fc0, like the reference.)
bool bothNaN(ref::DType dtype, const uint8_t *a, const uint8_t *b) {
  if (dtype == ref::DType::F32) {
    float x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return std::isnan(x) && std::isnan(y);
  }
  if (dtype == ref::DType::F16) {
    uint16_t x, y;
    std::memcpy(&x, a, 2);
    std::memcpy(&y, b, 2);
    auto nan = [](uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; };
    return nan(x) && nan(y);
  }
  return false;
}

/// The routine of every test: a registry of kernels/host, a host context and
/// the spec's kernel; `run` steps the host kernel and the reference on
/// copies of the same tensors and compares every stream after every step.
class HostKernelNumerics : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    const Case &c = GetParam();
    spec = c.make();
    ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS)
        << qopt_last_error();
    manifestPath = kernelDir(c.shipped) + "/" + c.spec + ".manifest.json";
    ASSERT_EQ(qopt_manifest_load(manifestPath.c_str(), &manifest), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
    // A launch's tensors lie at their first tiles (stochastic rounding's index).
    spec.tileElements = info.launch.tile_elements;
    ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_add_manifest_file(registry, manifestPath.c_str()),
              QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_kernel_create(ctx, registry, info.kernel, &kernel), QOPT_SUCCESS)
        << qopt_last_error();
    qopt_kernel_info kinfo{};
    ASSERT_EQ(qopt_kernel_get_info(kernel, &kinfo), QOPT_SUCCESS);
    ASSERT_EQ(kinfo.format, QOPT_BINARY_HOST);
    for (const ref::StateScheme &st : spec.states)
      if (st.kind == ref::StateKind::Codebook)
        tables.push_back(st.qmap.data());
  }

  void TearDown() override {
    qopt_kernel_destroy(kernel);
    qopt_registry_destroy(registry);
    qopt_manifest_destroy(manifest);
    qopt_context_destroy(ctx);
  }

  /// Steps `tensors` with the host kernel `k` (default: the registry's),
  /// adding its saturated and non-finite groups to `counters`.
  void hostStep(std::vector<ref::TensorBuffers> &tensors, int64_t step,
                qopt_kernel *k = nullptr) {
    qopt_status status = QOPT_SUCCESS;
    tryHostStep(tensors, step, k, &status);
    ASSERT_EQ(status, QOPT_SUCCESS) << qopt_last_error();
  }

  /// hostStep, its status in `status` (the stream count checked).
  void tryHostStep(std::vector<ref::TensorBuffers> &tensors, int64_t step,
                   qopt_kernel *k, qopt_status *status) {
    std::vector<int64_t> numels;
    std::vector<void *> pointers;
    for (ref::TensorBuffers &t : tensors) {
      numels.push_back(t.numel);
      std::vector<ref::Buffer *> streams = t.streams();
      ASSERT_EQ(streams.size(), info.num_streams)
          << "reference and manifest disagree on streams";
      for (ref::Buffer *b : streams)
        pointers.push_back(b->data());
    }
    qopt_tensor_list list{};
    list.num_tensors = tensors.size();
    list.num_streams = info.num_streams;
    list.numels = numels.data();
    list.data = pointers.data();
    // extraHypers replace the case's values of the same name.
    std::vector<qopt_hyper> hypers = GetParam().hypers;
    for (const qopt_hyper &e : extraHypers) {
      auto same = std::find_if(hypers.begin(), hypers.end(), [&](const qopt_hyper &h) {
        return std::string(h.name) == e.name;
      });
      if (same != hypers.end())
        same->value = e.value;
      else
        hypers.push_back(e);
    }
    qopt_launch launch{};
    launch.kernel = k ? k : kernel;
    launch.tensors = &list;
    launch.hypers = hypers.data();
    launch.num_hypers = hypers.size();
    launch.step = step;
    launch.tables = tables.data();
    launch.num_tables = tables.size();
    launch.numerics_counters = counters.data();
    *status = qopt_step_many(&launch, 1, nullptr);
  }

  /// Expects the kernel's counters to equal the reference's counts.
  void compareCounters() {
    EXPECT_EQ(counters[QOPT_COUNTER_SATURATED_GROUPS], refCounts.saturated)
        << "saturated groups";
    EXPECT_EQ(counters[QOPT_COUNTER_NONFINITE_GROUPS], refCounts.nonfinite)
        << "non-finite groups";
  }

  /// Four steps of the reference and of the host kernel from `initial`.
  void run(const std::vector<ref::TensorBuffers> &initial, const GradFn &grads,
           const PokeFn &poke = nullptr, qopt_kernel *k = nullptr) {
    std::vector<ref::TensorBuffers> want = initial, got = initial;
    for (int64_t step = 1; step <= 4; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (size_t i = 0; i < want.size(); ++i) {
        ref::setGrad(spec, want[i], grads(step, i, want[i].numel));
        if (poke)
          poke(i, want[i].grad);
        got[i].grad = want[i].grad;
      }
      ref::step(spec, want, step, &refCounts);
      hostStep(got, step, k);
      if (HasFatalFailure())
        return;
      compare(got, want);
      compareCounters();
      if (HasFailure())
        return;
    }
    lastStepped = got;
  }

  /// Adds a failure per stream whose bytes differ, with a few examples.
  void compare(std::vector<ref::TensorBuffers> &got, std::vector<ref::TensorBuffers> &want) {
    const std::string &name = GetParam().spec;
    for (size_t k = 0; k < want.size(); ++k) {
      std::vector<ref::Buffer *> gs = got[k].streams(), ws = want[k].streams();
      std::vector<std::string> names = want[k].streamNames(spec);
      for (size_t s = 0; s < ws.size(); ++s) {
        const std::vector<uint8_t> &g = gs[s]->raw(), &w = ws[s]->raw();
        if (g == w)
          continue;
        size_t esize = ref::dtypeSize(ws[s]->dtype());
        size_t mismatches = 0;
        std::string examples;
        for (size_t i = 0; i < g.size(); i += esize)
          if (std::memcmp(&g[i], &w[i], esize) != 0 &&
              !bothNaN(ws[s]->dtype(), &g[i], &w[i]) && ++mismatches <= 4) {
            char hex[8];
            examples += " [" + std::to_string(i / esize) + "] got 0x";
            for (size_t b = esize; b-- > 0;) {
              std::snprintf(hex, sizeof hex, "%02x", g[i + b]);
              examples += hex;
            }
            examples += " want 0x";
            for (size_t b = esize; b-- > 0;) {
              std::snprintf(hex, sizeof hex, "%02x", w[i + b]);
              examples += hex;
            }
          }
        if (mismatches == 0)
          continue; // only NaNs of another sign or payload (see bothNaN)
        ADD_FAILURE() << name << ": tensor " << k << " of " << want[k].numel
                      << " elements, stream " << names[s] << ": " << mismatches << " of "
                      << ws[s]->count() << " elements differ:" << examples;
      }
    }
  }

  /// Whether NaNs reach Lion's sign(), where the reference gives NaN
  /// (test/reference/lib/Step.cpp, signOf) and the DSL and torch.sign give +0
  /// (docs/dsl.md), which the compiler follows.
  /// Tensors of `sizes` with masters 0.5 * N(0, 1).
  std::vector<ref::TensorBuffers> randomTensors(const std::vector<int64_t> &sizes) {
    std::vector<ref::TensorBuffers> tensors;
    for (int64_t n : sizes) {
      tensors.push_back(ref::makeTensor(spec, n));
      std::vector<float> x(n);
      for (float &v : x)
        v = 0.5f * normal(rng);
      ref::setMaster(spec, tensors.back(), x);
    }
    return tensors;
  }

  ref::StepSpec spec;
  /// Hyperparameters given to the kernel after the case's (grad scaling).
  std::vector<qopt_hyper> extraHypers;
  /// The kernel's numerics counters, and the reference's counts of run().
  std::array<int64_t, QOPT_NUMERICS_COUNTERS> counters{};
  ref::NumericsCounts refCounts;
  /// The host kernel's tensors after run()'s last step.
  std::vector<ref::TensorBuffers> lastStepped;
  std::string manifestPath;
  qopt_context *ctx = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_manifest_info info{};
  qopt_registry *registry = nullptr;
  qopt_kernel *kernel = nullptr;
  std::vector<const void *> tables;
  std::mt19937 rng{1234};
  std::normal_distribution<float> normal{0.0f, 1.0f};
};

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
  // saturate they store 2^-24 and are counted (byte for byte the reference, counters its counts:
  // run()); a spec with a saturating f16 group state must have counted some groups here, where
  // its gradient type holds them (not f16, which rounds 1e-8 to 0). Weight decay 0: an L2 term
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
    if (f16Groups && scale <= 1e-8f && spec.grad != ref::DType::F16)
      EXPECT_GT(refCounts.saturated, 0) << "no f16 scale underflowed at this gradient scale";
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

/// Names a case by its spec in test listings (CTest's names stay stable).
void PrintTo(const Case &c, std::ostream *os) { *os << c.spec; }

/// A test name: the spec with the variant's dots as underscores.
std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  std::string name = info.param.spec;
  for (char &ch : name)
    if (ch == '.')
      ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Specs, HostKernelNumerics, ::testing::ValuesIn(cases()), caseName);

//===----------------------------------------------------------------------===//
// Grad scaling (qopt-opt --grad-scaling, <spec>[.f16|.f32].scaled)
//===----------------------------------------------------------------------===//

/// The scaled variant of every shipped spec in every parameter type.
std::vector<Case> scaledCases() {
  std::vector<Case> all;
  std::vector<SpecCase> specs = shippedSpecCases();
  for (const SpecCase &c : reductionSpecCases())
    specs.push_back(c);
  for (const SpecCase &c : specs) {
    all.push_back({c.spec + ".scaled", c.make, c.hypers});
    std::function<ref::StepSpec()> make = c.make;
    for (auto [suffix, t] : {std::pair{"f16", ref::DType::F16}, std::pair{"f32", ref::DType::F32}})
      all.push_back({c.spec + "." + suffix + ".scaled",
                     [make, t = t] { return retyped(make(), t); }, c.hypers});
  }
  return all;
}

/// torch.amp.GradScaler.unscale_ on one gradient, written out independently
/// of the compiler: inv = f32(1 / f64(scale)); each element f32(g) * inv,
/// stored back in the gradient's dtype (nearest even).
void unscaleLikeGradScaler(const ref::StepSpec &spec, ref::TensorBuffers &t, float scale) {
  float inv = static_cast<float>(1.0 / static_cast<double>(scale));
  std::vector<float> g = t.grad.toFloats();
  for (float &v : g)
    v = v * inv;
  ref::setGrad(spec, t, g);
}

class HostGradScaling : public HostKernelNumerics {};

TEST_P(HostGradScaling, FusedUnscaleEqualsUnscaleThenStepByteForByte) {
  // Loss scales as GradScaler makes them (powers of two) and one that is not
  // (its inverse is rounded); gradients spread over many binades, so that
  // unscaled f16 values land in f16 subnormals and round there.
  const float scales[] = {65536.0f, 0.125f, 3.0f, 1.0f};
  std::vector<ref::TensorBuffers> want = randomTensors({0, 1, 31, 4097, 3 * 4096 + 17});
  std::vector<ref::TensorBuffers> got = want;
  for (int64_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    float scale = scales[step - 1];
    for (size_t i = 0; i < want.size(); ++i) {
      std::vector<float> g(want[i].numel);
      for (float &v : g)
        v = scale * 1e-3f * normal(rng) * std::exp(2.0f * normal(rng));
      ref::setGrad(spec, got[i], g); // the scaled gradient, in its dtype
      want[i].grad = got[i].grad;
      unscaleLikeGradScaler(spec, want[i], scale);
    }
    ref::step(spec, want, step);
    extraHypers = {{"grad_scale", double(scale)}, {"found_inf", 0.0}};
    hostStep(got, step);
    if (HasFatalFailure())
      return;
    // The kernel leaves the gradient as it was (GradScaler.unscale_ would
    // overwrite it): compare the streams the step writes.
    for (size_t i = 0; i < want.size(); ++i)
      got[i].grad = want[i].grad;
    compare(got, want);
    if (HasFailure())
      return;
  }
}

TEST_P(HostGradScaling, FoundInfLeavesEveryStreamByteIdentical) {
  std::vector<ref::TensorBuffers> want = randomTensors({1, 33, 4097, 70001});
  const float inf = std::numeric_limits<float>::infinity();
  // Two ordinary steps first, so that the state is not zero.
  for (int64_t step = 1; step <= 2; ++step) {
    for (ref::TensorBuffers &t : want) {
      std::vector<float> g(t.numel);
      for (float &v : g)
        v = 1e-2f * normal(rng);
      ref::setGrad(spec, t, g);
    }
    ref::step(spec, want, step);
  }
  std::vector<ref::TensorBuffers> got = want;
  for (ref::TensorBuffers &t : got) {
    std::vector<float> g(t.numel);
    for (int64_t i = 0; i < t.numel; ++i)
      g[i] = i % 3 == 0 ? inf : i % 3 == 1 ? std::nanf("") : 1e-2f * normal(rng);
    ref::setGrad(spec, t, g);
  }
  for (size_t i = 0; i < want.size(); ++i)
    want[i].grad = got[i].grad;
  // found_inf as GradScaler gives it (1.0), and summed over two devices (2.0).
  for (double found : {1.0, 2.0}) {
    extraHypers = {{"grad_scale", 65536.0}, {"found_inf", found}};
    hostStep(got, 3);
    if (HasFatalFailure())
      return;
    compare(got, want);
  }
  // The next step with finite gradients is the reference's step 3.
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<float> g(want[i].numel);
    for (float &v : g)
      v = 1e-2f * normal(rng);
    ref::setGrad(spec, want[i], g);
    got[i].grad = want[i].grad;
  }
  ref::step(spec, want, 3);
  extraHypers = {{"grad_scale", 1.0}, {"found_inf", 0.0}};
  hostStep(got, 3);
  if (HasFatalFailure())
    return;
  compare(got, want);
}

TEST_P(HostGradScaling, DefaultsStepAsTheUnscaledKernel) {
  // Without grad_scale and found_inf (defaults 1 and 0) the scaled kernel is
  // the spec's step.
  run(randomTensors({31, 4097}), [&](int64_t, size_t, int64_t n) {
    std::vector<float> g(n);
    for (float &v : g)
      v = 1e-2f * normal(rng);
    return g;
  });
}

INSTANTIATE_TEST_SUITE_P(Scaled, HostGradScaling, ::testing::ValuesIn(scaledCases()),
                         caseName);

} // namespace

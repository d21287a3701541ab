//===- HostFastModeTest.cpp - Fast host kernels within a stated tolerance -===//
//
// `qopt-opt --mode=fast` (docs/dsl.md, "Fast mode") marks the update's
// arithmetic `contract afn arcp`: a * b + c may become one fused multiply-add
// where the CPU has one, and a division a multiplication by a reciprocal
// (x / 127 -> x * f32(1/127), v / bc2 -> v * (1 / bc2) computed once); on the
// GPU the division and square root are also approximate (div.approx,
// sqrt.approx). Fast kernels are therefore not bit-exact: this suite checks
// the tolerance that FastModeTolerance.h states, on every shipped spec
// compiled in fast mode at build time, for the baseline CPU as shipped
// (kernels/host-fast: no FMA instruction, so only the reciprocals differ) and
// for x86-64-v3 (FMA contraction too; skipped on a CPU without it).
//
// The tensors and gradients are the strict suite's (HostKernelNumericsTest):
// masters 0.5 * N(0, 1), gradients 1e-2 * N(0, 1) with a step of
// 1e-3 * N(0, 1), seven sizes from empty to 70001, the same hyperparameters.
//   - OneStepFromReferenceState: six steps, before each the fast kernel's
//     streams are set to the reference's: the error of one fast step
//     (kOneStep);
//   - SixStepTrajectory: the fast kernel and the reference each step their
//     own streams six times, as a trainer would (kTrajectory);
//   - AllZeroGradient, NonFiniteGradient, NearFloat16AndBFloat16Limits: the
//     strict suite's edge cases; NaN and infinities must be where the
//     reference has them and nowhere else;
//   - negative controls: the fast kernel given a learning rate 1% too large,
//     and fast results perturbed one unit past a bound (one element, or a
//     fraction of them), must fail the check.
// The measured figures are printed ("[ fast     ]" lines) and recorded as
// test properties.
//
//===----------------------------------------------------------------------===//

#include "FastModeTolerance.h"
#include "qopt/reference/Codebook.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Step.h"
#include "HostKernelHandles.h"
#include "ShippedSpecCases.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ref = qopt::ref;
using namespace qopt::fastmode;

namespace {

/// Where the fast-mode host libraries of the shipped specs are.
/// Where the fast-mode host libraries of the shipped specs are: built for
/// the baseline CPU (kernels/host-fast, as shipped; no FMA instruction, so
/// only the reciprocals differ), or with FMA (x86-64-v3) where `fma`.
std::string fastKernelDir(bool fma) {
  const char *dir =
      std::getenv(fma ? "QOPT_TEST_FAST_FMA_KERNEL_DIR" : "QOPT_TEST_FAST_KERNEL_DIR");
  if (dir && *dir)
    return dir;
#ifdef QOPT_FAST_FMA_KERNEL_DIR
  if (fma)
    return QOPT_FAST_FMA_KERNEL_DIR;
#endif
  return QOPT_FAST_KERNEL_DIR;
}

/// Whether this machine runs x86-64-v3 code (FMA, AVX2).
bool haveX86_64_v3() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("x86-64-v3");
#else
  return false;
#endif
}

struct Case {
  std::string spec;
  std::function<ref::StepSpec()> make;
  std::vector<qopt_hyper> hypers;
  bool fma = false; ///< the libraries built with FMA (x86-64-v3)
};
void PrintTo(const Case &c, std::ostream *os) { *os << c.spec << (c.fma ? " (fma)" : ""); }

using namespace qopt::test;

/// Every shipped spec with quantized states (fastModeSpecCases), with the
/// strict suite's hyperparameters.
std::vector<Case> cases() {
  std::vector<Case> all;
  for (const SpecCase &c : fastModeSpecCases())
    all.push_back({c.spec, c.make, c.hypers});
  return all;
}

//===----------------------------------------------------------------------===//
// The fixture
//===----------------------------------------------------------------------===//

using GradFn = std::function<std::vector<float>(int64_t step, size_t k, int64_t n)>;

class HostFastMode : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    const Case &c = GetParam();
    if (c.fma) {
#ifndef QOPT_FAST_FMA_KERNEL_DIR
      if (!std::getenv("QOPT_TEST_FAST_FMA_KERNEL_DIR"))
        GTEST_SKIP() << "no FMA build of the fast kernels (x86-64 hosts only)";
#endif
      if (!haveX86_64_v3())
        GTEST_SKIP() << "this CPU does not run x86-64-v3 code (FMA, AVX2)";
    }
    spec = c.make();
    hypers = c.hypers;
    for (const qopt_hyper &h : hypers)
      if (std::string(h.name) == "lr")
        lr = h.value;
    ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
    std::string manifestPath = fastKernelDir(c.fma) + "/" + c.spec + ".manifest.json";
    ASSERT_EQ(qopt_manifest_load(manifestPath.c_str(), &manifest), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
    ASSERT_STREQ(info.mode, "fast") << manifestPath << " is not a fast-mode kernel";
    // A launch's tensors lie at their first tiles (stochastic rounding's index).
    spec.tileElements = info.launch.tile_elements;
    ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_add_manifest_file(registry, manifestPath.c_str()), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_kernel_create(ctx, registry, info.kernel, &kernel), QOPT_SUCCESS)
        << qopt_last_error();
    tables = qopt::test::codebookTables(spec);
  }

  void TearDown() override { qopt::test::destroyHostKernel(kernel, registry, manifest, ctx); }

  void hostStep(std::vector<ref::TensorBuffers> &tensors, int64_t step) {
    std::vector<int64_t> numels;
    std::vector<void *> pointers;
    for (ref::TensorBuffers &t : tensors) {
      numels.push_back(t.numel);
      std::vector<ref::Buffer *> streams = t.streams();
      ASSERT_EQ(streams.size(), info.num_streams);
      for (ref::Buffer *b : streams)
        pointers.push_back(b->data());
    }
    qopt_tensor_list list{};
    list.num_tensors = tensors.size();
    list.num_streams = info.num_streams;
    list.numels = numels.data();
    list.data = pointers.data();
    ASSERT_EQ(qopt_step(kernel, &list, hypers.data(), hypers.size(), step, tables.data(),
                        tables.size(), nullptr),
              QOPT_SUCCESS)
        << qopt_last_error();
  }

  /// `steps` steps of the reference and of the fast kernel from `initial`;
  /// with `resync`, the fast streams restart from the reference's before
  /// every step. Returns the figures over every step.
  RunFigures run(const std::vector<ref::TensorBuffers> &initial, const GradFn &grads, int64_t steps,
                 bool resync) {
    RunFigures figures;
    want = initial;
    got = initial;
    for (int64_t step = 1; step <= steps; ++step) {
      if (resync)
        got = want;
      for (size_t i = 0; i < want.size(); ++i) {
        ref::setGrad(spec, want[i], grads(step, i, want[i].numel));
        got[i].grad = want[i].grad;
      }
      ref::step(spec, want, step);
      hostStep(got, step);
      if (HasFatalFailure())
        return figures;
      measure(spec, lr, got, want, figures);
    }
    return figures;
  }

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

  /// The strict suite's main case: sizes from empty to 70001 and gradients
  /// 1e-2 * N(0, 1), 1e-3 * N(0, 1) at step 3.
  std::vector<ref::TensorBuffers> mainTensors() {
    return randomTensors({0, 1, 31, 4096, 4097, 3 * 4096 + 17, 70001});
  }
  GradFn mainGradients() {
    return [this](int64_t step, size_t, int64_t n) {
      std::vector<float> g(n);
      float scale = step == 3 ? 1e-3f : 1e-2f;
      for (float &v : g)
        v = scale * normal(rng);
      return g;
    };
  }

  /// Prints and records `figures` and checks them against `tol`.
  void report(const char *run, const RunFigures &figures, const Tolerance &tol) {
    std::string text = describe(figures);
    std::cout << "[ fast     ] " << GetParam().spec << (GetParam().fma ? " fma" : "") << " " << run
              << ": " << text << "\n";
    RecordProperty(std::string(run) + "_figures", text);
    for (const std::string &v : violations(figures, tol))
      ADD_FAILURE() << GetParam().spec << " " << run << ": " << v;
  }

  ref::StepSpec spec;
  std::vector<ref::TensorBuffers> got, want; ///< after the last step of `run`
  std::vector<qopt_hyper> hypers;
  double lr = 0;
  qopt_context *ctx = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_manifest_info info{};
  qopt_registry *registry = nullptr;
  qopt_kernel *kernel = nullptr;
  std::vector<const void *> tables;
  std::mt19937 rng{1234};
  std::normal_distribution<float> normal{0.0f, 1.0f};
};

TEST_P(HostFastMode, OneStepFromReferenceState) {
  RunFigures f = run(mainTensors(), mainGradients(), /*steps=*/6, /*resync=*/true);
  if (!HasFatalFailure())
    report("one-step", f, kOneStep);
}

TEST_P(HostFastMode, SixStepTrajectory) {
  RunFigures f = run(mainTensors(), mainGradients(), /*steps=*/6, /*resync=*/false);
  if (!HasFatalFailure())
    report("trajectory", f, kTrajectory);
}

TEST_P(HostFastMode, AllZeroGradient) {
  // A zero master (all-zero state) and a random one; every gradient is 0.
  std::vector<ref::TensorBuffers> tensors = randomTensors({33, 5000});
  ref::setMaster(spec, tensors[0], std::vector<float>(33, 0.0f));
  RunFigures f = run(
      tensors, [](int64_t, size_t, int64_t n) { return std::vector<float>(n, 0.0f); },
      /*steps=*/4, /*resync=*/false);
  if (!HasFatalFailure())
    report("zero-gradient", f, kTrajectory);
}

TEST_P(HostFastMode, NonFiniteGradient) {
  // The strict suite's NaN and infinities: NaN and inf where the reference
  // has them, and nowhere else; the finite elements within the tolerance.
  const float inf = std::numeric_limits<float>::infinity();
  RunFigures f = run(
      randomTensors({4096 + 100, 300}),
      [&](int64_t step, size_t k, int64_t n) {
        std::vector<float> g(n);
        for (int64_t i = 0; i < n; ++i) {
          g[i] = 1e-2f * normal(rng);
          if (step == 4 && k == 1)
            continue; // finite again
          if (i % 97 == 5 || (i >= 64 && i < 96))
            g[i] = std::nanf("");
          else if (i % 101 == 7 || (i >= 128 && i < 160))
            g[i] = inf;
          else if (i % 103 == 9)
            g[i] = -inf;
        }
        return g;
      },
      /*steps=*/4, /*resync=*/true);
  if (!HasFatalFailure())
    report("non-finite", f, kOneStep);
}

TEST_P(HostFastMode, NearFloat16AndBFloat16Limits) {
  // The strict suite's masters near the bf16 and f16 limits and gradients
  // from 3e38 down to f32 subnormals: a reciprocal there could overflow or
  // flush where the division would not.
  const std::vector<float> masters = {3.3895314e38f, -3.38e38f,     65504.0f,      65520.0f,
                                      -65536.0f,     6.1035156e-5f, 5.9604645e-8f, 1.1754944e-38f,
                                      1e-40f,        0.0f};
  const std::vector<float> magnitudes = {3e38f,   1e6f,  65504.0f, 65520.0f, 1e4f,
                                         6.1e-5f, 6e-8f, 1e-10f,   1.2e-38f, 1e-40f};
  std::vector<ref::TensorBuffers> tensors;
  for (size_t k = 0; k < masters.size(); ++k) {
    int64_t n = 64 + 7 * int64_t(k);
    tensors.push_back(ref::makeTensor(spec, n));
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = masters[k] * (i % 3 == 0 ? 1.0f : i % 3 == 1 ? -0.999f : 0.5f);
    ref::setMaster(spec, tensors.back(), x);
  }
  RunFigures f = run(
      tensors,
      [&](int64_t step, size_t k, int64_t n) {
        std::vector<float> g(n);
        float m = magnitudes[(k + size_t(step)) % magnitudes.size()];
        for (int64_t i = 0; i < n; ++i)
          g[i] = m * (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.25f * std::fabs(normal(rng)));
        return g;
      },
      /*steps=*/4, /*resync=*/true);
  if (!HasFatalFailure())
    report("limits", f, kOneStep);
}

/// Negative control: the fast kernel given a learning rate 1% too large
/// (a real bug of the size fast mode must not hide) is outside the one-step
/// tolerance.
TEST_P(HostFastMode, NegativeControlLearningRateOnePercentOff) {
  for (qopt_hyper &h : hypers)
    if (std::string(h.name) == "lr")
      h.value *= 1.01;
  RunFigures f = run(mainTensors(), mainGradients(), /*steps=*/6, /*resync=*/true);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::string> caught = violations(f, kOneStep);
  std::cout << "[ control  ] " << GetParam().spec << (GetParam().fma ? " fma" : "")
            << " lr * 1.01: " << describe(f) << "\n";
  for (const std::string &v : caught)
    std::cout << "[ control  ]   caught: " << v << "\n";
  EXPECT_FALSE(caught.empty()) << GetParam().spec
                               << ": a 1% learning-rate error passes the tolerance";
}

/// Negative control: results perturbed by one unit more than the tolerance
/// allows, in one element or systematically, fail the check; unperturbed,
/// they pass.
TEST_P(HostFastMode, NegativeControlPerturbedResults) {
  run(mainTensors(), mainGradients(), /*steps=*/1, /*resync=*/true);
  ASSERT_FALSE(HasFatalFailure());
  auto check = [&](const std::vector<ref::TensorBuffers> &result) {
    RunFigures f;
    measure(spec, lr, result, want, f);
    return violations(f, kOneStep);
  };
  ASSERT_TRUE(check(got).empty()) << "the unperturbed result fails";
  const size_t k = want.size() - 1; // the 70001-element tensor
  const int64_t n = want[k].numel;
  auto expectCaught = [&](const char *what, const std::vector<ref::TensorBuffers> &result,
                          const std::string &expected) {
    std::vector<std::string> caught = check(result);
    bool found = false;
    for (const std::string &v : caught)
      found |= v.find(expected) != std::string::npos;
    EXPECT_TRUE(found) << GetParam().spec << ": " << what << " is not caught as \"" << expected
                       << "\" (" << caught.size() << " other violations)";
  };
  // The parameter's 16-bit patterns (bf16), an element away from zero.
  const int64_t i = 1000;
  {
    std::vector<ref::TensorBuffers> r = got;
    r[k].param.as<uint16_t>()[i] += 2; // 2 ULPs
    expectCaught("a parameter 2 ULPs off", r, "parameter: max ULPs");
  }
  {
    std::vector<ref::TensorBuffers> r = got;
    r[k].param.as<uint16_t>()[i] = 0x7fc0; // NaN
    expectCaught("a NaN parameter", r, "parameter: elements whose NaN/inf disagree");
  }
  {
    std::vector<ref::TensorBuffers> r = got;
    for (int64_t j = 0; j < n; j += 200)
      r[k].param.as<uint16_t>()[j] ^= 1; // 1 ULP in 0.5% of the elements
    expectCaught("0.5% of the parameters 1 ULP off", r, "parameter: fraction bit-equal");
  }
  {
    std::vector<ref::TensorBuffers> r = got;
    std::vector<float> x = ref::readMaster(spec, r[k]);
    x[i] += float((0x1p-7 * std::fabs(x[i]) + lr) * 2.5);
    ref::setMaster(spec, r[k], x);
    expectCaught("a master 2.5 units off", r, "master: max");
  }
  if (spec.master == ref::Master::EccI8 ||
      spec.master == ref::Master::EccI16) { // else the master is the parameter
    std::vector<ref::TensorBuffers> r = got;
    std::vector<float> x = ref::readMaster(spec, r[k]);
    for (int64_t j = 0; j < n; j += 50) // 2^-13 in 2%, above the error bits' resolution
      x[j] += float(0x1p-13 * std::max(double(std::fabs(x[j])), lr));
    ref::setMaster(spec, r[k], x);
    expectCaught("2% of the masters 2^-13 off", r, "master: fraction");
  }
  // The first state's codes (int8 or uint8: one byte each).
  auto codeAt = [&](std::vector<ref::TensorBuffers> &r, int64_t j) -> uint8_t & {
    return r[k].states[0].values.as<uint8_t>()[j];
  };
  {
    std::vector<ref::TensorBuffers> r = got;
    int64_t j = 0;
    // A code that can move up by 2 without wrapping, signed or not (a codebook's
    // uint8 codes of a nonnegative state all lie above 0x7e on the signed map).
    const uint8_t top = spec.states[0].kind == ref::StateKind::Codebook ? 0xfe : 0x7e;
    while (j < n && (codeAt(r, j) == 0 || codeAt(r, j) == 1 || codeAt(r, j) >= top))
      ++j;
    ASSERT_LT(j, n);
    codeAt(r, j) += 2;
    expectCaught("a code 2 off", r, "codes: max");
  }
  {
    std::vector<ref::TensorBuffers> r = got;
    for (int64_t j = 0; j < n; j += 200)
      codeAt(r, j) ^= 1; // one code unit in 0.5% of the elements
    expectCaught("0.5% of the codes 1 off", r, "codes: fraction");
  }
  {
    std::vector<ref::TensorBuffers> r = got;
    ref::Buffer &scales = r[k].states[0].scales;
    if (scales.dtype() == ref::DType::F16)
      scales.as<uint16_t>()[3] += 8; // 8 f16 ULPs: >= 2^-8 relative
    else
      scales.as<uint32_t>()[3] += 1 << 16; // >= 2^-8 relative
    expectCaught("a scale 2^-8 off", r, "scales: max");
  }
  {
    std::vector<ref::TensorBuffers> r = got;
    ref::Buffer &scales = r[k].states[0].scales;
    for (int64_t j = 0; j < scales.count(); ++j)
      if (scales.dtype() == ref::DType::F16)
        scales.as<uint16_t>()[j] ^= 1; // one f16 ULP in every scale
      else
        scales.as<uint32_t>()[j] ^= 1 << 4; // 16 f32 ULPs in every absmax
    expectCaught("every scale a little off", r, "scales: fraction");
  }
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) { return info.param.spec; }

INSTANTIATE_TEST_SUITE_P(Specs, HostFastMode, ::testing::ValuesIn(cases()), caseName);

/// The same with FMA contraction in effect (x86-64-v3), as on a GPU.
std::vector<Case> fmaCases() {
  std::vector<Case> all = cases();
  for (Case &c : all)
    c.fma = true;
  return all;
}
INSTANTIATE_TEST_SUITE_P(Fma, HostFastMode, ::testing::ValuesIn(fmaCases()), caseName);

} // namespace

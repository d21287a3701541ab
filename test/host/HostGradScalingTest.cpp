//===- HostGradScalingTest.cpp - Fused GradScaler vs unscale + step -------===//
//
// The grad-scaling variants (qopt-opt --grad-scaling, <spec>[.f16|.f32].scaled)
// of every shipped spec on the host: the fused unscale equals
// GradScaler.unscale_ (written out here) followed by the reference's step,
// byte for byte, and found_inf leaves every stream byte-identical.
//
//===----------------------------------------------------------------------===//

#include "HostKernelNumerics.h"

using namespace qopt::host_test;
using namespace qopt::test;

namespace {

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

//===- GradientSpike.h - The gradient-spike case of the kernel suites -----===//
//
// docs/numerics.md "Overflow" (issue 26: one step of FlashAdamW with gradients
// of scale 1e6 made every float16 scale of m infinite and, three steps later,
// every parameter NaN). The host and GPU suites step one spike of gradients
// N(0, 1) times 1e6 or 1e10, or +-inf at every 97th element, then three
// ordinary steps, byte for byte against the reference; this header holds the
// spike, what the reference's counts must show, and the finiteness check.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_COMMON_GRADIENTSPIKE_H
#define QOPT_TEST_COMMON_GRADIENTSPIKE_H

#include "qopt/reference/Step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace qopt::test {

namespace ref = qopt::ref;

/// The spikes each suite steps: two finite scales and an infinity.
inline std::vector<float> gradientSpikes() {
  return {1e6f, 1e10f, std::numeric_limits<float>::infinity()};
}

/// Whether element i holds an infinity under the infinite spike.
inline bool spikedElement(int64_t i) { return i % 97 == 5; }

/// Gradients of step `step` (1-based): N(0, 1e-2) but at step 1, where they
/// are N(0, 1) * spike, or +-inf at the spiked elements for an infinite spike.
inline std::vector<float> spikeGradient(int64_t step, int64_t n, float spike, std::mt19937 &rng) {
  const float inf = std::numeric_limits<float>::infinity();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    g[size_t(i)] = 1e-2f * normal(rng);
    if (step == 1 && !std::isinf(spike))
      g[size_t(i)] = spike * normal(rng);
    else if (step == 1 && spikedElement(i))
      g[size_t(i)] = i % 2 ? -inf : inf;
  }
  return g;
}

/// Why `spec` cannot take the spike, or empty: an f16 gradient cannot hold it
/// (it rounds to inf), and an SGD step of 1e-3 * 1e10 overflows an f16
/// parameter itself.
inline std::string spikeSkipReason(const ref::StepSpec &spec) {
  if (spec.param == ref::DType::F16 || spec.grad == ref::DType::F16)
    return "an f16 gradient cannot hold the spike (it rounds to inf), and an SGD step of "
           "1e-3 * 1e10 overflows an f16 parameter itself";
  return {};
}

/// What the reference's counts must show after `spike`: an infinity in every
/// saturating group or codebook state, a 1e10 spike beyond float16 scales.
inline void expectSpikeCounted(const ref::StepSpec &spec, float spike,
                               const ref::NumericsCounts &counts) {
  bool quantized = false, f16Scales = false;
  for (const ref::StateScheme &st : spec.states) {
    bool saturating = st.kind == ref::StateKind::Group && st.group.overflow == ref::Overflow::Saturate;
    quantized |= st.kind == ref::StateKind::Codebook || saturating;
    f16Scales |= saturating && st.group.scaleDType == ref::ScaleDType::F16;
  }
  if (std::isinf(spike)) {
    EXPECT_EQ(counts.nonfinite > 0, quantized);
  }
  if (spike == 1e10f) {
    EXPECT_EQ(counts.saturated > 0, f16Scales);
  }
}

/// Every state finite, and every parameter finite but those whose gradient was
/// infinite (AdamW's update is then inf / inf, NaN, as torch.optim.AdamW's;
/// SGD's infinite). A plain float state holds what the update computed, an
/// infinity included, as torch.optim's states do: the policy is about
/// quantized states.
inline ::testing::AssertionResult finiteAfterSpike(const ref::StepSpec &spec,
                                                   const ref::TensorBuffers &t, float spike) {
  for (size_t st = 0; st < spec.states.size(); ++st) {
    if (std::isinf(spike) && (spec.states[st].kind == ref::StateKind::PlainF32 ||
                              spec.states[st].kind == ref::StateKind::PlainBF16))
      continue;
    std::vector<float> values = ref::readState(spec, t, st);
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        return ::testing::AssertionFailure()
               << "state " << spec.states[st].name << " element " << i << " is " << values[i];
  }
  std::vector<float> p = ref::readMaster(spec, t);
  for (int64_t i = 0; i < t.numel; ++i)
    if (!(std::isinf(spike) && spikedElement(i)) && !std::isfinite(p[size_t(i)]))
      return ::testing::AssertionFailure() << "parameter element " << i << " is " << p[size_t(i)];
  return ::testing::AssertionSuccess();
}

} // namespace qopt::test

#endif // QOPT_TEST_COMMON_GRADIENTSPIKE_H

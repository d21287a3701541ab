//===- WholeStep.cpp - Steps that read whole-step reductions --------------===//
//
// docs/numerics.md, "Whole-step reductions": every tensor's float64
// accumulation of the reduction's operand, in step order (launch by launch,
// tensor by tensor), then Reduce.h's reduceStep. The updates that read them
// are written from their specs (Step.h).
//
//===----------------------------------------------------------------------===//
#include "TrustRatio.h"

#include <cmath>
#include <stdexcept>

namespace qopt::ref {

static float toF32(double x) { return static_cast<float>(x); }

/// min(a, b), NaN if either is NaN (as torch.minimum and the DSL's min).
static float minimumF32(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::nanf("");
  return b < a ? b : a;
}

std::vector<std::pair<Reduction, std::vector<float>>> stepReductionOperands(const StepSpec &spec,
                                                                            const TensorBuffers &t) {
  std::vector<float> g = t.grad.toFloats();
  switch (spec.optimizer) {
  case Optimizer::GlobalProbe:
    return {{Reduction::Max, g}, {Reduction::Norm, g}, {Reduction::Sum, g}};
  case Optimizer::FlashAdamWClip:
    return {{Reduction::Norm, g}};
  default:
    return {};
  }
}

void stepWhole(std::vector<Launch> &launches, int64_t stepIndex, NumericsCounts *counts) {
  if (launches.empty())
    throw std::invalid_argument("stepWhole: a step of no launches");
  std::vector<Reduction> kinds;
  std::vector<std::vector<double>> accumulations;
  for (size_t l = 0; l < launches.size(); ++l)
    for (const TensorBuffers &t : *launches[l].tensors) {
      auto operands = stepReductionOperands(launches[l].spec, t);
      if (kinds.empty() && accumulations.empty()) {
        for (auto &[kind, x] : operands)
          kinds.push_back(kind);
        accumulations.resize(kinds.size());
      }
      if (operands.size() != kinds.size())
        throw std::invalid_argument("stepWhole: launch " + std::to_string(l) +
                                    " reads other whole-step reductions than launch 0");
      for (size_t r = 0; r < operands.size(); ++r) {
        if (operands[r].first != kinds[r])
          throw std::invalid_argument("stepWhole: launch " + std::to_string(l) +
                                      " reads other whole-step reductions than launch 0");
        accumulations[r].push_back(accumulate(kinds[r], operands[r].second));
      }
    }
  std::vector<float> values;
  for (size_t r = 0; r < kinds.size(); ++r)
    values.push_back(reduceStep(kinds[r], accumulations[r]));
  for (Launch &launch : launches) {
    StepSpec spec = launch.spec;
    spec.stepValues = values;
    step(spec, *launch.tensors, stepIndex, counts);
  }
}

void updateGlobalProbe(const StepSpec &spec, int64_t n, std::vector<float> &p,
                       const std::vector<float> &g, std::vector<std::vector<float>> &st) {
  if (spec.stepValues.size() != 3)
    throw std::invalid_argument("GlobalProbe step: needs its 3 whole-step values (stepWhole)");
  const float max = spec.stepValues[0], norm = spec.stepValues[1], sum = spec.stepValues[2];
  const float tensorNorm = reduce(Reduction::Norm, g);
  for (int64_t i = 0; i < n; ++i) {
    st[0][i] = max;
    st[1][i] = norm;
    st[2][i] = tensorNorm / norm;
    p[i] = sum;
  }
}

void clipGradients(const StepSpec &spec, std::vector<float> &g) {
  if (spec.stepValues.size() != 1)
    throw std::invalid_argument("FlashAdamWClip step: needs its whole-step norm (stepWhole)");
  // min(1, max_grad_norm / (global_norm(g) + 1e-6)): each uniform and literal rounded to
  // float32 where it meets the float32 norm.
  const float clip =
      minimumF32(1.0f, toF32(spec.hyper.maxGradNorm) / (spec.stepValues[0] + toF32(1e-6)));
  for (float &x : g)
    x = x * clip;
}

} // namespace qopt::ref

//===- TrustRatio.h - Updates that read per-tensor reductions ---*- C++ -*-===//
#ifndef QOPT_REFERENCE_LIB_TRUSTRATIO_H
#define QOPT_REFERENCE_LIB_TRUSTRATIO_H

#include "qopt/reference/Step.h"

namespace qopt::ref {

/// updateElements for LAMB, LARS and StableAdamW (Step.h describes them).
void updateTrustRatio(const StepSpec &spec, int64_t step, int64_t n, std::vector<float> &p,
                      const std::vector<float> &g, std::vector<std::vector<float>> &st);

/// updateElements for GlobalProbe (Step.h), reading spec.stepValues.
void updateGlobalProbe(const StepSpec &spec, int64_t n, std::vector<float> &p,
                       const std::vector<float> &g, std::vector<std::vector<float>> &st);

/// FlashAdamWClip's gradient: g * min(1, f32(max_grad_norm) / (global_norm + f32(1e-6))).
void clipGradients(const StepSpec &spec, std::vector<float> &g);

} // namespace qopt::ref

#endif

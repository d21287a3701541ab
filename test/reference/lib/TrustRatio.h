//===- TrustRatio.h - Updates that read per-tensor reductions ---*- C++ -*-===//
#ifndef QOPT_REFERENCE_LIB_TRUSTRATIO_H
#define QOPT_REFERENCE_LIB_TRUSTRATIO_H

#include "qopt/reference/Step.h"

namespace qopt::ref {

/// updateElements for LAMB, LARS and StableAdamW (Step.h describes them).
void updateTrustRatio(const StepSpec &spec, int64_t step, int64_t n, std::vector<float> &p,
                      const std::vector<float> &g, std::vector<std::vector<float>> &st);

} // namespace qopt::ref

#endif

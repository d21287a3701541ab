//===- StepPhases.h - The launches of a step, and its two phases ----------===//
//
// qopt_step_many and its split form (docs/abi.md, "Step reductions"): every
// launch validated and its uniforms evaluated before anything is launched;
// then, without step reductions, each launch as one step; with them, phase A
// (each launch's accumulation rows of its tensors) over all launches, then
// phase B (each launch's combine over the step's rows, and its step).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_STEPPHASES_H
#define QOPT_RUNTIME_SRC_STEPPHASES_H

#include "qopt/runtime.h"

#include <cstdint>

namespace qopt::rt {

enum class StepMode {
  Whole,       ///< qopt_step_many: both phases, rows in the runtime's workspace
  Partials,    ///< phase A only, rows into the caller's buffer
  FromPartials ///< phase B from the caller's rows
};

/// Runs the launches as `mode` says; `rows` is the caller's buffer of the
/// split modes (written by Partials, read by FromPartials), ignored by Whole.
void stepMany(const qopt_launch *launches, size_t numLaunches, void *stream,
              StepMode mode, double *rows);

/// T and S of a step (qopt_step_partials_shape); validates the kernels and
/// the same-kinds rule, not the tensors.
void stepPartialsShape(const qopt_launch *launches, size_t numLaunches,
                       int64_t *numStepTensors, int64_t *numStepReductions);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_STEPPHASES_H

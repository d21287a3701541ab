//===- Passes.h - qopt launch planning --------------------------*- C++ -*-===//
//
// Declares qopt-plan-kernel, which writes the tuning policy's launch plan
// into the IR.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_SCHEDULE_PASSES_H
#define QOPT_SCHEDULE_PASSES_H

#include "mlir/Pass/Pass.h"
#include "qopt/Schedule/TuningPolicy.h"

namespace mlir::qopt {

#define GEN_PASS_DECL
#include "qopt/Schedule/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qopt/Schedule/Passes.h.inc"

} // namespace mlir::qopt

#endif // QOPT_SCHEDULE_PASSES_H

//===- Passes.h - qopt transformations --------------------------*- C++ -*-===//
//
// Declares the passes that rewrite the qopt dialect before lowering.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TRANSFORMS_PASSES_H
#define QOPT_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"

namespace mlir::qopt {

#define GEN_PASS_DECL
#include "qopt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qopt/Transforms/Passes.h.inc"

} // namespace mlir::qopt

#endif // QOPT_TRANSFORMS_PASSES_H

//===- Passes.h - qopt transformations --------------------------*- C++ -*-===//
//
// Declares the passes that rewrite the qopt dialect before lowering.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TRANSFORMS_PASSES_H
#define QOPT_TRANSFORMS_PASSES_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"

namespace mlir::qopt {

#define GEN_PASS_DECL
#include "qopt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qopt/Transforms/Passes.h.inc"

} // namespace mlir::qopt

#endif // QOPT_TRANSFORMS_PASSES_H

//===- Passes.h - qopt conversions ------------------------------*- C++ -*-===//
//
// Declares the conversions out of the qopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CONVERSION_PASSES_H
#define QOPT_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "qopt/Dialect/Qopt/QoptOps.h"

namespace mlir::qopt {

/// Tile size of every kernel: threads-per-block * elements-per-thread must
/// equal it, and every group and block size divides it (docs/abi.md).
constexpr int64_t kTileElements = 4096;

/// How the lowerings round (docs/numerics-notes.md): strict keeps one IEEE
/// rounding per operation in source order; fast allows contraction and
/// approximate division and square root.
enum class ArithMode { Strict, Fast };

/// The name of `mode` in flags and manifests (`strict`, `fast`).
inline llvm::StringRef stringifyArithMode(ArithMode mode) {
  return mode == ArithMode::Fast ? "fast" : "strict";
}

#define GEN_PASS_DECL
#include "qopt/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qopt/Conversion/Passes.h.inc"

} // namespace mlir::qopt

#endif // QOPT_CONVERSION_PASSES_H

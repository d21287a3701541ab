//===- MLIRGen.h - Emit a checked spec as qopt IR ---------------*- C++ -*-===//
//
// Turns a Spec that Sema accepted into a module holding one qopt.optimizer,
// with a FileLineColLoc from the spec on every operation.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_MLIRGEN_H
#define QOPT_FRONTEND_MLIRGEN_H

#include "qopt/Frontend/AST.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace mlir::qopt::frontend {

/// Emits `spec`, which must have passed checkSpec(), as a module with one
/// `qopt.optimizer`. Loads the qopt, arith and math dialects into `context`.
///
/// The update block reads the gradient, the parameter and each state with
/// one load (before any store), computes uniform values in f64 (`i1` for
/// bools) from `qopt.hyper_value` and `qopt.step_count`, rounds each uniform
/// number to f32 with one `arith.truncf` where it meets per-element f32
/// arithmetic (a literal becomes an f32 constant directly), and stores the
/// states and the parameter at the end, in the order of their assignments.
///
/// Returns null after reporting through the context's diagnostic handler if
/// the module does not verify (which would be a bug in the frontend).
OwningOpRef<ModuleOp> mlirGen(MLIRContext &context, const Spec &spec);

/// The same. `sourceMgr` is the one the spec was parsed with; the locations
/// come from the spec itself, so it is not needed, and this overload exists
/// for callers that hold it.
OwningOpRef<ModuleOp> mlirGen(MLIRContext &context, const Spec &spec,
                              llvm::SourceMgr &sourceMgr);

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_MLIRGEN_H

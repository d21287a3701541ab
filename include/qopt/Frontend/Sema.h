//===- Sema.h - Semantic checks of a qopt spec ------------------*- C++ -*-===//
//
// Resolves names, types every expression as a number or a bool, classifies it
// as uniform or per-element, and enforces the rules of docs/dsl.md.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_SEMA_H
#define QOPT_FRONTEND_SEMA_H

#include "qopt/Frontend/AST.h"

namespace mlir::qopt::frontend {

/// Checks `spec` and annotates it in place: every NameExpr is resolved, every
/// Expr has its ValueType and Variability, every CallExpr its Builtin and
/// every assignment its target. Reports every error it finds (an expression
/// that holds an error does not cause more errors about its users) and
/// returns true when there was none.
bool checkSpec(Spec &spec, DiagnosticEmitter &diags);

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_SEMA_H

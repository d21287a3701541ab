//===- SemaChecker.h - The checker behind checkSpec (private) -------------===//
//
// Sema.cpp checks declarations and statements, SemaExpr.cpp expressions and
// their constant folding; both are methods of this one checker, which owns
// the state they share (the symbols, what is assigned so far, the folded
// constants).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_LIB_FRONTEND_SEMACHECKER_H
#define QOPT_LIB_FRONTEND_SEMACHECKER_H

#include "qopt/Frontend/Sema.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace mlir::qopt::frontend::sema {

/// A declared name or a `let`.
struct Symbol {
  RefKind kind;
  unsigned index;
  Loc loc;
};

/// How a declaration of `kind` is named in diagnostics.
llvm::StringRef describeRefKind(RefKind kind);

inline llvm::StringRef describeType(ValueType type) {
  return type == ValueType::Bool ? "a bool" : "a number";
}

inline Variability join(Variability a, Variability b) { return std::max(a, b); }

class SemaChecker {
public:
  SemaChecker(Spec &spec, DiagnosticEmitter &diags)
      : spec(spec), diags(diags) {}

  bool run();

private:
  void declare(llvm::StringRef name, RefKind kind, unsigned index, Loc loc);
  void checkDeclarations();
  void checkScheme(const StateDecl &state);
  void checkStochasticMaster(const ParamDecl &param);
  void checkStatement(Stmt &stmt, unsigned index);
  void checkAssignment(Stmt &stmt);

  void checkExpr(Expr &e);
  void checkName(NameExpr &e);
  void checkUnary(UnaryExpr &e);
  void checkBinary(BinaryExpr &e);
  void checkCall(CallExpr &e);
  /// The rules of a reduction's argument (docs/dsl.md, "Reductions").
  void checkReduction(CallExpr &e);
  /// Sets e.readsReduction() from its operands, checked before it.
  void noteReductionReads(Expr &e);

  /// Folds `e`, whose operands are checked and folded, when all of them are
  /// constants: as the host computes a uniform, in float64 (a bool is 0 or
  /// 1). A constant that is NaN or infinite is reported at its operator, once
  /// (its users are not constants), as a NaN hyperparameter is refused.
  void foldConstant(const Expr &e);
  /// Reports a finite constant `operand` that rounds to infinity as float32,
  /// which it does where it meets per-element values (`perElement`).
  void checkRoundsToF32(const Expr &operand, bool perElement);
  std::optional<double> getConstant(const Expr &e) const {
    auto it = constants.find(&e);
    if (it == constants.end())
      return std::nullopt;
    return it->second;
  }

  /// Reports `e` if it is a bool; false when `e` is not a number (an
  /// expression of Unknown type was reported already and is not again).
  bool requireNumber(const Expr &e);
  /// Reports `e` if it is a number; false when `e` is not a bool.
  bool requireBool(const Expr &e);

  void error(Loc loc, const llvm::Twine &msg) {
    diags.error(loc, msg);
    failed = true;
  }

  Spec &spec;
  DiagnosticEmitter &diags;
  bool failed = false;

  /// Declarations, and the lets defined so far.
  llvm::StringMap<Symbol> symbols;
  /// The first `let` of each name, for "used before its definition".
  llvm::StringMap<Loc> allLets;
  /// Where each state, and the parameter, was assigned (invalid if not yet).
  std::vector<Loc> stateAssignedAt;
  /// Per state: its assigned value reads a reduction.
  std::vector<bool> stateReadsReduction;
  Loc paramAssignedAt;
  /// The value of every expression that is a finite constant.
  llvm::DenseMap<const Expr *, double> constants;
};

/// `value` as a diagnostic writes it: the shortest form that reads back.
std::string formatNumber(double value);

} // namespace mlir::qopt::frontend::sema

#endif // QOPT_LIB_FRONTEND_SEMACHECKER_H

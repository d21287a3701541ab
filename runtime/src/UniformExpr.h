//===- UniformExpr.h - A manifest's uniform expressions ---------------------===//
//
// The expression trees of a manifest's "uniforms" (docs/abi.md, "Uniforms"):
// their operators, float64 evaluation and printing. Manifest.cpp parses them.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_UNIFORMEXPR_H
#define QOPT_RUNTIME_SRC_UNIFORMEXPR_H

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace qopt::rt {

/// One node of a uniform expression tree (float64 semantics).
struct Expr {
  enum class Kind { Literal, Hyper, Step, Op };
  enum class Op {
    Add, Sub, Mul, Div, Pow, Neg, Sqrt, Abs, Sign, Min, Max,
    Lt, Le, Gt, Ge, Eq, Ne, And, Or, Not, Select, Exp, Log, Tanh, Atan2
  };
  Kind kind = Kind::Literal;
  double value = 0;  ///< Literal
  size_t hyper = 0;  ///< Hyper: index into Manifest::hypers
  Op op = Op::Add;   ///< Op
  std::vector<Expr> operands;
};

/// Evaluates `e` in float64 with hyperparameter values `hypers` (manifest
/// order) and step `step`.
double evaluate(const Expr &e, const std::vector<double> &hypers, double step);
/// Prints `e` back in the manifest's JSON form (for messages).
std::string toString(const Expr &e, const std::vector<std::string> &names);

/// An operator of the expression language: its manifest name and arity.
struct OpInfo {
  const char *name;
  Expr::Op op;
  int minArity;
  int maxArity; // -1: any number >= minArity
};

/// The operator named `name`, or null.
const OpInfo *findOp(std::string_view name);
/// Every operator's name, space-separated (for messages).
std::string opNames();

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_UNIFORMEXPR_H

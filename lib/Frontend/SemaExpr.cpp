//===- SemaExpr.cpp - Semantic checks of a spec's expressions ------------===//
//
// Types, variability (uniform, per-tensor, per-element), the builtins'
// arities and rules, reductions, and the folding of constant expressions in
// float64 as the host computes a uniform.
//
//===----------------------------------------------------------------------===//

#include "SemaChecker.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir::qopt::frontend;
using namespace mlir::qopt::frontend::sema;

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

bool SemaChecker::requireNumber(const Expr &e) {
  if (e.getType() == ValueType::Bool)
    error(e.getLoc(), "a bool is used where a number is needed");
  return e.getType() == ValueType::Number;
}

bool SemaChecker::requireBool(const Expr &e) {
  if (e.getType() == ValueType::Number)
    error(e.getLoc(), "a number is used where a bool is needed");
  return e.getType() == ValueType::Bool;
}

void SemaChecker::checkExpr(Expr &e) {
  switch (e.getKind()) {
  case Expr::Kind::Number:
  case Expr::Kind::Step:
    e.setType(ValueType::Number);
    e.setVariability(Variability::Uniform);
    break;
  case Expr::Kind::Bool:
    e.setType(ValueType::Bool);
    e.setVariability(Variability::Uniform);
    break;
  case Expr::Kind::Name:
    checkName(llvm::cast<NameExpr>(e));
    break;
  case Expr::Kind::Unary:
    checkUnary(llvm::cast<UnaryExpr>(e));
    break;
  case Expr::Kind::Binary:
    checkBinary(llvm::cast<BinaryExpr>(e));
    break;
  case Expr::Kind::Call:
    checkCall(llvm::cast<CallExpr>(e));
    break;
  }
  noteReductionReads(e);
  if (e.getType() != ValueType::Unknown)
    foldConstant(e);
}

void SemaChecker::noteReductionReads(Expr &e) {
  bool reads = false;
  if (auto *name = llvm::dyn_cast<NameExpr>(&e)) {
    if (name->getRefKind() == RefKind::Let)
      reads = spec.statements[name->getRefIndex()].value->readsReduction();
    else if (name->getRefKind() == RefKind::State && name->readsAssignedValue())
      reads = stateReadsReduction[name->getRefIndex()];
  } else if (auto *unary = llvm::dyn_cast<UnaryExpr>(&e)) {
    reads = unary->getOperand().readsReduction();
  } else if (auto *binary = llvm::dyn_cast<BinaryExpr>(&e)) {
    reads = binary->getLHS().readsReduction() || binary->getRHS().readsReduction();
  } else if (auto *call = llvm::dyn_cast<CallExpr>(&e)) {
    reads = isReduction(call->getBuiltin());
    for (unsigned i = 0, n = call->getNumArgs(); i != n; ++i)
      reads |= call->getArg(i).readsReduction();
  }
  e.setReadsReduction(reads);
}

void SemaChecker::foldConstant(const Expr &e) {
  std::optional<double> value;
  Loc at = e.getLoc();
  switch (e.getKind()) {
  case Expr::Kind::Number:
    value = llvm::cast<NumberExpr>(e).getValue();
    break;
  case Expr::Kind::Bool:
    value = llvm::cast<BoolExpr>(e).getValue() ? 1.0 : 0.0;
    break;
  case Expr::Kind::Step:
    return;
  case Expr::Kind::Name: {
    const auto &name = llvm::cast<NameExpr>(e);
    if (name.getRefKind() != RefKind::Let)
      return;
    value = getConstant(*spec.statements[name.getRefIndex()].value);
    break;
  }
  case Expr::Kind::Unary: {
    const auto &unary = llvm::cast<UnaryExpr>(e);
    std::optional<double> x = getConstant(unary.getOperand());
    if (!x)
      return;
    value = unary.getOp() == UnaryOp::Neg ? -*x : (*x != 0 ? 0.0 : 1.0);
    break;
  }
  case Expr::Kind::Binary: {
    const auto &binary = llvm::cast<BinaryExpr>(e);
    std::optional<double> a = getConstant(binary.getLHS());
    std::optional<double> b = getConstant(binary.getRHS());
    if (!a || !b)
      return;
    at = binary.getOpLoc();
    switch (binary.getOp()) {
    case BinaryOp::Add:
      value = *a + *b;
      break;
    case BinaryOp::Sub:
      value = *a - *b;
      break;
    case BinaryOp::Mul:
      value = *a * *b;
      break;
    case BinaryOp::Div:
      value = *a / *b;
      break;
    case BinaryOp::Pow:
      value = std::pow(*a, *b);
      break;
    case BinaryOp::Lt:
      value = *a < *b;
      break;
    case BinaryOp::Le:
      value = *a <= *b;
      break;
    case BinaryOp::Gt:
      value = *a > *b;
      break;
    case BinaryOp::Ge:
      value = *a >= *b;
      break;
    case BinaryOp::Eq:
      value = *a == *b;
      break;
    case BinaryOp::Ne:
      value = *a != *b;
      break;
    case BinaryOp::And:
      value = *a != 0 && *b != 0;
      break;
    case BinaryOp::Or:
      value = *a != 0 || *b != 0;
      break;
    }
    break;
  }
  case Expr::Kind::Call: {
    const auto &call = llvm::cast<CallExpr>(e);
    llvm::SmallVector<double, 3> args;
    for (unsigned i = 0, n = call.getNumArgs(); i != n; ++i) {
      std::optional<double> arg = getConstant(call.getArg(i));
      if (!arg)
        return;
      args.push_back(*arg);
    }
    at = call.isTernary() ? call.getOpLoc() : call.getLoc();
    switch (call.getBuiltin()) {
    case Builtin::Sqrt:
      value = std::sqrt(args[0]);
      break;
    case Builtin::Abs:
      value = std::fabs(args[0]);
      break;
    case Builtin::Sign:
      value = args[0] > 0 ? 1.0 : args[0] < 0 ? -1.0 : 0.0;
      break;
    case Builtin::Min:
      value = std::min(args[0], args[1]);
      break;
    case Builtin::Max:
      value = std::max(args[0], args[1]);
      break;
    case Builtin::Select:
      value = args[0] != 0 ? args[1] : args[2];
      break;
    // As the runtime evaluates a uniform: the host C library in float64.
    case Builtin::Exp:
      value = std::exp(args[0]);
      break;
    case Builtin::Log:
      value = std::log(args[0]);
      break;
    case Builtin::Tanh:
      value = std::tanh(args[0]);
      break;
    case Builtin::Atan2:
      value = std::atan2(args[0], args[1]);
      break;
    case Builtin::Sum:
    case Builtin::MaxOf:
    case Builtin::Norm:
    case Builtin::Rms:
    case Builtin::Mean:
    case Builtin::GlobalSum:
    case Builtin::GlobalMax:
    case Builtin::GlobalNorm:
      // a reduction of a constant is refused before (its argument must vary per element)
    case Builtin::Unknown:
      return;
    }
    break;
  }
  }
  if (!value)
    return;
  if (!std::isfinite(*value)) {
    error(at, "this constant expression is " + formatNumber(*value) +
                  "; a constant must be finite");
    return;
  }
  constants[&e] = *value;
}

void SemaChecker::checkRoundsToF32(const Expr &operand, bool perElement) {
  if (!perElement || operand.getType() != ValueType::Number ||
      !operand.isUniform())
    return;
  std::optional<double> value = getConstant(operand);
  if (!value)
    return;
  llvm::APFloat f(*value);
  bool losesInfo;
  f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  if (f.isInfinity())
    error(operand.getLoc(),
          "the constant " + formatNumber(*value) +
              " is too large for float32, in which it meets per-element "
              "values: it rounds to " +
              (f.isNegative() ? "-inf" : "+inf"));
  else if (f.isZero() && *value != 0)
    error(operand.getLoc(),
          "the constant " + formatNumber(*value) +
              " is too small for float32, in which it meets per-element "
              "values: it rounds to 0");
}

void SemaChecker::checkName(NameExpr &e) {
  auto it = symbols.find(e.getName());
  if (it == symbols.end()) {
    auto let = allLets.find(e.getName());
    if (let != allLets.end()) {
      error(e.getLoc(), "'" + e.getName() + "' is used before its definition");
      diags.note(let->second, "'" + e.getName() + "' is defined here");
    } else {
      error(e.getLoc(), "unknown name '" + e.getName() + "'");
    }
    return; // Unknown type: users of `e` report nothing more.
  }

  const Symbol &symbol = it->second;
  e.resolve(symbol.kind, symbol.index);
  switch (symbol.kind) {
  case RefKind::Hyper:
    e.setType(spec.hypers[symbol.index].isBool ? ValueType::Bool
                                               : ValueType::Number);
    e.setVariability(Variability::Uniform);
    return;
  case RefKind::Param:
    if (paramAssignedAt.isValid()) {
      error(e.getLoc(), "the parameter is read after it is assigned");
      diags.note(paramAssignedAt, "the parameter is assigned here");
    }
    e.setType(ValueType::Number);
    e.setVariability(Variability::PerElement);
    return;
  case RefKind::Grad:
    e.setType(ValueType::Number);
    e.setVariability(Variability::PerElement);
    return;
  case RefKind::State:
    e.setReadsAssignedValue(stateAssignedAt[symbol.index].isValid());
    e.setType(ValueType::Number);
    e.setVariability(Variability::PerElement);
    return;
  case RefKind::Let: {
    const Expr &value = *spec.statements[symbol.index].value;
    e.setType(value.getType());
    e.setVariability(value.getVariability());
    return;
  }
  case RefKind::Unresolved:
    return;
  }
}

void SemaChecker::checkUnary(UnaryExpr &e) {
  Expr &operand = e.getOperand();
  checkExpr(operand);
  e.setVariability(operand.getVariability());
  if (e.getOp() == UnaryOp::Neg) {
    if (requireNumber(operand))
      e.setType(ValueType::Number);
  } else {
    if (requireBool(operand))
      e.setType(ValueType::Bool);
  }
}

void SemaChecker::checkBinary(BinaryExpr &e) {
  Expr &lhs = e.getLHS(), &rhs = e.getRHS();
  checkExpr(lhs);
  checkExpr(rhs);
  e.setVariability(join(lhs.getVariability(), rhs.getVariability()));
  // MLIRGen rounds a uniform operand of a per-element operation to float32.
  checkRoundsToF32(lhs, !e.isUniform());
  checkRoundsToF32(rhs, !e.isUniform());

  switch (e.getOp()) {
  case BinaryOp::And:
  case BinaryOp::Or: {
    bool ok = requireBool(lhs);
    ok &= requireBool(rhs);
    if (ok)
      e.setType(ValueType::Bool);
    return;
  }
  case BinaryOp::Lt:
  case BinaryOp::Le:
  case BinaryOp::Gt:
  case BinaryOp::Ge:
  case BinaryOp::Eq:
  case BinaryOp::Ne: {
    bool ok = requireNumber(lhs);
    ok &= requireNumber(rhs);
    if (ok)
      e.setType(ValueType::Bool);
    return;
  }
  case BinaryOp::Pow: {
    // A per-element base takes a uniform exponent, rounded to float32
    // (docs/numerics.md, "Elementary functions"); a uniform one is float64.
    bool ok = requireNumber(lhs);
    ok &= requireNumber(rhs);
    if (rhs.getType() == ValueType::Number && !rhs.isUniform()) {
      error(rhs.getLoc(), llvm::Twine("a ") +
                              (rhs.isTensor() ? "per-tensor" : "per-element") +
                              " exponent is not supported; the exponent of "
                              "'**' must be uniform");
      ok = false;
    }
    if (ok)
      e.setType(ValueType::Number);
    return;
  }
  case BinaryOp::Add:
  case BinaryOp::Sub:
  case BinaryOp::Mul:
  case BinaryOp::Div: {
    bool ok = requireNumber(lhs);
    ok &= requireNumber(rhs);
    if (ok)
      e.setType(ValueType::Number);
    return;
  }
  }
}

void SemaChecker::checkCall(CallExpr &e) {
  Variability variability = Variability::Uniform;
  for (unsigned i = 0, n = e.getNumArgs(); i != n; ++i) {
    checkExpr(e.getArg(i));
    variability = join(variability, e.getArg(i).getVariability());
  }
  e.setVariability(variability);

  Builtin builtin = symbolizeBuiltin(e.getCallee());
  if (builtin == Builtin::Unknown) {
    error(e.getLoc(), "unknown function '" + e.getCallee() +
                          "'; the builtins are sqrt, abs, sign, min, max, "
                          "select, exp, log, tanh, atan2, sum, mean, norm, rms, "
                          "global_sum, global_max and global_norm");
    return;
  }
  // `max` of one argument is the per-tensor maximum, of two the element-wise.
  if (builtin == Builtin::Max && e.getNumArgs() == 1)
    builtin = Builtin::MaxOf;
  e.setBuiltin(builtin);
  unsigned arity = getBuiltinArity(builtin);
  if (e.getNumArgs() != arity) {
    error(e.getLoc(), "'" + e.getCallee() + "' takes " +
                          (builtin == Builtin::Max ? "1 argument (the "
                                                     "per-tensor maximum) or "
                                                   : "") +
                          llvm::Twine(arity) +
                          (arity == 1 ? " argument" : " arguments") +
                          ", found " + llvm::Twine(e.getNumArgs()));
    return;
  }
  if (isReduction(builtin)) {
    checkReduction(e);
    return;
  }

  // MLIRGen rounds the uniform number operands of a per-element min, max,
  // atan2 or select to float32.
  if (builtin == Builtin::Min || builtin == Builtin::Max ||
      builtin == Builtin::Atan2 || builtin == Builtin::Select)
    for (unsigned i = builtin == Builtin::Select ? 1 : 0; i != arity; ++i)
      checkRoundsToF32(e.getArg(i), !e.isUniform());

  if (builtin != Builtin::Select) {
    bool ok = true;
    for (unsigned i = 0; i != arity; ++i)
      ok &= requireNumber(e.getArg(i));
    if (ok)
      e.setType(ValueType::Number);
    return;
  }

  bool ok = requireBool(e.getArg(0));
  ValueType a = e.getArg(1).getType(), b = e.getArg(2).getType();
  if (a == ValueType::Unknown || b == ValueType::Unknown)
    return;
  if (a != b) {
    error(e.isTernary() ? e.getOpLoc() : e.getLoc(),
          "the branches of " + llvm::Twine(e.isTernary() ? "'?:'" : "select") +
              " have different types: " + describeType(a) + " and " +
              describeType(b));
    return;
  }
  if (ok)
    e.setType(a);
}

void SemaChecker::checkReduction(CallExpr &e) {
  const Expr &arg = e.getArg(0);
  if (!requireNumber(arg))
    return;
  if (arg.readsReduction()) {
    error(arg.getLoc(), "a reduction of a reduction is not supported: the "
                        "argument of '" +
                            e.getCallee() +
                            "' reads the result of a reduction");
    return;
  }
  if (!arg.isPerElement()) {
    error(arg.getLoc(), "the argument of '" + e.getCallee() +
                            "' is uniform; a reduction takes a per-element "
                            "value");
    return;
  }
  e.setType(ValueType::Number);
  e.setVariability(Variability::Tensor);
}

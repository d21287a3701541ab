//===- Sema.cpp - Semantic checks of a qopt spec --------------------------===//
//
// Walks the declarations, then the update statements in order, keeping track
// of which states and whether the parameter have been assigned so far. Every
// rule of docs/dsl.md that the grammar does not enforce is checked here.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Sema.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

using namespace mlir::qopt::frontend;

namespace {

/// A declared name or a `let`.
struct Symbol {
  RefKind kind;
  unsigned index;
  Loc loc;
};

/// How a declaration of `kind` is named in diagnostics.
llvm::StringRef describeRefKind(RefKind kind) {
  switch (kind) {
  case RefKind::Hyper:
    return "a hyperparameter";
  case RefKind::Param:
    return "the parameter";
  case RefKind::Grad:
    return "the gradient";
  case RefKind::State:
    return "a state";
  case RefKind::Let:
    return "a let";
  case RefKind::Unresolved:
    break;
  }
  return "a name";
}

llvm::StringRef describeType(ValueType type) {
  return type == ValueType::Bool ? "a bool" : "a number";
}

Variability join(Variability a, Variability b) { return std::max(a, b); }

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
std::string formatNumber(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+inf" : "-inf";
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  return buffer;
}

} // namespace

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

void SemaChecker::declare(llvm::StringRef name, RefKind kind, unsigned index,
                          Loc loc) {
  auto [it, inserted] = symbols.try_emplace(name, Symbol{kind, index, loc});
  if (inserted)
    return;
  error(loc, "'" + name + "' is already declared as " +
                 describeRefKind(it->second.kind));
  diags.note(it->second.loc, "the previous declaration is here");
}

void SemaChecker::checkDeclarations() {
  // The name becomes the kernel's PTX entry and host symbol: a PTX identifier
  // starting with '_' needs another character after it.
  if (spec.name == "_")
    error(spec.loc, "optimizer name '_' cannot name a kernel (PTX needs a "
                    "letter or digit after a leading '_'); choose another name");
  if (!spec.param)
    error(spec.loc, "optimizer '" + spec.name +
                        "' has no 'param' declaration; declare the parameter "
                        "with 'param <name> : <type>;'");
  if (!spec.grad)
    error(spec.loc, "optimizer '" + spec.name +
                        "' has no 'grad' declaration; declare the gradient "
                        "with 'grad <name> : <type>;'");

  // Declare in source order, so that the second of two equal names is the
  // one reported.
  struct Decl {
    llvm::StringRef name;
    RefKind kind;
    unsigned index;
    Loc loc;
  };
  std::vector<Decl> decls;
  for (auto [i, hyper] : llvm::enumerate(spec.hypers))
    decls.push_back({hyper.name, RefKind::Hyper, unsigned(i), hyper.loc});
  if (spec.param)
    decls.push_back({spec.param->name, RefKind::Param, 0, spec.param->loc});
  if (spec.grad)
    decls.push_back({spec.grad->name, RefKind::Grad, 0, spec.grad->loc});
  for (auto [i, state] : llvm::enumerate(spec.states))
    decls.push_back({state.name, RefKind::State, unsigned(i), state.loc});
  std::stable_sort(decls.begin(), decls.end(),
                   [](const Decl &a, const Decl &b) {
                     return a.loc.ptr.getPointer() < b.loc.ptr.getPointer();
                   });
  for (const Decl &d : decls)
    declare(d.name, d.kind, d.index, d.loc);

  if (spec.param && spec.param->master != MasterFormat::None &&
      spec.param->master != MasterFormat::Stochastic &&
      spec.param->master != MasterFormat::KahanBF16 &&
      spec.param->dtype == FloatType::F32)
    error(spec.param->masterLoc,
          "error-correction bits need a 16-bit parameter (bf16 or f16); an "
          "f32 parameter is its own master weight");
  if (spec.param && spec.param->master == MasterFormat::Stochastic)
    checkStochasticMaster(*spec.param);
  if (spec.param && spec.param->master == MasterFormat::KahanBF16 &&
      spec.param->dtype != FloatType::BF16)
    error(spec.param->masterLoc,
          "a Kahan compensation needs a bf16 parameter, found " +
              stringifyFloatType(spec.param->dtype));

  for (const StateDecl &state : spec.states)
    checkScheme(state);
}

void SemaChecker::checkStochasticMaster(const ParamDecl &param) {
  const HyperDecl *seed = nullptr;
  for (const HyperDecl &hyper : spec.hypers)
    if (hyper.name == param.seedName)
      seed = &hyper;
  // The seed reaches the kernel as a float32 uniform: an integer below 2^24
  // is exact there.
  if (!seed)
    error(param.seedLoc, "'" + param.seedName +
                             "' is not a hyperparameter; stochastic<...> "
                             "names the hyperparameter of its seed");
  else if (seed->isBool || !(seed->defaultValue >= 0) ||
           seed->defaultValue >= 16777216.0 ||
           seed->defaultValue != std::floor(seed->defaultValue))
    error(seed->loc, "the seed '" + seed->name +
                         "' must default to an integer in [0, 2^24)");
  if (param.dtype != FloatType::BF16)
    error(param.masterLoc,
          "stochastic rounding needs a bf16 parameter, found " +
              stringifyFloatType(param.dtype));
}

void SemaChecker::checkScheme(const StateDecl &state) {
  const StateScheme &scheme = state.scheme;
  switch (scheme.kind) {
  case SchemeKind::Plain:
    return;
  case SchemeKind::Codebook:
    if (!llvm::isPowerOf2_64(scheme.blockSize) || scheme.blockSize < 32 ||
        scheme.blockSize > kTileElements)
      error(scheme.sizeLoc, "the codebook block size must be a power of two "
                            "between 32 and " +
                                llvm::Twine(kTileElements) + ", found " +
                                llvm::Twine(scheme.blockSize));
    return;
  case SchemeKind::Group:
    // A power of two in [2, 4096] is exactly a divisor of the 4096-element
    // tile other than 1.
    if (!llvm::isPowerOf2_64(scheme.groupSize) || scheme.groupSize < 2 ||
        scheme.groupSize > kTileElements)
      error(scheme.sizeLoc,
            "the group size must be a power of two between 2 and " +
                llvm::Twine(kTileElements) + " (a divisor of the " +
                llvm::Twine(kTileElements) + "-element tile), found " +
                llvm::Twine(scheme.groupSize));
    if (scheme.isSigned && scheme.companding == Companding::Sqrt)
      error(scheme.compandingLoc,
            "'sqrt' companding needs an unsigned group (u8); a signed group "
            "(i8) uses 'softsign' or 'linear'");
    if (!scheme.isSigned && scheme.companding == Companding::Softsign)
      error(scheme.compandingLoc,
            "'softsign' companding needs a signed group (i8); an unsigned "
            "group (u8) uses 'sqrt' or 'linear'");
    if (scheme.companding == Companding::Dynamic &&
        (!scheme.isSigned || scheme.bits != 4))
      error(scheme.compandingLoc,
            "'dynamic' (torchao's 4-bit map) needs a signed 4-bit group (i4)");
    if (scheme.companding == Companding::NonZero &&
        (scheme.isSigned || scheme.bits != 4))
      error(scheme.compandingLoc, "'nonzero' (torchao's (k + 1) / 16 map) "
                                  "needs an unsigned 4-bit group (u4)");
    return;
  }
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

bool SemaChecker::run() {
  checkDeclarations();
  stateAssignedAt.assign(spec.states.size(), Loc());
  stateReadsReduction.assign(spec.states.size(), false);

  for (auto [i, stmt] : llvm::enumerate(spec.statements))
    if (stmt.isLet())
      allLets.try_emplace(stmt.name, stmt.loc);

  for (auto [i, stmt] : llvm::enumerate(spec.statements))
    checkStatement(stmt, i);

  if (spec.param && !paramAssignedAt.isValid())
    error(spec.param->loc, "the parameter '" + spec.param->name +
                               "' is never assigned in the update block");
  for (auto [i, state] : llvm::enumerate(spec.states)) {
    // A duplicate state name resolves to the first declaration; the
    // duplicate was reported already.
    auto it = symbols.find(state.name);
    if (it == symbols.end() || it->second.kind != RefKind::State ||
        it->second.index != i)
      continue;
    if (!stateAssignedAt[i].isValid())
      error(state.loc,
            "state '" + state.name + "' is never assigned in the update block");
  }
  return !failed;
}

void SemaChecker::checkStatement(Stmt &stmt, unsigned index) {
  // The value is checked first: it reads the names as they are before the
  // statement (the old state, the parameter before its assignment).
  checkExpr(*stmt.value);
  if (!stmt.isLet()) {
    checkAssignment(stmt);
    return;
  }

  auto [it, inserted] =
      symbols.try_emplace(stmt.name, Symbol{RefKind::Let, index, stmt.loc});
  if (inserted)
    return;
  if (it->second.kind == RefKind::Let) {
    error(stmt.loc, "let '" + stmt.name +
                        "' is defined twice; a let is "
                        "defined once");
    diags.note(it->second.loc, "the first definition is here");
  } else {
    error(stmt.loc, "'" + stmt.name + "' is already declared as " +
                        describeRefKind(it->second.kind));
    diags.note(it->second.loc, "the previous declaration is here");
  }
}

void SemaChecker::checkAssignment(Stmt &stmt) {
  if (stmt.name == "step") {
    error(stmt.loc, "cannot assign 'step': it is the step count, which the "
                    "runtime sets");
    return;
  }
  auto it = symbols.find(stmt.name);
  if (it == symbols.end()) {
    error(stmt.loc, "unknown name '" + stmt.name + "'");
    return;
  }
  const Symbol &symbol = it->second;
  switch (symbol.kind) {
  case RefKind::Hyper:
    error(stmt.loc, "cannot assign the hyperparameter '" + stmt.name +
                        "': hyperparameters are read-only");
    diags.note(symbol.loc, "'" + stmt.name + "' is declared here");
    return;
  case RefKind::Grad:
    error(stmt.loc, "cannot assign the gradient '" + stmt.name +
                        "': the gradient is read-only");
    diags.note(symbol.loc, "'" + stmt.name + "' is declared here");
    return;
  case RefKind::Let:
    error(stmt.loc, "cannot assign '" + stmt.name +
                        "': it is a let, which is defined once");
    diags.note(symbol.loc, "'" + stmt.name + "' is defined here");
    return;
  case RefKind::Param:
    if (paramAssignedAt.isValid()) {
      error(stmt.loc, "the parameter '" + stmt.name +
                          "' is assigned twice; it is assigned exactly once");
      diags.note(paramAssignedAt, "the first assignment is here");
      return;
    }
    paramAssignedAt = stmt.loc;
    break;
  case RefKind::State: {
    Loc &assignedAt = stateAssignedAt[symbol.index];
    if (assignedAt.isValid()) {
      error(stmt.loc, "state '" + stmt.name +
                          "' is assigned twice; a state is assigned exactly "
                          "once");
      diags.note(assignedAt, "the first assignment is here");
      return;
    }
    assignedAt = stmt.loc;
    stateReadsReduction[symbol.index] = stmt.value->readsReduction();
    break;
  }
  case RefKind::Unresolved:
    return;
  }
  stmt.targetKind = symbol.kind;
  stmt.targetIndex = symbol.index;
  if (requireNumber(*stmt.value))
    checkRoundsToF32(*stmt.value, /*perElement=*/true);
}

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
                          "select, exp, log, tanh, atan2, sum, mean, norm and rms");
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

bool mlir::qopt::frontend::checkSpec(Spec &spec, DiagnosticEmitter &diags) {
  return SemaChecker(spec, diags).run();
}

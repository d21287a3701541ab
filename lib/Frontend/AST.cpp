//===- AST.cpp - The syntax tree of a qopt spec ---------------------------===//
//
// Names of the enums and the textual dump of a spec.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/AST.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir::qopt::frontend;

Expr::~Expr() = default;

llvm::StringRef mlir::qopt::frontend::stringifyFloatType(FloatType type) {
  switch (type) {
  case FloatType::F32:
    return "f32";
  case FloatType::BF16:
    return "bf16";
  case FloatType::F16:
    return "f16";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyMasterFormat(MasterFormat m) {
  switch (m) {
  case MasterFormat::None:
    return "none";
  case MasterFormat::EccI8:
    return "ecc<i8>";
  case MasterFormat::EccI16:
    return "ecc<i16>";
  case MasterFormat::Stochastic:
    return "stochastic";
  case MasterFormat::KahanBF16:
    return "kahan<bf16>";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyCompanding(Companding c) {
  switch (c) {
  case Companding::Linear:
    return "linear";
  case Companding::Softsign:
    return "softsign";
  case Companding::Sqrt:
    return "sqrt";
  case Companding::Dynamic:
    return "dynamic";
  case Companding::NonZero:
    return "nonzero";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyRounding(Rounding r) {
  switch (r) {
  case Rounding::HalfUp:
    return "half_up";
  case Rounding::HalfEven:
    return "half_even";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyScaleDivisor(ScaleDivisor d) {
  switch (d) {
  case ScaleDivisor::Absmax:
    return "absmax";
  case ScaleDivisor::StoredScale:
    return "stored_scale";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyOverflow(Overflow o) {
  switch (o) {
  case Overflow::Saturate:
    return "saturate";
  case Overflow::Ieee:
    return "ieee";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyBinaryOp(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return "add";
  case BinaryOp::Sub:
    return "sub";
  case BinaryOp::Mul:
    return "mul";
  case BinaryOp::Div:
    return "div";
  case BinaryOp::Pow:
    return "pow";
  case BinaryOp::Lt:
    return "lt";
  case BinaryOp::Le:
    return "le";
  case BinaryOp::Gt:
    return "gt";
  case BinaryOp::Ge:
    return "ge";
  case BinaryOp::Eq:
    return "eq";
  case BinaryOp::Ne:
    return "ne";
  case BinaryOp::And:
    return "and";
  case BinaryOp::Or:
    return "or";
  }
  return "";
}

llvm::StringRef mlir::qopt::frontend::stringifyUnaryOp(UnaryOp op) {
  return op == UnaryOp::Neg ? "neg" : "not";
}

llvm::StringRef mlir::qopt::frontend::stringifyBuiltin(Builtin builtin) {
  switch (builtin) {
  case Builtin::Unknown:
    return "";
  case Builtin::Sqrt:
    return "sqrt";
  case Builtin::Abs:
    return "abs";
  case Builtin::Sign:
    return "sign";
  case Builtin::Min:
    return "min";
  case Builtin::Max:
    return "max";
  case Builtin::Select:
    return "select";
  case Builtin::Exp:
    return "exp";
  case Builtin::Log:
    return "log";
  case Builtin::Tanh:
    return "tanh";
  case Builtin::Atan2:
    return "atan2";
  case Builtin::Sum:
    return "sum";
  case Builtin::MaxOf:
    return "max";
  case Builtin::Norm:
    return "norm";
  case Builtin::Rms:
    return "rms";
  case Builtin::Mean:
    return "mean";
  case Builtin::GlobalSum:
    return "global_sum";
  case Builtin::GlobalMax:
    return "global_max";
  case Builtin::GlobalNorm:
    return "global_norm";
  }
  return "";
}

Builtin mlir::qopt::frontend::symbolizeBuiltin(llvm::StringRef name) {
  return llvm::StringSwitch<Builtin>(name)
      .Case("sqrt", Builtin::Sqrt)
      .Case("abs", Builtin::Abs)
      .Case("sign", Builtin::Sign)
      .Case("min", Builtin::Min)
      .Case("max", Builtin::Max)
      .Case("select", Builtin::Select)
      .Case("exp", Builtin::Exp)
      .Case("log", Builtin::Log)
      .Case("tanh", Builtin::Tanh)
      .Case("atan2", Builtin::Atan2)
      .Case("sum", Builtin::Sum)
      .Case("norm", Builtin::Norm)
      .Case("rms", Builtin::Rms)
      .Case("mean", Builtin::Mean)
      .Case("global_sum", Builtin::GlobalSum)
      .Case("global_max", Builtin::GlobalMax)
      .Case("global_norm", Builtin::GlobalNorm)
      .Default(Builtin::Unknown);
}

unsigned mlir::qopt::frontend::getBuiltinArity(Builtin builtin) {
  switch (builtin) {
  case Builtin::Unknown:
    return 0;
  case Builtin::Sqrt:
  case Builtin::Abs:
  case Builtin::Sign:
  case Builtin::Exp:
  case Builtin::Log:
  case Builtin::Tanh:
  case Builtin::Sum:
  case Builtin::MaxOf:
  case Builtin::Norm:
  case Builtin::Rms:
  case Builtin::Mean:
  case Builtin::GlobalSum:
  case Builtin::GlobalMax:
  case Builtin::GlobalNorm:
    return 1;
  case Builtin::Min:
  case Builtin::Max:
  case Builtin::Atan2:
    return 2;
  case Builtin::Select:
    return 3;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// printSpec
//===----------------------------------------------------------------------===//

/// Prints `value` with the fewest significant digits that read back as the
/// same float64.
static void printNumber(double value, llvm::raw_ostream &os) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value)
      break;
  }
  os << buf;
}

namespace {
class SpecPrinter {
public:
  explicit SpecPrinter(llvm::raw_ostream &os) : os(os) {}

  void print(const Spec &spec);

private:
  void printScheme(const StateScheme &scheme);
  /// Prints `e`; `inPerElement` is true when `e` is an operand of a
  /// per-element expression, so that a uniform `e` is where float64 meets
  /// float32 and is wrapped in braces.
  void printExpr(const Expr &e, bool inPerElement);
  void printExprBody(const Expr &e);
  void printAnnotation(const Expr &e);

  llvm::raw_ostream &os;
};
} // namespace

void SpecPrinter::printScheme(const StateScheme &scheme) {
  switch (scheme.kind) {
  case SchemeKind::Plain:
    os << stringifyFloatType(scheme.plainType);
    return;
  case SchemeKind::Codebook:
    os << "codebook<" << scheme.blockSize;
    if (scheme.overflow != Overflow::Saturate)
      os << ", overflow = " << stringifyOverflow(scheme.overflow);
    os << ">";
    return;
  case SchemeKind::Group:
    os << "group<" << (scheme.isSigned ? "i" : "u") << scheme.bits << ", "
       << scheme.groupSize << ", " << stringifyCompanding(scheme.companding)
       << ", scale = " << stringifyFloatType(scheme.scaleType)
       << ", round = " << stringifyRounding(scheme.rounding)
       << ", divide = " << stringifyScaleDivisor(scheme.divisor);
    if (scheme.overflow != Overflow::Saturate)
      os << ", overflow = " << stringifyOverflow(scheme.overflow);
    os << ">";
    return;
  }
}

void SpecPrinter::printAnnotation(const Expr &e) {
  if (e.getType() == ValueType::Unknown)
    return;
  os << " ["
     << (e.isUniform()  ? "uniform"
         : e.isTensor() ? "per-tensor"
                        : "per-element")
     << " "
     << (e.getType() == ValueType::Bool ? "bool" : "number") << "]";
}

void SpecPrinter::printExpr(const Expr &e, bool inPerElement) {
  bool wrap =
      inPerElement && e.getType() != ValueType::Unknown && e.isUniform();
  if (wrap)
    os << "{";
  printExprBody(e);
  if (wrap)
    os << "}";
}

void SpecPrinter::printExprBody(const Expr &e) {
  bool perElement = e.getType() != ValueType::Unknown && !e.isUniform();
  switch (e.getKind()) {
  case Expr::Kind::Number:
    printNumber(llvm::cast<NumberExpr>(e).getValue(), os);
    return;
  case Expr::Kind::Bool:
    os << (llvm::cast<BoolExpr>(e).getValue() ? "true" : "false");
    return;
  case Expr::Kind::Step:
    os << "step";
    return;
  case Expr::Kind::Name: {
    const auto &name = llvm::cast<NameExpr>(e);
    os << name.getName();
    if (name.readsAssignedValue())
      os << "'";
    return;
  }
  case Expr::Kind::Unary: {
    const auto &unary = llvm::cast<UnaryExpr>(e);
    os << "(" << stringifyUnaryOp(unary.getOp()) << " ";
    printExpr(unary.getOperand(), perElement);
    os << ")";
    return;
  }
  case Expr::Kind::Binary: {
    const auto &binary = llvm::cast<BinaryExpr>(e);
    os << "(" << stringifyBinaryOp(binary.getOp()) << " ";
    printExpr(binary.getLHS(), perElement);
    os << " ";
    printExpr(binary.getRHS(), perElement);
    os << ")";
    return;
  }
  case Expr::Kind::Call: {
    const auto &call = llvm::cast<CallExpr>(e);
    os << "(" << call.getCallee();
    for (unsigned i = 0, n = call.getNumArgs(); i != n; ++i) {
      os << " ";
      printExpr(call.getArg(i), perElement);
    }
    os << ")";
    return;
  }
  }
}

void SpecPrinter::print(const Spec &spec) {
  os << "optimizer " << spec.name << "\n";
  for (const HyperDecl &hyper : spec.hypers) {
    os << "  hyper " << hyper.name << " = ";
    if (hyper.isBool)
      os << (hyper.defaultValue != 0.0 ? "true" : "false");
    else
      printNumber(hyper.defaultValue, os);
    os << "\n";
  }
  if (spec.param)
    os << "  param " << spec.param->name << " : "
       << stringifyFloatType(spec.param->dtype)
       << ", master = " << stringifyMasterFormat(spec.param->master);
  if (spec.param && spec.param->master == MasterFormat::Stochastic)
    os << "<" << spec.param->seedName << ">";
  if (spec.param)
    os << "\n";
  if (spec.grad)
    os << "  grad " << spec.grad->name << " : "
       << stringifyFloatType(spec.grad->dtype) << "\n";
  for (const StateDecl &state : spec.states) {
    os << "  state " << state.name << " : ";
    printScheme(state.scheme);
    os << "\n";
  }
  os << "  update\n";
  for (const Stmt &stmt : spec.statements) {
    os << "    " << (stmt.isLet() ? "let " : "") << stmt.name;
    printAnnotation(*stmt.value);
    os << " = ";
    printExpr(*stmt.value, /*inPerElement=*/false);
    os << "\n";
  }
}

void mlir::qopt::frontend::printSpec(const Spec &spec, llvm::raw_ostream &os) {
  SpecPrinter(os).print(spec);
}

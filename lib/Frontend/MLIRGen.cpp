//===- MLIRGen.cpp - Emit a checked spec as qopt IR -----------------------===//
//
// One walk over the declarations and one over the update statements. Sema
// has typed every expression (number or bool) and classified it (uniform or
// per-element), so each expression maps to one representation: f64 for a
// uniform number, f32 for a per-element number, i1 for a bool.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/MLIRGen.h"

#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::qopt;
using namespace mlir::qopt::frontend;

namespace {

/// Emits one spec. Usage: `MLIRGenImpl(context, spec).run()`.
class MLIRGenImpl {
public:
  MLIRGenImpl(MLIRContext &context, const Spec &spec)
      : context(context), spec(spec), builder(&context) {}

  OwningOpRef<ModuleOp> run();

private:
  Location loc(Loc l) {
    return FileLineColLoc::get(&context, spec.filename, l.line, l.col);
  }

  mlir::FloatType getFloatType(frontend::FloatType type);
  Attribute getScheme(const StateScheme &scheme);

  void genStatement(const Stmt &stmt, unsigned index);

  /// The value of `e`: f64 for a uniform number, f32 for a per-element
  /// number, i1 for a bool.
  Value genExpr(const Expr &e);
  /// The value of `e` as an operand of an operation whose result is
  /// per-element when `perElement` is true: a uniform number is rounded to
  /// f32 there. Bools and per-element values are returned as they are.
  Value genOperand(const Expr &e, bool perElement);
  Value genName(const NameExpr &e);
  Value genUnary(const UnaryExpr &e);
  Value genBinary(const BinaryExpr &e);
  Value genCall(const CallExpr &e);
  Value genSign(Value x, Location l);

  /// An arith.constant of `type` (f32 or f64) holding `value` rounded to
  /// nearest even; one per value and type.
  Value getConstant(double value, Type type, Location l);
  /// `value` (f64) rounded to f32 once; one arith.truncf per value.
  Value roundToF32(Value value, Location l);

  MLIRContext &context;
  const Spec &spec;
  OpBuilder builder;

  /// The loads and reads of hyperparameters and of the step, emitted once,
  /// at the first read.
  Value grad, param, step;
  llvm::SmallVector<Value> hyperValues;
  llvm::SmallVector<Value> stateLoads;
  /// The new value of each state once assigned (reads after the assignment).
  llvm::SmallVector<Value> stateValues;
  /// The value of each `let`, by statement index.
  llvm::DenseMap<unsigned, Value> lets;
  /// Uniform f64 values already rounded to f32, and constants.
  llvm::DenseMap<Value, Value> rounded;
  llvm::DenseMap<std::pair<Type, uint64_t>, Value> constants;

  /// A store deferred to the end of the update: the state's index, or -1
  /// for the parameter.
  struct PendingStore {
    int state;
    Value value;
    Location loc;
  };
  llvm::SmallVector<PendingStore> stores;
};

} // namespace

mlir::FloatType MLIRGenImpl::getFloatType(frontend::FloatType type) {
  switch (type) {
  case frontend::FloatType::F32:
    return builder.getF32Type();
  case frontend::FloatType::BF16:
    return builder.getBF16Type();
  case frontend::FloatType::F16:
    return builder.getF16Type();
  }
  llvm_unreachable("unknown float type");
}

Attribute MLIRGenImpl::getScheme(const StateScheme &scheme) {
  qopt::Overflow overflow = scheme.overflow == frontend::Overflow::Ieee
                                ? qopt::Overflow::ieee
                                : qopt::Overflow::saturate;
  switch (scheme.kind) {
  case SchemeKind::Plain:
    return PlainSchemeAttr::get(&context, getFloatType(scheme.plainType));
  case SchemeKind::Codebook:
    return CodebookSchemeAttr::get(
        &context, static_cast<int64_t>(scheme.blockSize), overflow);
  case SchemeKind::Group: {
    auto storage = IntegerType::get(&context, scheme.bits,
                                    scheme.isSigned ? IntegerType::Signed
                                                    : IntegerType::Unsigned);
    qopt::Companding companding = qopt::Companding::linear;
    if (scheme.companding == frontend::Companding::Softsign)
      companding = qopt::Companding::softsign;
    else if (scheme.companding == frontend::Companding::Sqrt)
      companding = qopt::Companding::sqrt;
    else if (scheme.companding == frontend::Companding::Dynamic)
      companding = qopt::Companding::dynamic;
    else if (scheme.companding == frontend::Companding::NonZero)
      companding = qopt::Companding::nonzero;
    qopt::Rounding rounding = scheme.rounding == frontend::Rounding::HalfEven
                                  ? qopt::Rounding::half_even
                                  : qopt::Rounding::half_up;
    qopt::ScaleDivisor divisor =
        scheme.divisor == frontend::ScaleDivisor::StoredScale
            ? qopt::ScaleDivisor::stored_scale
            : qopt::ScaleDivisor::absmax;
    return GroupSchemeAttr::get(
        &context, storage, static_cast<int64_t>(scheme.groupSize), companding,
        getFloatType(scheme.scaleType), rounding, divisor, overflow);
  }
  }
  llvm_unreachable("unknown scheme kind");
}

OwningOpRef<ModuleOp> MLIRGenImpl::run() {
  context.getOrLoadDialect<QoptDialect>();
  context.getOrLoadDialect<arith::ArithDialect>();
  context.getOrLoadDialect<math::MathDialect>();

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc(spec.loc));
  builder.setInsertionPointToEnd(module->getBody());

  qopt::MasterFormat master = qopt::MasterFormat::none;
  if (spec.param->master == frontend::MasterFormat::EccI8)
    master = qopt::MasterFormat::ecc_i8;
  else if (spec.param->master == frontend::MasterFormat::EccI16)
    master = qopt::MasterFormat::ecc_i16;
  else if (spec.param->master == frontend::MasterFormat::Stochastic)
    master = qopt::MasterFormat::stochastic;
  else if (spec.param->master == frontend::MasterFormat::KahanBF16)
    master = qopt::MasterFormat::kahan_bf16;
  auto optimizer =
      OptimizerOp::create(builder, loc(spec.loc), spec.name, spec.param->name,
                          getFloatType(spec.param->dtype), master,
                          spec.grad->name, getFloatType(spec.grad->dtype));
  builder.setInsertionPointToEnd(&optimizer.getBody().emplaceBlock());

  for (const HyperDecl &hyper : spec.hypers) {
    TypedAttr value =
        hyper.isBool ? TypedAttr(builder.getIntegerAttr(
                           builder.getI1Type(), hyper.defaultValue != 0.0))
                     : TypedAttr(builder.getF64FloatAttr(hyper.defaultValue));
    HyperOp::create(builder, loc(hyper.loc), hyper.name, value);
  }
  for (const StateDecl &state : spec.states)
    StateOp::create(builder, loc(state.loc), state.name,
                    getScheme(state.scheme));

  auto update = UpdateOp::create(builder, loc(spec.updateLoc));
  builder.setInsertionPointToEnd(&update.getBody().emplaceBlock());

  hyperValues.assign(spec.hypers.size(), Value());
  stateLoads.assign(spec.states.size(), Value());
  stateValues.assign(spec.states.size(), Value());
  for (auto [i, stmt] : llvm::enumerate(spec.statements))
    genStatement(stmt, i);

  // Every store after every load: a state's new value is an SSA value, so
  // deferring its store changes nothing else.
  for (const PendingStore &store : stores) {
    if (store.state < 0 && master == qopt::MasterFormat::stochastic) {
      // The rounding's key: the seed and the step, each a float32 uniform.
      Location l = loc(spec.param->masterLoc);
      Type f32 = builder.getF32Type();
      Value seed = arith::TruncFOp::create(
          builder, l, f32,
          HyperValueOp::create(builder, l, builder.getF64Type(),
                               spec.param->seedName));
      Value step = arith::TruncFOp::create(builder, l, f32,
                                           StepCountOp::create(builder, l));
      StoreParamOp::create(builder, store.loc, store.value,
                           ValueRange{seed, step});
    } else if (store.state < 0)
      StoreParamOp::create(builder, store.loc, store.value);
    else
      StoreStateOp::create(builder, store.loc, spec.states[store.state].name,
                           store.value);
  }

  if (failed(verify(*module)))
    return nullptr;
  return module;
}

void MLIRGenImpl::genStatement(const Stmt &stmt, unsigned index) {
  if (stmt.isLet()) {
    lets[index] = genExpr(*stmt.value);
    return;
  }
  // The stored value is a per-element float32, even when the expression is
  // uniform (`m = 0`).
  Value value = genOperand(*stmt.value, /*perElement=*/true);
  if (stmt.targetKind == RefKind::Param) {
    stores.push_back({-1, value, loc(stmt.loc)});
    return;
  }
  assert(stmt.targetKind == RefKind::State && "Sema resolves every target");
  stateValues[stmt.targetIndex] = value;
  stores.push_back({static_cast<int>(stmt.targetIndex), value, loc(stmt.loc)});
}

Value MLIRGenImpl::getConstant(double value, Type type, Location l) {
  llvm::APFloat f(value);
  if (type.isF32()) {
    bool losesInfo;
    f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
              &losesInfo);
  }
  auto key = std::make_pair(type, f.bitcastToAPInt().getZExtValue());
  auto it = constants.find(key);
  if (it != constants.end())
    return it->second;
  Value c =
      arith::ConstantOp::create(builder, l, builder.getFloatAttr(type, f));
  constants[key] = c;
  return c;
}

Value MLIRGenImpl::roundToF32(Value value, Location l) {
  auto it = rounded.find(value);
  if (it != rounded.end())
    return it->second;
  Value r = arith::TruncFOp::create(builder, l, builder.getF32Type(), value);
  rounded[value] = r;
  return r;
}

Value MLIRGenImpl::genOperand(const Expr &e, bool perElement) {
  if (!perElement || e.getType() != ValueType::Number || !e.isUniform())
    return genExpr(e);
  // A uniform number where it meets float32: f32(f64(x)).
  if (const auto *number = llvm::dyn_cast<NumberExpr>(&e))
    return getConstant(number->getValue(), builder.getF32Type(),
                       loc(e.getLoc()));
  return roundToF32(genExpr(e), loc(e.getLoc()));
}

Value MLIRGenImpl::genExpr(const Expr &e) {
  switch (e.getKind()) {
  case Expr::Kind::Number:
    return getConstant(llvm::cast<NumberExpr>(e).getValue(),
                       builder.getF64Type(), loc(e.getLoc()));
  case Expr::Kind::Bool:
    return arith::ConstantOp::create(
        builder, loc(e.getLoc()),
        builder.getBoolAttr(llvm::cast<BoolExpr>(e).getValue()));
  case Expr::Kind::Step:
    if (!step)
      step = StepCountOp::create(builder, loc(e.getLoc()));
    return step;
  case Expr::Kind::Name:
    return genName(llvm::cast<NameExpr>(e));
  case Expr::Kind::Unary:
    return genUnary(llvm::cast<UnaryExpr>(e));
  case Expr::Kind::Binary:
    return genBinary(llvm::cast<BinaryExpr>(e));
  case Expr::Kind::Call:
    return genCall(llvm::cast<CallExpr>(e));
  }
  llvm_unreachable("unknown expression kind");
}

Value MLIRGenImpl::genName(const NameExpr &e) {
  Location l = loc(e.getLoc());
  switch (e.getRefKind()) {
  case RefKind::Hyper: {
    Value &value = hyperValues[e.getRefIndex()];
    if (!value) {
      const HyperDecl &hyper = spec.hypers[e.getRefIndex()];
      Type type =
          hyper.isBool ? Type(builder.getI1Type()) : Type(builder.getF64Type());
      value = HyperValueOp::create(builder, l, type, hyper.name);
    }
    return value;
  }
  case RefKind::Grad:
    if (!grad)
      grad = LoadGradOp::create(builder, l);
    return grad;
  case RefKind::Param:
    if (!param)
      param = LoadParamOp::create(builder, l, builder.getF32Type());
    return param;
  case RefKind::State: {
    unsigned i = e.getRefIndex();
    if (e.readsAssignedValue())
      return stateValues[i];
    if (!stateLoads[i])
      stateLoads[i] = LoadStateOp::create(builder, l, builder.getF32Type(),
                                          spec.states[i].name);
    return stateLoads[i];
  }
  case RefKind::Let:
    return lets.lookup(e.getRefIndex());
  case RefKind::Unresolved:
    break;
  }
  llvm_unreachable("Sema resolves every name");
}

Value MLIRGenImpl::genUnary(const UnaryExpr &e) {
  Location l = loc(e.getLoc());
  Value operand = genExpr(e.getOperand());
  if (e.getOp() == UnaryOp::Neg)
    return arith::NegFOp::create(builder, l, operand);
  Value trueValue =
      arith::ConstantOp::create(builder, l, builder.getBoolAttr(true));
  return arith::XOrIOp::create(builder, l, operand, trueValue);
}

/// The predicate of a comparison: ordered (false on NaN) except `!=`, which
/// is true on NaN, as in C and IEEE 754.
static arith::CmpFPredicate getPredicate(BinaryOp op) {
  switch (op) {
  case BinaryOp::Lt:
    return arith::CmpFPredicate::OLT;
  case BinaryOp::Le:
    return arith::CmpFPredicate::OLE;
  case BinaryOp::Gt:
    return arith::CmpFPredicate::OGT;
  case BinaryOp::Ge:
    return arith::CmpFPredicate::OGE;
  case BinaryOp::Eq:
    return arith::CmpFPredicate::OEQ;
  case BinaryOp::Ne:
    return arith::CmpFPredicate::UNE;
  default:
    llvm_unreachable("not a comparison");
  }
}

Value MLIRGenImpl::genBinary(const BinaryExpr &e) {
  Location l = loc(e.getOpLoc());
  const Expr &lhsExpr = e.getLHS(), &rhsExpr = e.getRHS();
  // Operands are float32 when the operation is per-element: for arithmetic
  // that is its result; for a comparison (whose result is a bool) it is
  // whether either operand is.
  bool perElement = !e.isUniform();
  Value lhs = genOperand(lhsExpr, perElement);
  Value rhs = genOperand(rhsExpr, perElement);
  switch (e.getOp()) {
  case BinaryOp::Add:
    return arith::AddFOp::create(builder, l, lhs, rhs);
  case BinaryOp::Sub:
    return arith::SubFOp::create(builder, l, lhs, rhs);
  case BinaryOp::Mul:
    return arith::MulFOp::create(builder, l, lhs, rhs);
  case BinaryOp::Div:
    return arith::DivFOp::create(builder, l, lhs, rhs);
  case BinaryOp::Pow:
    // Uniform operands: a float64 power on the host. A per-element base: an
    // f32 power of the exponent rounded to f32 (Sema allows no per-element
    // exponent), lowered by lib/Codegen/ElementaryFunctions.cpp.
    return math::PowFOp::create(builder, l, lhs, rhs);
  case BinaryOp::Lt:
  case BinaryOp::Le:
  case BinaryOp::Gt:
  case BinaryOp::Ge:
  case BinaryOp::Eq:
  case BinaryOp::Ne:
    return arith::CmpFOp::create(builder, l, getPredicate(e.getOp()), lhs, rhs);
  case BinaryOp::And:
    return arith::AndIOp::create(builder, l, lhs, rhs);
  case BinaryOp::Or:
    return arith::OrIOp::create(builder, l, lhs, rhs);
  }
  llvm_unreachable("unknown binary operator");
}

/// sign(x) as torch.sign computes it, (x > 0) - (x < 0): 1 above zero, -1
/// below, +0 for ±0 and for NaN (checked on PyTorch 2.11, CPU and CUDA).
Value MLIRGenImpl::genSign(Value x, Location l) {
  Type type = x.getType();
  Value zero = getConstant(0.0, type, l);
  Value one = getConstant(1.0, type, l);
  Value minusOne = getConstant(-1.0, type, l);
  Value negative =
      arith::CmpFOp::create(builder, l, arith::CmpFPredicate::OLT, x, zero);
  Value positive =
      arith::CmpFOp::create(builder, l, arith::CmpFPredicate::OGT, x, zero);
  Value notPositive =
      arith::SelectOp::create(builder, l, negative, minusOne, zero);
  return arith::SelectOp::create(builder, l, positive, one, notPositive);
}

Value MLIRGenImpl::genCall(const CallExpr &e) {
  Location l = loc(e.isTernary() ? e.getOpLoc() : e.getLoc());
  bool perElement = !e.isUniform();
  switch (e.getBuiltin()) {
  case Builtin::Sqrt:
    return math::SqrtOp::create(builder, l, genExpr(e.getArg(0)));
  case Builtin::Abs:
    return math::AbsFOp::create(builder, l, genExpr(e.getArg(0)));
  case Builtin::Sign:
    return genSign(genExpr(e.getArg(0)), l);
  case Builtin::Min:
  case Builtin::Max: {
    // NaN-propagating, as torch.minimum and torch.maximum.
    Value a = genOperand(e.getArg(0), perElement);
    Value b = genOperand(e.getArg(1), perElement);
    if (e.getBuiltin() == Builtin::Min)
      return arith::MinimumFOp::create(builder, l, a, b);
    return arith::MaximumFOp::create(builder, l, a, b);
  }
  case Builtin::Exp:
    return math::ExpOp::create(builder, l, genExpr(e.getArg(0)));
  case Builtin::Log:
    return math::LogOp::create(builder, l, genExpr(e.getArg(0)));
  case Builtin::Tanh:
    return math::TanhOp::create(builder, l, genExpr(e.getArg(0)));
  case Builtin::Atan2: {
    // atan2(y, x), as math.atan2 and C.
    Value y = genOperand(e.getArg(0), perElement);
    Value x = genOperand(e.getArg(1), perElement);
    return math::Atan2Op::create(builder, l, y, x);
  }
  case Builtin::Select: {
    Value cond = genExpr(e.getArg(0));
    Value a = genOperand(e.getArg(1), perElement);
    Value b = genOperand(e.getArg(2), perElement);
    return arith::SelectOp::create(builder, l, cond, a, b);
  }
  case Builtin::Sum:
  case Builtin::MaxOf:
  case Builtin::Norm:
  case Builtin::Rms:
  case Builtin::Mean:
  case Builtin::GlobalSum:
  case Builtin::GlobalMax:
  case Builtin::GlobalNorm: {
    Builtin builtin = e.getBuiltin();
    ReductionKind kind =
        builtin == Builtin::Sum || builtin == Builtin::GlobalSum
            ? ReductionKind::sum
        : builtin == Builtin::Mean ? ReductionKind::mean
        : builtin == Builtin::MaxOf || builtin == Builtin::GlobalMax
            ? ReductionKind::max
        : builtin == Builtin::Norm || builtin == Builtin::GlobalNorm
            ? ReductionKind::norm
            : ReductionKind::rms;
    return ReduceOp::create(builder, l, builder.getF32Type(), kind,
                            genExpr(e.getArg(0)), isStepReduction(builtin));
  }
  case Builtin::Unknown:
    break;
  }
  llvm_unreachable("Sema resolves every builtin");
}

OwningOpRef<ModuleOp> mlir::qopt::frontend::mlirGen(MLIRContext &context,
                                                    const Spec &spec) {
  return MLIRGenImpl(context, spec).run();
}

OwningOpRef<ModuleOp> mlir::qopt::frontend::mlirGen(MLIRContext &context,
                                                    const Spec &spec,
                                                    llvm::SourceMgr &) {
  return mlirGen(context, spec);
}

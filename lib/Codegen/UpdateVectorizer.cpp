//===- UpdateVectorizer.cpp - The update on lanes -------------------------===//
//
// The update's arith/math operations rebuilt on f32 lanes with the mode's
// flags (the elementary functions through ElementaryFunctions.h), and the
// launch-uniform skip flag of qopt.skip_if.
//
//===----------------------------------------------------------------------===//

#include "CodecSupport.h"

#include "qopt/Codegen/ElementaryFunctions.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::qopt;

FailureOr<Value> mlir::qopt::getSkipFlag(OptimizerOp optimizer,
                                         ArrayRef<Value> uniforms,
                                         LaneMath &m) {
  OpBuilder &b = m.builder();
  Value skip;
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    auto skipIf = dyn_cast<SkipIfOp>(op);
    if (!skipIf)
      continue;
    Value flag;
    Operation *def = skipIf.getFlag().getDefiningOp();
    if (auto uniform = dyn_cast_or_null<UniformOp>(def)) {
      if (uniform.getIndex() >= uniforms.size())
        return uniform.emitOpError("reads uniform ")
               << uniform.getIndex() << " but the optimizer yields only "
               << uniforms.size();
      flag = uniforms[uniform.getIndex()];
    } else if (auto constant = dyn_cast_or_null<arith::ConstantOp>(def)) {
      flag = arith::ConstantOp::create(b, m.location(), constant.getValue());
    } else {
      return skipIf.emitOpError("needs a launch-uniform flag (a qopt.uniform "
                                "or a constant); run qopt-outline-uniforms "
                                "first");
    }
    // Nonzero, NaN included, skips.
    Value set = arith::CmpFOp::create(b, m.location(),
                                      arith::CmpFPredicate::UNE, flag,
                                      m.constF(flag, 0.0));
    skip = skip ? arith::OrIOp::create(b, m.location(), skip, set) : set;
  }
  return skip;
}


bool mlir::qopt::isVectorizableUpdateOp(Operation *op) {
  if (isa<math::SqrtOp, math::AbsFOp, math::FloorOp, math::CopySignOp,
          math::ExpOp, math::LogOp, math::TanhOp, math::Atan2Op,
          math::PowFOp>(op))
    return true;
  return op->getDialect() && op->getDialect()->getNamespace() == "arith";
}

FailureOr<Value> mlir::qopt::vectorizeUpdateOp(LaneMath &m, Operation *op,
                                               IRMapping &mapping,
                                               int64_t lanes) {
  OpBuilder &b = m.builder();
  Location loc = op->getLoc();
  auto lanesOf = [&](Type t) -> Type { return VectorType::get({lanes}, t); };
  if (auto constant = dyn_cast<arith::ConstantOp>(op))
    return Value(arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(cast<ShapedType>(lanesOf(constant.getType())),
                               constant.getValue())));
  auto operand = [&](unsigned i) { return mapping.lookup(op->getOperand(i)); };
  if (isa<math::SqrtOp>(op))
    return m.sqrt(operand(0));
  if (isa<arith::DivFOp>(op) && m.isGuarded())
    return m.div(operand(0), operand(1));
  if (isa<math::AbsFOp>(op))
    return m.abs(operand(0));
  if (isa<math::FloorOp>(op))
    return m.floor(operand(0));
  if (isa<math::CopySignOp>(op))
    return m.copySign(operand(0), operand(1));
  // The elementary functions: docs/numerics.md's float64 algorithms, the
  // same in both modes.
  if (isa<math::ExpOp>(op))
    return emitExp(m, operand(0));
  if (isa<math::LogOp>(op))
    return emitLog(m, operand(0));
  if (isa<math::TanhOp>(op))
    return emitTanh(m, operand(0));
  if (isa<math::Atan2Op>(op))
    return emitAtan2(m, operand(0), operand(1));
  if (isa<math::PowFOp>(op))
    return emitPow(m, operand(0), operand(1));
  if (op->getDialect()->getNamespace() != "arith")
    return op->emitOpError("is not supported in a per-element expression");
  OperationState state(loc, op->getName());
  for (Value v : op->getOperands())
    state.addOperands(mapping.lookup(v));
  for (Type t : op->getResultTypes())
    state.addTypes(lanesOf(t));
  state.addAttributes(op->getAttrs());
  if (m.isFast() && isa<arith::DivFOp>(op))
    state.attributes.set("fastmath", m.divisionFlags(operand(1)));
  else if (m.isFast() && op->hasAttr("fastmath"))
    state.attributes.set("fastmath",
                         arith::FastMathFlagsAttr::get(
                             b.getContext(), arith::FastMathFlags::contract |
                                                 arith::FastMathFlags::afn |
                                                 arith::FastMathFlags::arcp));
  Value result = b.create(state)->getResult(0);
  if (isa<arith::MulFOp>(op))
    m.recordMul(operand(0), operand(1), result);
  else if (isa<arith::AddFOp>(op))
    m.recordAdd(operand(0), operand(1), result);
  return result;
}

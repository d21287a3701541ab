//===- ExactUniformDivision.cpp - div.rn by a lane-uniform divisor --------===//
//
// Replaces a vector division by a broadcast scalar with a multiplication by
// the scalar's reciprocal, one fused correction and a proof that the result
// is the correctly rounded quotient; lanes that cannot be proven fall back to
// the IEEE division, so the result is bit for bit that of div.rn.
//
//===----------------------------------------------------------------------===//

#include "qopt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace mlir::qopt {
#define GEN_PASS_DEF_EXACTUNIFORMDIVISION
#include "qopt/Transforms/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {
struct ExactUniformDivisionPass
    : public qopt::impl::ExactUniformDivisionBase<ExactUniformDivisionPass> {
  void runOnOperation() override;
};
} // namespace

/// Whether every lane of `v` holds the same value: a broadcast, a splat
/// constant, or an elementwise operation of such values.
static bool isLaneUniform(Value v, unsigned depth = 0) {
  if (depth > 8)
    return false;
  if (v.getDefiningOp<vector::BroadcastOp>())
    return true;
  Attribute attr;
  if (matchPattern(v, m_Constant(&attr)))
    return isa<SplatElementsAttr>(attr) ||
           (isa<DenseElementsAttr>(attr) && cast<DenseElementsAttr>(attr).isSplat());
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumRegions() != 0 || !isPure(op) ||
      !op->hasTrait<OpTrait::Elementwise>())
    return false;
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    return isLaneUniform(operand, depth + 1);
  });
}

static void rewrite(arith::DivFOp div, Value s) {
  OpBuilder b(div);
  Location loc = div.getLoc();
  auto vecType = cast<VectorType>(div.getType());
  auto i32Vec = VectorType::get(vecType.getShape(), b.getI32Type());
  auto splatF = [&](double v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vecType, b.getF32FloatAttr(v)));
  };
  auto splatI = [&](int32_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(i32Vec, b.getI32IntegerAttr(v)));
  };
  auto fma = [&](Value a, Value c, Value d) -> Value {
    return LLVM::FMAOp::create(b, loc, a, c, d);
  };
  auto cmp = [&](arith::CmpFPredicate p, Value a, Value c) -> Value {
    return arith::CmpFOp::create(b, loc, p, a, c);
  };
  Value x = div.getLhs(), sVec = div.getRhs();

  // r = 1/s once for the whole vector.
  Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  Value r = arith::DivFOp::create(b, loc, one, s);
  Value rVec = vector::BroadcastOp::create(b, loc, vecType, r);

  // q0 = x * r; q1 = fma(fma(-q0, s, x), r, q0); d = fma(-q1, s, x)
  Value q0 = arith::MulFOp::create(b, loc, x, rVec);
  Value rem = fma(arith::NegFOp::create(b, loc, q0), sVec, x);
  Value q1 = fma(rem, rVec, q0);
  Value d = fma(arith::NegFOp::create(b, loc, q1), sVec, x);

  // H = |s| * ulp(q1) / 2 = |s| * 2^(E - 151), E the biased exponent of q1;
  // a quarter ulp (2^(E - 152)) when q1 is a power of two, whose lower
  // neighbour is only half an ulp away.
  Value bits = arith::BitcastOp::create(b, loc, i32Vec, q1);
  Value field = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, splatI(23)), splatI(0xFF));
  Value mantissa = arith::AndIOp::create(b, loc, bits, splatI(0x7FFFFF));
  Value isPow2 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       mantissa, splatI(0));
  Value shift = arith::SelectOp::create(b, loc, isPow2, splatI(152), splatI(151));
  // 2^(E - shift) is normal for E in [25, 254]; other exponents fall back.
  Value exponent = arith::SubIOp::create(b, loc, field, shift);
  Value clamped = arith::MaxSIOp::create(b, loc, exponent, splatI(-126));
  Value scaleBits = arith::ShLIOp::create(
      b, loc, arith::AddIOp::create(b, loc, clamped, splatI(127)), splatI(23));
  Value scale = arith::BitcastOp::create(b, loc, vecType, scaleBits);
  // llvm.intr.fabs would become a libdevice call in convert-gpu-to-nvvm.
  auto fabs = [&](Value v) -> Value {
    return LLVM::CallIntrinsicOp::create(b, loc, v.getType(),
                                         b.getStringAttr("llvm.fabs"),
                                         ValueRange{v})
        .getResult(0);
  };
  Value absS = fabs(sVec);
  Value h = arith::MulFOp::create(b, loc, absS, scale);
  Value absD = fabs(d);

  Value inRange = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, field,
                            splatI(25)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, field,
                            splatI(254)));
  // H well inside the normal range, so computing it was exact.
  Value hNormal = arith::AndIOp::create(
      b, loc, cmp(arith::CmpFPredicate::OGT, h, splatF(0x1p-100)),
      cmp(arith::CmpFPredicate::OLT, h,
          splatF(std::numeric_limits<float>::infinity())));
  Value proven = arith::AndIOp::create(
      b, loc, arith::AndIOp::create(b, loc, inRange, hNormal),
      cmp(arith::CmpFPredicate::OLT, absD, h));
  // x == 0: q0 = x * r is IEEE's x / s, sign and NaN included.
  Value zero = cmp(arith::CmpFPredicate::OEQ, x, splatF(0.0));
  Value ok = arith::OrIOp::create(b, loc, proven, zero);
  Value fast = arith::SelectOp::create(b, loc, zero, q0, q1);

  Value all = vector::ReductionOp::create(b, loc, vector::CombiningKind::AND, ok);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{vecType}, all,
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, loc, fast);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    Value ieee = arith::DivFOp::create(b, loc, x, sVec);
    scf::YieldOp::create(b, loc, ieee);
  }
  div.replaceAllUsesWith(ifOp.getResult(0));
  div.erase();
}

void ExactUniformDivisionPass::runOnOperation() {
  SmallVector<std::pair<arith::DivFOp, Value>> candidates;
  getOperation().walk([&](arith::DivFOp div) {
    // Only strict (IEEE) divisions: a fast-math division is already cheap.
    if (div.getFastmath() != arith::FastMathFlags::none)
      return;
    auto vecType = dyn_cast<VectorType>(div.getType());
    if (!vecType || !vecType.getElementType().isF32() ||
        vecType.getNumElements() < 2)
      return;
    if (isLaneUniform(div.getRhs()))
      candidates.push_back({div, Value()});
  });
  for (auto [div, unused] : candidates) {
    OpBuilder b(div);
    Value s = vector::ExtractOp::create(b, div.getLoc(), div.getRhs(), 0);
    rewrite(div, s);
  }
}

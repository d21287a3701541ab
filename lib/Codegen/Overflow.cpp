//===- Overflow.cpp - Saturated scales and the numerics counters ----------===//
//
// docs/numerics.md "Overflow": under a state's overflow = saturate policy a
// group scale that does not fit its storage type stores the type's largest
// finite value (the codes clamp against it, GroupQuantization.cpp), a
// codebook block's NaN absmax becomes 0 and an infinite one the largest
// float32, and every such group or block is counted in the kernel's
// numerics counters (docs/abi.md, "Numerics counters"). A positive f16
// scale that would round to 0 stores its smallest positive value,
// uncounted.
//
//===----------------------------------------------------------------------===//

#include "CodecSupport.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;
using namespace mlir::qopt;

namespace {
/// The largest scale a group state stores, and the smallest absmax that
/// saturates to it: the scale type's largest finite value and the smallest
/// float32 that rounds to infinity in it (round to nearest even: 65520 for
/// f16, halfway to 2^16; none, +inf, for f32). With sqrt companding and an
/// f32 scale the dequantized value is the scale's square: the largest scale
/// is then 2^64 (1 - 2^-24), whose square is finite, and 2^64 saturates.
/// (With an f16 scale, 65504^2 is finite.)
struct ScaleLimits {
  double maxFinite, overflowsAt;
};

/// An f16 scale's underflow: a positive absmax at most 2^-25 (half the
/// smallest subnormal; the tie goes to the even 0) rounds to a zero scale, so
/// its group would dequantize to zeros. Saturated, it divides by and stores
/// 2^-24, the smallest positive float16. (An f32 scale's divisor is at least
/// 1e-12, which f32 holds.)
constexpr double kF16UnderflowsAt = 0x1p-25;
constexpr double kF16SmallestPositive = 0x1p-24;

} // namespace

/// Whether an f16 absmax underflows: 0 < a <= 2^-25 (false for NaN).
static Value f16Underflows(LaneMath &m, Value absmax) {
  return arith::AndIOp::create(
      m.builder(), m.location(),
      m.cmp(arith::CmpFPredicate::OGT, absmax, m.constF(absmax, 0.0)),
      m.cmp(arith::CmpFPredicate::OLE, absmax,
            m.constF(absmax, kF16UnderflowsAt)));
}

static ScaleLimits scaleLimits(GroupSchemeAttr scheme) {
  if (scheme.getScale().isF16())
    return {65504.0, 65520.0};
  if (scheme.getCompanding() == Companding::sqrt)
    return {0x1.fffffep63, 0x1p64};
  return {std::numeric_limits<float>::max(),
          std::numeric_limits<double>::infinity()};
}

Value mlir::qopt::saturateGroupAbsmax(LaneMath &m, GroupSchemeAttr scheme,
                                      Value absmax) {
  if (scheme.getOverflow() != Overflow::saturate)
    return absmax;
  ScaleLimits limits = scaleLimits(scheme);
  // !(absmax < overflowsAt): a NaN saturates too.
  Value fits = m.cmp(arith::CmpFPredicate::OLT, absmax,
                     m.constF(absmax, limits.overflowsAt));
  Value saturated = m.select(fits, absmax, m.constF(absmax, limits.maxFinite));
  if (!scheme.getScale().isF16())
    return saturated;
  return m.select(f16Underflows(m, absmax),
                  m.constF(absmax, kF16SmallestPositive), saturated);
}

Value mlir::qopt::saturateCodebookAbsmax(LaneMath &m,
                                         CodebookSchemeAttr scheme,
                                         Value absmax) {
  if (scheme.getOverflow() != Overflow::saturate)
    return absmax;
  const double inf = std::numeric_limits<double>::infinity();
  Value isNaN = m.cmp(arith::CmpFPredicate::UNO, absmax, absmax);
  Value isInf = m.cmp(arith::CmpFPredicate::OEQ, absmax, m.constF(absmax, inf));
  return m.select(
      isNaN, m.constF(absmax, 0.0),
      m.select(isInf, m.constF(absmax, std::numeric_limits<float>::max()),
               absmax));
}

void mlir::qopt::countSaturation(LaneMath &m, Attribute scheme, Value absmax,
                                 Value counters) {
  if (!counters)
    return;
  double overflowsAt;
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    if (group.getOverflow() != Overflow::saturate)
      return;
    overflowsAt = scaleLimits(group).overflowsAt;
  } else if (auto codebook = dyn_cast<CodebookSchemeAttr>(scheme)) {
    if (codebook.getOverflow() != Overflow::saturate)
      return;
    overflowsAt = std::numeric_limits<double>::infinity();
  } else {
    return;
  }
  OpBuilder &b = m.builder();
  Location loc = m.location();
  const double inf = std::numeric_limits<double>::infinity();
  Value saturated = arith::XOrIOp::create(
      b, loc,
      m.cmp(arith::CmpFPredicate::OLT, absmax, m.constF(absmax, overflowsAt)),
      arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
  Value null = LLVM::ZeroOp::create(b, loc, counters.getType());
  Value given = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                     counters, null);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{},
                                arith::AndIOp::create(b, loc, saturated, given),
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Type i64 = b.getI64Type();
  auto slot = [&](NumericsCounter c) {
    return arith::ConstantOp::create(
        b, loc, b.getI64IntegerAttr(static_cast<int64_t>(c)));
  };
  // A finite absmax too large for its scale type, or a NaN or infinite one
  // (values that were not finite). An f16 scale's underflow is not counted:
  // it rounds small values (common in linear-companded second moments) and
  // clips none, and one atomic per such group would serialize the launch
  // (docs/numerics.md "Overflow").
  Value finite = m.cmp(arith::CmpFPredicate::OLT, absmax, m.constF(absmax, inf));
  Value index =
      arith::SelectOp::create(b, loc, finite,
                              slot(NumericsCounter::SaturatedGroups),
                              slot(NumericsCounter::NonfiniteGroups));
  Value addr = LLVM::GEPOp::create(b, loc, counters.getType(), i64, counters,
                                   ValueRange{index});
  LLVM::AtomicRMWOp::create(
      b, loc, LLVM::AtomicBinOp::add, addr,
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1)),
      LLVM::AtomicOrdering::monotonic);
}

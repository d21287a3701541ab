//===- GroupQuantization.cpp - Group quantization -------------------------===//
//
// numerics.md §2: group (companded) dequantization and quantization, the
// stored scale, and checked rounding (approximate arithmetic where a margin
// proves the IEEE code).
//
//===----------------------------------------------------------------------===//

#include "CodecSupport.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::qopt;

static double codeRange(GroupSchemeAttr scheme) {
  if (isPacked(scheme))
    return scheme.getStorage().isSigned() ? 7.0 : 15.0;
  return scheme.getStorage().isSigned() ? 127.0 : 255.0;
}

Value mlir::qopt::dequantizeGroup(LaneMath &m, GroupSchemeAttr scheme,
                                  Value codes, Value scale) {
  if (isCodeTable(scheme.getCompanding()))
    return dequantizeTable(m, scheme, codes, scale);
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type f32 = withElement(codes.getType(), b.getF32Type());
  Value q = scheme.getStorage().isSigned()
                ? Value(arith::SIToFPOp::create(b, loc, f32, codes))
                : Value(arith::UIToFPOp::create(b, loc, f32, codes));
  Value z = m.div(q, m.constF(q, codeRange(scheme)));
  switch (scheme.getCompanding()) {
  case Companding::softsign: {
    // y = z / (2 - |z|); m = y * s
    Value y = m.div(z, m.sub(m.constF(z, 2.0), m.abs(z)));
    return m.mul(y, scale);
  }
  case Companding::sqrt: {
    // u = (q / 255) * s; v = u * u
    Value u = m.mul(z, scale);
    return m.mul(u, u);
  }
  case Companding::linear:
    return m.mul(z, scale);
  case Companding::dynamic:
  case Companding::nonzero:
    break;
  }
  llvm_unreachable("a table's codes are dequantized by dequantizeTable");
}

Value mlir::qopt::groupMagnitude(LaneMath &m, GroupSchemeAttr scheme,
                                 Value x) {
  if (scheme.getCompanding() == Companding::sqrt)
    return m.sqrt(x);
  if (scheme.getStorage().isSigned())
    return m.abs(x);
  return x;
}

Value mlir::qopt::groupStoredScale(LaneMath &m, GroupSchemeAttr scheme,
                                   Value absmax) {
  Value s = absmax;
  // The authors' kernel floors the scale at 1e-12 and stores that; seed 003
  // stores the absmax itself.
  if (scheme.getDivisor() == ScaleDivisor::absmax)
    s = m.maxKeepNaN(absmax, m.constF(absmax, 1e-12));
  return narrowFromF32(m, s, scheme.getScale());
}

/// The divisor of a group's quantization: max(absmax, 1e-12) (the authors'
/// kernel) or the stored scale with 0 taken as 1 (seed 003).
static Value groupDivisor(LaneMath &m, GroupSchemeAttr scheme, Value absmax,
                          Value storedScale) {
  if (scheme.getDivisor() == ScaleDivisor::absmax)
    return m.maxKeepNaN(absmax, m.constF(absmax, 1e-12));
  Value zero = m.constF(storedScale, 0.0);
  return m.select(m.cmp(arith::CmpFPredicate::OEQ, storedScale, zero),
                  m.constF(storedScale, 1.0), storedScale);
}

/// groupDivisor of broadcast lanes computed on their scalars and broadcast:
/// a division by it then sees a uniform divisor (one reciprocal and one
/// range check a thread, not a tree over identical lanes).
static Value quantizationDivisor(LaneMath &m, GroupSchemeAttr scheme,
                                 Value absmax, Value storedScale) {
  Value a = LaneMath::uniformOf(absmax);
  Value s = LaneMath::uniformOf(storedScale);
  if (!a || !s)
    return groupDivisor(m, scheme, absmax, storedScale);
  return vector::BroadcastOp::create(m.builder(), m.location(), absmax.getType(),
                                     groupDivisor(m, scheme, a, s));
}

/// Under overflow = saturate, y = x / divisor clamped to [-1, 1] before
/// softsign's 2y / (1 + |y|), which is NaN for an infinite y: an infinite x
/// then takes the extreme code, as a finite one beyond the divisor does. For
/// a finite y the code does not change: softsign is increasing and maps ±1
/// to ±1 exactly, so |y| > 1 rounds to a code the clamp takes to ±range
/// anyway. A NaN y stays NaN (code 0).
static Value clampSoftsignArgument(LaneMath &m, GroupSchemeAttr scheme,
                                   Value y) {
  if (scheme.getOverflow() != Overflow::saturate)
    return y;
  Value one = m.constF(y, 1.0), minusOne = m.constF(y, -1.0);
  return m.select(m.cmp(arith::CmpFPredicate::OGT, y, one), one,
                  m.select(m.cmp(arith::CmpFPredicate::OLT, y, minusOne),
                           minusOne, y));
}

/// t, the value whose rounding is the code: 127 * softsign(x / s),
/// 255 * sqrt(x) / s, ... (numerics.md §2), in `m`'s arithmetic.
static Value codeArgument(LaneMath &m, GroupSchemeAttr scheme, Value x,
                          Value divisor) {
  double range = codeRange(scheme);
  if (scheme.getDivisor() == ScaleDivisor::absmax) {
    // Authors: signed: 127 * z with z = softsign(m/s); unsigned: 255 * u / s.
    if (scheme.getStorage().isSigned()) {
      Value z = m.div(x, divisor);
      if (scheme.getCompanding() == Companding::softsign) {
        z = clampSoftsignArgument(m, scheme, z);
        z = m.div(m.mul(m.constF(z, 2.0), z),
                  m.add(m.constF(z, 1.0), m.abs(z)));
      }
      return m.mul(m.constF(z, range), z);
    }
    Value u = scheme.getCompanding() == Companding::sqrt ? m.sqrt(x) : x;
    return m.div(m.mul(m.constF(u, range), u), divisor);
  }
  // Seed 003: y = g / safe, softsign 2y / (1 + |y|), then y * 127 (or * 255).
  Value u = scheme.getCompanding() == Companding::sqrt ? m.sqrt(x) : x;
  Value y = m.div(u, divisor);
  if (scheme.getCompanding() == Companding::softsign) {
    y = clampSoftsignArgument(m, scheme, y);
    y = m.div(m.mul(m.constF(y, 2.0), y), m.add(m.constF(y, 1.0), m.abs(y)));
  }
  return m.mul(y, m.constF(y, range));
}

/// codeArgument's t in real arithmetic as a product p * k left unrounded,
/// computed with fewer operations by `approx` (LaneMath::approximate) for
/// checkedRoundCode: softsign's 2y / (1 + |y|), y = u / divisor, as
/// (u / (divisor + |u|)) * 2 range; the others' u / divisor * range as u *
/// (range / divisor), the quotient once per thread. u is x, or its square
/// root for sqrt companding; `divisor` is a broadcast scalar. A square root
/// the update computed (`root`, LaneMath::knownRoot) stands for the
/// approximate one: u = root * scale, the scale folded into the quotient
/// (range / divisor) * scale, once per thread. `quotient` is range /
/// divisor itself (null for softsign).
namespace {
struct CodeArgument {
  Value p, k, quotient;
};
} // namespace
static CodeArgument
approximateCodeArgument(LaneMath &approx, GroupSchemeAttr scheme, Value x,
                        Value divisor,
                        const std::optional<LaneMath::KnownRoot> &root) {
  OpBuilder &b = approx.builder();
  Location loc = approx.location();
  double range = codeRange(scheme);
  Value u = x;
  if (scheme.getCompanding() == Companding::sqrt)
    u = root ? root->root : approx.sqrt(x);
  if (scheme.getCompanding() == Companding::softsign)
    return {approx.div(u, approx.add(divisor, approx.abs(u))),
            approx.constF(u, 2 * range), Value()};
  Value d = vector::ExtractOp::create(b, loc, divisor, 0);
  Value quotient = approx.div(approx.constF(d, range), d);
  Value k = quotient;
  if (root && root->scale)
    k = arith::MulFOp::create(b, loc, k, root->scale);
  return {u, vector::BroadcastOp::create(b, loc, u.getType(), k), quotient};
}

/// The code before clamping: floor(t + 0.5) or roundeven(t).
static Value roundCode(LaneMath &m, GroupSchemeAttr scheme, Value t) {
  return scheme.getRounding() == Rounding::half_up
             ? m.floor(m.add(t, m.constF(t, 0.5)))
             : m.roundEven(t);
}

/// The code clamped to the scheme's range [lo, hi], NaN taken as 0.
static Value clampCode(LaneMath &m, GroupSchemeAttr scheme, Value q) {
  double range = codeRange(scheme);
  Value lo = m.constF(q, scheme.getStorage().isSigned() ? -range : 0.0);
  Value hi = m.constF(q, range);
  q = m.select(m.cmp(arith::CmpFPredicate::OLT, q, lo), lo,
               m.select(m.cmp(arith::CmpFPredicate::OGT, q, hi), hi, q));
  return m.select(m.cmp(arith::CmpFPredicate::UNO, q, q), m.constF(q, 0.0), q);
}

/// q + kCodeBias for an integer-valued code q (exact).
static Value biasCode(LaneMath &m, Value q) {
  return m.add(q, m.constF(q, kCodeBias));
}

/// checkedRoundCode's per-lane fallback: the lanes whose check fails
/// (`laneOk` false, or `divisorOk` false for all), lowest first, take the
/// IEEE chain (`ieee`) one at a time; the others keep their code in `biased`.
static Value fixFailingLanes(LaneMath &m, LaneMath &ieee,
                             GroupSchemeAttr scheme, Value x, Value divisor,
                             Value laneOk, Value divisorOk, Value biased) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Value p = biased;
  auto lanes = cast<VectorType>(p.getType()).getNumElements();
  Type i32 = b.getI32Type();
  auto ci = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Value mask = ci(0);
  for (int64_t i = 0; i < lanes; ++i) {
    Value ok = arith::AndIOp::create(
        b, loc, divisorOk, vector::ExtractOp::create(b, loc, laneOk, i));
    mask = arith::OrIOp::create(
        b, loc, mask,
        arith::SelectOp::create(b, loc, ok, ci(0), ci(int64_t(1) << i)));
  }
  auto loopOp = scf::WhileOp::create(b, loc, TypeRange{i32, p.getType()},
                                     ValueRange{mask, biased});
  {
    OpBuilder::InsertionGuard loopGuard(b);
    Block *before = b.createBlock(&loopOp.getBefore(), {}, {i32, p.getType()},
                                  {loc, loc});
    Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                       before->getArgument(0), ci(0));
    scf::ConditionOp::create(b, loc, more, before->getArguments());
    Block *after = b.createBlock(&loopOp.getAfter(), {}, {i32, p.getType()},
                                 {loc, loc});
    Value bits = after->getArgument(0), cur = after->getArgument(1);
    Value lane = LLVM::CountTrailingZerosOp::create(b, loc, i32, bits, false);
    Value xi = vector::ExtractOp::create(b, loc, x, 0);
    for (int64_t k = 1; k < lanes; ++k)
      xi = arith::SelectOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, ci(k)),
          vector::ExtractOp::create(b, loc, x, k), xi);
    Value di = vector::ExtractOp::create(b, loc, divisor, 0);
    Value code = biasCode(
        ieee, clampCode(ieee, scheme,
                        roundCode(ieee, scheme, codeArgument(ieee, scheme, xi, di))));
    SmallVector<int32_t> iota;
    for (int64_t k = 0; k < lanes; ++k)
      iota.push_back(static_cast<int32_t>(k));
    auto vecI32 = VectorType::get({lanes}, i32);
    Value hit = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vecI32, ArrayRef<int32_t>(iota))),
        vector::BroadcastOp::create(b, loc, vecI32, lane));
    Value next = arith::SelectOp::create(
        b, loc, hit, vector::BroadcastOp::create(b, loc, p.getType(), code), cur);
    Value rest = arith::AndIOp::create(
        b, loc, bits, arith::SubIOp::create(b, loc, bits, ci(1)));
    scf::YieldOp::create(b, loc, ValueRange{rest, next});
  }
  return loopOp.getResult(1);
}

/// clampCode(roundCode(codeArgument(...))) in IEEE arithmetic, plus
/// kCodeBias (the code is the low byte of the sum's pattern), computed
/// through the approximate chain where that is provably the same integer.
///
/// Every chain of codeArgument and approximateCodeArgument is products,
/// quotients and square roots of its operands plus one sum of non-negative
/// terms (1 + |y| or divisor + |u|): no cancellation, and softsign's
/// relative condition number is at most 1, so each rounding adds its
/// relative error to t's. In units of 2^-24: the IEEE chain rounds at most 4
/// times (softsign: y, 1 + |y|, the quotient, the product by 127; sqrt: the
/// root, the product by 255, the quotient; linear: the quotient and the
/// product), the approximate one at most 6
/// (div.approx.ftz.f32 within 2 ulp, 4 units, for divisors in [2^-126,
/// 2^126]; sqrt.approx.ftz.f32 within 2^-23, 2 units; the IEEE sum, 1; its
/// last product p * k is not rounded): softsign 4 + 5 (the sum, the
/// quotient), sqrt 3 + 6 (the root, range / divisor), linear 2 + 4. (The divisor + |u| is
/// within div.approx's range as |u| <= 2 divisor: the divisor is the
/// group's absmax, or its stored scale, which is within a factor of 2 of
/// it; the divisor is checked to lie in [2^-40, 2^100].)
/// With |t| < 128 (softsign) and |t| < 256 (sqrt) that is E < 6.9e-5 and
/// E < 1.38e-4. Flushing a subnormal operand or quotient to zero moves t by
/// less than 255 * sqrt(2^-126) / 2^-40 < 3.1e-5 when the divisor is at
/// least 2^-40 (the authors' divisor is at least 1e-12 > 2^-40): E < 1.69e-4.
/// A sqrt code whose root the update computed (LaneMath::knownRoot) takes u
/// = root * scale in place of sqrt.approx: sqrt.rn(x) is within 1 unit;
/// sqrt.rn(RN(x / w)) * sqrt.rn(w), for a uniform w in [2^-40, 1], within
/// 1.5 + 1 and the product (range / divisor) * sqrt.rn(w) 1 more, so sqrt
/// 3 + 7.5 (E < 1.61e-4); x / w is subnormal only where x is, and then
/// moves sqrt(x) by at most sqrt(2^-150) = 2^-75, t by less than 255 *
/// 2^-75 / 2^-40 < 7.5e-9, inside the flush bound above: E < 1.92e-4. A w
/// outside [2^-40, 1] fails the thread's check, and the lanes' own checks
/// then take the sqrt.approx chain.
///
/// With q' the integer nearest t' = p * k (RN(p * k + kCodeBias) -
/// kCodeBias, the first an FMA: the sum lies in [2^23, 2^24), where floats
/// are the integers), d = RN(p * k - q') (an FMA) is within 2^-26 of t' - q'
/// where |d| < 1/2. Where |d| < 1/2 - 2^-12, t' + 0.5 lies in (q' + 2^-12 -
/// 2^-26, q' + 1 - 2^-12 + 2^-26); t + 0.5 within E of it and u = RN(t + 0.5)
/// within 2^-16 more, and E + 2^-16 + 2^-26 < 2^-12 (at most 2.08e-4, with
/// a known root, against 2.44e-4),
/// so floor(u) = q' (and, away from half integers, roundeven(t) = q'). A
/// tie, t' a half integer, gives |d| = 1/2 and fails.
/// Where also |t' - c| < R, c and R the centre and half width of
/// [lo - 1/2, hi + 1/2], q' is in [lo, hi] and needs no clamp (and the |t|
/// bounds above hold); with the absmax as divisor that holds by itself (see
/// below), with seed 003's stored scale it is checked. Each condition is one
/// maximum per thread: max |d| and max |t' - c| over the lanes (a NaN lane
/// makes both NaN and fails them). Where the thread's check or the divisor's
/// range fails, each lane
/// checks itself, and a lane that fails takes the IEEE chain and its clamp.
static Value checkedRoundCode(LaneMath &m, GroupSchemeAttr scheme, Value x,
                              Value divisor) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  LaneMath approx = LaneMath::approximate(b, loc);
  std::optional<LaneMath::KnownRoot> root;
  if (scheme.getCompanding() == Companding::sqrt)
    root = m.knownRoot(x);
  auto [p, k, quotient] =
      approximateCodeArgument(approx, scheme, x, divisor, root);
  double range = codeRange(scheme);
  double lo = scheme.getStorage().isSigned() ? -range : 0.0;
  double centre = (lo + range) / 2, halfWidth = (range - lo + 1) / 2;
  // For t' = p * k: the nearest integer as RN(t' + kCodeBias) - kCodeBias
  // (one FMA, not FRND on the quarter-rate conversion pipe; the biased sum
  // is the code, quantizeGroup; floor(t' + 0.5) is the same integer where
  // the check below passes), t' less it, and t' less the range's centre.
  struct Terms {
    Value biased, distance, offCentre;
  };
  auto termsOf = [&](Value p, Value k) {
    auto fma = [&](Value addend) { return m.fma(p, k, addend); };
    Value biased = fma(m.constF(p, kCodeBias));
    Value q = m.sub(biased, m.constF(biased, kCodeBias));
    return Terms{biased, fma(arith::NegFOp::create(b, loc, q)),
                 fma(m.constF(p, -centre))};
  };
  auto [biased, distance, offCentre] = termsOf(p, k);
  auto lanes = cast<VectorType>(p.getType()).getNumElements();
  auto cmpConst = [&](arith::CmpFPredicate p, Value v, double c) {
    return m.cmp(p, v, m.constF(v, c));
  };
  Value clearOfBoundary =
      cmpConst(arith::CmpFPredicate::OLT,
               m.laneMaximum(distance, /*magnitude=*/true), 0.5 - 0x1p-12);
  // With the absmax as divisor the range needs no check: |x| <= absmax <=
  // divisor (the sqrt codes' divisor is sqrt.rn of the largest v), so
  // |t'| <= range * (1 + 2^-20) < range + 1/2 for both chains (their errors
  // above), and a NaN lane fails the boundary check. (Lanes past a partial
  // tile's end take no part in the absmax; their codes are not stored.)
  Value all = clearOfBoundary;
  if (scheme.getDivisor() != ScaleDivisor::absmax) {
    Value inRange = cmpConst(arith::CmpFPredicate::OLT,
                             m.laneMaximum(offCentre, /*magnitude=*/true),
                             halfWidth);
    all = arith::AndIOp::create(b, loc, all, inRange);
  }
  // The divisor is the same for all lanes: its range is checked once, for
  // the thread here and for each lane's own check in the fallback. Under
  // overflow = saturate a group of an f16 scale whose divisor is 65504 (the
  // saturated scale, whose lanes may lie far beyond it, where div.approx
  // does not hold, or an absmax of exactly 65504) takes the IEEE chain and
  // its clamp; with an f32 scale the saturated divisor is above 2^100.
  Value absDivisor = m.abs(vector::ExtractOp::create(b, loc, divisor, 0));
  Value belowHi =
      scheme.getOverflow() == Overflow::saturate && scheme.getScale().isF16()
          ? cmpConst(arith::CmpFPredicate::OLT, absDivisor, 65504.0)
          : cmpConst(arith::CmpFPredicate::OLE, absDivisor, 0x1p100);
  all = arith::AndIOp::create(b, loc, all, belowHi);
  Value aboveLo = cmpConst(arith::CmpFPredicate::OGE, absDivisor, 0x1p-40);
  all = arith::AndIOp::create(b, loc, all, aboveLo);
  Value divisorOk = arith::AndIOp::create(b, loc, belowHi, aboveLo);
  // A known root's uniform out of its range fails every thread's check; the
  // lanes' own checks below then take the sqrt.approx chain instead.
  if (root && root->cond)
    all = arith::AndIOp::create(b, loc, all, root->cond);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{p.getType()}, all,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, loc, biased);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  // Some lane failed: each lane keeps its checked code or takes the IEEE
  // chain alone, so that a warp pays for the lanes that fail and not for
  // all of them (ties are common: docs/tuning.md#checked-rounding). Scalar
  // div.rn / sqrt.rn as inline PTX: LLVM would hoist the short chain above
  // the branch.
  LaneMath ieee = m.guarded(false).opaque();
  if (lanes > 8) {
    // 16 lanes: all of them take the IEEE chain; a per-lane fallback costs
    // registers there. docs/tuning.md#checked-rounding
    LaneMath plain = m.guarded(false);
    scf::YieldOp::create(
        b, loc,
        biasCode(plain, clampCode(plain, scheme,
                                  roundCode(plain, scheme,
                                            codeArgument(plain, scheme, x, divisor)))));
    b.setInsertionPointAfter(ifOp);
    return ifOp.getResult(0);
  }
  // One lane at a time: a mask of the failing lanes, and a loop that gives
  // the lowest one the IEEE chain. A warp runs it as often as its thread
  // with the most failing lanes (usually once), whatever lanes they are.
  // docs/tuning.md#checked-rounding
  if (root && root->cond) {
    // Where the known root's uniform lies outside [2^-40, 1], the lanes are
    // checked on the sqrt.approx chain (the codes' own, without the root):
    // a launch with such a uniform then costs the per-lane checks, not the
    // IEEE chain on every lane. sqrt.approx as inline PTX, which LLVM cannot
    // hoist above the branch into the fast path.
    Value k0 = vector::BroadcastOp::create(b, loc, p.getType(), quotient);
    Value u0 = m.perLane(x, [&](Value lane) {
      return inlinePtx(b, loc, b.getF32Type(), lane,
                       "sqrt.approx.ftz.f32 $0, $1;", "=f,f");
    });
    Terms t0 = termsOf(u0, k0);
    biased = m.select(root->cond, biased, t0.biased);
    distance = m.select(root->cond, distance, t0.distance);
    offCentre = m.select(root->cond, offCentre, t0.offCentre);
  }
  Value laneOk = arith::AndIOp::create(
      b, loc,
      m.cmp(arith::CmpFPredicate::OLT, m.abs(distance),
            m.constF(distance, 0.5 - 0x1p-12)),
      m.cmp(arith::CmpFPredicate::OLT, m.abs(offCentre),
            m.constF(offCentre, halfWidth)));
  scf::YieldOp::create(b, loc,
                       fixFailingLanes(m, ieee, scheme, x, divisor, laneOk,
                                       divisorOk, biased));
  b.setInsertionPointAfter(ifOp);
  return ifOp.getResult(0);
}

Value mlir::qopt::quantizeGroup(LaneMath &m, GroupSchemeAttr scheme, Value x,
                                Value absmax, Value storedScale,
                                bool checkedRounding) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Value divisor = quantizationDivisor(m, scheme, absmax, storedScale);
  if (isCodeTable(scheme.getCompanding()))
    return quantizeTable(m, scheme, x, divisor);
  Type i32 = withElement(x.getType(), b.getI32Type());
  Type i8 = withElement(x.getType(), b.getI8Type());
  // Every companding, linear codes too (docs/tuning.md#checked-rounding).
  if (checkedRounding && !m.isFast() &&
      m.getTarget() == LaneMath::Target::NVVM &&
      isa<VectorType>(x.getType()))
    return arith::TruncIOp::create(
        b, loc, i8,
        arith::BitcastOp::create(b, loc, i32,
                                 checkedRoundCode(m, scheme, x, divisor)));
  Value q = clampCode(m, scheme, roundCode(m, scheme, codeArgument(m, scheme, x, divisor)));
  // On the GPU the code from the biased sum's bits (an FADD), not a
  // conversion (F2I, quarter rate); the host converts.
  Value qi = m.getTarget() == LaneMath::Target::NVVM
                 ? Value(arith::BitcastOp::create(b, loc, i32, biasCode(m, q)))
                 : Value(arith::FPToSIOp::create(b, loc, i32, q));
  return arith::TruncIOp::create(b, loc, i8, qi);
}

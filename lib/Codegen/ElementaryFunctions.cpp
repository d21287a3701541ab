//===- ElementaryFunctions.cpp - exp, log, tanh, atan2, pow on lanes ------===//
//
// docs/numerics.md, "Elementary functions", as arith operations on float64
// lanes: the same operations in the same order as the C++ reference
// (test/reference/lib/Elementary.cpp), each one IEEE rounding on both
// targets. No fast-math flags: LLVM may neither contract nor reassociate
// them, and NVPTX emits add.rn/mul.rn/fma.rn/div.rn.f64. Branches of the
// reference are selects here; a lane whose value the selects discard still
// computes through integers that are defined (the clamps come first), so no
// conversion sees a NaN. No call below has two arguments that create ops, so
// the ops' order (and the kernels' bytes) is not the C++ compiler's order of
// evaluating arguments.
//
//===----------------------------------------------------------------------===//

#include "qopt/Codegen/ElementaryFunctions.h"
#include "qopt/Numerics/ElementaryConstants.h"

#include "CodecSupport.h"

#include <limits>

using namespace mlir;
using namespace mlir::qopt;

namespace {

using namespace ::qopt::elementary;

/// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude below 2^51
/// to an integer, ties to even (no roundeven instruction on baseline x86-64).
constexpr double kShifter = 0x1.8p52;
constexpr double kInf = std::numeric_limits<double>::infinity();

using Pred = arith::CmpFPredicate;

/// Float64 (and i64, i1) lanes shaped like one f32 value: the operations the
/// algorithms are written in, each one op.
class F64Lanes {
public:
  F64Lanes(LaneMath &m, Value like)
      : m(m), b(m.builder()), loc(m.location()),
        f64(withElement(like.getType(), b.getF64Type())),
        i64(withElement(like.getType(), b.getI64Type())), f32(like.getType()) {}

  Value c(double v) {
    return arith::ConstantOp::create(
        b, loc, cast<TypedAttr>(splat(f64, b.getF64FloatAttr(v))));
  }
  Value ci(int64_t v) {
    return arith::ConstantOp::create(
        b, loc,
        cast<TypedAttr>(splat(i64, b.getIntegerAttr(b.getI64Type(), v))));
  }
  Value ext(Value x) { return arith::ExtFOp::create(b, loc, f64, x); }
  Value trunc(Value x) { return arith::TruncFOp::create(b, loc, f32, x); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value fma(Value x, Value y, Value z) { return m.fma(x, y, z); }
  Value cmp(Pred p, Value x, Value y) { return m.cmp(p, x, y); }
  Value sel(Value cond, Value x, Value y) { return m.select(cond, x, y); }
  Value both(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value either(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value no(Value x) {
    Value t = arith::ConstantOp::create(
        b, loc, cast<TypedAttr>(splat(x.getType(), b.getBoolAttr(true))));
    return arith::XOrIOp::create(b, loc, x, t);
  }
  Value bits(Value x) { return arith::BitcastOp::create(b, loc, i64, x); }
  Value fromBits(Value x) { return arith::BitcastOp::create(b, loc, f64, x); }
  Value toInt(Value x) { return arith::FPToSIOp::create(b, loc, i64, x); }
  Value toDouble(Value x) { return arith::SIToFPOp::create(b, loc, f64, x); }
  Value addi(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value ori(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, int64_t n) {
    return arith::ShLIOp::create(b, loc, x, ci(n));
  }
  Value shr(Value x, int64_t n) {
    return arith::ShRUIOp::create(b, loc, x, ci(n));
  }

  /// The nearest integer to x (|x| < 2^51), ties to even.
  Value rint(Value x) {
    Value shifted = add(x, c(kShifter));
    return sub(shifted, c(kShifter));
  }
  /// Whether x is an integer, for x a float32 value: from 2^23 on every one
  /// is (+-inf included).
  Value isInteger(Value x) {
    Value magnitude = fabs(x);
    Value large = cmp(Pred::OGE, magnitude, c(0x1p23));
    Value exact = cmp(Pred::OEQ, rint(x), x);
    return either(large, exact);
  }
  Value fabs(Value x) { return m.intrinsic("llvm.fabs", x); }
  /// 2^k for i64 lanes k of a normal double's range.
  Value pow2(Value k) {
    Value biased = addi(k, ci(1023));
    return fromBits(shl(biased, 52));
  }
  /// Horner's rule by fmas: coeffs[n] z^n + ... + coeffs[0].
  Value horner(ArrayRef<double> coeffs, Value z) {
    Value acc = c(coeffs.back());
    for (double k : llvm::reverse(coeffs.drop_back()))
      acc = fma(acc, z, c(k));
    return acc;
  }

  LaneMath &m;
  OpBuilder &b;
  Location loc;
  Type f64, i64, f32;

private:
  static Attribute splat(Type type, Attribute scalar) {
    if (auto vec = dyn_cast<VectorType>(type))
      return DenseElementsAttr::get(vec, scalar);
    return scalar;
  }
};

/// exp's reduction (Elementary.cpp, expReduce): k, r and w with e^(hi + lo)
/// = 2^k (1 + r w).
struct ExpReduced {
  Value k, r, w;
};
ExpReduced expReduce(F64Lanes &d, Value hi, Value lo) {
  Value atLeastMin = d.cmp(Pred::OGE, hi, d.c(kExpMin));
  Value atMostMax = d.cmp(Pred::OLE, hi, d.c(kExpMax));
  Value inRange = d.both(atLeastMin, atMostMax);
  Value belowMin = d.cmp(Pred::ULT, hi, d.c(kExpMin)); // NaN too
  Value h = d.sel(belowMin, d.c(kExpMin), hi);
  Value aboveMax = d.cmp(Pred::OGT, h, d.c(kExpMax));
  h = d.sel(aboveMax, d.c(kExpMax), h);
  Value l = d.sel(inRange, lo, d.c(0.0));
  Value kd = d.rint(d.mul(h, d.c(kInvLn2)));
  Value minusK = d.neg(kd);
  Value r = d.fma(minusK, d.c(kLn2Hi), h);
  r = d.fma(minusK, d.c(kLn2Lo), r);
  r = d.add(r, l);
  Value u = d.horner(kExpU, r);
  Value w = d.fma(u, r, d.c(1.0));
  return {d.toInt(kd), r, w};
}

Value expCore(F64Lanes &d, Value hi, Value lo) {
  ExpReduced e = expReduce(d, hi, lo);
  Value p = d.fma(e.w, e.r, d.c(1.0));
  return d.mul(p, d.pow2(e.k));
}

/// ln a as hi + lo for positive finite lanes `a` (Elementary.cpp, logCore).
std::pair<Value, Value> logCore(F64Lanes &d, Value a) {
  Value bits = d.bits(a);
  Value biasedE = d.shr(bits, 52);
  Value e = d.addi(biasedE, d.ci(-1023));
  Value mantissa = d.andi(bits, d.ci((int64_t(1) << 52) - 1));
  Value m = d.fromBits(d.ori(mantissa, d.ci(int64_t(1023) << 52)));
  Value big = d.cmp(Pred::OGT, m, d.c(kSqrt2));
  m = d.sel(big, d.mul(m, d.c(0.5)), m);
  e = d.sel(big, d.addi(e, d.ci(1)), e);
  Value f = d.sub(m, d.c(1.0));
  Value twoPlusF = d.add(d.c(2.0), f);
  Value s = d.div(f, twoPlusF);
  Value z = d.mul(s, s);
  Value p = d.horner(kLogP, z);
  Value r = d.mul(z, p);
  Value hfsq = d.mul(d.mul(d.c(0.5), f), f);
  Value ed = d.toDouble(e);
  Value hfsqPlusR = d.add(hfsq, r);
  Value eLo = d.mul(ed, d.c(kLn2Lo));
  Value t = d.fma(s, hfsqPlusR, eLo);
  Value tail = d.sub(f, d.sub(hfsq, t));
  Value head = d.mul(ed, d.c(kLn2Hi));
  Value hi = d.add(head, tail);
  Value lo = d.add(d.sub(head, hi), tail);
  return {hi, lo};
}

Value isNaN(LaneMath &m, Value x) { return m.cmp(Pred::UNO, x, x); }

/// The sign bit of f32 lanes.
Value signBit(LaneMath &m, Value x) {
  OpBuilder &b = m.builder();
  Value bits = bitsOf(m, x, 32);
  return arith::CmpIOp::create(b, m.location(), arith::CmpIPredicate::slt, bits,
                               m.constI(bits.getType(), 0));
}

/// The f32 lanes `x` where they are NaN, else `r`.
Value keepNaN(LaneMath &m, Value x, Value r) {
  return m.select(isNaN(m, x), x, r);
}

/// The value of lanes that are one constant, if they are.
std::optional<double> constantLanes(Value v) {
  auto constant = v.getDefiningOp<arith::ConstantOp>();
  if (!constant)
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(constant.getValue()))
    return f.getValueAsDouble();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue()))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

} // namespace

Value mlir::qopt::emitExp(LaneMath &m, Value x) {
  F64Lanes d(m, x);
  Value xd = d.ext(x);
  Value y = expCore(d, xd, d.c(0.0));
  return keepNaN(m, x, d.trunc(y));
}

Value mlir::qopt::emitLog(LaneMath &m, Value x) {
  F64Lanes d(m, x);
  Value xd = d.ext(x);
  // Positive finite lanes take the algorithm; the others 1, then their value.
  Value positive = d.cmp(Pred::OGT, xd, d.c(0.0));
  Value finite = d.cmp(Pred::OLT, xd, d.c(kInf));
  Value regular = d.both(positive, finite);
  Value a = d.sel(regular, xd, d.c(1.0));
  Value r = d.trunc(logCore(d, a).first);
  const float inf = std::numeric_limits<float>::infinity();
  Value negative = m.cmp(Pred::OLT, x, m.constF(x, 0.0));
  r = m.select(negative, m.constF(x, std::numeric_limits<float>::quiet_NaN()),
               r);
  Value zero = m.cmp(Pred::OEQ, x, m.constF(x, 0.0));
  r = m.select(zero, m.constF(x, -inf), r);
  Value infinite = m.cmp(Pred::OEQ, x, m.constF(x, inf));
  r = m.select(infinite, x, r);
  return keepNaN(m, x, r);
}

Value mlir::qopt::emitTanh(LaneMath &m, Value x) {
  F64Lanes d(m, x);
  Value a = d.ext(m.abs(x));
  Value large = d.cmp(Pred::OGT, a, d.c(10.0));
  a = d.sel(large, d.c(10.0), a);
  // tanh |x| = E / (E + 2), E = e^(2|x|) - 1 = 2^k (e^r - 1) + (2^k - 1).
  Value twoA = d.mul(d.c(2.0), a);
  ExpReduced e = expReduce(d, twoA, d.c(0.0));
  Value scale = d.pow2(e.k);
  Value em1r = d.mul(e.w, e.r);
  Value scaleMinusOne = d.sub(scale, d.c(1.0));
  Value em1 = d.fma(scale, em1r, scaleMinusOne);
  Value t = d.div(em1, d.add(em1, d.c(2.0)));
  Value r = m.copySign(d.trunc(t), x);
  return keepNaN(m, x, r);
}

Value mlir::qopt::emitAtan2(LaneMath &m, Value y, Value x) {
  F64Lanes d(m, x);
  Value ax = d.ext(m.abs(x));
  Value ay = d.ext(m.abs(y));
  Value inf = d.c(kInf);
  Value zero = d.c(0.0);
  Value one = d.c(1.0);
  Value xInf = d.cmp(Pred::OEQ, ax, inf);
  Value bothInf = d.both(xInf, d.cmp(Pred::OEQ, ay, inf));
  ax = d.sel(bothInf, one, ax);
  ay = d.sel(bothInf, one, ay);
  Value xZero = d.cmp(Pred::OEQ, ax, zero);
  Value bothZero = d.both(xZero, d.cmp(Pred::OEQ, ay, zero));
  ax = d.sel(bothZero, one, ax);
  // atan2 = pi/2 - atan(ax / ay) where ay > ax; t = n / d <= 1, and above
  // 5/12 atan t = pi/4 + atan((t - 1) / (t + 1)) (12 n, 5 d, n - d and d + n
  // of float32 values are exact).
  Value swap = d.cmp(Pred::OGT, ay, ax);
  Value n = d.sel(swap, ax, ay);
  Value den0 = d.sel(swap, ay, ax);
  Value n12 = d.mul(d.c(12.0), n);
  Value d5 = d.mul(d.c(5.0), den0);
  Value big = d.cmp(Pred::OGT, n12, d5);
  Value num = d.sel(big, d.sub(n, den0), n);
  Value den = d.sel(big, d.add(den0, n), den0);
  Value t = d.div(num, den);
  Value z = d.mul(t, t);
  Value q = d.horner(kAtanQ, z);
  Value a = d.fma(d.mul(t, z), q, t);
  Value quarter = d.add(d.c(kPi4Lo), a);
  Value v = d.sel(big, d.add(d.c(kPi4Hi), quarter), a);
  Value half = d.sub(d.c(kPi2Lo), v);
  v = d.sel(swap, d.add(d.c(kPi2Hi), half), v);
  Value negativeX = signBit(m, x);
  Value whole = d.sub(d.c(kPiLo), v);
  v = d.sel(negativeX, d.add(d.c(kPiHi), whole), v);
  Value r = m.copySign(d.trunc(v), y);
  r = keepNaN(m, x, r);
  return keepNaN(m, y, r);
}

Value mlir::qopt::emitPow(LaneMath &m, Value x, Value c) {
  std::optional<double> constant = constantLanes(c);
  if (constant && *constant == 2.0)
    return m.mul(x, x);
  F64Lanes d(m, x);
  Value cd = d.ext(c);
  Value ax = d.ext(m.abs(x));
  Value inf = d.c(kInf);
  Value zero = d.c(0.0);
  Value one = d.c(1.0);
  // ln|x|: the algorithm on positive finite lanes, -inf at 0, +inf at inf.
  Value positive = d.cmp(Pred::OGT, ax, zero);
  Value regular = d.both(positive, d.cmp(Pred::OLT, ax, inf));
  auto [logHi, logLo] = logCore(d, d.sel(regular, ax, one));
  Value atInf = d.cmp(Pred::OEQ, ax, inf);
  logHi = d.sel(atInf, inf, logHi);
  Value atZero = d.cmp(Pred::OEQ, ax, zero);
  logHi = d.sel(atZero, d.neg(inf), logHi);
  logLo = d.sel(regular, logLo, zero);
  // c ln|x| as phi + plo: the product's rounding error, exactly, by fma.
  Value phi = d.mul(cd, logHi);
  Value error = d.fma(cd, logHi, d.neg(phi));
  Value plo = d.add(error, d.mul(cd, logLo));
  Value power = expCore(d, phi, plo);
  Value unitBase = d.cmp(Pred::OEQ, ax, one);
  Value y = d.sel(unitBase, one, power);
  Value cInteger = d.isInteger(cd);
  Value halfInteger = d.isInteger(d.mul(cd, d.c(0.5)));
  Value cOdd = d.both(cInteger, d.no(halfInteger));
  Value negate = d.both(signBit(m, x), cOdd);
  y = d.sel(negate, d.neg(y), y);
  Value r = d.trunc(y);
  // C99's pow for the lanes the formula does not cover, last rule first.
  const float fInf = std::numeric_limits<float>::infinity();
  Value negativeX = m.cmp(Pred::OLT, x, m.constF(x, 0.0));
  Value negativeFinite =
      d.both(negativeX, m.cmp(Pred::OGT, x, m.constF(x, -fInf)));
  Value undefined = d.both(negativeFinite, d.no(cInteger));
  r = m.select(undefined, m.constF(x, std::numeric_limits<float>::quiet_NaN()),
               r);
  r = keepNaN(m, c, r);
  r = keepNaN(m, x, r);
  Value cZero = m.cmp(Pred::OEQ, c, m.constF(c, 0.0));
  Value unit = d.either(cZero, m.cmp(Pred::OEQ, x, m.constF(x, 1.0)));
  r = m.select(unit, m.constF(x, 1.0), r);
  Value square = m.mul(x, x);
  Value cTwo = m.cmp(Pred::OEQ, c, m.constF(c, 2.0));
  return m.select(cTwo, square, r);
}

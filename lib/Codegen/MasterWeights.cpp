//===- MasterWeights.cpp - The master weight's error bits -----------------===//
//
// numerics.md §3: the float32 master weight rebuilt from a 16-bit value and
// its error bits, and the split of a new master weight into both.
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

namespace {
/// The format constants of numerics.md §3.
struct SplitFormat {
  int mbits, bias, expMask, nmax, rhoWidth;
};
} // namespace

static SplitFormat getSplitFormat(Type x16, MasterFormat master) {
  bool bf16 = getElementTypeOrSelf(x16).isBF16();
  int rhoWidth = master == MasterFormat::ecc_i8 ? 8 : 16;
  return {bf16 ? 7 : 10, bf16 ? 127 : 15, bf16 ? 0xFF : 0x1F,
          rhoWidth == 8 ? 127 : 32767, rhoWidth};
}

/// max(|x16f|, 2^(1 - bias)): the widened x16 with the exponent numerics.md
/// §3 takes for it (1 - bias for zero and subnormals) in its f32 exponent
/// field. A NaN x16 gives 2^(1 - bias) (maxnum), an infinite one keeps the
/// field of all ones.
static Value exponentFloor(LaneMath &m, Value x16f, const SplitFormat &f) {
  return m.maxNum(m.abs(x16f), m.constF(x16f, std::ldexp(1.0, 1 - f.bias)));
}

/// The f32 exponent field of `x` alone, as f32 bits: 2^E for a normal x.
static Value exponentPower(LaneMath &m, Value x) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x.getType(), b.getI32Type());
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  return arith::BitcastOp::create(
      b, loc, x.getType(),
      arith::AndIOp::create(b, loc, bits, m.constI(i32, 0x7F800000)));
}

Value mlir::qopt::reconstructMaster(LaneMath &m, Value x16, Value rho,
                                    MasterFormat master) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  SplitFormat f = getSplitFormat(x16.getType(), master);
  Type f32 = withElement(x16.getType(), b.getF32Type());
  Value x16f = widenToF32(m, x16);
  // numerics.md §3: x32 = f32(x16) + ((rho / Nmax) * 2^h') * 2^(l - h'),
  // l = E - mbits - 1, E the exponent of x16 (1 - bias for zero and
  // subnormals). Both products of that form are exact but the last, so it
  // equals one rounding of (rho / Nmax) * 2^l, computed here as
  // ((rho / Nmax) * 2^-(mbits + 1)) * 2^E: the first product depends on rho
  // alone (a table under qopt-tabulate-codes) and is exact (a normal float
  // times a power of two), 2^E is the exponent field of |x16| clamped to
  // [2^(1 - bias), 2^bias]. (At an infinite or NaN x16 the clamp only
  // changes a finite addend of a non-finite sum.) Checked against the
  // reference for every x16 and rho: test/host/EccExhaustiveTest.cpp.
  Value clamped = m.minNum(exponentFloor(m, x16f, f),
                           m.constF(x16f, std::ldexp(1.0, f.bias)));
  Value rhoF = arith::SIToFPOp::create(b, loc, f32, rho);
  Value frac = m.mul(m.div(rhoF, m.constF(rhoF, f.nmax)),
                     m.constF(rhoF, std::ldexp(1.0, -(f.mbits + 1))));
  return m.add(x16f, m.mul(frac, exponentPower(m, clamped)));
}

/// numerics.md §3's encode for a bf16 x16 and int8 rho in integer
/// arithmetic, exactly: with a = |x32| and b = |f32(x16)| as bit patterns,
/// D = a - b counts the error e in ulps of the lower of the two binades (bf16
/// rounding moves x32 within its binade or up to the next power of two, and
/// f32 subnormals continue the lowest binade's spacing), and that ulp is
/// 2^-15 of half an ULP of x16 (2^-16 when x16 rounded up to the power of two
/// above a normal x32). So en = e * 2^-l = +-|D| * 2^-15 (or 2^-16), |en| <= 1
/// needs no clamp, s = en * 127 and |s| + 0.5 are exact in f32, and
/// floor(|s| + 0.5) = (|D| * 254 + 2^15) >> 16 (|D| * 127 + 2^15 at the power
/// of two). rho takes the sign of e (x32's sign, flipped where D < 0) and is
/// 0 where x16 is infinite or NaN.
static Value splitMasterBf16I8(LaneMath &m, Value x32, Value x16) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x16.getType(), b.getI32Type());
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  using P = arith::CmpIPredicate;
  auto cmp = [&](P p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  };
  Value u = bitsOf(m, x32, 32);
  Value a = arith::AndIOp::create(b, loc, u, c(0x7FFFFFFF));
  Value h = arith::ExtUIOp::create(b, loc, i32, bitsOf(m, x16, 16));
  Value bb = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, h, c(0x7FFF)), c(16));
  Value d = arith::SubIOp::create(b, loc, a, bb);
  Value negD = cmp(P::slt, d, c(0));
  Value mag = arith::SelectOp::create(
      b, loc, negD, arith::SubIOp::create(b, loc, c(0), d), d);
  // x16 rounded up to the power of two above a normal x32's binade.
  Value nextBinade = arith::AndIOp::create(
      b, loc, cmp(P::sgt, bb, arith::OrIOp::create(b, loc, a, c(0x7FFFFF))),
      cmp(P::sge, a, c(0x800000)));
  Value mult = arith::SelectOp::create(b, loc, nextBinade, c(127), c(254));
  Value r = arith::ShRUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, mag, mult),
                            c(0x8000)),
      c(16));
  Value negative = cmp(P::slt, arith::XOrIOp::create(b, loc, u, d), c(0));
  Value rho = arith::SelectOp::create(
      b, loc, negative, arith::SubIOp::create(b, loc, c(0), r), r);
  rho = arith::SelectOp::create(b, loc, cmp(P::sge, bb, c(0x7F800000)), c(0),
                                rho);
  return arith::TruncIOp::create(
      b, loc, withElement(x16.getType(), b.getIntegerType(8)), rho);
}

/// numerics.md §3's encode on the GPU, in six float operations and no
/// branch: en * Nmax = (e * 2^(1 - E)) * (Nmax * 2^mbits) with 2^-l =
/// 2^(mbits + 1 - E) split so that 2^(1 - E) is a normal float for every E of
/// a finite x16 (E in [1 - bias, bias]: 2^(1 - E) in [2^(1 - bias), 2^bias]).
/// e = x32 - f32(x16) is exact, and so is e * 2^(1 - E): where E <= 1 the
/// factor is at least 1 (e is a multiple of the f32 subnormal step at
/// least); where E > 1, x16 is normal, x32 lies in binade E or E - 1, e is a
/// multiple of 2^(E - 24) and the product a multiple of 2^-23. The product
/// with the constant rounds once, as the reference's s = en * Nmax does
/// (|en| <= 1 after round-to-nearest-even: the clamp changes nothing).
/// 2^(1 - E) is the complement of the exponent field of max(|x16|, 2^(1 -
/// bias)): its field 255 - (E + 127). An infinite x16 gives the field 0, so s
/// is inf * 0 = NaN; a NaN x16 gives a NaN e; the saturating conversion
/// takes NaN to rho 0, the reference's value there. trunc(RN(s + copysign(
/// 0.5, s))) equals the reference's copysign(floor(RN(|s| + 0.5)), s), RN
/// being symmetric: ties go away from zero (|s| <= Nmax, no saturation).
/// (bf16 with int8 rho, where s is exact: cvt.rni(s), see below.)
/// Checked against the reference on every float32 for the four formats: on
/// the GPU by test/host/EccExhaustiveTest.cpp, and as C++ float arithmetic.
/// (The host keeps the integer and two-step forms below: they have no
/// subnormal operands, so a caller's flush-to-zero mode cannot change them.)
static Value splitMasterNVVM(LaneMath &m, Value x32, Value x16,
                             const SplitFormat &f) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x16.getType(), b.getI32Type());
  // A bf16 is widened from its bits (widenToF32): as fpext of the fptrunc,
  // LLVM rounds each lane alone (F2F, a quarter-rate conversion) instead of
  // pairs (F2FP.PACK_AB), which the store needs anyway.
  Value x16f = widenToF32(m, x16);
  Value e = m.sub(x32, x16f);
  Value floorBits = arith::BitcastOp::create(b, loc, i32, exponentFloor(m, x16f, f));
  Value scale = arith::BitcastOp::create(
      b, loc, x32.getType(),
      arith::AndIOp::create(
          b, loc,
          arith::XOrIOp::create(b, loc, floorBits, m.constI(i32, -1)),
          m.constI(i32, 0x7F800000)));
  // t = RN(s + copysign(0.5, s)) with s = (e * 2^(1-E)) * Nmax * 2^mbits,
  // the first product exact: one FMA, rounded once instead of twice. The
  // rounding direction's integer is the same (EccExhaustiveTest: every
  // float32, every format).
  Value p = m.mul(e, scale);
  Value k = m.constF(p, f.nmax * std::ldexp(1.0, f.mbits));
  // bf16 and int8 rho: s = p * k is exact (p is a multiple of 2^-23 of
  // magnitude at most 2^-7 + 2^-23, 17 significant bits at most; k = 127 *
  // 2^7 has 7), so the reference's copysign(floor(|s| + 0.5), s) is s
  // rounded to the nearest integer, ties away from zero. cvt.rni rounds ties
  // to even instead: the same where the tie's integer above is even, and the
  // only ties s reaches (s = 127 * j * 2^-16) are +-63.5, which go to +-64
  // both ways. (For f16, s reaches k + 0.5 for every k.) So one FMUL comes
  // before the conversion, where the rounding of ties away needs two. Checked
  // on every float32: EccExhaustiveTest on the GPU, and the same arithmetic
  // as C++ floats against the reference.
  // Otherwise cvt.rzi of RN(s + copysign(0.5, s)). Both conversions saturate
  // and take NaN (an infinite or NaN x16) to 0 (PTX ISA; llvm.fptosi.sat
  // would add the saturation and NaN selects around it).
  bool exactProduct = f.rhoWidth == 8 && f.mbits == 7;
  Value t = exactProduct ? m.mul(p, k)
                         : m.fma(p, k, m.copySign(m.constF(p, 0.5), p));
  StringRef toInt = exactProduct ? "llvm.nvvm.f2i.rn" : "llvm.nvvm.f2i.rz";
  Value rho = m.perLane(
      t, [&](Value lane) { return m.intrinsic(toInt, {lane}, b.getI32Type()); },
      b.getI32Type());
  return arith::TruncIOp::create(
      b, loc, withElement(x16.getType(), b.getIntegerType(f.rhoWidth)), rho);
}

Value mlir::qopt::splitMaster(LaneMath &m, Value x32, Value x16,
                              MasterFormat master) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  SplitFormat f = getSplitFormat(x16.getType(), master);
  if (m.getTarget() == LaneMath::Target::NVVM)
    return splitMasterNVVM(m, x32, x16, f);
  if (getElementTypeOrSelf(x16.getType()).isBF16() && f.rhoWidth == 8)
    return splitMasterBf16I8(m, x32, x16);
  Type i32 = withElement(x16.getType(), b.getI32Type());
  Type f32 = withElement(x16.getType(), b.getF32Type());
  Value x16f = widenToF32(m, x16);
  Value e = m.sub(x32, x16f);
  // numerics.md §3: en = (e * 2^h) * 2^(-l - h), h = floor(-l / 2): both
  // products are exact (e is a multiple of 2^(E - 24) and |e| <= 2^l), so en
  // is e * 2^-l exactly, computed here as (e * p1) * p2 with p1 * p2 = 2^-l,
  // p1 = 2^(mbits + 1 - E1), E1 = max(E, mbits + 1 - 127) so that p1 stays a
  // normal float, and p2 = 2^(E1 - E) (1 but for a bf16 below 2^-119); both
  // products exact again. E is clamped below at 1 - bias as numerics.md says.
  // i32 constants of their bit patterns (262 << 23 does not fit a signed
  // int); the subtraction below wraps to the intended pattern.
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  Value expBits = arith::AndIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, x16f), c(0x7F800000));
  Value clampedE = arith::MaxSIOp::create(b, loc, expBits, c((128 - f.bias) << 23));
  Value e1 = arith::MaxSIOp::create(b, loc, clampedE, c((f.mbits + 1) << 23));
  Value p1 = arith::BitcastOp::create(
      b, loc, f32, arith::SubIOp::create(b, loc, c((254 + f.mbits + 1) << 23), e1));
  Value p2 = arith::BitcastOp::create(
      b, loc, f32,
      arith::AddIOp::create(b, loc, c(127 << 23),
                            arith::SubIOp::create(b, loc, e1, clampedE)));
  Value en = m.mul(m.mul(e, p1), p2);
  // s = clamp(en, -1, 1) * Nmax; rho = copysign(floor(|s| + 0.5), s)
  Value one = m.constF(en, 1.0), minusOne = m.constF(en, -1.0);
  Value clamped = m.select(m.cmp(arith::CmpFPredicate::OLT, en, minusOne),
                           minusOne,
                           m.select(m.cmp(arith::CmpFPredicate::OGT, en, one),
                                    one, en));
  Value s = m.mul(clamped, m.constF(en, f.nmax));
  Value r = m.floor(m.add(m.abs(s), m.constF(s, 0.5)));
  Value zero = m.constF(s, 0.0);
  r = m.select(m.cmp(arith::CmpFPredicate::OLT, s, zero),
               arith::NegFOp::create(b, loc, r), r);
  // A non-finite error (x16 infinite or NaN) keeps no correction.
  Value inf = m.constF(e, std::numeric_limits<double>::infinity());
  r = m.select(m.cmp(arith::CmpFPredicate::UEQ, m.abs(e), inf), zero, r);
  Value ri = arith::FPToSIOp::create(b, loc, i32, r);
  return arith::TruncIOp::create(
      b, loc, withElement(x16.getType(), b.getIntegerType(f.rhoWidth)), ri);
}

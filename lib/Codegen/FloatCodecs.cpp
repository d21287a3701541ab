//===- FloatCodecs.cpp - bf16, fp16 and f32 lanes -------------------------===//
//
// Widening stored parameters, gradients and plain states to f32 and
// rounding back to nearest even, on the GPU through the NVVM conversions and
// on the host on the bits, as the reference stores NaNs.
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

/// A bf16 (lanes) widened to f32 from its bits: the pattern shifted up.
/// An even number of lanes is taken as the 32-bit words that hold them in
/// pairs: the even lane is the word shifted up, the odd lane the word with
/// its low half cleared. One operation per lane; per lane, LLVM extracts the
/// odd half first (a PRMT) and shifts it, and a packed bf16 about to be
/// stored is taken apart into halves and put back together (two PRMT).
static Value widenBf16Bits(LaneMath &m, Value stored) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(stored.getType(), b.getI32Type());
  auto lanes = dyn_cast<VectorType>(stored.getType());
  if (lanes && lanes.getRank() == 1 && lanes.getNumElements() % 2 == 0) {
    int64_t n = lanes.getNumElements();
    auto wordsType = VectorType::get({n / 2}, b.getI32Type());
    Value words = vector::BitCastOp::create(b, loc, wordsType, stored);
    Value even = arith::ShLIOp::create(b, loc, words, m.constI(wordsType, 16));
    Value odd = arith::AndIOp::create(
        b, loc, words,
        m.constI(wordsType, static_cast<int32_t>(0xFFFF0000u)));
    SmallVector<int64_t> interleave;
    for (int64_t i = 0; i < n / 2; ++i) {
      interleave.push_back(i);
      interleave.push_back(n / 2 + i);
    }
    Value bits = vector::ShuffleOp::create(b, loc, even, odd, interleave);
    return arith::BitcastOp::create(
        b, loc, withElement(stored.getType(), b.getF32Type()), bits);
  }
  return arith::BitcastOp::create(
      b, loc, withElement(stored.getType(), b.getF32Type()),
      arith::ShLIOp::create(
          b, loc, arith::ExtUIOp::create(b, loc, i32, bitsOf(m, stored, 16)),
          m.constI(i32, 16)));
}

/// Exact bf16/f16 -> f32 from the bits, with no subnormal f32 operand (so a
/// caller's flush-to-zero mode cannot change it).
static Value widenHost(LaneMath &m, Value stored) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(stored.getType(), b.getI32Type());
  Type f32 = withElement(stored.getType(), b.getF32Type());
  Value h = arith::ExtUIOp::create(b, loc, i32, bitsOf(m, stored, 16));
  // i32 constants of their bit patterns (262 << 23 does not fit a signed
  // int); the subtraction below wraps to the intended pattern.
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  if (getElementTypeOrSelf(stored.getType()).isBF16())
    return widenBf16Bits(m, stored);
  Value sign = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, h, c(0x8000)), c(16));
  Value exp = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, h, c(10)), c(0x1f));
  Value mant = arith::AndIOp::create(b, loc, h, c(0x3ff));
  Value mant23 = arith::ShLIOp::create(b, loc, mant, c(13));
  // Normal: rebias the exponent; inf/NaN: all-ones exponent, same payload.
  Value normal = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, exp, c(112)),
                            c(23)),
      mant23);
  Value special = arith::OrIOp::create(b, loc, mant23, c(0x7f800000));
  // Zero and subnormal: mant * 2^-24, both factors and the product normal.
  Value tiny = arith::BitcastOp::create(
      b, loc, i32,
      arith::MulFOp::create(b, loc, arith::UIToFPOp::create(b, loc, f32, mant),
                            m.constF(mant, 0x1p-24)));
  auto eq = [&](Value a, int64_t v) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, a, c(v));
  };
  Value magnitude = arith::SelectOp::create(
      b, loc, eq(exp, 0), tiny,
      arith::SelectOp::create(b, loc, eq(exp, 0x1f), special, normal));
  return arith::BitcastOp::create(
      b, loc, f32, arith::OrIOp::create(b, loc, magnitude, sign));
}

/// f32 -> bf16/f16 rounded to nearest even from the bits, as the reference's
/// floatToBf16Bits / floatToF16Bits.
static Value narrowHost(LaneMath &m, Value x, Type storage) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x.getType(), b.getI32Type());
  Type i16 = withElement(x.getType(), b.getI16Type());
  // i32 constants of their bit patterns (262 << 23 does not fit a signed
  // int); the subtraction below wraps to the intended pattern.
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  auto cmp = [&](arith::CmpIPredicate p, Value a, int64_t v) {
    return arith::CmpIOp::create(b, loc, p, a, c(v));
  };
  auto sel = [&](Value cond, Value a, Value e) {
    return arith::SelectOp::create(b, loc, cond, a, e);
  };
  using P = arith::CmpIPredicate;
  Value u = bitsOf(m, x, 32);
  Value a = arith::AndIOp::create(b, loc, u, c(0x7fffffff));
  Value isNaN = cmp(P::ugt, a, 0x7f800000);
  Value h;
  if (storage.isBF16()) {
    // u + 0x7fff + lsb, then the high half; a carry is the next binade.
    Value lsb = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, u, c(16)), c(1));
    Value rounded = arith::ShRUIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, arith::AddIOp::create(b, loc, u, c(0x7fff)),
                              lsb),
        c(16));
    h = sel(isNaN, c(0x7fc0), rounded);
  } else {
    Value sign = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, u, c(16)), c(0x8000));
    // Normal f16: rebias, round the 13 dropped bits to nearest even.
    Value lsb = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, a, c(13)), c(1));
    Value normal = arith::SubIOp::create(
        b, loc,
        arith::ShRUIOp::create(
            b, loc,
            arith::AddIOp::create(b, loc, arith::AddIOp::create(b, loc, a, c(0xfff)),
                                  lsb),
            c(13)),
        c(112 << 10));
    // Below 2^-14: adding 0.5 rounds |x| to a multiple of 2^-24 (the f16
    // subnormal unit) in the current rounding mode, nearest even.
    Value half = m.constF(x, 0.5);
    Value sum = arith::AddFOp::create(
        b, loc, arith::BitcastOp::create(b, loc, x.getType(), a), half);
    Value tiny = arith::SubIOp::create(b, loc, bitsOf(m, sum, 32),
                                       c(0x3f000000));
    Value magnitude =
        sel(isNaN, c(0x7e00),
            sel(cmp(P::uge, a, 0x477ff000), c(0x7c00),
                sel(cmp(P::uge, a, 0x38800000), normal, tiny)));
    h = arith::OrIOp::create(b, loc, magnitude, sign);
  }
  return arith::BitcastOp::create(b, loc, withElement(x.getType(), storage),
                                  arith::TruncIOp::create(b, loc, i16, h));
}

Value mlir::qopt::widenToF32(LaneMath &m, Value stored) {
  OpBuilder &b = m.builder();
  Type elem = getElementTypeOrSelf(stored.getType());
  if (elem.isF32())
    return stored;
  if (m.getTarget() == LaneMath::Target::Host)
    return widenHost(m, stored);
  // As the bits, not cvt.f32.bf16: see widenBf16Bits.
  if (elem.isBF16())
    return widenBf16Bits(m, stored);
  return arith::ExtFOp::create(
      b, m.location(), withElement(stored.getType(), b.getF32Type()), stored);
}

Value mlir::qopt::narrowFromF32(LaneMath &m, Value x, Type storage) {
  if (storage.isF32())
    return x;
  if (m.getTarget() == LaneMath::Target::Host)
    return narrowHost(m, x, storage);
  // arith.truncf rounds to nearest even: cvt.rn.bf16.f32 / cvt.rn.f16.f32.
  return arith::TruncFOp::create(m.builder(), m.location(),
                                 withElement(x.getType(), storage), x);
}

Value mlir::qopt::unscaleGrad(LaneMath &m, Value g, Value inv,
                              Type gradType) {
  return widenToF32(m, narrowFromF32(m, m.mul(g, inv), gradType));
}

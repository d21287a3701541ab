//===- Philox.cpp - Stochastic rounding of the bf16 parameter -------------===//
//
// numerics.md, "Stochastic rounding": Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011) keyed by the seed, counted by
// the element's global index and the step, and the bf16 rounding it drives.
// The same integer arithmetic on the GPU, on the host and in the reference.
//
//===----------------------------------------------------------------------===//

#include "CodecSupport.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <array>

using namespace mlir;
using namespace mlir::qopt;

namespace {
/// Philox4x32's multipliers and Weyl key increments (Salmon et al., §4.3).
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

struct ScalarInts {
  OpBuilder &b;
  Location loc;
  Value c32(uint32_t v) {
    return arith::ConstantOp::create(b, loc,
                                     b.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  Value x(Value a, Value c) { return arith::XOrIOp::create(b, loc, a, c); }
  Value add(Value a, Value c) { return arith::AddIOp::create(b, loc, a, c); }
};
} // namespace

/// Philox4x32-10 of counter `ctr` under key (k0, k1), all i32 scalars: ten
/// rounds, the key bumped by (W0, W1) before each round after the first.
static std::array<Value, 4> philox4x32x10(OpBuilder &b, Location loc,
                                          std::array<Value, 4> ctr, Value k0,
                                          Value k1) {
  ScalarInts s{b, loc};
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 = s.add(k0, s.c32(kW0));
      k1 = s.add(k1, s.c32(kW1));
    }
    auto p0 = arith::MulUIExtendedOp::create(b, loc, s.c32(kM0), ctr[0]);
    auto p1 = arith::MulUIExtendedOp::create(b, loc, s.c32(kM1), ctr[2]);
    ctr = {s.x(s.x(p1.getHigh(), ctr[1]), k0), p1.getLow(),
           s.x(s.x(p0.getHigh(), ctr[3]), k1), p0.getLow()};
  }
  return ctr;
}

Value mlir::qopt::stochasticRoundBF16(LaneMath &m, Value x, Value seed,
                                      Value step, Value globalIndex) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  auto vecType = cast<VectorType>(x.getType());
  int64_t lanes = vecType.getNumElements();
  Type i32 = b.getI32Type();
  ScalarInts s{b, loc};
  // The seed and the step are exact float32 integers below 2^24 (the
  // frontend's check, and a step count below 2^24).
  Value seed0 = vector::ExtractOp::create(b, loc, seed, 0);
  Value step0 = vector::ExtractOp::create(b, loc, step, 0);
  Value key0 = arith::FPToUIOp::create(b, loc, i32, seed0);
  Value ctr2 = arith::FPToUIOp::create(b, loc, i32, step0);
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  // Element G takes 16 bits of block G / 8's four words: word (G % 8) / 2,
  // its low half for an even G. Lanes are consecutive elements from lane
  // 0's, a multiple of `lanes`: with 8 | lanes one block serves 8 lanes.
  SmallVector<Value> random;
  std::array<Value, 4> words;
  for (int64_t k = 0; k < lanes; ++k) {
    Value g = arith::AddIOp::create(b, loc, globalIndex, c64(k));
    bool newBlock = lanes % 8 != 0 || k % 8 == 0;
    if (newBlock) {
      Value block = arith::ShRUIOp::create(b, loc, g, c64(3));
      Value lo = arith::TruncIOp::create(b, loc, i32, block);
      Value hi = arith::TruncIOp::create(
          b, loc, i32, arith::ShRUIOp::create(b, loc, block, c64(32)));
      words = philox4x32x10(b, loc, {lo, hi, ctr2, s.c32(0)}, key0, s.c32(0));
    }
    Value word, half;
    if (lanes % 8 == 0) {
      word = words[(k % 8) / 2];
      half = s.c32(k % 2 ? 16 : 0);
    } else {
      // (G % 8) / 2 picks the word, G % 2 the half.
      Value inBlock = arith::TruncIOp::create(
          b, loc, i32, arith::AndIOp::create(b, loc, g, c64(7)));
      Value w = arith::ShRUIOp::create(b, loc, inBlock, s.c32(1));
      word = words[0];
      for (int i = 1; i < 4; ++i)
        word = arith::SelectOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, w,
                                  s.c32(i)),
            words[i], word);
      half = arith::MulIOp::create(
          b, loc, arith::AndIOp::create(b, loc, inBlock, s.c32(1)), s.c32(16));
    }
    random.push_back(arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, word, half), s.c32(0xFFFF)));
  }
  auto i32Lanes = VectorType::get({lanes}, i32);
  Value r = vector::FromElementsOp::create(b, loc, i32Lanes, random);
  // bf16 = the high half of bits(x) + r: rounded up with probability equal
  // to x's distance from the truncated value in units of its bf16 ulp. A
  // NaN stores 0x7FC0.
  Value bits = bitsOf(m, x, 32);
  Value sum = arith::AddIOp::create(b, loc, bits, r);
  Value high = arith::ShRUIOp::create(
      b, loc, sum,
      arith::ConstantOp::create(b, loc, DenseElementsAttr::get(i32Lanes, int32_t(16))));
  auto i16Lanes = VectorType::get({lanes}, b.getI16Type());
  Value narrow = arith::TruncIOp::create(b, loc, i16Lanes, high);
  Value nan = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(i16Lanes, int16_t(0x7FC0)));
  Value isNaN = m.cmp(arith::CmpFPredicate::UNO, x, x);
  Value stored = arith::SelectOp::create(b, loc, isNaN, nan, narrow);
  return arith::BitcastOp::create(
      b, loc, VectorType::get({lanes}, b.getBF16Type()), stored);
}

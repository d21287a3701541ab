//===- PackedCodes.cpp - 4-bit group codes, two per byte ------------------===//
//
// docs/abi.md, "Packed 4-bit codes": element 2j's code in the low nibble of
// byte j, element 2j + 1's in the high nibble; an odd tensor's last byte
// has a zero high nibble. numerics.md §2: the 4-bit tables `dynamic` (si4:
// torchao's signed dynamic map) and `nonzero` (ui4: (k + 1) / 16), whose
// code is the index of the nearest entry.
//
//===----------------------------------------------------------------------===//

#include "CodecSupport.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/bit.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::qopt;

ArrayRef<float> mlir::qopt::getCodeTable(Companding companding) {
  // torchao's create_dynamic_map(signed=True, max_exponent_bits=3,
  // total_bits=4): for i = 0, 1, 2 the midpoints of linspace(0.1, 1,
  // 2^i + 1) times 10^(i - 2), both signs, then 0 and 1; each entry the
  // float32 nearest the exact decimal.
  static const float kDynamic[16] = {
      -0.8875f, -0.6625f, -0.4375f, -0.2125f, -0.0775f, -0.0325f,
      -0.0055f, 0.0f,     0.0055f,  0.0325f,  0.0775f,  0.2125f,
      0.4375f,  0.6625f,  0.8875f,  1.0f};
  // torchao's unsigned map: linspace(0, 1, 17)[1:], (k + 1) / 16, exact.
  static const float kNonZero[16] = {
      1 / 16.f,  2 / 16.f,  3 / 16.f,  4 / 16.f,  5 / 16.f,  6 / 16.f,
      7 / 16.f,  8 / 16.f,  9 / 16.f,  10 / 16.f, 11 / 16.f, 12 / 16.f,
      13 / 16.f, 14 / 16.f, 15 / 16.f, 1.0f};
  if (companding == Companding::dynamic)
    return kDynamic;
  if (companding == Companding::nonzero)
    return kNonZero;
  return {};
}

bool mlir::qopt::isCodeTable(Companding companding) {
  return companding == Companding::dynamic ||
         companding == Companding::nonzero;
}

static bool isSixteenths(ArrayRef<float> table);

bool mlir::qopt::isArithmeticTable(Companding companding) {
  return isSixteenths(getCodeTable(companding));
}

/// The index of the table entry a NaN takes: the entry nearest 0.
static int64_t zeroCode(ArrayRef<float> table) {
  int64_t best = 0;
  for (int64_t k = 1; k < int64_t(table.size()); ++k)
    if (std::abs(table[k]) < std::abs(table[best]))
      best = k;
  return best;
}

/// Whether `table` is `nonzero`'s (k + 1) / 16, the table whose codes are
/// computed arithmetically.
static bool isSixteenths(ArrayRef<float> table) {
  for (auto [k, e] : llvm::enumerate(table))
    if (e != float(k + 1) / 16.f)
      return false;
  return table.size() == 16;
}

/// `cands[prefix]` for the integer `prefix` whose bits (most significant
/// first) are `bits`: a tree of selects, the last bit's between constants.
static Value selectByBits(LaneMath &m, Value like, ArrayRef<float> cands,
                          ArrayRef<Value> bits) {
  if (cands.size() == 1)
    return m.constF(like, cands[0]);
  size_t half = cands.size() / 2;
  Value lo = selectByBits(m, like, cands.take_front(half), bits.drop_front());
  Value hi = selectByBits(m, like, cands.drop_front(half), bits.drop_front());
  return m.select(bits.front(), hi, lo);
}

bool mlir::qopt::hasNonnegativeEntries(Companding companding) {
  ArrayRef<float> table = getCodeTable(companding);
  return !table.empty() &&
         llvm::all_of(table, [](float e) { return !std::signbit(e); });
}

Value mlir::qopt::dequantizeTable(LaneMath &m, GroupSchemeAttr scheme,
                                  Value codes, Value scale) {
  // x = entry * scale, one rounding.
  return m.mul(tableEntries(m, scheme, codes), scale);
}

Value mlir::qopt::tableEntries(LaneMath &m, GroupSchemeAttr scheme,
                               Value codes) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  ArrayRef<float> table = getCodeTable(scheme.getCompanding());
  Type f32 = withElement(codes.getType(), b.getF32Type());
  // entry = table[code], exactly.
  Value entry;
  if (isSixteenths(table)) {
    // (code + 1) / 16: a small integer and a power of two, both exact.
    Value k = arith::UIToFPOp::create(b, loc, f32, codes);
    entry = m.mul(m.add(k, m.constF(k, 1.0)), m.constF(k, 1.0 / 16));
  } else {
    // A tree of selects over the code's four bits (the same on every target).
    SmallVector<Value, 4> bits;
    for (int64_t bit = 3; bit >= 0; --bit)
      bits.push_back(arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne,
          arith::AndIOp::create(b, loc, codes,
                                m.constI(codes.getType(), int64_t(1) << bit)),
          m.constI(codes.getType(), 0)));
    Value like = arith::ConstantOp::create(b, loc, b.getZeroAttr(f32));
    entry = selectByBits(m, like, table, bits);
  }
  return entry;
}

/// The table's 15 midpoints (e_k + e_k+1) * 0.5, each rounded to float32.
static SmallVector<float, 16> midpointsOf(ArrayRef<float> table) {
  SmallVector<float, 16> mids;
  for (size_t k = 0; k + 1 < table.size(); ++k)
    mids.push_back((table[k] + table[k + 1]) * 0.5f);
  return mids;
}

static uint32_t floatBits(float f) { return llvm::bit_cast<uint32_t>(f); }

/// getCodeTableBuckets' construction; null where a bucket would hold two
/// midpoints or a midpoint's magnitude is not inside (2^e, 1).
static std::optional<CodeTableBuckets> buildBuckets(ArrayRef<float> table) {
  constexpr int kShift = CodeTableBuckets::kShift;
  constexpr uint32_t kOne = 0x3F800000u;
  SmallVector<float, 16> mids = midpointsOf(table);
  uint32_t lowest = kOne;
  for (float mid : mids) {
    if (!(std::abs(mid) > 0.0f && std::abs(mid) < 1.0f))
      return std::nullopt;
    lowest = std::min(lowest, floatBits(std::abs(mid)));
  }
  CodeTableBuckets buckets;
  // The largest power of two strictly below every midpoint's magnitude.
  buckets.magLo = (lowest & 0x7F800000u) == lowest ? lowest - 0x00800000u
                                                   : lowest & 0x7F800000u;
  buckets.perSign = int64_t((kOne - buckets.magLo) >> kShift) + 1;
  auto bucketOf = [&](uint32_t mag) { return int64_t((mag - buckets.magLo) >> kShift); };
  uint32_t lowMask = (uint32_t(1) << kShift) - 1;
  buckets.entries.assign(2 * buckets.perSign, 0);
  for (int64_t k = 0; k < buckets.perSign; ++k) {
    uint32_t first = buckets.magLo + (uint32_t(k) << kShift);
    // Positive c in bucket k: the midpoints below the bucket's first
    // magnitude, and the one inside it, if any. Negative c = -|c|: the
    // midpoints below -|c| are those of magnitude above |c| among the
    // negative ones.
    uint32_t below = 0, above = 0;
    int64_t positiveInside = -1, negativeInside = -1;
    for (float mid : mids) {
      uint32_t mag = floatBits(std::abs(mid));
      bool positive = mid > 0.0f;
      int64_t &inside = positive ? positiveInside : negativeInside;
      if (bucketOf(mag) == k) {
        if (inside >= 0)
          return std::nullopt; // two midpoints of one sign in the bucket
        inside = mag & lowMask;
      } else if (positive && mag < first) {
        ++below;
      } else if (!positive && mag > first) {
        ++above;
      }
    }
    // All negative midpoints lie below a positive c.
    uint32_t negatives = 0;
    for (float mid : mids)
      negatives += mid < 0.0f;
    uint32_t positiveBase = negatives + below;
    buckets.entries[k] =
        (positiveBase << kShift) +
        (positiveInside >= 0 ? lowMask - uint32_t(positiveInside) : 0);
    buckets.entries[buckets.perSign + k] =
        (above << kShift) + (negativeInside >= 0 ? uint32_t(negativeInside) : 0);
  }
  // A NaN c (clamped to 2^e, of either sign) takes the entry nearest 0.
  float nan = std::numeric_limits<float>::quiet_NaN();
  if (buckets.code(nan) != zeroCode(table) ||
      buckets.code(-nan) != zeroCode(table))
    return std::nullopt;
  return buckets;
}

int64_t CodeTableBuckets::code(float c) const {
  uint32_t cBits = floatBits(c);
  // maxNum then minNum, as the lowering: a NaN clamps to 2^e.
  float mag = std::fmin(std::fmax(std::abs(c), llvm::bit_cast<float>(magLo)), 1.0f);
  uint32_t magBits = floatBits(mag);
  uint32_t sign = cBits >> 31 ? ~uint32_t(0) : 0;
  int64_t index = int64_t((magBits - magLo) >> kShift) + (sign ? perSign : 0);
  uint32_t low = (magBits ^ sign) & ((uint32_t(1) << kShift) - 1);
  return int64_t((entries[index] + low) >> kShift);
}

const CodeTableBuckets *mlir::qopt::getCodeTableBuckets(Companding companding) {
  static const std::optional<CodeTableBuckets> dynamic =
      buildBuckets(getCodeTable(Companding::dynamic));
  if (companding == Companding::dynamic && dynamic)
    return &*dynamic;
  return nullptr;
}

Value mlir::qopt::quantizeTable(LaneMath &m, GroupSchemeAttr scheme, Value x,
                                Value divisor) {
  return tableCodeOfQuotient(m, scheme, m.div(x, divisor));
}

Value mlir::qopt::tableCodeOfQuotient(LaneMath &m, GroupSchemeAttr scheme,
                                      Value c, bool withinOne) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  ArrayRef<float> table = getCodeTable(scheme.getCompanding());
  // The code counts the midpoints strictly below c (the lower code on a
  // tie), each midpoint (e_k + e_k+1) * 0.5 in float32; a NaN c takes the
  // entry nearest 0.
  Type i8 = withElement(c.getType(), b.getI8Type());
  Type i32 = withElement(c.getType(), b.getI32Type());
  if (isSixteenths(table)) {
    // Midpoint k is (k + 1.5) / 16, so with s = 16 c (exact) the count is
    // ceil(s - 1.5) clamped to [0, 15], and s clamped to [1, 16] first
    // (NaN to 1: code 0, whose entry is the one nearest 0) gives it.
    // y = s - 1.5 is exact there (a multiple of ulp(s) below 16), and
    // ceil(y) is y rounded to an integer (the biased sum) plus one where
    // that went down.
    Value s = m.mul(c, m.constF(c, 16.0));
    s = m.maxNum(s, m.constF(s, 1.0));
    if (!withinOne)
      s = m.minNum(s, m.constF(s, 16.0));
    Value y = m.sub(s, m.constF(s, 1.5));
    Value biased = m.add(y, m.constF(y, kCodeBias));
    Value rounded = m.sub(biased, m.constF(biased, kCodeBias));
    Value up = arith::ExtUIOp::create(
        b, loc, i32, m.cmp(arith::CmpFPredicate::OLT, rounded, y));
    Value code = arith::AddIOp::create(
        b, loc, arith::BitcastOp::create(b, loc, i32, biased), up);
    return arith::TruncIOp::create(b, loc, i8, code);
  }
  // Binary search over the 15 midpoints: bit 3 of the code is whether
  // midpoint 7 lies below c, bit 2 whether midpoint 3 or 11 (by bit 3)
  // does, and so on; each probe's midpoint a tree of selects over the bits
  // found. NaN compares false everywhere (code 0) and is replaced.
  assert(table.size() == 16 && "4-bit tables have 16 entries");
  SmallVector<float, 16> mids = midpointsOf(table);
  SmallVector<Value, 4> bits;
  Value code = m.constI(i8, 0);
  for (int64_t step = 8; step >= 1; step /= 2) {
    SmallVector<float, 8> probes;
    for (int64_t prefix = 0; prefix * 2 * step < 16; ++prefix)
      probes.push_back(mids[prefix * 2 * step + step - 1]);
    Value mid = selectByBits(m, c, probes, bits);
    Value below = m.cmp(arith::CmpFPredicate::OLT, mid, c);
    bits.push_back(below);
    code = arith::OrIOp::create(
        b, loc, code,
        arith::SelectOp::create(b, loc, below, m.constI(i8, step),
                                m.constI(i8, 0)));
  }
  Value isNaN = m.cmp(arith::CmpFPredicate::UNO, c, c);
  return arith::SelectOp::create(b, loc, isNaN,
                                 m.constI(i8, zeroCode(table)), code);
}

/// `v`'s lanes at `indices`.
static Value shuffle(OpBuilder &b, Location loc, Value v, Value w,
                     ArrayRef<int64_t> indices) {
  return vector::ShuffleOp::create(b, loc, v, w, indices);
}

Value mlir::qopt::packedByteMask(OpBuilder &b, Location loc, Value laneMask) {
  int64_t lanes = cast<VectorType>(laneMask.getType()).getNumElements();
  SmallVector<int64_t> even;
  for (int64_t j = 0; j < lanes / 2; ++j)
    even.push_back(2 * j);
  return shuffle(b, loc, laneMask, laneMask, even);
}

Value mlir::qopt::unpackNibbles(LaneMath &m, Value bytes, bool isSigned) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  auto type = cast<VectorType>(bytes.getType());
  int64_t half = type.getNumElements();
  auto c8 = [&](int64_t v) { return m.constI(type, v); };
  // Signed: shift the nibble to the top and back arithmetically.
  Value lo = isSigned
                 ? Value(arith::ShRSIOp::create(
                       b, loc, arith::ShLIOp::create(b, loc, bytes, c8(4)),
                       c8(4)))
                 : Value(arith::AndIOp::create(b, loc, bytes, c8(0xF)));
  Value hi = isSigned ? Value(arith::ShRSIOp::create(b, loc, bytes, c8(4)))
                      : Value(arith::ShRUIOp::create(b, loc, bytes, c8(4)));
  SmallVector<int64_t> interleave;
  for (int64_t j = 0; j < half; ++j) {
    interleave.push_back(j);
    interleave.push_back(half + j);
  }
  return shuffle(b, loc, lo, hi, interleave);
}

Value mlir::qopt::packNibbles(LaneMath &m, Value codes, Value laneMask) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  auto type = cast<VectorType>(codes.getType());
  int64_t lanes = type.getNumElements();
  // Lanes past the tensor's end store a zero nibble.
  if (laneMask)
    codes = arith::SelectOp::create(b, loc, laneMask, codes,
                                    m.constI(type, 0));
  SmallVector<int64_t> even, odd;
  for (int64_t j = 0; j < lanes / 2; ++j) {
    even.push_back(2 * j);
    odd.push_back(2 * j + 1);
  }
  auto halfType = VectorType::get({lanes / 2}, type.getElementType());
  auto c8 = [&](int64_t v) { return m.constI(halfType, v); };
  Value lo = arith::AndIOp::create(
      b, loc, shuffle(b, loc, codes, codes, even), c8(0xF));
  Value hi = arith::ShLIOp::create(b, loc, shuffle(b, loc, codes, codes, odd),
                                   c8(4));
  return arith::OrIOp::create(b, loc, lo, hi);
}

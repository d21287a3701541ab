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

/// The index of the table entry a NaN takes: the entry nearest 0.
static int64_t zeroCode(ArrayRef<float> table) {
  int64_t best = 0;
  for (int64_t k = 1; k < int64_t(table.size()); ++k)
    if (std::abs(table[k]) < std::abs(table[best]))
      best = k;
  return best;
}

Value mlir::qopt::dequantizeTable(LaneMath &m, GroupSchemeAttr scheme,
                                  Value codes, Value scale) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  ArrayRef<float> table = getCodeTable(scheme.getCompanding());
  // entry = table[code] by selects (16 constants; the same on every
  // target), then x = entry * scale, one rounding.
  Value entry = m.constF(scale, table[0]);
  for (int64_t k = 1; k < int64_t(table.size()); ++k) {
    Value hit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, codes,
                                      m.constI(codes.getType(), k));
    entry = m.select(hit, m.constF(scale, table[k]), entry);
  }
  return m.mul(entry, scale);
}

Value mlir::qopt::quantizeTable(LaneMath &m, GroupSchemeAttr scheme, Value x,
                                Value divisor) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  ArrayRef<float> table = getCodeTable(scheme.getCompanding());
  // c = x / divisor; the code counts the midpoints strictly below c (the
  // lower code on a tie), each midpoint (e_k + e_k+1) * 0.5 in float32.
  Value c = m.div(x, divisor);
  Type i8 = withElement(x.getType(), b.getI8Type());
  Value code = m.constI(i8, 0);
  Value one = m.constI(i8, 1);
  for (int64_t k = 0; k + 1 < int64_t(table.size()); ++k) {
    float mid = (table[k] + table[k + 1]) * 0.5f;
    Value below = m.cmp(arith::CmpFPredicate::OLT, m.constF(c, mid), c);
    code = arith::AddIOp::create(
        b, loc, code,
        arith::SelectOp::create(b, loc, below, one, m.constI(i8, 0)));
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

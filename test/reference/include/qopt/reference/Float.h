//===- Float.h - Bit-exact float32 / bfloat16 / float16 helpers -----------===//
//
// Part of qopt's independent C++ reference (test oracle). No LLVM/MLIR, no code
// shared with the compiler. Conversions are done on bit patterns so that their
// rounding is exactly round-to-nearest-even, whatever the compiler and CPU.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_FLOAT_H
#define QOPT_REFERENCE_FLOAT_H

#include <cstdint>
#include <cstring>

namespace qopt::ref {

/// The raw bits of a float32, and back.
inline uint32_t floatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float bitsToFloat(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// float32 -> bfloat16 bits, round to nearest even. Overflow gives +-inf; any NaN
/// gives 0x7FC0 (PyTorch's c10::BFloat16 canonical NaN, sign dropped).
uint16_t floatToBf16Bits(float x);
/// bfloat16 bits -> float32 (exact).
float bf16BitsToFloat(uint16_t b);

/// float32 -> IEEE binary16 bits, round to nearest even, subnormals included.
/// |x| >= 65520 gives +-inf; NaN gives sign | 0x7E00 (PyTorch CPU's c10::Half).
uint16_t floatToF16Bits(float x);
/// binary16 bits -> float32 (exact; NaN payload kept).
float f16BitsToFloat(uint16_t b);

/// Round a float32 to the nearest bfloat16 / float16 value, returned as float32.
inline float roundToBf16(float x) { return bf16BitsToFloat(floatToBf16Bits(x)); }
inline float roundToF16(float x) { return f16BitsToFloat(floatToF16Bits(x)); }

/// Exact 2^k as a float32, for -149 <= k <= 127 (subnormal below -126).
/// Throws std::out_of_range outside.
float pow2f(int k);

/// float64 -> float32, round to nearest even (the one rounding a Python scalar
/// gets where it meets a float32 tensor).
inline float toF32(double x) { return static_cast<float>(x); }

/// Round half to even of a float32 (torch.round); half up is floorf(x + 0.5f).
float roundHalfEven(float x);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_FLOAT_H

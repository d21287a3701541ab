//===- ErrorBits.h - Split master weights (numerics.md section 3) --------===//
//
// Host-side encode and decode of the error-correction bits `rho` that keep a
// float32 master weight as a bf16/f16 parameter plus an int8/int16 integer.
// This is product code for initializing state from a float32 checkpoint; the
// C++ reference in test/reference is an independent oracle.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_ERRORBITS_H
#define QOPT_RUNTIME_SRC_ERRORBITS_H

#include <cstdint>

namespace qopt::rt {

/// float32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
uint16_t floatToBf16(float x);
/// float32 -> IEEE half bits, round to nearest even, with subnormals; values
/// at or past 65520 in magnitude become infinity; NaN stays a quiet NaN.
uint16_t floatToF16(float x);
float bf16ToFloat(uint16_t bits);
float f16ToFloat(uint16_t bits);

/// The 16-bit format of the parameter.
struct HalfFormat {
  bool isF16;    ///< false: bf16
  int mbits;     ///< 7 (bf16) or 10 (f16)
  int bias;      ///< 127 or 15
  uint16_t toBits(float x) const { return isF16 ? floatToF16(x) : floatToBf16(x); }
  float toFloat(uint16_t b) const { return isF16 ? f16ToFloat(b) : bf16ToFloat(b); }
};
constexpr HalfFormat kBf16{false, 7, 127};
constexpr HalfFormat kF16{true, 10, 15};

/// Encodes one master value: *x16 = RNE(x32), returns rho in [-nmax, nmax].
int32_t encodeErrorBits(const HalfFormat &f, int32_t nmax, float x32,
                        uint16_t *x16);
/// Decodes: f32(x16) + ((rho / nmax) * 2^h') * 2^(l - h').
float decodeErrorBits(const HalfFormat &f, int32_t nmax, uint16_t x16,
                      int32_t rho);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_ERRORBITS_H

//===- Ecc.h - Split master weights: 16-bit value + error bits (§3) --------===//
//
// numerics.md §3 (FlashOptim "ECC"): a float32 master value x32 kept as
// x16 = round_to_nearest_even(x32) (bf16 or fp16) plus a signed integer rho
// (int8: "24-bit master", int16: "32-bit master").
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_ECC_H
#define QOPT_REFERENCE_ECC_H

#include "qopt/reference/Buffer.h"

#include <cstdint>

namespace qopt::ref {

/// One split value: the 16-bit pattern and the error integer.
struct EccSplit {
  uint16_t x16;
  int32_t rho;
};

/// Encode (numerics.md §3, formulas as written, float32 arithmetic):
///   x16 = rne(x32); e = x32 - f32(x16)
///   E = unbiased exponent of |x16| (1 - bias for zero/subnormal; 128 / 16 for inf and NaN)
///   l = E - mbits - 1; h = floor(-l / 2)
///   en = (e * 2^h) * 2^(-l - h)
///   s = clamp(en, -1, 1) * Nmax; rho = copysign(floor(|s| + 0.5), s)
/// When e is not finite (x16 is inf or NaN) rho = 0: §3 does not fix it (reference choice).
/// param: BF16 or F16; rho: I8 or I16. Throws std::invalid_argument otherwise.
EccSplit eccEncode(float x32, DType param, DType rho);

/// Decode: x32 = f32(x16) + ((rho / Nmax) * 2^h') * 2^(l - h'), h' = floor(l / 2).
float eccDecode(uint16_t x16, int32_t rho, DType param, DType rhoType);

/// Array forms over n elements; x16 holds 16-bit patterns, rho n int8_t or int16_t.
void eccEncode(const float *x32, int64_t n, DType param, DType rhoType, uint16_t *x16, void *rho);
void eccDecode(const uint16_t *x16, const void *rho, int64_t n, DType param, DType rhoType,
               float *out);

/// Nmax = 127 (I8) or 32767 (I16); mbits = 7 (BF16) or 10 (F16); bias = 127 or 15.
int32_t eccNmax(DType rho);
int eccMantissaBits(DType param);
int eccBias(DType param);
/// l = E - mbits - 1 of a 16-bit value (log2 of half its ULP).
int eccHalfUlpLog2(uint16_t x16, DType param);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_ECC_H

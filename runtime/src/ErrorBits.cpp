//===- ErrorBits.cpp - Split master weights (numerics.md section 3) ------===//
//
// Every line below is one float32 operation rounded to nearest even, in the
// order numerics.md gives; the target is compiled with -ffp-contract=off so
// no multiply-add is fused.
//
//===----------------------------------------------------------------------===//
#include "ErrorBits.h"

#include <cmath>
#include <cstring>

namespace qopt::rt {

namespace {

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// floor(a / 2) for any sign of a.
int floorHalf(int a) { return a >= 0 ? a / 2 : -((1 - a) / 2); }

/// log2 of half an ULP of the 16-bit value `x16` (l in numerics.md).
int halfUlpLog2(const HalfFormat &f, uint16_t x16) {
  int expField = (x16 & 0x7FFF) >> f.mbits;
  int e = expField == 0 ? 1 - f.bias : expField - f.bias;
  return e - f.mbits - 1;
}

} // namespace

uint16_t floatToBf16(float x) {
  uint32_t u = bitsOf(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<uint16_t>((u >> 16) | 0x0040u); // quiet NaN
  uint32_t bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + bias) >> 16);
}

uint16_t floatToF16(float x) {
  uint32_t u = bitsOf(x);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7FFFFFFFu;
  if (u > 0x7F800000u)
    return sign | 0x7E00u; // NaN
  if (u >= 0x477FF000u)    // >= 65520 rounds to infinity
    return sign | 0x7C00u;
  if (u < 0x38800000u) {   // below 2^-14: subnormal half or zero
    if (u < 0x33000000u)   // below 2^-25: rounds to zero
      return sign;
    int e = static_cast<int>(u >> 23);
    uint32_t mant = (u & 0x7FFFFFu) | 0x800000u; // value = mant * 2^(e-150)
    int shift = 126 - e;                         // to units of 2^-24
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
      ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t e = (u >> 23) - 127 + 15;
  uint32_t mant = u & 0x7FFFFFu;
  uint32_t h = (e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // a carry into the exponent is the correct result
  return static_cast<uint16_t>(sign | h);
}

float bf16ToFloat(uint16_t bits) { return floatOf(uint32_t(bits) << 16); }

float f16ToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t e = (bits >> 10) & 0x1Fu;
  uint32_t mant = bits & 0x3FFu;
  if (e == 0x1F)
    return floatOf(sign | 0x7F800000u | (mant << 13));
  if (e == 0) {
    // mant * 2^-24, exact in float32.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return floatOf(sign | ((e - 15 + 127) << 23) | (mant << 13));
}

int32_t encodeErrorBits(const HalfFormat &f, int32_t nmax, float x32,
                        uint16_t *x16out) {
  uint16_t x16 = f.toBits(x32);
  *x16out = x16;
  float p = f.toFloat(x16);
  if (!std::isfinite(p))
    return 0; // NaN, infinity, or a master beyond the 16-bit range
  float e = x32 - p; // exact
  int l = halfUlpLog2(f, x16);
  int h = floorHalf(-l);
  float en = std::ldexp(std::ldexp(e, h), -l - h); // exact: powers of two
  float c = en < -1.0f ? -1.0f : (en > 1.0f ? 1.0f : en);
  float s = c * static_cast<float>(nmax);
  float r = std::floor(std::fabs(s) + 0.5f); // ties away from zero
  return static_cast<int32_t>(s < 0 ? -r : r);
}

float decodeErrorBits(const HalfFormat &f, int32_t nmax, uint16_t x16,
                      int32_t rho) {
  float p = f.toFloat(x16);
  if (!std::isfinite(p))
    return p;
  int l = halfUlpLog2(f, x16);
  int h = floorHalf(l);
  float q = static_cast<float>(rho) / static_cast<float>(nmax);
  float corr = std::ldexp(std::ldexp(q, h), l - h);
  return p + corr;
}

} // namespace qopt::rt

//===- Float.cpp - Bit-exact float conversions ----------------------------===//
#include "qopt/reference/Float.h"

#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

// The reference relies on every float operation being one IEEE float32 rounding.
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "qopt_reference needs FLT_EVAL_METHOD == 0 (SSE float math, not x87): build with -msse2 -mfpmath=sse"
#endif

namespace qopt::ref {

uint16_t floatToBf16Bits(float x) {
  uint32_t u = floatBits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0; // NaN
  // Round to nearest even on the low 16 bits: add 0x7fff plus the kept LSB. A carry out of the
  // mantissa increments the exponent (and turns the largest finite values into inf), as RNE does.
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

float bf16BitsToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

uint16_t floatToF16Bits(float x) {
  const uint32_t u = floatBits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return sign | 0x7e00u; // NaN
  if (a >= 0x477ff000u)    // >= 65520 = 65504 + half an ULP: the tie goes to the even inf
    return sign | 0x7c00u;
  if (a >= 0x38800000u) { // >= 2^-14: a normal float16
    const uint32_t exp = (a >> 23) - 127 + 15;
    const uint32_t mant = a & 0x7fffffu;
    uint32_t h = (exp << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
      ++h; // a carry into the exponent is the correct next value
    return sign | static_cast<uint16_t>(h);
  }
  if (a <= 0x33000000u) // <= 2^-25: rounds to zero (2^-25 is a tie with 0, which is even)
    return sign;
  // Subnormal float16: units of 2^-24. a is a normal float32 with exponent E in [-25, -15].
  const int e = static_cast<int>(a >> 23) - 127;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u; // value = mant * 2^(e - 23)
  const int shift = -(e + 1);                         // value / 2^-24 = mant >> shift
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u)))
    ++h; // may become 0x400, the smallest normal: still the right encoding
  return sign | static_cast<uint16_t>(h);
}

float f16BitsToFloat(uint16_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x8000u) << 16;
  const uint32_t exp = (b >> 10) & 0x1fu;
  const uint32_t mant = b & 0x3ffu;
  if (exp == 0x1f)
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0)
    return bitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0)
    return bitsToFloat(sign);
  // Subnormal: mant * 2^-24, normalised by hand.
  int e = -14;
  uint32_t m = mant;
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --e;
  }
  m &= 0x3ffu;
  return bitsToFloat(sign | (static_cast<uint32_t>(e + 127) << 23) | (m << 13));
}

float pow2f(int k) {
  if (k > 127 || k < -149)
    throw std::out_of_range("pow2f: 2^" + std::to_string(k) + " is not a finite nonzero float32");
  if (k >= -126)
    return bitsToFloat(static_cast<uint32_t>(k + 127) << 23);
  return bitsToFloat(1u << (k + 149));
}

float roundHalfEven(float x) {
  if (!std::isfinite(x) || std::fabs(x) >= 8388608.0f) // 2^23: already an integer (or inf/NaN)
    return x;
  const float f = std::floor(x);
  const float d = x - f; // exact: x and floor(x) are within one binade step below 2^23
  if (d > 0.5f)
    return f + 1.0f;
  if (d < 0.5f)
    return f == 0.0f ? std::copysign(0.0f, x) : f;
  // Tie: the even neighbour.
  const float r = (std::fmod(f, 2.0f) == 0.0f) ? f : f + 1.0f;
  return r == 0.0f ? std::copysign(0.0f, x) : r;
}

} // namespace qopt::ref

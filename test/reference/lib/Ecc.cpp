//===- Ecc.cpp - Split master weights (numerics.md §3) --------------------===//
#include "qopt/reference/Ecc.h"

#include "qopt/reference/Float.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace qopt::ref {

static void checkFormats(DType param, DType rho) {
  if (param != DType::BF16 && param != DType::F16)
    throw std::invalid_argument(std::string("error-correction bits need a bf16 or f16 parameter, got ") +
                                dtypeName(param));
  if (rho != DType::I8 && rho != DType::I16)
    throw std::invalid_argument(std::string("error-correction bits are int8 or int16, got ") +
                                dtypeName(rho));
}

int32_t eccNmax(DType rho) { return rho == DType::I8 ? 127 : 32767; }
int eccMantissaBits(DType param) { return param == DType::BF16 ? 7 : 10; }
int eccBias(DType param) { return param == DType::BF16 ? 127 : 15; }

/// floor(a / 2) for any integer a.
static int floorHalf(int a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

static float toFloat16(uint16_t x16, DType param) {
  return param == DType::BF16 ? bf16BitsToFloat(x16) : f16BitsToFloat(x16);
}

int eccHalfUlpLog2(uint16_t x16, DType param) {
  const int mbits = eccMantissaBits(param);
  const int bias = eccBias(param);
  const int expBits = param == DType::BF16 ? 8 : 5;
  const int field = (x16 >> mbits) & ((1 << expBits) - 1);
  // E: unbiased exponent of |x16|; 1 - bias for zero and subnormals (inf/NaN: all-ones field - bias)
  const int E = field == 0 ? 1 - bias : field - bias;
  return E - mbits - 1; // l = E - mbits - 1
}

EccSplit eccEncode(float x32, DType param, DType rho) {
  checkFormats(param, rho);
  const uint16_t x16 = param == DType::BF16 ? floatToBf16Bits(x32) : floatToF16Bits(x32);
  const float e = x32 - toFloat16(x16, param); // e = x32 - f32(x16), exact in float32
  if (!std::isfinite(e))
    return {x16, 0}; // x16 is inf or NaN: reference choice, §3 does not fix rho
  const int l = eccHalfUlpLog2(x16, param);
  const int h = floorHalf(-l);                        // h = floor(-l / 2)
  const float en = (e * pow2f(h)) * pow2f(-l - h);    // two steps, neither factor out of range
  const float nmax = static_cast<float>(eccNmax(rho));
  const float s = std::clamp(en, -1.0f, 1.0f) * nmax; // s = clamp(en, -1, 1) * Nmax
  const float r = std::copysign(std::floor(std::fabs(s) + 0.5f), s); // ties away from zero
  return {x16, static_cast<int32_t>(r)};
}

float eccDecode(uint16_t x16, int32_t rho, DType param, DType rhoType) {
  checkFormats(param, rhoType);
  const int l = eccHalfUlpLog2(x16, param);
  const int hp = floorHalf(l); // h' = floor(l / 2)
  const float nmax = static_cast<float>(eccNmax(rhoType));
  // x32 = f32(x16) + ((rho / Nmax) * 2^h') * 2^(l - h')
  return toFloat16(x16, param) + ((static_cast<float>(rho) / nmax) * pow2f(hp)) * pow2f(l - hp);
}

void eccEncode(const float *x32, int64_t n, DType param, DType rhoType, uint16_t *x16, void *rho) {
  checkFormats(param, rhoType);
  for (int64_t i = 0; i < n; ++i) {
    const EccSplit s = eccEncode(x32[i], param, rhoType);
    x16[i] = s.x16;
    if (rhoType == DType::I8)
      static_cast<int8_t *>(rho)[i] = static_cast<int8_t>(s.rho);
    else
      static_cast<int16_t *>(rho)[i] = static_cast<int16_t>(s.rho);
  }
}

void eccDecode(const uint16_t *x16, const void *rho, int64_t n, DType param, DType rhoType, float *out) {
  checkFormats(param, rhoType);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = rhoType == DType::I8 ? static_cast<const int8_t *>(rho)[i]
                                           : static_cast<const int16_t *>(rho)[i];
    out[i] = eccDecode(x16[i], r, param, rhoType);
  }
}

} // namespace qopt::ref

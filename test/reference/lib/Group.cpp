//===- Group.cpp - Companded / linear group quantization (numerics.md §2) -===//
#include "qopt/reference/Group.h"

#include "qopt/reference/Float.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace qopt::ref {

GroupScheme GroupScheme::momentum() {
  GroupScheme s;
  s.isSigned = true;
  s.companding = Companding::Softsign;
  return s;
}

GroupScheme GroupScheme::variance() {
  GroupScheme s;
  s.isSigned = false;
  s.companding = Companding::Sqrt;
  return s;
}

GroupScheme GroupScheme::seed003(bool isSigned, Companding companding) {
  GroupScheme s;
  s.isSigned = isSigned;
  s.companding = companding;
  s.scaleDType = ScaleDType::F16;
  s.rounding = Rounding::HalfEven;
  s.divisor = ScaleDivisor::StoredScale;
  s.overflow = Overflow::Ieee;
  return s;
}

std::string GroupScheme::str() const {
  std::string s = std::string("group<") + (isSigned ? "i8" : "u8") + ", " + std::to_string(group) + ", ";
  s += companding == Companding::Softsign ? "softsign" : companding == Companding::Sqrt ? "sqrt" : "linear";
  s += std::string(", scale=") + (scaleDType == ScaleDType::F16 ? "f16" : "f32");
  s += std::string(", round=") + (rounding == Rounding::HalfUp ? "half_up" : "half_even");
  s += std::string(", divide=") + (divisor == ScaleDivisor::Absmax ? "absmax" : "stored_scale");
  s += overflow == Overflow::Ieee ? ", overflow=ieee>" : ">";
  return s;
}

void GroupScheme::validate() const {
  if (group < 1)
    throw std::invalid_argument("group scheme: group size must be >= 1, got " + std::to_string(group));
  if (isSigned && companding == Companding::Sqrt)
    throw std::invalid_argument("group scheme: sqrt companding needs an unsigned (u8) scheme");
  if (!isSigned && companding == Companding::Softsign)
    throw std::invalid_argument("group scheme: softsign companding needs a signed (i8) scheme");
}

/// The stored scale's value: float16 (round to nearest even) or float32.
static float storeScale(const GroupScheme &s, float v, void *scales, int64_t g) {
  if (s.scaleDType == ScaleDType::F16) {
    const uint16_t h = floatToF16Bits(v);
    static_cast<uint16_t *>(scales)[g] = h;
    return f16BitsToFloat(h);
  }
  static_cast<float *>(scales)[g] = v;
  return v;
}

static float loadScale(const GroupScheme &s, const void *scales, int64_t g) {
  if (s.scaleDType == ScaleDType::F16)
    return f16BitsToFloat(static_cast<const uint16_t *>(scales)[g]);
  return static_cast<const float *>(scales)[g];
}

static float roundCode(const GroupScheme &s, float r) {
  // half_up: floor(x + 0.5) in float32 (authors); half_even: torch.round (seed 003)
  return s.rounding == Rounding::HalfUp ? std::floor(r + 0.5f) : roundHalfEven(r);
}

void groupQuantize(const GroupScheme &scheme, const float *x, int64_t n, void *codes, void *scales,
                   NumericsCounts *counts) {
  scheme.validate();
  const bool sqrtC = scheme.companding == Companding::Sqrt;
  const bool softsign = scheme.companding == Companding::Softsign;
  for (int64_t g = 0, begin = 0; begin < n; ++g, begin += scheme.group) {
    const int64_t end = std::min(n, begin + scheme.group); // partial group: valid elements only
    // t = sqrt(x) for the sqrt scheme (§2 "u = sqrt(v)"; seed 003 `g = torch.sqrt(g)`)
    auto t = [&](int64_t i) { return sqrtC ? std::sqrt(x[i]) : x[i]; };
    // absmax over the group: max |t| signed, max t unsigned (from 0, like seed 003's zero padding);
    // a NaN anywhere makes it NaN (torch.amax)
    float am = 0.0f;
    bool nan = false;
    for (int64_t i = begin; i < end; ++i) {
      const float a = scheme.isSigned ? std::fabs(t(i)) : t(i);
      if (std::isnan(a))
        nan = true;
      else if (a > am)
        am = a;
    }
    if (nan)
      am = std::nanf("");
    // docs/numerics.md "Overflow": an absmax the scale type cannot hold (or NaN) is stored as the
    // type's largest finite value, and the codes clamp against it.
    const bool saturate = scheme.overflow == Overflow::Saturate;
    if (saturate) {
      // f16: 65520 rounds to inf. f32: any finite absmax fits, but with sqrt companding the
      // dequantized value is the scale squared, finite up to a scale of 2^64 (1 - 2^-24).
      const bool f16 = scheme.scaleDType == ScaleDType::F16;
      const float largest = f16 ? 65504.0f : sqrtC ? 0x1.fffffep63f : std::numeric_limits<float>::max();
      const bool fits = f16 ? am < 65520.0f : sqrtC ? am < 0x1p64f : std::isfinite(am);
      if (!fits) {
        if (counts)
          ++(std::isfinite(am) ? counts->saturated : counts->nonfinite);
        am = largest;
      }
    }
    float sDiv;
    if (scheme.divisor == ScaleDivisor::Absmax) {
      // authors: s = max(absmax, 1e-12) in float32, divide by it, store it rounded
      sDiv = (std::isnan(am) || am >= 1e-12f) ? am : 1e-12f;
      storeScale(scheme, sDiv, scales, g);
    } else {
      // seed 003: scales_f16 = scales.to(float16); safe = where(scales_f16 == 0, 1, scales_f16)
      const float stored = storeScale(scheme, am, scales, g);
      sDiv = stored == 0.0f ? 1.0f : stored;
    }
    for (int64_t i = begin; i < end; ++i) {
      float r;
      if (scheme.isSigned) {
        float y = t(i) / sDiv;                                      // y = m / s
        if (saturate && !std::isnan(y))
          y = std::clamp(y, -1.0f, 1.0f);                           // inf: the extreme code
        const float z = softsign ? (2.0f * y) / (1.0f + std::fabs(y)) : y; // z = 2y / (1 + |y|)
        r = 127.0f * z;                                             // 127 * z
      } else if (scheme.divisor == ScaleDivisor::Absmax) {
        r = (255.0f * t(i)) / sDiv;                                 // §2: 255 * u / s, left to right
      } else {
        r = (t(i) / sDiv) * 255.0f;                                 // seed 003: (g / safe) * 255.0
      }
      float q = roundCode(scheme, r);
      if (std::isnan(q))
        q = 0.0f; // reference choice: §2 does not say what a NaN code is
      if (scheme.isSigned)
        static_cast<int8_t *>(codes)[i] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
      else
        static_cast<uint8_t *>(codes)[i] = static_cast<uint8_t>(std::clamp(q, 0.0f, 255.0f));
    }
  }
}

void groupDequantize(const GroupScheme &scheme, const void *codes, const void *scales, int64_t n,
                     float *out) {
  scheme.validate();
  for (int64_t i = 0; i < n; ++i) {
    const float s = loadScale(scheme, scales, i / scheme.group);
    if (scheme.isSigned) {
      const float q = static_cast<float>(static_cast<const int8_t *>(codes)[i]);
      const float z = q / 127.0f;                                           // z = q / 127
      const float y = scheme.companding == Companding::Softsign ? z / (2.0f - std::fabs(z)) : z;
      out[i] = y * s;                                                       // m = y * s
    } else {
      const float q = static_cast<float>(static_cast<const uint8_t *>(codes)[i]);
      const float u = (q / 255.0f) * s;                                     // u = (q / 255) * s
      out[i] = scheme.companding == Companding::Sqrt ? u * u : u;           // v = u * u
    }
  }
}

double nmse(const float *x, const float *xHat, int64_t n) {
  // seed 003: mean(x^2) in float64; 0 if it is 0; else mean((x - x_hat)^2) / that.
  // An empty tensor's mean is NaN in PyTorch, so seed 003 returns NaN there.
  if (n == 0)
    return std::nan("");
  double den = 0.0, num = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = x[i], b = xHat[i];
    den += a * a;
    num += (a - b) * (a - b);
  }
  den /= static_cast<double>(n);
  if (den == 0.0)
    return 0.0;
  return (num / static_cast<double>(n)) / den;
}

} // namespace qopt::ref

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
  std::string s = std::string("group<") + (isSigned ? "i" : "u") + std::to_string(bits) + ", " +
                  std::to_string(group) + ", ";
  s += companding == Companding::Softsign ? "softsign"
       : companding == Companding::Sqrt   ? "sqrt"
       : companding == Companding::Dynamic ? "dynamic"
       : companding == Companding::NonZero ? "nonzero"
                                           : "linear";
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
  if (bits != 8 && bits != 4)
    throw std::invalid_argument("group scheme: bits must be 8 or 4, got " + std::to_string(bits));
  if (companding == Companding::Dynamic && !(isSigned && bits == 4))
    throw std::invalid_argument("group scheme: the dynamic table needs a signed 4-bit scheme");
  if (companding == Companding::NonZero && !(!isSigned && bits == 4))
    throw std::invalid_argument("group scheme: the nonzero table needs an unsigned 4-bit scheme");
}

std::vector<float> fourBitTable(Companding companding) {
  std::vector<double> v;
  if (companding == Companding::Dynamic) {
    // torchao quant_utils.create_dynamic_map(signed=True, max_exponent_bits=3, total_bits=4):
    // for i in 0..2, the means of linspace(0.1, 1, 2^i + 1) times 10^(i - 2), both signs; then
    // 0 and 1 (no additional items: 2^(3 - 3) - 1 = 0).
    for (int i = 0; i < 3; ++i) {
      const int items = (1 << i) + 1;
      const double scale = std::pow(10.0, i - 2);
      for (int j = 0; j + 1 < items; ++j) {
        const double lo = 0.1 + 0.9 * j / (items - 1), hi = 0.1 + 0.9 * (j + 1) / (items - 1);
        v.push_back(scale * (lo + hi) / 2);
        v.push_back(-scale * (lo + hi) / 2);
      }
    }
    v.push_back(0.0);
    v.push_back(1.0);
  } else if (companding == Companding::NonZero) {
    // torchao subclass_4bit: torch.linspace(0, 1, 17)[1:]
    for (int k = 1; k <= 16; ++k)
      v.push_back(k / 16.0);
  } else {
    throw std::invalid_argument("fourBitTable: not a table companding");
  }
  std::sort(v.begin(), v.end());
  return std::vector<float>(v.begin(), v.end());
}

/// A 4-bit table's code of c: the count of midpoints strictly below c; NaN: the entry nearest 0.
static int tableCode(const std::vector<float> &table, float c) {
  if (std::isnan(c)) {
    int best = 0;
    for (int k = 1; k < 16; ++k)
      if (std::fabs(table[k]) < std::fabs(table[best]))
        best = k;
    return best;
  }
  int q = 0;
  for (int k = 0; k < 15; ++k)
    if ((table[k] + table[k + 1]) * 0.5f < c)
      ++q;
  return q;
}

/// Stores code q of element i: a byte, or a nibble (low for even i) of a zeroed packed buffer.
static void putCode(const GroupScheme &s, void *codes, int64_t i, int q) {
  if (s.bits == 8) {
    if (s.isSigned)
      static_cast<int8_t *>(codes)[i] = static_cast<int8_t>(q);
    else
      static_cast<uint8_t *>(codes)[i] = static_cast<uint8_t>(q);
    return;
  }
  uint8_t &byte = static_cast<uint8_t *>(codes)[i / 2];
  const uint8_t nibble = static_cast<uint8_t>(q) & 0xF;
  byte = i % 2 ? static_cast<uint8_t>((byte & 0x0F) | (nibble << 4))
               : static_cast<uint8_t>((byte & 0xF0) | nibble);
}

/// Code q of element i (a 4-bit signed code sign-extended; a table's index as it is).
static int getCode(const GroupScheme &s, const void *codes, int64_t i) {
  if (s.bits == 8)
    return s.isSigned ? static_cast<const int8_t *>(codes)[i] : static_cast<const uint8_t *>(codes)[i];
  const uint8_t byte = static_cast<const uint8_t *>(codes)[i / 2];
  const int nibble = i % 2 ? byte >> 4 : byte & 0xF;
  return s.isSigned && !s.isTable() && nibble >= 8 ? nibble - 16 : nibble;
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
  const float sRange = scheme.bits == 4 ? 7.0f : 127.0f, uRange = scheme.bits == 4 ? 15.0f : 255.0f;
  const std::vector<float> table = scheme.isTable() ? fourBitTable(scheme.companding) : std::vector<float>();
  if (scheme.bits == 4 && n > 0) // an odd count's last high nibble stays 0
    static_cast<uint8_t *>(codes)[(n - 1) / 2] = 0;
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
      } else if (f16 && am > 0.0f && am <= 0x1p-25f) {
        // A positive absmax that rounds to a zero float16 (at most half of 2^-24, the smallest
        // subnormal; the tie goes to the even 0) would store a zero scale: the group would
        // dequantize to zeros. It takes 2^-24, divided by and stored as it is.
        if (counts)
          ++counts->underflowed;
        am = 0x1p-24f;
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
      if (scheme.isTable()) {
        putCode(scheme, codes, i, tableCode(table, x[i] / sDiv)); // torchao: input / scale
        continue;
      }
      float r;
      if (scheme.isSigned) {
        float y = t(i) / sDiv;                                      // y = m / s
        if (saturate && !std::isnan(y))
          y = std::clamp(y, -1.0f, 1.0f);                           // inf: the extreme code
        const float z = softsign ? (2.0f * y) / (1.0f + std::fabs(y)) : y; // z = 2y / (1 + |y|)
        r = sRange * z;                                             // 127 * z (7 * z)
      } else if (scheme.divisor == ScaleDivisor::Absmax) {
        r = (uRange * t(i)) / sDiv;                                 // §2: 255 * u / s, left to right
      } else {
        r = (t(i) / sDiv) * uRange;                                 // seed 003: (g / safe) * 255.0
      }
      float q = roundCode(scheme, r);
      if (std::isnan(q))
        q = 0.0f; // reference choice: §2 does not say what a NaN code is
      q = scheme.isSigned ? std::clamp(q, -sRange, sRange) : std::clamp(q, 0.0f, uRange);
      putCode(scheme, codes, i, static_cast<int>(q));
    }
  }
}

void groupDequantize(const GroupScheme &scheme, const void *codes, const void *scales, int64_t n,
                     float *out) {
  scheme.validate();
  const float sRange = scheme.bits == 4 ? 7.0f : 127.0f, uRange = scheme.bits == 4 ? 15.0f : 255.0f;
  const std::vector<float> table = scheme.isTable() ? fourBitTable(scheme.companding) : std::vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float s = loadScale(scheme, scales, i / scheme.group);
    if (scheme.isTable()) {
      out[i] = table[getCode(scheme, codes, i)] * s;                        // qmap[code] * scale
    } else if (scheme.isSigned) {
      const float q = static_cast<float>(getCode(scheme, codes, i));
      const float z = q / sRange;                                           // z = q / 127
      const float y = scheme.companding == Companding::Softsign ? z / (2.0f - std::fabs(z)) : z;
      out[i] = y * s;                                                       // m = y * s
    } else {
      const float q = static_cast<float>(getCode(scheme, codes, i));
      const float u = (q / uRange) * s;                                     // u = (q / 255) * s
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

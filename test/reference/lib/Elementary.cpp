//===- Elementary.cpp - The DSL's exp, log, tanh, atan2 and x ** c --------===//
//
// docs/numerics.md, "Elementary functions", written out in plain C++: every
// float64 operation below is one IEEE rounding (the library is built with
// -ffp-contract=off; fused multiply-adds are std::fma), in the order the
// document gives. The polynomial coefficients are the output of
// tools/elementary_coefficients.py.
//
//===----------------------------------------------------------------------===//
#include "qopt/reference/Elementary.h"

#include "qopt/Numerics/ElementaryConstants.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace qopt::ref {

namespace {

using namespace qopt::elementary;

constexpr double kInf = std::numeric_limits<double>::infinity();

float quietNaN() {
  uint32_t bits = 0x7FC00000u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint64_t bitsOf(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
double fromBits(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
/// 2^k for an integer k of a normal double's range.
double pow2(int64_t k) { return fromBits(static_cast<uint64_t>(k + 1023) << 52); }

/// exp's reduction of hi + lo (|lo| far below ulp(hi)): k = RN(hi / ln 2)
/// and r = hi - k ln 2 + lo, with w = 1 + r u(r), so that e^(hi + lo) =
/// 2^k (1 + r w) and e^r - 1 = r w. hi outside [kExpMin, kExpMax], or NaN,
/// is clamped (lo then dropped); the caller handles NaN.
struct ExpReduced {
  int64_t k;
  double r, w;
};
ExpReduced expReduce(double hi, double lo) {
  const bool inRange = hi >= kExpMin && hi <= kExpMax;
  double h = hi;
  if (!(h >= kExpMin))
    h = kExpMin; // NaN too
  if (h > kExpMax)
    h = kExpMax;
  const double l = inRange ? lo : 0.0;
  const double kd = std::nearbyint(h * kInvLn2); // ties to even
  double r = std::fma(-kd, kLn2Hi, h);           // exact
  r = std::fma(-kd, kLn2Lo, r);
  r = r + l;
  double u = kExpU[10];
  for (int j = 9; j >= 0; --j)
    u = std::fma(u, r, kExpU[j]);
  const double w = std::fma(u, r, 1.0);
  return {static_cast<int64_t>(kd), r, w};
}

/// e^(hi + lo) in float64 (clamped as expReduce says).
double expCore(double hi, double lo) {
  ExpReduced e = expReduce(hi, lo);
  return std::fma(e.w, e.r, 1.0) * pow2(e.k);
}

/// ln a for a positive finite double as hi + lo (|lo| <= ulp(hi) / 2):
/// a = 2^e m with m in (sqrt(1/2), sqrt(2)], f = m - 1, s = f / (2 + f), and
/// ln(1 + f) = f - (f^2/2 - s (f^2/2 + z P(z))), z = s^2 (fdlibm's form).
struct DoubleDouble {
  double hi, lo;
};
DoubleDouble logCore(double a) {
  const uint64_t bits = bitsOf(a);
  int64_t e = static_cast<int64_t>(bits >> 52) - 1023;
  double m = fromBits((bits & ((uint64_t(1) << 52) - 1)) | (uint64_t(1023) << 52));
  if (m > kSqrt2) {
    m = m * 0.5; // exact
    e = e + 1;
  }
  const double f = m - 1.0; // exact
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = kLogP[7];
  for (int j = 6; j >= 0; --j)
    p = std::fma(p, z, kLogP[j]);
  const double r = z * p;
  const double hfsq = 0.5 * f * f;
  const double ed = static_cast<double>(e);
  const double t = std::fma(s, hfsq + r, ed * kLn2Lo);
  const double tail = f - (hfsq - t);
  const double head = ed * kLn2Hi; // exact
  const double hi = head + tail;
  const double lo = (head - hi) + tail; // exact: |head| >= |tail| or head == 0
  return {hi, lo};
}

} // namespace

float expF32(float x) {
  if (std::isnan(x))
    return x;
  return static_cast<float>(expCore(x, 0.0));
}

float logF32(float x) {
  if (std::isnan(x))
    return x;
  if (x < 0.0f)
    return quietNaN();
  if (x == 0.0f)
    return -std::numeric_limits<float>::infinity();
  if (std::isinf(x))
    return x;
  return static_cast<float>(logCore(x).hi);
}

float tanhF32(float x) {
  if (std::isnan(x))
    return x;
  double a = std::fabs(static_cast<double>(x));
  if (a > 10.0)
    a = 10.0;
  // tanh |x| = E / (E + 2) with E = e^(2|x|) - 1 = 2^k (e^r - 1) + (2^k - 1).
  const ExpReduced e = expReduce(2.0 * a, 0.0);
  const double scale = pow2(e.k);
  const double em1 = std::fma(scale, e.w * e.r, scale - 1.0);
  const double t = em1 / (em1 + 2.0);
  return std::copysign(static_cast<float>(t), x);
}

float atan2F32(float y, float x) {
  if (std::isnan(y))
    return y;
  if (std::isnan(x))
    return x;
  double ax = std::fabs(static_cast<double>(x));
  double ay = std::fabs(static_cast<double>(y));
  // Both infinite: the angle of (1, 1); both zero: that of (1, 0). The signs
  // of x and y place it in its quadrant below.
  if (std::isinf(ax) && std::isinf(ay))
    ax = ay = 1.0;
  if (ax == 0.0 && ay == 0.0)
    ax = 1.0;
  const bool swap = ay > ax; // then atan2 = pi/2 - atan(ax / ay)
  const double n = swap ? ax : ay;
  const double d = swap ? ay : ax;
  // t = n / d <= 1; above 5/12, atan t = pi/4 + atan((t - 1) / (t + 1)).
  // n and d are float32 values, so 12 n, 5 d, n - d and d + n are exact.
  const bool big = 12.0 * n > 5.0 * d;
  const double num = big ? n - d : n;
  const double den = big ? d + n : d;
  const double t = num / den;
  const double z = t * t;
  double q = kAtanQ[11];
  for (int j = 10; j >= 0; --j)
    q = std::fma(q, z, kAtanQ[j]);
  const double a = std::fma(t * z, q, t);
  double v = big ? kPi4Hi + (kPi4Lo + a) : a;
  if (swap)
    v = kPi2Hi + (kPi2Lo - v);
  if (std::signbit(x))
    v = kPiHi + (kPiLo - v);
  return std::copysign(static_cast<float>(v), y);
}

float powF32(float x, float c) {
  if (c == 2.0f)
    return x * x;
  if (c == 0.0f || x == 1.0f)
    return 1.0f;
  if (std::isnan(x))
    return x;
  if (std::isnan(c))
    return c;
  const double ax = std::fabs(static_cast<double>(x));
  const double cd = c;
  double lhi, llo;
  if (ax == 0.0) {
    lhi = -kInf;
    llo = 0.0;
  } else if (std::isinf(ax)) {
    lhi = kInf;
    llo = 0.0;
  } else {
    DoubleDouble l = logCore(ax);
    lhi = l.hi;
    llo = l.lo;
  }
  // c ln|x| as phi + plo: the product's rounding error, exactly, by fma.
  const double phi = cd * lhi;
  const double plo = std::fma(cd, lhi, -phi) + cd * llo;
  double y = ax == 1.0 ? 1.0 : expCore(phi, plo);
  const bool cInteger = std::floor(cd) == cd; // +-inf counts as even
  const bool cOdd = cInteger && std::floor(cd * 0.5) != cd * 0.5;
  if (x < 0.0f && !std::isinf(x) && !cInteger)
    return quietNaN();
  if (std::signbit(x) && cOdd)
    y = -y;
  return static_cast<float>(y);
}

} // namespace qopt::ref

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

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace qopt::ref {

namespace {

// exp: u(r) = (e^r - 1 - r) / r^2 on [-0.35, 0.35], max abs error 2^-58.70.
constexpr double kExpU[] = {
    0x1.0000000000000p-1,  0x1.5555555555557p-3,  0x1.5555555555556p-5,
    0x1.111111110ff8bp-7,  0x1.6c16c16c16214p-10, 0x1.a01a01ac9de9ep-13,
    0x1.a01a01a74077ap-16, 0x1.71ddfff6573d6p-19, 0x1.27e4da1e12fb1p-22,
    0x1.af5282aacdb2ep-26, 0x1.1f75a3caadff5p-29,
};
// log: P(z) = (2 atanh(s) / s - 2) / z, z = s^2 in [0, 0.0295], max abs
// error 2^-54.58.
constexpr double kLogP[] = {
    0x1.5555555555555p-1, 0x1.9999999999a3ap-2, 0x1.249249247670ap-2,
    0x1.c71c7201fc0e6p-3, 0x1.745cf8c09a9d4p-3, 0x1.3b1c43c68eb6dp-3,
    0x1.0fbd140544b63p-3, 0x1.0c135adcf3011p-3,
};
// atan: Q(z) = (atan(t) / t - 1) / z, z = t^2 in [0, (5/12)^2], max abs
// error 2^-55.58.
constexpr double kAtanQ[] = {
    -0x1.5555555555555p-2, 0x1.999999999994ap-3,  -0x1.249249248cf30p-3,
    0x1.c71c71c29ad8ep-4,  -0x1.745d16497f811p-4, 0x1.3b13908e0591fp-4,
    -0x1.110e5f0a96030p-4, 0x1.e1966a83a6225p-5, -0x1.ac5fc5e570d2ap-5,
    0x1.746449e4b2910p-5,  -0x1.19fcff0a1b52ap-5, 0x1.0826c4073e87dp-6,
};

// ln 2 as a 32-bit head (k * kLn2Hi is exact for |k| < 2^21) and the double
// nearest the rest.
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kInvLn2 = 0x1.71547652b82fep+0; // RN(1 / ln 2)
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;  // RN(sqrt 2)
// pi, pi/2 and pi/4 as the nearest double and the double nearest the rest.
constexpr double kPiHi = 0x1.921fb54442d18p+1, kPiLo = 0x1.1a62633145c07p-53;
constexpr double kPi2Hi = 0x1.921fb54442d18p+0, kPi2Lo = 0x1.1a62633145c07p-54;
constexpr double kPi4Hi = 0x1.921fb54442d18p-1, kPi4Lo = 0x1.1a62633145c07p-55;
// exp's argument is clamped to [kExpMin, kExpMax]: e^-110 < 2^-150 rounds to
// 0 in float32, e^100 > FLT_MAX to +inf, and 2^k stays a normal double.
constexpr double kExpMin = -110.0, kExpMax = 100.0;

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

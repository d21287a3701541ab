//===- ElementaryTest.cpp - exp, log, tanh, atan2, pow against long double -===//
//
// The reference's elementary functions (Elementary.h) at the points where an
// algorithm goes wrong first: reduction boundaries, overflow and underflow
// thresholds, subnormals, arguments next to 1 and 0, the quadrants of atan2
// and C99's special values. The oracle is the x87 long double function,
// rounded once to float32; a result must be that value, or (the exact ties of
// x ** c) within half a ULP.
//
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace qopt::ref;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

/// The float32 nearest to the long double value t.
float nearest(long double t) { return static_cast<float>(t); }

/// Whether r is t's nearest float32, signed zeros and NaN included.
::testing::AssertionResult isNearest(float r, long double t, const char *what, float x, float y = 0) {
  float want = nearest(t);
  bool same = std::isnan(want) ? std::isnan(r) : (r == want && std::signbit(r) == std::signbit(want));
  if (same)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << "(" << std::hexfloat << x << ", " << y << ") = " << r
                                       << ", nearest to the exact value is " << want;
}

/// x, its neighbours one and two float32 steps either way.
std::vector<float> around(float x) {
  std::vector<float> out{x};
  float up = x, down = x;
  for (int i = 0; i < 2; ++i) {
    up = std::nextafter(up, kInf);
    down = std::nextafter(down, -kInf);
    out.push_back(up);
    out.push_back(down);
  }
  return out;
}

uint32_t bitsOfNaN(float x) { return floatBits(x); }

} // namespace

TEST(ElementaryTest, ExpAtItsThresholds) {
  // ln(FLT_MAX) = 88.7228..., the subnormal range from -87.33 down to
  // ln(2^-150) = -103.97, the reduction's half-way points (k + 1/2) ln 2,
  // and the neighbours of 0.
  std::vector<float> points;
  for (float c : {88.72283935546875f, 88.7228317f, -87.3365479f, -103.972084f, -103.278931f, -100.0f,
                  0.346573591f, -0.346573591f, 1.03972077f, 45.7477f, 1.0f, -1.0f, 0x1p-24f, -0x1p-25f,
                  0x1p-149f, 0.0f, -0.0f, 10.0f, -10.0f, 88.0f})
    for (float x : around(c))
      points.push_back(x);
  for (float x : points)
    EXPECT_TRUE(isNearest(expF32(x), std::exp(static_cast<long double>(x)), "exp", x));
  EXPECT_EQ(expF32(0.0f), 1.0f);
  EXPECT_EQ(expF32(-0.0f), 1.0f);
  EXPECT_EQ(expF32(kInf), kInf);
  EXPECT_EQ(floatBits(expF32(-kInf)), 0u); // +0
  EXPECT_EQ(expF32(89.0f), kInf);
  EXPECT_EQ(floatBits(expF32(-104.0f)), 0u);
  EXPECT_EQ(expF32(-103.9f), kDenormMin); // e^-103.9 is about 1.07 * 2^-150
  const float nan = bitsToFloat(0x7FC12345u);
  EXPECT_EQ(bitsOfNaN(expF32(nan)), 0x7FC12345u);
}

TEST(ElementaryTest, LogNearOneAndAtTheEnds) {
  std::vector<float> points;
  for (float c : {1.0f, 0.70710677f, 1.41421354f, 2.0f, 0.5f, kMax, 0x1p-126f, 0x1p-149f, 3.0e-45f,
                  2.718281828f, 10.0f, 0.1f, 1e30f, 1e-30f, 1.5f, 0.75f})
    for (float x : around(c))
      if (x > 0)
        points.push_back(x);
  for (float x : points)
    EXPECT_TRUE(isNearest(logF32(x), std::log(static_cast<long double>(x)), "log", x));
  EXPECT_EQ(floatBits(logF32(1.0f)), 0u); // +0
  EXPECT_EQ(logF32(0.0f), -kInf);
  EXPECT_EQ(logF32(-0.0f), -kInf);
  EXPECT_EQ(logF32(kInf), kInf);
  EXPECT_EQ(floatBits(logF32(-1.0f)), 0x7FC00000u);
  EXPECT_EQ(floatBits(logF32(-kInf)), 0x7FC00000u);
  EXPECT_EQ(floatBits(logF32(-kDenormMin)), 0x7FC00000u);
  EXPECT_EQ(bitsOfNaN(logF32(bitsToFloat(0xFFC00001u))), 0xFFC00001u);
}

TEST(ElementaryTest, TanhIsOddAndSaturates) {
  std::vector<float> points;
  for (float c : {0x1p-149f, 0x1p-30f, 1e-4f, 0.17328679f, 0.34657359f, 0.5f, 1.0f, 2.0f, 4.5f, 9.0f,
                  9.01091290f, 10.0f, 20.0f})
    for (float x : around(c))
      for (float s : {x, -x})
        points.push_back(s);
  for (float x : points)
    EXPECT_TRUE(isNearest(tanhF32(x), std::tanh(static_cast<long double>(x)), "tanh", x));
  EXPECT_EQ(floatBits(tanhF32(0.0f)), 0u);
  EXPECT_EQ(floatBits(tanhF32(-0.0f)), 0x80000000u);
  EXPECT_EQ(tanhF32(kInf), 1.0f);
  EXPECT_EQ(tanhF32(-kInf), -1.0f);
  EXPECT_EQ(tanhF32(1e30f), 1.0f);
  EXPECT_EQ(bitsOfNaN(tanhF32(bitsToFloat(0x7FA00000u))), 0x7FA00000u);
}

TEST(ElementaryTest, Atan2InEveryQuadrantAndAtTheReductionBoundary) {
  std::vector<std::pair<float, float>> pairs;
  // (y, x) near the breakpoint t = 5/12 and the swap t = 1, in all quadrants
  for (float t : {5.0f / 12.0f, 1.0f, 0.5f, 1e-3f, 0.999999f, 1e3f})
    for (float x : around(1.0f))
      for (float y : around(t * x))
        for (float sy : {1.0f, -1.0f})
          for (float sx : {1.0f, -1.0f})
            pairs.push_back({sy * y, sx * x});
  // far-apart magnitudes, subnormals, the range's ends
  for (auto [y, x] : std::vector<std::pair<float, float>>{{kDenormMin, kMax},
                                                          {kMax, kDenormMin},
                                                          {0x1p-126f, 3.0f},
                                                          {1e-30f, -1e30f},
                                                          {-kMax, -kMax},
                                                          {kDenormMin, -kDenormMin},
                                                          {3.0f, 4.0f},
                                                          {-7.5f, 0.25f}})
    pairs.push_back({y, x});
  for (auto [y, x] : pairs)
    EXPECT_TRUE(isNearest(atan2F32(y, x),
                          std::atan2(static_cast<long double>(y), static_cast<long double>(x)), "atan2",
                          y, x));

  const long double pi = 3.141592653589793238462643383279502884L;
  // C99 F.9.1.4
  EXPECT_EQ(floatBits(atan2F32(0.0f, 0.0f)), 0u);
  EXPECT_EQ(floatBits(atan2F32(-0.0f, 0.0f)), 0x80000000u);
  EXPECT_EQ(atan2F32(0.0f, -0.0f), nearest(pi));
  EXPECT_EQ(atan2F32(-0.0f, -0.0f), -nearest(pi));
  EXPECT_EQ(atan2F32(0.0f, -1.0f), nearest(pi));
  EXPECT_EQ(atan2F32(-0.0f, -1.0f), -nearest(pi));
  EXPECT_EQ(floatBits(atan2F32(-0.0f, 1.0f)), 0x80000000u);
  EXPECT_EQ(atan2F32(1.0f, 0.0f), nearest(pi / 2));
  EXPECT_EQ(atan2F32(1.0f, -0.0f), nearest(pi / 2));
  EXPECT_EQ(atan2F32(-1.0f, 0.0f), -nearest(pi / 2));
  EXPECT_EQ(atan2F32(1.0f, -kInf), nearest(pi));
  EXPECT_EQ(atan2F32(-1.0f, -kInf), -nearest(pi));
  EXPECT_EQ(floatBits(atan2F32(1.0f, kInf)), 0u);
  EXPECT_EQ(floatBits(atan2F32(-1.0f, kInf)), 0x80000000u);
  EXPECT_EQ(atan2F32(kInf, 5.0f), nearest(pi / 2));
  EXPECT_EQ(atan2F32(-kInf, -5.0f), -nearest(pi / 2));
  EXPECT_EQ(atan2F32(kInf, kInf), nearest(pi / 4));
  EXPECT_EQ(atan2F32(-kInf, kInf), -nearest(pi / 4));
  EXPECT_EQ(atan2F32(kInf, -kInf), nearest(3 * pi / 4));
  EXPECT_EQ(atan2F32(-kInf, -kInf), -nearest(3 * pi / 4));
  EXPECT_EQ(bitsOfNaN(atan2F32(bitsToFloat(0x7FC00002u), bitsToFloat(0x7FC00003u))), 0x7FC00002u);
  EXPECT_EQ(bitsOfNaN(atan2F32(1.0f, bitsToFloat(0x7FC00003u))), 0x7FC00003u);
}

TEST(ElementaryTest, PowOfAPerElementBase) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x7F7FFFFFu);
  const float exponents[] = {0.5f, -0.5f, 1.5f, 3.0f, -1.0f, 1.0f / 3.0f, 2.5f, -2.25f, 1e-3f, 1.0f, -3.0f, 0.75f};
  for (float c : exponents)
    for (int i = 0; i < 2000; ++i) {
      float x = bitsToFloat(bits(rng));
      for (float s : {x, -x})
        EXPECT_TRUE(isNearest(powF32(s, c),
                              std::pow(static_cast<long double>(s), static_cast<long double>(c)), "pow",
                              s, c));
    }
  // x ** 2 is one product; so x ** 2 of 4097 rounds its exact tie to even.
  EXPECT_EQ(powF32(4097.0f, 2.0f), 4097.0f * 4097.0f);
  EXPECT_EQ(powF32(4097.0f, 2.0f), 16785408.0f);
  // An exact tie of another integer power is within half a ULP either way:
  // 257^3 = 16974593 lies between 16974592 and 16974594.
  float tie = powF32(257.0f, 3.0f);
  EXPECT_TRUE(tie == 16974592.0f || tie == 16974594.0f) << tie;
  // Exact powers stay exact.
  EXPECT_EQ(powF32(3.0f, 3.0f), 27.0f);
  EXPECT_EQ(powF32(-2.0f, 3.0f), -8.0f);
  EXPECT_EQ(powF32(16.0f, 0.25f), 2.0f);
  EXPECT_EQ(powF32(0.25f, -0.5f), 2.0f);
  EXPECT_EQ(powF32(5.0f, 1.0f), 5.0f);

  // C99 F.9.4.4
  const float nan = bitsToFloat(0x7FC00000u);
  EXPECT_EQ(powF32(nan, 0.0f), 1.0f);
  EXPECT_EQ(powF32(1.0f, nan), 1.0f);
  EXPECT_EQ(powF32(1.0f, kInf), 1.0f);
  EXPECT_EQ(powF32(-1.0f, kInf), 1.0f);
  EXPECT_EQ(powF32(-1.0f, -kInf), 1.0f);
  EXPECT_EQ(powF32(-1.0f, 3.0f), -1.0f);
  EXPECT_EQ(powF32(-1.0f, 4.0f), 1.0f);
  EXPECT_TRUE(std::isnan(powF32(nan, 3.0f)));
  EXPECT_TRUE(std::isnan(powF32(2.0f, nan)));
  EXPECT_EQ(floatBits(powF32(-8.0f, 1.0f / 3.0f)), 0x7FC00000u);
  EXPECT_EQ(floatBits(powF32(-1.0f, 0.5f)), 0x7FC00000u);
  EXPECT_EQ(powF32(0.0f, -1.0f), kInf);
  EXPECT_EQ(powF32(-0.0f, -1.0f), -kInf);
  EXPECT_EQ(powF32(-0.0f, -2.5f), kInf);
  EXPECT_EQ(floatBits(powF32(-0.0f, 3.0f)), 0x80000000u);
  EXPECT_EQ(floatBits(powF32(-0.0f, 0.5f)), 0u);
  EXPECT_EQ(floatBits(powF32(0.0f, 3.0f)), 0u);
  EXPECT_EQ(powF32(0.5f, -kInf), kInf);
  EXPECT_EQ(floatBits(powF32(2.0f, -kInf)), 0u);
  EXPECT_EQ(floatBits(powF32(0.5f, kInf)), 0u);
  EXPECT_EQ(powF32(-2.0f, kInf), kInf);
  EXPECT_EQ(floatBits(powF32(-kInf, -3.0f)), 0x80000000u);
  EXPECT_EQ(floatBits(powF32(-kInf, -2.0f)), 0u);
  EXPECT_EQ(powF32(-kInf, 3.0f), -kInf);
  EXPECT_EQ(powF32(-kInf, 0.5f), kInf);
  EXPECT_EQ(floatBits(powF32(kInf, -0.5f)), 0u);
  EXPECT_EQ(powF32(kInf, 0.5f), kInf);
  // Overflow and underflow
  EXPECT_EQ(powF32(1e20f, 3.0f), kInf);
  EXPECT_EQ(powF32(-1e20f, 3.0f), -kInf);
  EXPECT_EQ(floatBits(powF32(1e-20f, 10.0f)), 0u);
  EXPECT_EQ(floatBits(powF32(-1e-20f, 3.0f)), 0x80000000u);
}

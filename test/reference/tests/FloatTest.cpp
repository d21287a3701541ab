//===- FloatTest.cpp - bf16 / f16 conversions against exact oracles --------===//
//
// The oracles compute in float64 (every float32/bf16/f16 value and their
// differences are exact there), independently of the bit tricks under test.
//
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>

using namespace qopt::ref;
using namespace qopt::ref::test;

namespace {

/// All float32 bit patterns to try: every exponent field, both signs, and low-bit patterns
/// around the rounding boundary of a 16-bit format that keeps `keep` mantissa bits.
std::vector<uint32_t> sweepPatterns(int dropBits, std::mt19937_64 &rng) {
  const uint32_t half = 1u << (dropBits - 1), mask = (1u << dropBits) - 1u;
  const uint32_t lows[] = {0, 1, half - 1, half, half + 1, mask, mask - 1, half >> 1, half | (half >> 1)};
  std::vector<uint32_t> out;
  std::uniform_int_distribution<uint32_t> any(0, 0xffffffffu);
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exp = 0; exp < 255; ++exp)
      for (int rep = 0; rep < 8; ++rep) {
        const uint32_t high = (rep < 2 ? (rep == 0 ? 0u : 0x7fffffu) : any(rng)) & 0x7fffffu & ~mask;
        for (uint32_t low : lows)
          out.push_back((sign << 31) | (exp << 23) | high | low);
        out.push_back((sign << 31) | (exp << 23) | (any(rng) & 0x7fffffu));
      }
  return out;
}

/// Round-to-nearest-even of x onto an ascending list of candidate values (doubles), with
/// `isEven(index)`; exact because all values are float32-representable.
template <class Even>
size_t nearestEven(double x, double lo, double hi, size_t loIdx, size_t hiIdx, Even isEven) {
  const double dl = x - lo, dh = hi - x;
  if (dl < dh)
    return loIdx;
  if (dh < dl)
    return hiIdx;
  return isEven(loIdx) ? loIdx : hiIdx;
}

} // namespace

TEST(FloatTest, Bf16RoundingIsNearestEven) {
  std::mt19937_64 rng(1);
  int64_t checked = 0;
  for (uint32_t u : sweepPatterns(16, rng)) {
    const float x = bitsToFloat(u);
    const uint32_t lo = u & 0xffff0000u;   // truncation towards zero: the bf16 below |x|
    const uint32_t hiBits = lo + 0x10000u; // the next bf16 up in magnitude (may be inf)
    const double xl = std::fabs(static_cast<double>(bitsToFloat(lo)));
    // The next value up, in exact arithmetic even when it is "2^128" (bf16 inf).
    const int field = static_cast<int>((lo >> 23) & 0xffu);
    const double ulp = std::ldexp(1.0, (field == 0 ? 1 : field) - 127 - 7);
    const double xh = xl + ulp;
    const size_t pick = nearestEven(std::fabs(static_cast<double>(x)), xl, xh, 0, 1,
                                    [&](size_t i) { return ((i == 0 ? lo : hiBits) & 0x10000u) == 0; });
    const uint16_t expect = static_cast<uint16_t>((pick == 0 ? lo : hiBits) >> 16);
    ASSERT_EQ(floatToBf16Bits(x), expect) << "x bits 0x" << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 40000);
  EXPECT_EQ(floatToBf16Bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(floatToBf16Bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(floatToBf16Bits(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(floatToBf16Bits(bitsToFloat(0xff800001u)), 0x7fc0); // signalling, negative NaN
  EXPECT_EQ(floatToBf16Bits(std::numeric_limits<float>::max()), 0x7f80); // overflows to inf
  for (uint32_t b = 0; b < 0x10000u; ++b)
    ASSERT_EQ(floatBits(bf16BitsToFloat(static_cast<uint16_t>(b))), b << 16);
}

TEST(FloatTest, F16RoundingIsNearestEven) {
  // All finite non-negative float16 values, by their definition (m * 2^-24 or (1024+m) * 2^(e-25)).
  std::vector<double> values;
  for (uint32_t b = 0; b < 0x7c00u; ++b) {
    const uint32_t e = b >> 10, m = b & 0x3ffu;
    values.push_back(e == 0 ? std::ldexp(static_cast<double>(m), -24)
                            : std::ldexp(static_cast<double>(1024 + m), static_cast<int>(e) - 25));
  }
  values.push_back(65536.0); // where inf sits for rounding purposes (its "mantissa" is even)
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const uint32_t e = (b >> 10) & 0x1fu;
    const float f = f16BitsToFloat(static_cast<uint16_t>(b));
    if (e == 0x1f) {
      if ((b & 0x3ffu) == 0) {
        ASSERT_TRUE(std::isinf(f) && std::signbit(f) == ((b & 0x8000u) != 0));
      } else {
        ASSERT_TRUE(std::isnan(f));
      }
      continue;
    }
    const double expect = (b & 0x8000u) ? -values[b & 0x7fffu] : values[b & 0x7fffu];
    ASSERT_EQ(static_cast<double>(f), expect) << "f16 bits 0x" << std::hex << b;
    if (expect == 0.0) {
      ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0);
    }
  }
  std::mt19937_64 rng(2);
  int64_t checked = 0;
  for (uint32_t u : sweepPatterns(13, rng)) {
    const float x = bitsToFloat(u);
    if (std::isnan(x))
      continue;
    const double a = std::fabs(static_cast<double>(x));
    uint16_t expect;
    if (a >= 65536.0) {
      expect = 0x7c00;
    } else {
      const size_t hi = static_cast<size_t>(std::lower_bound(values.begin(), values.end(), a) - values.begin());
      size_t pick;
      if (values[hi] == a)
        pick = hi;
      else
        pick = nearestEven(a, values[hi - 1], values[hi], hi - 1, hi, [](size_t i) { return (i & 1u) == 0; });
      expect = static_cast<uint16_t>(pick); // index == bit pattern; 0x7c00 == inf
    }
    if (u & 0x80000000u)
      expect |= 0x8000;
    ASSERT_EQ(floatToF16Bits(x), expect) << "x bits 0x" << std::hex << u << " = " << x;
    ++checked;
  }
  EXPECT_GT(checked, 40000);
  EXPECT_EQ(floatToF16Bits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16Bits(65519.99f), 0x7bff);
  EXPECT_EQ(floatToF16Bits(65520.0f), 0x7c00); // the tie goes to the even "mantissa": inf
  EXPECT_EQ(floatToF16Bits(std::ldexp(1.0f, -25)), 0x0000); // tie with 0
  EXPECT_EQ(floatToF16Bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToF16Bits(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16Bits(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
}

TEST(FloatTest, Pow2IsExactAndRangeChecked) {
  for (int k = -149; k <= 127; ++k)
    ASSERT_EQ(pow2f(k), std::ldexp(1.0f, k)) << k;
  EXPECT_THROW(pow2f(128), std::out_of_range);
  EXPECT_THROW(pow2f(-150), std::out_of_range);
}

TEST(FloatTest, RoundHalfEvenMatchesNearbyint) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::mt19937_64 rng(3);
  std::vector<float> xs = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f, 254.5f, 255.5f,
                           0.49999997f, -0.49999997f, 8388607.5f, 8388608.0f, 1e30f, -0.0f};
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (int i = 0; i < 200000; ++i)
    xs.push_back(i % 2 ? u(rng) : std::floor(u(rng)) + 0.5f);
  for (float x : xs)
    ASSERT_EQ(roundHalfEven(x), std::nearbyint(x)) << x;
}

//===- EccTest.cpp - Error-correction bits: invariants and measured rates ---===//
//
// numerics.md §3 / testing.md: every 16-bit mantissa over a spread of float32
// exponents, both formats, both rho widths. Expected values are mathematical
// invariants (exactness, bounds, special values), not outputs of the code.
//
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace qopt::ref;
using namespace qopt::ref::test;

namespace {

struct Format {
  DType param, rho;
  const char *name;
};
const Format kFormats[] = {{DType::BF16, DType::I8, "bf16+int8"},
                           {DType::BF16, DType::I16, "bf16+int16"},
                           {DType::F16, DType::I8, "f16+int8"},
                           {DType::F16, DType::I16, "f16+int16"}};

float to16(uint16_t b, DType p) { return p == DType::BF16 ? bf16BitsToFloat(b) : f16BitsToFloat(b); }
uint16_t rne16(float x, DType p) { return p == DType::BF16 ? floatToBf16Bits(x) : floatToF16Bits(x); }

double ulp32(float x) {
  const float a = std::fabs(x);
  return static_cast<double>(std::nextafter(a, std::numeric_limits<float>::infinity())) - a;
}

/// float32 inputs: for each float32 exponent field in [eLo, eHi], every mantissa of the 16-bit format,
/// a set of low-bit patterns (ties, quarter points, extremes, random), both signs.
std::vector<float> sweep(DType p, int eLo, int eHi, std::mt19937_64 &rng) {
  const int drop = p == DType::BF16 ? 16 : 13; // float32 mantissa bits below the 16-bit format's
  const uint32_t half = 1u << (drop - 1), mask = (1u << drop) - 1;
  std::vector<uint32_t> lows = {0, 1, 2, half >> 1, (half >> 1) - 1, (half >> 1) + 1, half - 1, half,
                                half + 1, half | (half >> 1), mask - 1, mask};
  for (int i = 0; i < 6; ++i)
    lows.push_back(static_cast<uint32_t>(rng()) & mask);
  std::vector<float> out;
  const uint32_t mants = 1u << (23 - drop);
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (int e = eLo; e <= eHi; ++e)
      for (uint32_t m = 0; m < mants; ++m)
        for (uint32_t low : lows)
          out.push_back(bitsToFloat((sign << 31) | (static_cast<uint32_t>(e) << 23) | (m << drop) | low));
  return out;
}

} // namespace

TEST(EccTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const Format &f : kFormats) {
    for (float x : {0.0f, -0.0f}) {
      const EccSplit s = eccEncode(x, f.param, f.rho);
      EXPECT_EQ(s.x16, std::signbit(x) ? 0x8000 : 0x0000) << f.name << ": the 16-bit value keeps the sign";
      EXPECT_EQ(s.rho, 0) << f.name;
      EXPECT_EQ(floatBits(eccDecode(s.x16, s.rho, f.param, f.rho)), 0u) << f.name << ": -0 reconstructs as +0";
    }
    for (float x : {inf, -inf}) {
      const EccSplit s = eccEncode(x, f.param, f.rho);
      EXPECT_EQ(eccDecode(s.x16, s.rho, f.param, f.rho), x) << f.name;
    }
    for (uint32_t nanBits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu}) {
      const EccSplit s = eccEncode(bitsToFloat(nanBits), f.param, f.rho);
      EXPECT_TRUE(std::isnan(eccDecode(s.x16, s.rho, f.param, f.rho))) << f.name;
    }
    // Beyond the 16-bit format's range: rounds to infinity, and stays there (inherent loss).
    for (float x : {std::numeric_limits<float>::max(), -3.0e38f, 1.0e5f}) {
      if (f.param == DType::BF16 && std::fabs(x) < 3.4e38f)
        continue;
      const EccSplit s = eccEncode(x, f.param, f.rho);
      const float d = eccDecode(s.x16, s.rho, f.param, f.rho);
      EXPECT_TRUE(std::isinf(d) && std::signbit(d) == std::signbit(x)) << f.name << " x=" << x;
    }
  }
  EXPECT_THROW(eccEncode(1.0f, DType::F32, DType::I8), std::invalid_argument);
  EXPECT_THROW(eccEncode(1.0f, DType::BF16, DType::U8), std::invalid_argument);
}

TEST(EccTest, EveryMantissaSweepInvariants) {
  std::mt19937_64 rng(30);
  for (const Format &f : kFormats) {
    // bf16: every float32 exponent field (subnormal float32 included); f16: float32 exponents
    // 2^-30 .. 2^20 (float16 subnormals, normals, and overflow to inf).
    const std::vector<float> xs = f.param == DType::BF16 ? sweep(f.param, 0, 254, rng) : sweep(f.param, 97, 147, rng);
    const double nmax = eccNmax(f.rho);
    int64_t finite = 0, exact = 0, overflow = 0, worseThan16 = 0, powerOfTwoRoundUps = 0, nearHalf = 0,
            subnormalCorrection = 0, otherInexact = 0;
    for (float x : xs) {
      const EccSplit s = eccEncode(x, f.param, f.rho);
      ASSERT_EQ(s.x16, rne16(x, f.param)) << f.name;
      ASSERT_LE(std::abs(s.rho), eccNmax(f.rho)) << f.name;
      const float d = eccDecode(s.x16, s.rho, f.param, f.rho);
      const float x16 = to16(s.x16, f.param);
      if (!std::isfinite(x16)) { // over the 16-bit range
        ++overflow;
        ASSERT_TRUE(std::isinf(d) && std::signbit(d) == std::signbit(x)) << f.name << " x=" << x;
        continue;
      }
      ++finite;
      if (x16 == x) { // exact stays exact
        ASSERT_EQ(s.rho, 0) << f.name << " x=" << x;
        ASSERT_EQ(floatBits(d), x == 0.0f ? 0u : floatBits(x)) << f.name << " x=" << x;
      }
      // |x_rec - x32| <= 2^l (0.5 / Nmax + 2^-22) + one float32 ULP of x32
      const int l = eccHalfUlpLog2(s.x16, f.param);
      const double err = std::fabs(static_cast<double>(d) - x);
      const double bound = std::ldexp(0.5 / nmax + std::ldexp(1.0, -22), l) + ulp32(x);
      ASSERT_LE(err, bound) << f.name << " x=" << x << " (bits 0x" << std::hex << floatBits(x) << ")";
      // never worse than the 16-bit value alone, up to one float32 ULP
      ASSERT_LE(err, std::fabs(static_cast<double>(x16) - x) + ulp32(x)) << f.name << " x=" << x;
      if (f.rho == DType::I16) {
        const EccSplit s8 = eccEncode(x, f.param, DType::I8);
        const double err8 = std::fabs(static_cast<double>(eccDecode(s8.x16, s8.rho, f.param, DType::I8)) - x);
        // 16-bit error <= 8-bit error, up to one float32 ULP, where the 16-bit value is normal
        // (int8 can land exactly where int16 is one ULP off, see below); strict violations are
        // counted. Below the 16-bit normal range int16's step can exceed float32's ULP.
        const bool normal16 = ((s.x16 >> eccMantissaBits(f.param)) & (f.param == DType::BF16 ? 0xffu : 0x1fu)) != 0;
        if (normal16) {
          ASSERT_LE(err, err8 + ulp32(x)) << f.name << " x=" << x;
        }
        if (err > err8)
          ++worseThan16;
      }
      if (d == x) {
        ++exact;
        continue;
      }
      // classify the inexact reconstructions
      const int mbits = eccMantissaBits(f.param);
      const bool mantissaZero = (s.x16 & ((1u << mbits) - 1)) == 0;
      const double en = std::ldexp(static_cast<double>(x) - x16, -l); // e / 2^l, exact
      if (mantissaZero && std::fabs(x) < std::fabs(x16))
        ++powerOfTwoRoundUps; // x rounded up to +-2^k: the gap below is half as wide (§3)
      else if (std::fabs(std::fabs(en) - 0.5) <= std::ldexp(1.0, -9))
        ++nearHalf; // |e| near a quarter ULP: en * Nmax or rho / Nmax rounds across k + 0.5
      else if (l < -126 && std::fabs(x) >= std::ldexp(1.0f, -125))
        ++subnormalCorrection; // the decoded correction is a float32 subnormal: rounded twice
      else
        ++otherInexact;
    }
    std::printf("[ measured ] %s every-mantissa sweep: %lld finite of %zu, exact %.5f%%; inexact: %lld at "
                "power-of-two round-ups, %lld with |e| near ULP/4, %lld with a subnormal correction, %lld other; %lld overflow to inf; "
                "16-bit error > 8-bit error: %lld\n",
                f.name, static_cast<long long>(finite), xs.size(), 100.0 * exact / finite,
                static_cast<long long>(powerOfTwoRoundUps), static_cast<long long>(nearHalf),
                static_cast<long long>(subnormalCorrection), static_cast<long long>(otherInexact), static_cast<long long>(overflow),
                static_cast<long long>(worseThan16));
    if (f.rho == DType::I16 && f.param == DType::BF16) {
      // int16 with bf16 is exact except in three classes: x rounded up to a power of two (§3), e
      // within 2^-9 half-ULPs of a quarter ULP (float32 rounds en * 32767 or rho / 32767 across
      // k + 0.5), and binades 2^-125 .. 2^-119 whose correction 2^l is below 2^-126 (a float32
      // subnormal, rounded to 2^-149 before the sum rounds again).
      EXPECT_EQ(otherInexact, 0) << f.name;
      EXPECT_EQ(worseThan16, 0) << f.name;
    }
    if (f.rho == DType::I16 && f.param == DType::F16) {
      EXPECT_LE(worseThan16, static_cast<int64_t>(finite / 1000)) << f.name;
    }
  }
}

TEST(EccTest, Seed004StratifiedSweepRates) {
  // Seed 004's protocol with this project's RNG: float32 exponent fields 1, 5, ..., 253, 2^16 random
  // mantissas each; int8 with random signs, int16 positive. Reports the exact-reconstruction fraction
  // and the mean relative error. numerics.md: int16 99.73% exact over all 2^32 floats (authors,
  // H200); the stratified sweep over normal exponents measures the same classes.
  std::mt19937_64 rng(11);
  const int perExp = 1 << 16;
  for (DType rhoType : {DType::I8, DType::I16}) {
    int64_t n = 0, exact = 0;
    double relErr = 0, relErrBf16 = 0;
    for (uint32_t e = 1; e < 255; e += 4)
      for (int i = 0; i < perExp; ++i) {
        const uint32_t sign = rhoType == DType::I8 ? static_cast<uint32_t>(rng() & 1u) << 31 : 0u;
        const float x = bitsToFloat(sign | (e << 23) | (static_cast<uint32_t>(rng()) & 0x7fffffu));
        const EccSplit s = eccEncode(x, DType::BF16, rhoType);
        const float d = eccDecode(s.x16, s.rho, DType::BF16, rhoType);
        ++n;
        if (d == x)
          ++exact;
        if (std::isfinite(d))
          relErr += std::fabs(static_cast<double>(d) - x) / std::fabs(x);
        const float b = bf16BitsToFloat(s.x16);
        if (std::isfinite(b))
          relErrBf16 += std::fabs(static_cast<double>(b) - x) / std::fabs(x);
      }
    const double frac = static_cast<double>(exact) / n;
    std::printf("[ measured ] stratified sweep bf16+%s: n=%lld exact %.6f mean rel err %.3e (bf16 alone %.3e)\n",
                dtypeName(rhoType), static_cast<long long>(n), frac, relErr / n, relErrBf16 / n);
    if (rhoType == DType::I16) {
      // Measured 0.99676 with these formulas (the inexact cases are the two classes of
      // EveryMantissaSweepInvariants); bound with a little room for the random draw.
      EXPECT_GE(frac, 0.9965);
      EXPECT_LT(frac, 0.9985);
    } else {
      EXPECT_LT(frac, 0.05) << "int8: exact hits are rare";
      EXPECT_LT(relErr / n, relErrBf16 / n / 50) << "int8 mean relative error far below bf16's";
    }
  }
}

TEST(EccTest, ReencodingAfterZeroUpdate) {
  // Decode then encode again (what a zero update does), starting from split values of float32 inputs.
  // Holds exactly: int16 keeps the float32 master (its rho may move by one, the value does not);
  // int8 keeps the master unless the decoded value is a 16-bit midpoint that rounds to a power of
  // two (rho = +-Nmax below 2^k: the new rho has only half the resolution there), and keeps the
  // stored bits unless |rho| == Nmax or the 16-bit value is a power of two.
  std::mt19937_64 rng(31);
  for (const Format &f : kFormats) {
    const std::vector<float> xs = f.param == DType::BF16 ? sweep(f.param, 60, 194, rng) : sweep(f.param, 112, 141, rng);
    const int mbits = eccMantissaBits(f.param);
    int64_t n = 0, bitsChanged = 0, masterChanged = 0;
    for (float x : xs) {
      const EccSplit s = eccEncode(x, f.param, f.rho);
      const float y = eccDecode(s.x16, s.rho, f.param, f.rho);
      if (!std::isfinite(y))
        continue;
      const EccSplit t = eccEncode(y, f.param, f.rho);
      const float y2 = eccDecode(t.x16, t.rho, f.param, f.rho);
      ++n;
      const bool powerOfTwo = (s.x16 & ((1u << mbits) - 1)) == 0, newPowerOfTwo = (t.x16 & ((1u << mbits) - 1)) == 0;
      if (floatBits(y2) != floatBits(y)) {
        ++masterChanged;
        ASSERT_EQ(f.rho, DType::I8) << f.name << " x=" << x;
        ASSERT_TRUE(std::abs(s.rho) == eccNmax(f.rho) && newPowerOfTwo) << f.name << " x=" << x;
      }
      if (t.x16 != s.x16 || t.rho != s.rho) {
        ++bitsChanged;
        if (f.rho == DType::I8) {
          ASSERT_TRUE(std::abs(s.rho) == eccNmax(f.rho) || powerOfTwo) << f.name << " x=" << x;
        }
      }
    }
    std::printf("[ measured ] %s re-encode of %lld split values: stored bits changed %lld, float32 master "
                "changed %lld\n",
                f.name, static_cast<long long>(n), static_cast<long long>(bitsChanged),
                static_cast<long long>(masterChanged));
  }
}

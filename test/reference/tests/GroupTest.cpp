//===- GroupTest.cpp - Group quantizer round trips and options -------------===//
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace qopt::ref;
using namespace qopt::ref::test;

namespace {

std::vector<GroupScheme> allSchemes() {
  std::vector<GroupScheme> out;
  for (auto [isSigned, comp] : {std::pair{true, Companding::Softsign}, std::pair{true, Companding::Linear},
                                std::pair{false, Companding::Sqrt}, std::pair{false, Companding::Linear}})
    for (ScaleDType sd : {ScaleDType::F16, ScaleDType::F32})
      for (Rounding r : {Rounding::HalfUp, Rounding::HalfEven})
        for (ScaleDivisor dv : {ScaleDivisor::Absmax, ScaleDivisor::StoredScale})
          for (Overflow o : {Overflow::Saturate, Overflow::Ieee}) {
            GroupScheme s;
            s.isSigned = isSigned;
            s.companding = comp;
            s.scaleDType = sd;
            s.rounding = r;
            s.divisor = dv;
            s.overflow = o;
            out.push_back(s);
          }
  return out;
}

struct Quantized {
  std::vector<uint8_t> codes;  // int8 or uint8 bytes
  std::vector<uint8_t> scales; // f16 bits or f32, raw
  std::vector<float> back;
  float scale(const GroupScheme &s, size_t g) const {
    if (s.scaleDType == ScaleDType::F16) {
      uint16_t h;
      std::memcpy(&h, scales.data() + 2 * g, 2);
      return f16BitsToFloat(h);
    }
    float f;
    std::memcpy(&f, scales.data() + 4 * g, 4);
    return f;
  }
};

Quantized roundTrip(const GroupScheme &s, const std::vector<float> &x,
                    NumericsCounts *counts = nullptr) {
  const int64_t n = static_cast<int64_t>(x.size());
  Quantized q;
  q.codes.assign(x.size(), 0);
  q.scales.assign(static_cast<size_t>(s.numGroups(n)) * (s.scaleDType == ScaleDType::F16 ? 2 : 4), 0);
  q.back.assign(x.size(), 0.0f);
  groupQuantize(s, x.data(), n, q.codes.data(), q.scales.data(), counts);
  groupDequantize(s, q.codes.data(), q.scales.data(), n, q.back.data());
  return q;
}

/// Input data suited to a scheme: randn for signed, randn^2 for unsigned.
std::vector<float> dataFor(const GroupScheme &s, std::mt19937_64 &rng, size_t n) {
  std::vector<float> x = randn(rng, n);
  if (!s.isSigned)
    for (float &v : x)
      v = v * v;
  return x;
}

} // namespace

TEST(GroupTest, ZerosRoundTripExactly) {
  for (const GroupScheme &s : allSchemes()) {
    const std::vector<float> x(100, 0.0f);
    const Quantized q = roundTrip(s, x);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(q.codes[i], 0) << s.str();
      ASSERT_EQ(floatBits(q.back[i]), 0u) << s.str(); // +0.0 exactly
    }
    // authors: s = max(0, 1e-12) stored; seed 003: stored 0 (and divided by 1)
    const float expectScale = s.divisor == ScaleDivisor::StoredScale ? 0.0f
                              : s.scaleDType == ScaleDType::F16    ? roundToF16(1e-12f)
                                                                   : 1e-12f;
    for (size_t g = 0; g < 4; ++g)
      ASSERT_EQ(q.scale(s, g), expectScale) << s.str();
  }
}

TEST(GroupTest, TailsTakeTheirOwnScaleAndStayAccurate) {
  // N = 33 .. 4097 with group 32: the last (partial) group's scale is the stored max over its own
  // valid elements; mean |error| / group absmax <= 1.6/255 (testing.md); the tail groups' mean
  // error is at most twice the interior groups'.
  std::mt19937_64 rng(20);
  for (GroupScheme s : {GroupScheme::momentum(), GroupScheme::variance(), GroupScheme::seed003(true, Companding::Linear),
                        GroupScheme::seed003(false, Companding::Linear)}) {
    const std::vector<float> all = dataFor(s, rng, 4097);
    double tailErr = 0, interiorErr = 0;
    int64_t tailCount = 0, interiorCount = 0;
    for (int64_t n = 33; n <= 4097; ++n) {
      const std::vector<float> x(all.begin(), all.begin() + n);
      const Quantized q = roundTrip(s, x);
      const int64_t groups = s.numGroups(n);
      ASSERT_EQ(groups, (n + 31) / 32);
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t b = g * 32, e = std::min(n, b + 32);
        float m = 0.0f;
        for (int64_t i = b; i < e; ++i)
          m = std::max(m, std::fabs(s.companding == Companding::Sqrt ? std::sqrt(x[i]) : x[i]));
        const float stored = s.divisor == ScaleDivisor::Absmax ? std::max(m, 1e-12f) : m;
        ASSERT_EQ(q.scale(s, static_cast<size_t>(g)), roundToF16(stored)) << s.str() << " n=" << n << " g=" << g;
        const double absmax = s.companding == Companding::Sqrt ? double(m) * m : m;
        double err = 0;
        for (int64_t i = b; i < e; ++i)
          err += std::fabs(double(q.back[i]) - x[i]) / absmax;
        const bool tail = (n % 32 != 0) && g == groups - 1;
        (tail ? tailErr : interiorErr) += err;
        (tail ? tailCount : interiorCount) += e - b;
      }
    }
    const double tailMean = tailErr / tailCount, interiorMean = interiorErr / interiorCount;
    std::printf("[ measured ] %s: mean |err|/absmax interior %.6f, tails %.6f (bound %.6f)\n", s.str().c_str(),
                interiorMean, tailMean, 1.6 / 255);
    EXPECT_LE(interiorMean, 1.6 / 255) << s.str();
    EXPECT_LE(tailMean, 1.6 / 255) << s.str();
    EXPECT_LE(tailMean, 2 * interiorMean) << s.str();
  }
}

TEST(GroupTest, PartialGroupWritesNothingPastN) {
  for (const GroupScheme &s : allSchemes()) {
    std::mt19937_64 rng(21);
    const std::vector<float> x = dataFor(s, rng, 45);
    std::vector<uint8_t> codes(64, 0xCD), scales(32, 0xCD);
    groupQuantize(s, x.data(), 45, codes.data(), scales.data());
    for (size_t i = 45; i < codes.size(); ++i)
      ASSERT_EQ(codes[i], 0xCD) << s.str();
    const size_t scaleBytes = 2 * (s.scaleDType == ScaleDType::F16 ? 2 : 4);
    for (size_t i = scaleBytes; i < scales.size(); ++i)
      ASSERT_EQ(scales[i], 0xCD) << s.str();
    std::vector<float> back(50, 9.0f);
    groupDequantize(s, codes.data(), scales.data(), 45, back.data());
    for (size_t i = 45; i < back.size(); ++i)
      ASSERT_EQ(back[i], 9.0f);
  }
}

TEST(GroupTest, RoundingOptionDecidesExactTies) {
  // Unsigned linear, divide by the float32 absmax 255: r = (255 * t) / 255 == t exactly, so t = k + 0.5
  // is an exact tie: half_up gives k + 1, half_even the even neighbour.
  GroupScheme s;
  s.isSigned = false;
  s.companding = Companding::Linear;
  s.divisor = ScaleDivisor::Absmax;
  std::vector<float> x = {255.0f, 2.5f, 3.5f, 0.5f, 1.5f, 100.5f, 7.25f, 0.0f};
  for (Rounding r : {Rounding::HalfUp, Rounding::HalfEven}) {
    s.rounding = r;
    std::vector<uint8_t> codes(x.size());
    uint16_t scale;
    groupQuantize(s, x.data(), static_cast<int64_t>(x.size()), codes.data(), &scale);
    const bool up = r == Rounding::HalfUp;
    EXPECT_EQ(codes[0], 255);
    EXPECT_EQ(codes[1], up ? 3 : 2);
    EXPECT_EQ(codes[2], 4);
    EXPECT_EQ(codes[3], up ? 1 : 0);
    EXPECT_EQ(codes[4], 2);
    EXPECT_EQ(codes[5], up ? 101 : 100);
    EXPECT_EQ(codes[6], 7);
    EXPECT_EQ(codes[7], 0);
  }
}

TEST(GroupTest, CodesStayInRange) {
  std::mt19937_64 rng(22);
  for (const GroupScheme &s : allSchemes()) {
    std::vector<float> x = randn(rng, 1000, 1e3f);
    x[5] = std::numeric_limits<float>::infinity();
    x[40] = -std::numeric_limits<float>::max();
    x[70] = std::nanf("");
    if (!s.isSigned)
      for (float &v : x)
        v = std::fabs(v);
    const Quantized q = roundTrip(s, x);
    for (uint8_t c : q.codes) {
      if (s.isSigned) {
        ASSERT_NE(static_cast<int8_t>(c), -128) << s.str();
      }
    }
    if (s.overflow == Overflow::Ieee) {
      // The NaN's group codes are 0 (reference choice), other groups unaffected.
      for (int i = 64; i < 96; ++i)
        ASSERT_EQ(q.codes[i], 0) << s.str();
    } else {
      // Saturated: the NaN's code is 0, and every stored value finite.
      ASSERT_EQ(q.codes[70], 0) << s.str();
      for (float v : q.back)
        ASSERT_TRUE(std::isfinite(v)) << s.str();
    }
  }
}

TEST(GroupTest, SaturatedScaleKeepsTheGroupFinite) {
  // docs/numerics.md "Overflow": one group of each kind, for every scheme under Saturate:
  // absmax 128000 (finite, above float16's 65504), a +inf, a NaN, and 65519 (rounds to 65504:
  // no saturation). Expected values computed here from the rule: the scale is the largest
  // finite value, a value beyond it takes the extreme code, a NaN code 0.
  const float inf = std::numeric_limits<float>::infinity();
  for (GroupScheme s : allSchemes()) {
    if (s.overflow != Overflow::Saturate)
      continue;
    const bool f16 = s.scaleDType == ScaleDType::F16;
    // ... value whose dequantized state is finite: with sqrt companding and an f32 scale the
    // largest float below 2^64, as its square (2^128 - 2^105 + 2^80) is below FLT_MAX.
    const bool sqrtF32 = !f16 && s.companding == Companding::Sqrt;
    const float largest =
        f16 ? 65504.0f : sqrtF32 ? std::nextafter(0x1p64f, 0.0f) : std::numeric_limits<float>::max();
    std::vector<float> x(4 * 32, 0.0f);
    for (int i = 0; i < 32; ++i) {
      const float sign = s.isSigned && i % 2 ? -1.0f : 1.0f;
      x[i] = sign * (i + 1) * 4000.0f;  // group 0: absmax 128000
      x[32 + i] = sign * 1000.0f;       // group 1: one +inf
      x[64 + i] = sign * 1000.0f;       // group 2: one NaN
      x[96 + i] = sign * 65519.0f;      // group 3: absmax 65519 (sqrt: 65519^2)
    }
    x[32 + 7] = inf;
    x[64 + 9] = std::nanf("");
    if (s.companding == Companding::Sqrt)
      for (int i = 0; i < 32; ++i) {
        x[i] *= x[i];           // sqrt companding: the scale is the root's absmax
        x[96 + i] *= x[96 + i];
      }
    NumericsCounts counts;
    const Quantized q = roundTrip(s, x, &counts);
    const int top = s.isSigned ? 127 : 255;
    auto code = [&](int i) {
      return s.isSigned ? int(static_cast<int8_t>(q.codes[size_t(i)])) : int(q.codes[size_t(i)]);
    };
    EXPECT_EQ(counts.nonfinite, 2) << s.str();
    if (f16) {
      EXPECT_EQ(counts.saturated, 1) << s.str();
      EXPECT_EQ(q.scale(s, 0), largest) << s.str();
      // Group 0's values beyond 65504 take the extreme code (x = 20000k for k >= 17).
      for (int i = 16; i < 32; ++i)
        EXPECT_EQ(std::abs(code(i)), top) << s.str() << " element " << i;
    } else {
      EXPECT_EQ(counts.saturated, 0) << s.str();
      EXPECT_EQ(q.scale(s, 0), 128000.0f) << s.str();
    }
    EXPECT_EQ(q.scale(s, 1), largest) << s.str();
    EXPECT_EQ(q.scale(s, 2), largest) << s.str();
    EXPECT_EQ(code(32 + 7), top) << s.str() << ": +inf takes the top code";
    EXPECT_EQ(code(64 + 9), 0) << s.str() << ": NaN takes code 0";
    // 65519 rounds to 65504 in float16 without saturating: the scale is the rounded absmax
    // (seed 003's divisor) or the absmax itself (the authors'), as under Ieee.
    GroupScheme ieee = s;
    ieee.overflow = Overflow::Ieee;
    const Quantized qi = roundTrip(ieee, x);
    for (int i = 96; i < 128; ++i)
      EXPECT_EQ(q.codes[size_t(i)], qi.codes[size_t(i)]) << s.str() << " element " << i;
    EXPECT_EQ(q.scale(s, 3), qi.scale(ieee, 3)) << s.str();
    for (float v : q.back)
      ASSERT_TRUE(std::isfinite(v)) << s.str();
  }
}

TEST(GroupTest, UnderflowingFloat16ScaleKeepsTheGroupNonzero) {
  // docs/numerics.md "Overflow": under Saturate a float16 scale whose positive absmax is at most
  // 2^-25 (it rounds to a zero float16) stores 2^-24 and divides by it; no kernel counts it (the
  // reference's own `underflowed` does). Per scheme four groups: absmax 1e-9 (far below), exactly
  // 2^-25 (the tie, which goes to 0), just above 2^-25 (rounds up to 2^-24 by itself: not
  // replaced), and all zeros (stays 0). Expected codes from the rule, computed here: r = range * companded(x / 2^-24).
  for (GroupScheme s : allSchemes()) {
    if (s.scaleDType != ScaleDType::F16 || s.overflow != Overflow::Saturate)
      continue;
    const bool sqrtC = s.companding == Companding::Sqrt;
    const float tie = 0x1p-25f, above = std::nextafter(0x1p-25f, 1.0f);
    std::vector<float> x(4 * 32, 0.0f);
    for (int i = 0; i < 32; ++i) {
      const float sign = s.isSigned && i % 2 ? -1.0f : 1.0f;
      const float frac = float(i + 1) / 32.0f;        // the group's last element is its absmax
      x[i] = sign * frac * 1e-9f;
      x[32 + i] = sign * frac * tie;
      x[64 + i] = sign * frac * above;
    }
    if (sqrtC)
      for (int i = 0; i < 96; ++i)
        x[i] *= x[i];                                   // the scale is the root's absmax
    for (Overflow policy : {Overflow::Saturate, Overflow::Ieee}) {
      GroupScheme p = s;
      p.overflow = policy;
      NumericsCounts counts;
      const Quantized q = roundTrip(p, x, &counts);
      const bool sat = policy == Overflow::Saturate;
      // The stored scales: 2^-24 where saturated; under Ieee FlashOptim's zero (the stored-scale
      // divisor then divides by 1, so its codes are 0 too). Just above the tie: 2^-24 either way.
      EXPECT_EQ(q.scale(p, 0), sat ? 0x1p-24f : 0.0f) << p.str();
      EXPECT_EQ(q.scale(p, 1), sat ? 0x1p-24f : 0.0f) << p.str();
      EXPECT_EQ(q.scale(p, 2), 0x1p-24f) << p.str();
      EXPECT_EQ(q.scale(p, 3), 0.0f) << p.str();
      EXPECT_EQ(counts.saturated, 0) << p.str();
      EXPECT_EQ(counts.nonfinite, 0) << p.str();
      EXPECT_EQ(counts.underflowed, sat ? 2 : 0) << p.str();
      if (!sat)
        continue;
      for (int g = 0; g < 2; ++g) {
        const float absmax = g == 0 ? 1e-9f : tie;
        for (int i = 0; i < 32; ++i) {
          const size_t at = size_t(32 * g + i);
          const float t = sqrtC ? std::sqrt(x[at]) : x[at];   // signed for signed schemes
          const float y = t / 0x1p-24f;
          const float z =
              s.companding == Companding::Softsign ? (2.0f * y) / (1.0f + std::fabs(y)) : y;
          const float r = s.isSigned                          ? 127.0f * z
                          : s.divisor == ScaleDivisor::Absmax ? (255.0f * t) / 0x1p-24f
                                                              : (t / 0x1p-24f) * 255.0f;
          const int code = int(s.rounding == Rounding::HalfUp ? std::floor(r + 0.5f)
                                                              : std::nearbyint(r));
          const int got = s.isSigned ? int(static_cast<int8_t>(q.codes[at])) : int(q.codes[at]);
          EXPECT_EQ(got, code) << p.str() << " group " << g << " element " << i;
        }
        // The group's largest element dequantizes to a nonzero value, below 2^-24.
        const float last = std::fabs(q.back[size_t(32 * g + 31)]);
        EXPECT_GT(last, 0.0f) << p.str() << " group " << g << " absmax " << absmax;
        EXPECT_LE(last, sqrtC ? 0x1p-48f : 0x1p-24f) << p.str();
      }
    }
  }
}

TEST(GroupTest, Float16ScaleRangeBehaviour) {
  // numerics.md §2: a float16 scale cannot hold a group absmax above 65504 or below ~6e-8. Under
  // Overflow::Ieee the reference computes the formulas as written (an infinite scale, FlashOptim's
  // behaviour); this test pins down what they give (Saturate: SaturatedScaleKeepsTheGroupFinite).
  std::vector<float> big(32), small(32);
  std::mt19937_64 rng(23);
  for (int i = 0; i < 32; ++i) {
    big[i] = (i + 1) * 4000.0f;      // absmax 128000 > 65504
    small[i] = (i + 1) * 1e-9f;      // absmax 3.2e-8 < float16's smallest normal 6.1e-5
  }
  for (ScaleDivisor dv : {ScaleDivisor::Absmax, ScaleDivisor::StoredScale}) {
    GroupScheme f16 = GroupScheme::momentum();
    f16.divisor = dv;
    f16.overflow = Overflow::Ieee;
    GroupScheme f32 = f16;
    f32.scaleDType = ScaleDType::F32;
    const Quantized qb = roundTrip(f16, big), qs = roundTrip(f16, small);
    EXPECT_TRUE(std::isinf(qb.scale(f16, 0))) << "absmax 128000 stored as float16 is inf";
    EXPECT_FALSE(std::isfinite(qb.back[31])) << "and dequantizes to a non-finite value";
    EXPECT_EQ(qs.scale(f16, 0), roundToF16(3.2e-8f)); // subnormal float16: 2 significant bits
    const Quantized qb32 = roundTrip(f32, big), qs32 = roundTrip(f32, small);
    for (int i = 0; i < 32; ++i) {
      EXPECT_NEAR(qb32.back[i], big[i], 128000.0 / 100);
      EXPECT_NEAR(qs32.back[i], small[i], 3.2e-8 / 100);
    }
  }
}

TEST(GroupTest, InvalidSchemesAreRejected) {
  GroupScheme s = GroupScheme::momentum();
  s.companding = Companding::Sqrt;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = GroupScheme::variance();
  s.companding = Companding::Softsign;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = GroupScheme::variance();
  s.group = 0;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  EXPECT_EQ(GroupScheme::momentum().str(), "group<i8, 32, softsign, scale=f16, round=half_up, divide=absmax>");
  EXPECT_EQ(GroupScheme::seed003(false, Companding::Sqrt).str(),
            "group<u8, 32, sqrt, scale=f16, round=half_even, divide=stored_scale, overflow=ieee>");
}

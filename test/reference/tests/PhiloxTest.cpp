//===- PhiloxTest.cpp - Philox4x32-10 and stochastic bf16 rounding --------===//
#include "qopt/reference/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace qopt::ref;

namespace {

// Random123's kat_vectors, the three "philox4x32 10" lines: counter, key, expected output.
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    std::array<uint32_t, 4> ctr;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> out;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat &k : kats)
    EXPECT_EQ(philox4x32(k.ctr, k.key), k.out);
}

TEST(Philox, ElementBitsComeFromTheirBlocksWords) {
  // Element 8b + 2w + h: word w of block b's output, its low half for h = 0.
  const uint32_t seed = 12345, step = 7;
  const uint64_t block = (uint64_t(3) << 32) + 5;
  const auto out = philox4x32({5u, 3u, step, 0u}, {seed, 0u});
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(stochasticBits(seed, step, block * 8 + 2 * w), out[w] & 0xFFFF);
    EXPECT_EQ(stochasticBits(seed, step, block * 8 + 2 * w + 1), out[w] >> 16);
  }
}

float bf16(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(StochasticRounding, RepresentableValuesAndSpecialsAreKept) {
  for (uint64_t i = 0; i < 4096; ++i) {
    EXPECT_EQ(stochasticRoundBF16(1.5f, 1, 1, i), 0x3FC0);
    EXPECT_EQ(stochasticRoundBF16(-0.0f, 1, 1, i), 0x8000);
    EXPECT_EQ(stochasticRoundBF16(INFINITY, 1, 1, i), 0x7F80);
    EXPECT_EQ(stochasticRoundBF16(-INFINITY, 1, 1, i), 0xFF80);
    EXPECT_EQ(stochasticRoundBF16(NAN, 1, 1, i), 0x7FC0);
  }
}

TEST(StochasticRounding, IsUnbiasedAndTakesOnlyTheTwoNeighbours) {
  // x = 1 + 0.3 ulp (bf16 ulp at 1 is 2^-7): 1 with probability 0.7, 1 + 2^-7 with 0.3.
  for (float sign : {1.0f, -1.0f}) {
    const float x = sign * (1.0f + 0.3f * 0x1p-7f);
    double sum = 0;
    int up = 0;
    const int n = 1 << 16;
    for (int i = 0; i < n; ++i) {
      const float r = bf16(stochasticRoundBF16(x, 42, 3, uint64_t(i)));
      ASSERT_TRUE(r == sign * 1.0f || r == sign * (1.0f + 0x1p-7f)) << r;
      up += r != sign * 1.0f;
      sum += r;
    }
    // Binomial(65536, 0.3): standard deviation 117; 6 of them.
    EXPECT_NEAR(up, 0.3 * n, 700);
    EXPECT_NEAR(sum / n, x, 6 * 117.0 / n * 0x1p-7);
  }
}

TEST(StochasticRounding, DependsOnSeedStepAndIndex) {
  const float x = 1.0f + 0.5f * 0x1p-7f;
  int differs[3] = {0, 0, 0};
  for (uint64_t i = 0; i < 1024; ++i) {
    const uint16_t base = stochasticRoundBF16(x, 1, 1, i);
    differs[0] += base != stochasticRoundBF16(x, 2, 1, i);
    differs[1] += base != stochasticRoundBF16(x, 1, 2, i);
    differs[2] += base != stochasticRoundBF16(x, 1, 1, i + 4096);
  }
  // Independent fair coins differ half the time: 512 +- 16.
  for (int d : differs)
    EXPECT_NEAR(d, 512, 100);
}

} // namespace

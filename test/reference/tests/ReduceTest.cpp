//===- ReduceTest.cpp - The reductions' order, on hand-made inputs ---------===//
//
// Each expectation is worked out by hand from docs/numerics.md §7 (float64
// terms, a pairwise tree per 2048-element chunk, a pairwise tree over the chunks).
//
//===----------------------------------------------------------------------===//
#include "qopt/reference/Reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

using qopt::ref::reduce;
using qopt::ref::Reduction;

uint32_t bitsOf(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(Reduce, SmallValues) {
  EXPECT_EQ(reduce(Reduction::Sum, {1.0f, 2.0f, 3.5f}), 6.5f);
  EXPECT_EQ(reduce(Reduction::Mean, {1.0f, 2.0f, 3.0f, 6.0f}), 3.0f);
  EXPECT_EQ(reduce(Reduction::Norm, {3.0f, -4.0f}), 5.0f);
  // sqrt((9 + 16) / 2) = sqrt(12.5) in float64, rounded once.
  EXPECT_EQ(reduce(Reduction::Rms, {3.0f, 4.0f}), static_cast<float>(std::sqrt(12.5)));
  EXPECT_EQ(reduce(Reduction::Max, {-3.0f, -1.0f, -2.0f}), -1.0f);
}

TEST(Reduce, PairwiseInsideAChunk) {
  // (2^60 + 1) + (-2^60 + 1): each pair rounds its 1 away, so the tree gives 0; a sequential
  // sum would give 1.
  const float big = std::ldexp(1.0f, 60);
  EXPECT_EQ(reduce(Reduction::Sum, {big, 1.0f, -big, 1.0f}), 0.0f);
}

TEST(Reduce, ChunksOf2048ThenATreeOverThem) {
  // 2^60 at 0, 1 at 1024, -2^60 at 2048, 1 at 3072. Chunks of 2048: each chunk's tree loses its
  // 1 (2^60 + 1 = 2^60, -2^60 + 1 = -2^60 in float64), the tree over the two gives 0. Chunks of 1024 folded
  // in order would give ((2^60 + 1) + -2^60) + 1 = 1.
  const float big = std::ldexp(1.0f, 60);
  std::vector<float> x(3073, 0.0f);
  x[0] = big;
  x[1024] = 1.0f;
  x[2048] = -big;
  x[3072] = 1.0f;
  EXPECT_EQ(reduce(Reduction::Sum, x), 0.0f);
  // Chunk partials 2^60, 1, -2^60, 1: the tree over them gives (2^60 + 1) + (-2^60 + 1) =
  // 2^60 + -2^60 = 0; folded left in order they would give ((2^60 + 1) + -2^60) + 1 = 1.
  std::vector<float> y(3 * 2048 + 1, 0.0f);
  y[0] = big;
  y[2048] = 1.0f;
  y[2 * 2048] = -big;
  y[3 * 2048] = 1.0f;
  EXPECT_EQ(reduce(Reduction::Sum, y), 0.0f);
  // Six partials 2^60, 1, 1, 1, -2^60, 1, padded to eight with -0: ((2^60 + 1) + (1 + 1)) +
  // ((-2^60 + 1) + (-0 + -0)) = 2^60 + -2^60 = 0; folded left they would give 1.
  std::vector<float> z(5 * 2048 + 1, 0.0f);
  z[0] = big;
  z[2048] = 1.0f;
  z[2 * 2048] = 1.0f;
  z[3 * 2048] = 1.0f;
  z[4 * 2048] = -big;
  z[5 * 2048] = 1.0f;
  EXPECT_EQ(reduce(Reduction::Sum, z), 0.0f);
}

TEST(Reduce, SignedZerosAndNaN) {
  // -0 terms and -0 padding: the sum of -0s is -0; max puts +0 above -0.
  EXPECT_EQ(bitsOf(reduce(Reduction::Sum, {-0.0f, -0.0f, -0.0f})), 0x80000000u);
  EXPECT_EQ(bitsOf(reduce(Reduction::Max, {-0.0f, 0.0f, -0.0f})), 0x00000000u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint32_t payload = 0xffc01234u;
  float odd;
  std::memcpy(&odd, &payload, sizeof odd);
  EXPECT_EQ(bitsOf(reduce(Reduction::Sum, {1.0f, odd, 2.0f})), 0x7fc00000u);
  EXPECT_EQ(bitsOf(reduce(Reduction::Max, {1.0f, nan})), 0x7fc00000u);
  EXPECT_EQ(bitsOf(reduce(Reduction::Norm, {odd})), 0x7fc00000u);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(reduce(Reduction::Max, {-inf, -inf}), -inf);
  EXPECT_THROW(reduce(Reduction::Sum, {}), std::invalid_argument);
}

} // namespace

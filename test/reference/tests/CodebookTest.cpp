//===- CodebookTest.cpp - Seed 000's codebook quantizer --------------------===//
//
// Expected codes come from a brute-force nearest-entry search in float64, not
// from the midpoint search under test.
//
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace qopt::ref;
using namespace qopt::ref::test;

namespace {

/// argmin_j |c - q[j]| in float64, the lowest j on a tie.
int bruteNearest(float c, const std::vector<float> &q) {
  int best = 0;
  double bestD = std::fabs(static_cast<double>(c) - q[0]);
  for (int j = 1; j < static_cast<int>(q.size()); ++j) {
    const double d = std::fabs(static_cast<double>(c) - q[j]);
    if (d < bestD) {
      bestD = d;
      best = j;
    }
  }
  return best;
}

/// 256 distinct ascending multiples of 2^-20 in [-1, 1] (or [0, 1]): sums of two entries need at
/// most 22 bits, so every float32 midpoint is the exact midpoint.
std::vector<float> exactTable(std::mt19937_64 &rng, bool isSigned) {
  std::uniform_int_distribution<int> d(isSigned ? -(1 << 20) : 0, 1 << 20);
  std::set<int> s;
  while (s.size() < 256)
    s.insert(d(rng));
  std::vector<float> q;
  for (int v : s)
    q.push_back(std::ldexp(static_cast<float>(v), -20));
  return q;
}

} // namespace

TEST(CodebookTest, MidpointSearchIsBruteForceNearestOnExactTables) {
  std::mt19937_64 rng(10);
  int64_t ties = 0, checked = 0;
  for (int table = 0; table < 20; ++table) {
    const bool isSigned = table % 2 == 0;
    const std::vector<float> q = exactTable(rng, isSigned);
    // One block of 2048 per table: element 0 is 1.0 so that absmax == 1 and c == x exactly.
    std::vector<float> x(2048);
    x[0] = 1.0f;
    std::uniform_real_distribution<float> u(isSigned ? -1.0f : 0.0f, 1.0f);
    for (size_t i = 1; i < x.size(); ++i) {
      switch (i % 4) {
      case 0: x[i] = u(rng); break;
      case 1: { // exactly on a midpoint: the lower code must win
        const size_t k = rng() % 255;
        x[i] = (q[k] + q[k + 1]) * 0.5f;
        break;
      }
      case 2: x[i] = q[rng() % 256]; break; // exactly a table entry
      default: x[i] = std::ldexp(u(rng), -static_cast<int>(rng() % 40)); break; // small values
      }
    }
    std::vector<uint8_t> codes(x.size());
    float absmax = -1.0f;
    codebookQuantize(x.data(), static_cast<int64_t>(x.size()), 2048, q.data(), codes.data(), &absmax);
    ASSERT_EQ(absmax, 1.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      const int expect = bruteNearest(x[i], q);
      ASSERT_EQ(codes[i], expect) << "table " << table << " x=" << x[i];
      const int other = expect + 1;
      if (other < 256 && std::fabs(static_cast<double>(x[i]) - q[expect]) ==
                             std::fabs(static_cast<double>(x[i]) - q[other]))
        ++ties;
      ++checked;
    }
  }
  EXPECT_GT(ties, 5000) << "the sweep must contain exact ties";
  EXPECT_EQ(checked, 20 * 2048);
}

TEST(CodebookTest, GeneralTablesDifferFromExactNearestOnlyBetweenRoundedAndExactMidpoint) {
  // With arbitrary float32 tables the float32 midpoint can be off by half an ULP; seed 000 uses the
  // float32 midpoint, so a value between the two midpoints gets the "other" code. Every mismatch
  // with the exact nearest entry must be of that kind.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int64_t mismatches = 0, checked = 0;
  for (int table = 0; table < 10; ++table) {
    std::set<float> s;
    while (s.size() < 256)
      s.insert(std::ldexp(u(rng), -static_cast<int>(rng() % 12)));
    const std::vector<float> q(s.begin(), s.end());
    const auto mid = codebookMidpoints(q.data());
    for (int i = 0; i < 20000; ++i) {
      float c;
      if (i % 2) {
        c = std::ldexp(u(rng), -static_cast<int>(rng() % 12));
      } else { // within a few ULPs of an exact midpoint
        const size_t k = rng() % 255;
        const double exactMid = (static_cast<double>(q[k]) + q[k + 1]) / 2;
        c = std::nextafter(static_cast<float>(exactMid), (rng() % 2) ? 2.0f : -2.0f);
      }
      const int got = codebookCode(c, mid);
      const int expect = bruteNearest(c, q);
      ++checked;
      if (got == expect)
        continue;
      ++mismatches;
      ASSERT_EQ(std::abs(got - expect), 1) << "c=" << c;
      const int k = std::min(got, expect); // the midpoint between entries k and k+1
      const double exactMid = (static_cast<double>(q[k]) + q[k + 1]) / 2;
      const double lo = std::min<double>(exactMid, mid[k]), hi = std::max<double>(exactMid, mid[k]);
      ASSERT_TRUE(c >= lo && c <= hi) << "c=" << c << " exact mid " << exactMid << " f32 mid " << mid[k];
    }
  }
  EXPECT_EQ(checked, 200000);
  RecordProperty("mismatches_from_float32_midpoints", static_cast<int>(mismatches));
  std::printf("[ measured ] general tables: %lld of %lld codes differ from the exact nearest entry, "
              "all between the float32 and the exact midpoint\n",
              static_cast<long long>(mismatches), static_cast<long long>(checked));
}

TEST(CodebookTest, PartialLastBlockUsesValidElementsOnlyAndWritesNothingPastN) {
  const std::vector<float> qmap = createDynamicMap(true);
  for (int64_t n : {1, 255, 256, 257, 511, 2049, 4097}) {
    const int64_t block = 256;
    std::mt19937_64 rng(static_cast<uint64_t>(n));
    std::vector<float> x = randn(rng, static_cast<size_t>(n));
    const int64_t nb = (n + block - 1) / block;
    std::vector<uint8_t> codes(static_cast<size_t>(n) + 64, 0xAB);
    std::vector<float> absmax(static_cast<size_t>(nb) + 4, -7.0f);
    codebookQuantize(x.data(), n, block, qmap.data(), codes.data(), absmax.data());
    for (size_t i = static_cast<size_t>(n); i < codes.size(); ++i)
      ASSERT_EQ(codes[i], 0xAB);
    for (size_t b = static_cast<size_t>(nb); b < absmax.size(); ++b)
      ASSERT_EQ(absmax[b], -7.0f);
    for (int64_t b = 0; b < nb; ++b) {
      float m = 0.0f;
      for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i)
        m = std::max(m, std::fabs(x[static_cast<size_t>(i)]));
      ASSERT_EQ(absmax[static_cast<size_t>(b)], m);
    }
    std::vector<float> back(static_cast<size_t>(n) + 8, 42.0f);
    codebookDequantize(codes.data(), absmax.data(), n, block, qmap.data(), back.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(back[static_cast<size_t>(i)], qmap[codes[static_cast<size_t>(i)]] * absmax[static_cast<size_t>(i / block)]);
    ASSERT_EQ(back[static_cast<size_t>(n)], 42.0f);
  }
}

TEST(CodebookTest, ZeroBlockGivesZeroCodeAndZeroAbsmax) {
  for (bool isSigned : {true, false}) {
    const std::vector<float> qmap = createDynamicMap(isSigned);
    const int zeroIndex = static_cast<int>(std::find(qmap.begin(), qmap.end(), 0.0f) - qmap.begin());
    std::vector<float> x(300, 0.0f);
    std::vector<uint8_t> codes(300);
    std::vector<float> absmax(2);
    codebookQuantize(x.data(), 300, 256, qmap.data(), codes.data(), absmax.data());
    EXPECT_EQ(absmax[0], 0.0f);
    for (uint8_t c : codes)
      ASSERT_EQ(qmap[c], 0.0f) << "code " << int(c) << " zero entry at " << zeroIndex;
    std::vector<float> back(300, 1.0f);
    codebookDequantize(codes.data(), absmax.data(), 300, 256, qmap.data(), back.data());
    for (float b : back)
      ASSERT_EQ(floatBits(b), 0u);
  }
}

TEST(CodebookTest, NanInBlockGivesNanAbsmaxAndTopCode) {
  const std::vector<float> qmap = createDynamicMap(true);
  std::vector<float> x = {0.5f, std::nanf(""), -0.25f, 1.0f};
  std::vector<uint8_t> codes(4);
  float absmax[2];
  codebookQuantize(x.data(), 4, 2, qmap.data(), codes.data(), absmax);
  EXPECT_TRUE(std::isnan(absmax[0])); // torch.amax propagates NaN
  EXPECT_EQ(codes[0], 255);           // x / NaN = NaN; bucketize(NaN) = 255
  EXPECT_EQ(codes[1], 255);
  EXPECT_EQ(absmax[1], 1.0f);
  EXPECT_EQ(qmap[codes[3]], 1.0f);
}

TEST(CodebookTest, SaturatedBlockRestartsOnNanAndSaturatesOnInfinity) {
  // docs/numerics.md "Overflow": a NaN absmax is stored as 0 (the block dequantizes to zeros), an
  // infinite one as FLT_MAX (+inf takes the top code); each such block is counted; a finite block
  // is as under Ieee.
  const std::vector<float> qmap = createDynamicMap(true);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.5f, std::nanf(""), -0.25f, inf, 3.0f, -1.5f};
  std::vector<uint8_t> codes(6), ieeeCodes(6);
  float absmax[3], ieeeAbsmax[3];
  NumericsCounts counts;
  codebookQuantize(x.data(), 6, 2, qmap.data(), codes.data(), absmax, Overflow::Saturate, &counts);
  codebookQuantize(x.data(), 6, 2, qmap.data(), ieeeCodes.data(), ieeeAbsmax);
  EXPECT_EQ(counts.nonfinite, 2);
  EXPECT_EQ(counts.saturated, 0);
  EXPECT_EQ(floatBits(absmax[0]), 0u);
  EXPECT_EQ(absmax[1], std::numeric_limits<float>::max());
  EXPECT_EQ(codes[3], 255); // inf / FLT_MAX = inf
  EXPECT_EQ(qmap[codes[2]], 0.0f); // -0.25 / FLT_MAX rounds to the code of 0
  EXPECT_EQ(absmax[2], 3.0f);
  EXPECT_EQ(absmax[2], ieeeAbsmax[2]);
  EXPECT_EQ(codes[4], ieeeCodes[4]);
  EXPECT_EQ(codes[5], ieeeCodes[5]);
  std::vector<float> back(6);
  codebookDequantize(codes.data(), absmax, 6, 2, qmap.data(), back.data());
  for (float v : back)
    EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_EQ(back[1], 0.0f);
}

TEST(CodebookTest, DynamicMapStructure) {
  // bitsandbytes' documented structure, checked without the generator's own arithmetic:
  // signed: 127 negative values, exact 0, 127 positive values ending at +1.0, no -1.0;
  // unsigned: 0 then 255 positive values ending at 1.0; strictly ascending; each level's values
  // within one float32 ULP of the float64 evaluation of the same definition.
  for (bool isSigned : {true, false}) {
    const std::vector<float> q = createDynamicMap(isSigned);
    ASSERT_EQ(q.size(), 256u);
    for (size_t i = 1; i < q.size(); ++i)
      ASSERT_LT(q[i - 1], q[i]) << i;
    EXPECT_EQ(q.back(), 1.0f);
    if (isSigned) {
      EXPECT_EQ(q[127], 0.0f);
      EXPECT_GT(q[0], -1.0f);
      EXPECT_EQ(std::count_if(q.begin(), q.end(), [](float v) { return v < 0; }), 127);
    } else {
      EXPECT_EQ(q[0], 0.0f);
    }
    std::vector<double> ideal{0.0, 1.0};
    for (int level = 0; level < 7; ++level) {
      const int items = 1 << (level + (isSigned ? 0 : 1));
      for (int k = 0; k < items; ++k) {
        const double a = 0.1 + 0.9 * k / items, b = 0.1 + 0.9 * (k + 1) / items;
        const double v = std::pow(10.0, level - 6) * (a + b) / 2;
        ideal.push_back(v);
        if (isSigned)
          ideal.push_back(-v);
      }
    }
    std::sort(ideal.begin(), ideal.end());
    ASSERT_EQ(ideal.size(), 256u);
    for (size_t i = 0; i < 256; ++i) {
      const float f = static_cast<float>(ideal[i]);
      const float ulp = std::nextafter(std::fabs(f), 2.0f) - std::fabs(f);
      ASSERT_LE(std::fabs(q[i] - f), 2 * ulp) << "entry " << i << " " << q[i] << " vs " << ideal[i];
    }
  }
}

TEST(CodebookTest, DynamicMapMatchesGoldenTable) {
  // The tables made by PyTorch (float32 linspace) on the golden machine, value by value.
  const qopt::st::File f = qopt::st::File::load(goldenPath("dynamic_map.safetensors"));
  const std::string cap = f.meta("torch_cpu_capability");
  // torch 2.11 (the golden machine, AVX512): every element by the fused scalar formula. (Debian's
  // torch 1.13 on AVX2 needs LinspaceModel::torch113Avx2(); the table then differs in a few ULPs.)
  const LinspaceModel model = LinspaceModel::torch211();
  for (int n : {2, 3, 5, 9, 17, 33, 65, 129, 257}) {
    const std::vector<float> want = f.vec<float>("linspace/" + std::to_string(n), "F32");
    const std::vector<float> got = torchLinspace(0.1f, 1.0f, n, model);
    EXPECT_EQ(countBitDiffs(got, want), 0) << "linspace(0.1, 1, " << n << ") under CPU capability " << cap;
  }
  for (bool isSigned : {true, false}) {
    const std::vector<float> want = f.vec<float>(isSigned ? "signed" : "unsigned", "F32");
    const std::vector<float> got = createDynamicMap(isSigned, 7, 8, model);
    int64_t diffs = 0;
    for (size_t i = 0; i < 256; ++i)
      if (floatBits(got[i]) != floatBits(want[i])) {
        ++diffs;
        ADD_FAILURE() << (isSigned ? "signed" : "unsigned") << " entry " << i << ": " << got[i]
                      << " vs golden " << want[i];
      }
    EXPECT_EQ(diffs, 0);
  }
}

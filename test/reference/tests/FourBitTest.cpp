//===- FourBitTest.cpp - 4-bit group codes and torchao's 4-bit tables -----===//
#include "qopt/reference/Group.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace qopt::ref;

namespace {

TEST(FourBitTable, DynamicIsTorchaosSignedMap) {
  // create_dynamic_map(True, 3, 4): the means 0.55; 0.325, 0.775; 0.2125, 0.4375, 0.6625, 0.8875
  // of linspace(0.1, 1, 2), (.., 3), (.., 5) times 0.01, 0.1 and 1, both signs, 0 and 1.
  const float want[16] = {-0.8875f, -0.6625f, -0.4375f, -0.2125f, -0.0775f, -0.0325f,
                          -0.0055f, 0.0f,     0.0055f,  0.0325f,  0.0775f,  0.2125f,
                          0.4375f,  0.6625f,  0.8875f,  1.0f};
  const std::vector<float> got = fourBitTable(Companding::Dynamic);
  ASSERT_EQ(got.size(), 16u);
  for (int k = 0; k < 16; ++k)
    EXPECT_EQ(got[k], want[k]) << k;
}

TEST(FourBitTable, NonZeroIsLinspaceWithoutZero) {
  const std::vector<float> got = fourBitTable(Companding::NonZero);
  ASSERT_EQ(got.size(), 16u);
  for (int k = 0; k < 16; ++k)
    EXPECT_EQ(got[k], (k + 1) / 16.0f);
}

GroupScheme fourBit(bool isSigned, Companding c, int64_t group) {
  GroupScheme s;
  s.isSigned = isSigned;
  s.bits = 4;
  s.group = group;
  s.companding = c;
  s.scaleDType = ScaleDType::F32;
  return s;
}

TEST(FourBitGroup, PacksTheEvenElementInTheLowNibble) {
  // linear i4, absmax 1: codes floor(7x + 0.5) = 7, -3 (from -3.5), 2 (from 1.75).
  const GroupScheme s = fourBit(true, Companding::Linear, 4);
  const float x[3] = {1.0f, -0.5f, 0.25f};
  uint8_t codes[2] = {0xAA, 0xAA};
  float scale = 0;
  groupQuantize(s, x, 3, codes, &scale);
  EXPECT_EQ(codes[0], 0xD7); // 7 | (-3 & 0xF) << 4
  EXPECT_EQ(codes[1], 0x02); // 2, the odd count's high nibble 0
  EXPECT_EQ(scale, 1.0f);
  float back[3];
  groupDequantize(s, codes, &scale, 3, back);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -3.0f / 7.0f);
  EXPECT_EQ(back[2], 2.0f / 7.0f);
}

TEST(FourBitGroup, TablesTakeTheNearestEntry) {
  // nonzero u4: x / 0.8 = 1, 0.5, 0.03 -> entries 16/16, 8/16, 1/16 (no zero).
  const GroupScheme v = fourBit(false, Companding::NonZero, 128);
  const float x[3] = {0.8f, 0.4f, 0.024f};
  uint8_t codes[2] = {0, 0};
  float scale = 0;
  groupQuantize(v, x, 3, codes, &scale);
  EXPECT_EQ(codes[0], 0x7F); // codes 15 and 7
  EXPECT_EQ(codes[1], 0x00); // code 0
  // dynamic i4: x / 2 = -1 -> -0.8875 (0), 0.03 -> 0.0325 (9), 0 -> 0 (7), 0.5 -> 0.4375 (12);
  // a NaN in the group (overflow=ieee) makes every c NaN: the entry nearest 0.
  const GroupScheme m = fourBit(true, Companding::Dynamic, 4);
  const float y[4] = {-2.0f, 0.06f, 0.0f, 1.0f};
  uint8_t mc[2];
  groupQuantize(m, y, 4, mc, &scale);
  EXPECT_EQ(mc[0], 0x90);
  EXPECT_EQ(mc[1], 0xC7);
  float back[4];
  groupDequantize(m, mc, &scale, 4, back);
  EXPECT_EQ(back[0], -0.8875f * 2.0f);
  EXPECT_EQ(back[2], 0.0f);
  GroupScheme ieee = m;
  ieee.overflow = Overflow::Ieee;
  const float z[2] = {NAN, 1.0f};
  uint8_t zc = 0xFF;
  groupQuantize(ieee, z, 2, &zc, &scale);
  EXPECT_EQ(zc, 0x77);
}

TEST(FourBitGroup, RoundTripsWithinHalfAStep) {
  // linear i4 and u4 over odd sizes: every value comes back within half a step of the grid.
  for (int64_t n : {1, 7, 129, 255}) {
    std::vector<float> x(n), back(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = std::sin(0.37f * i) * (1 + i % 5);
    for (auto [isSigned, c] : {std::pair{true, Companding::Linear}, std::pair{false, Companding::Linear}}) {
      const GroupScheme s = fourBit(isSigned, c, 32);
      std::vector<float> in = x;
      if (!isSigned)
        for (float &v : in)
          v = std::fabs(v);
      std::vector<uint8_t> codes(s.codeBytes(n));
      std::vector<float> scales(s.numGroups(n));
      groupQuantize(s, in.data(), n, codes.data(), scales.data());
      groupDequantize(s, codes.data(), scales.data(), n, back.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_LE(std::fabs(back[i] - in[i]),
                  scales[i / 32] / (isSigned ? 7.0f : 15.0f) * 0.5001f)
            << n << " " << i;
    }
  }
}

} // namespace

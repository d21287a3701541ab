//===- ErrorBitsTest.cpp - Split master weights against hand-computed values ===//
//
// Each expected value is derived by hand from numerics.md section 3 (the
// derivation is in the comment) and its float32 bits were checked with
// Python's struct module.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

struct Case {
  const char *what;
  qopt_dtype param, ecc;
  float master;
  uint16_t x16;       ///< expected 16-bit parameter bits
  int32_t rho;        ///< expected error bits
  uint32_t decoded;   ///< expected float32 bits of the reconstruction
};

const Case kCases[] = {
    // 1 + 2^-9: bf16 1.0 (0x3f80); e = 2^-9; E = 0, l = -8, h = 4;
    // en = 2^-9 * 2^4 * 2^4 = 0.5; s = 63.5; rho = floor(64.0) = 64.
    // decode: 1 + f32(64/127) * 2^-8 = 1.0019685 (0x3f804081).
    {"1+2^-9 int8", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, 1.001953125f, 0x3f80, 64, 0x3f804081},
    // int16: s = 0.5 * 32767 = 16383.5 -> 16384; decode 1 + f32(16384/32767)
    // * 2^-8 rounds to 1.001953125 exactly (0x3f804000).
    {"1+2^-9 int16", QOPT_DTYPE_BF16, QOPT_DTYPE_INT16, 1.001953125f, 0x3f80, 16384, 0x3f804000},
    // 1 + 2^-8 is a bf16 tie: rounds to even 1.0; en = 1; rho = 127 (32767);
    // decode 1 + 2^-8 exactly.
    {"tie int8", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, 1.00390625f, 0x3f80, 127, 0x3f808000},
    {"tie int16", QOPT_DTYPE_BF16, QOPT_DTYPE_INT16, 1.00390625f, 0x3f80, 32767, 0x3f808000},
    // -(1 + 3 * 2^-9) rounds to -(1 + 2^-7) = 0xbf81; e = +2^-9; rho = +64;
    // decode -1.0078125 + f32(64/127) * 2^-8 = -1.0058434 (0xbf80bf7f).
    {"negative", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, -1.005859375f, 0xbf81, 64, 0xbf80bf7f},
    // 2 - 2^-9 rounds up to 2.0 (0x4000): E = 1, l = -7, h = 3;
    // en = -2^-9 * 2^3 * 2^4 = -0.25; s = -31.75; rho = -32 (half the range
    // below a power of two); decode 2 + f32(-32/127) * 2^-7 = 1.9980315
    // (0x3fffbf7f).
    {"power of two", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, 1.998046875f, 0x4000, -32, 0x3fffbf7f},
    // A bf16 value is exact: rho = 0, decode is the value.
    {"exact", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, 0.75f, 0x3f40, 0, 0x3f400000},
    // 1.25 * 2^-133 (f32 0x00014000): bf16 subnormal unit 2^-133 (0x0001),
    // e = 2^-135; E = 1 - 127, l = -134, h = 67; en = 0.5; rho = 64.
    // decode: f32(64/127) * 2^-67 * 2^-67 = 16513.0078 * 2^-149 rounds to
    // 16513 units; 65536 + 16513 = 82049 units (0x00014081).
    {"subnormal", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, floatOf(0x00014000), 0x0001, 64, 0x00014081},
    // fp16: 1 + 2^-12 -> 1.0 (0x3c00); l = 0 - 10 - 1 = -11, h = 5;
    // en = 2^-12 * 2^5 * 2^6 = 0.5; rho = 64 / 16384.
    {"f16 int8", QOPT_DTYPE_F16, QOPT_DTYPE_INT8, 1.000244140625f, 0x3c00, 64, 0},
    {"f16 int16", QOPT_DTYPE_F16, QOPT_DTYPE_INT16, 1.000244140625f, 0x3c00, 16384, 0},
    // 65519 -> 65504 (0x7bff): e = 15; E = 15, l = 4, h = -2;
    // en = 15 * 2^-2 * 2^-2 = 0.9375; s = 119.0625 -> 119;
    // decode 65504 + f32(119/127) * 16 = 65518.992 (0x477feefe).
    {"f16 top", QOPT_DTYPE_F16, QOPT_DTYPE_INT8, 65519.0f, 0x7bff, 119, 0x477feefe},
    {"f16 top int16", QOPT_DTYPE_F16, QOPT_DTYPE_INT16, 65519.0f, 0x7bff, 30719, 0},
    // Past the 16-bit range: infinity, rho 0, decode infinity.
    {"f16 overflow", QOPT_DTYPE_F16, QOPT_DTYPE_INT8, 70000.0f, 0x7c00, 0, 0x7f800000},
    {"bf16 overflow", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, floatOf(0x7f7fffff), 0x7f80, 0, 0x7f800000},
    {"inf", QOPT_DTYPE_BF16, QOPT_DTYPE_INT16, -INFINITY, 0xff80, 0, 0xff800000},
    // Zero; -0.0 keeps its sign in bf16 and reconstructs as +0.0.
    {"zero", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, 0.0f, 0x0000, 0, 0x00000000},
    {"minus zero", QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, -0.0f, 0x8000, 0, 0x00000000},
};

class ErrorBits : public ::testing::TestWithParam<Case> {};

TEST_P(ErrorBits, HandComputed) {
  const Case &c = GetParam();
  uint16_t x16 = 0;
  int32_t rho = 0;
  if (c.ecc == QOPT_DTYPE_INT8) {
    int8_t r = 0;
    ASSERT_EQ(qopt_error_bits_init(c.param, c.ecc, &c.master, 1, &x16, &r), QOPT_SUCCESS)
        << qopt_last_error();
    rho = r;
    if (c.decoded) {
      float back = 0;
      ASSERT_EQ(qopt_error_bits_decode(c.param, c.ecc, &x16, &r, 1, &back), QOPT_SUCCESS);
      EXPECT_EQ(bitsOf(back), c.decoded) << c.what << ": " << back;
    }
  } else {
    int16_t r = 0;
    ASSERT_EQ(qopt_error_bits_init(c.param, c.ecc, &c.master, 1, &x16, &r), QOPT_SUCCESS)
        << qopt_last_error();
    rho = r;
    if (c.decoded) {
      float back = 0;
      ASSERT_EQ(qopt_error_bits_decode(c.param, c.ecc, &x16, &r, 1, &back), QOPT_SUCCESS);
      EXPECT_EQ(bitsOf(back), c.decoded) << c.what << ": " << back;
    }
  }
  EXPECT_EQ(x16, c.x16) << c.what;
  EXPECT_EQ(rho, c.rho) << c.what;
}

/// Names a case in test listings (CTest's names stay stable).
void PrintTo(const Case &c, std::ostream *os) { *os << c.what; }

INSTANTIATE_TEST_SUITE_P(Cases, ErrorBits, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           std::string name;
                           for (const char *c = info.param.what; *c; ++c)
                             name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
                           return name;
                         });

TEST(ErrorBitsNaN, StaysNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  uint16_t x16;
  int8_t r = 5;
  ASSERT_EQ(qopt_error_bits_init(QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, &nan, 1, &x16, &r),
            QOPT_SUCCESS);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(x16 & 0x7f80, 0x7f80);
  EXPECT_NE(x16 & 0x007f, 0);
  float back;
  ASSERT_EQ(qopt_error_bits_decode(QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, &x16, &r, 1, &back),
            QOPT_SUCCESS);
  EXPECT_TRUE(std::isnan(back));
}

TEST(ErrorBitsArrays, ParamOutIsOptionalAndInt16ReconstructsMost) {
  // A sweep of ordinary values: int16 reconstructs bf16 masters far better
  // than int8, and |error| stays below half a bf16 ULP / 32767 (+ rounding).
  std::vector<float> master(4096);
  for (size_t i = 0; i < master.size(); ++i)
    master[i] = 1.0f + static_cast<float>(i) * 0.000244140625f * 0.37f - 0.5f;
  std::vector<int8_t> r8(master.size());
  std::vector<int16_t> r16(master.size());
  std::vector<uint16_t> p(master.size());
  ASSERT_EQ(qopt_error_bits_init(QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, master.data(),
                                 static_cast<int64_t>(master.size()), nullptr, r8.data()),
            QOPT_SUCCESS);
  ASSERT_EQ(qopt_error_bits_init(QOPT_DTYPE_BF16, QOPT_DTYPE_INT16, master.data(),
                                 static_cast<int64_t>(master.size()), p.data(), r16.data()),
            QOPT_SUCCESS);
  std::vector<float> b8(master.size()), b16(master.size());
  ASSERT_EQ(qopt_error_bits_decode(QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, p.data(), r8.data(),
                                   static_cast<int64_t>(master.size()), b8.data()),
            QOPT_SUCCESS);
  ASSERT_EQ(qopt_error_bits_decode(QOPT_DTYPE_BF16, QOPT_DTYPE_INT16, p.data(), r16.data(),
                                   static_cast<int64_t>(master.size()), b16.data()),
            QOPT_SUCCESS);
  size_t exact16 = 0;
  for (size_t i = 0; i < master.size(); ++i) {
    double e8 = std::fabs(double(b8[i]) - master[i]);
    double e16 = std::fabs(double(b16[i]) - master[i]);
    EXPECT_LE(e16, e8 + 1e-12) << i;
    // Half a bf16 ULP in [0.5, 2) is at most 2^-8; int8 resolves it to 1/127.
    EXPECT_LE(e8, std::ldexp(1.0, -8) / 127 * 0.5 + std::ldexp(1.0, -24)) << i;
    exact16 += b16[i] == master[i];
  }
  EXPECT_GE(exact16, master.size() * 99 / 100);
}

TEST(ErrorBitsArrays, Errors) {
  float x = 1.0f;
  int8_t r;
  EXPECT_EQ(qopt_error_bits_init(QOPT_DTYPE_F32, QOPT_DTYPE_INT8, &x, 1, nullptr, &r),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "error bits need a bf16 or f16 parameter, got f32");
  EXPECT_EQ(qopt_error_bits_init(QOPT_DTYPE_BF16, QOPT_DTYPE_UINT8, &x, 1, nullptr, &r),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "error bits are int8 or int16, got uint8");
  EXPECT_EQ(qopt_error_bits_init(QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, &x, 1, nullptr, nullptr),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "ecc_out is NULL");
  EXPECT_EQ(qopt_error_bits_init(QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, nullptr, 0, nullptr, nullptr),
            QOPT_SUCCESS);
}

} // namespace

//===- StateLayoutTest.cpp - Buffer sizes and initial values --------------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

qopt_manifest *flashWithBlock(int block) {
  json j = json::parse(flashManifestJson());
  j["states"][1]["block"] = block;
  j["streams"][6]["block"] = block;
  return parseOrDie(j.dump());
}

struct Sizes {
  int64_t numel;
  int64_t groups;    // ceil(numel / 32), by hand
  int64_t blocks2048; // ceil(numel / 2048), by hand
  int64_t blocks256;  // ceil(numel / 256), by hand
};

// 2^31 + 5 = 2147483653: 2^26 + 1 groups of 32, 2^20 + 1 blocks of 2048,
// 2^23 + 1 blocks of 256.
const Sizes kSizes[] = {
    {0, 0, 0, 0},        {1, 1, 1, 1},       {31, 1, 1, 1},
    {32, 1, 1, 1},       {33, 2, 1, 1},      {2147483653LL, 67108865LL, 1048577LL, 8388609LL},
};

class StateLayoutSizes : public ::testing::TestWithParam<Sizes> {};

TEST_P(StateLayoutSizes, CountsAndBytesOfEveryStream) {
  const Sizes &z = GetParam();
  for (int block : {2048, 256}) {
    qopt_manifest *m = flashWithBlock(block);
    ASSERT_NE(m, nullptr);
    std::vector<qopt_buffer_layout> out(8);
    ASSERT_EQ(qopt_manifest_state_layout(m, z.numel, nullptr, 0, out.data(), out.size()),
              QOPT_SUCCESS)
        << qopt_last_error();
    int64_t n = z.numel;
    int64_t blocks = block == 2048 ? z.blocks2048 : z.blocks256;
    struct Want {
      const char *name;
      qopt_dtype dtype;
      int64_t count;
      uint64_t bytes;
      qopt_init_kind init;
    } want[] = {
        {"p", QOPT_DTYPE_BF16, n, uint64_t(n) * 2, QOPT_INIT_CALLER},
        {"p.ecc", QOPT_DTYPE_INT8, n, uint64_t(n), QOPT_INIT_FROM_MASTER},
        {"g", QOPT_DTYPE_BF16, n, uint64_t(n) * 2, QOPT_INIT_CALLER},
        {"m.codes", QOPT_DTYPE_INT8, n, uint64_t(n), QOPT_INIT_FILL},
        {"m.scales", QOPT_DTYPE_F16, z.groups, uint64_t(z.groups) * 2, QOPT_INIT_FILL},
        {"m2.codes", QOPT_DTYPE_UINT8, n, uint64_t(n), QOPT_INIT_CODEBOOK_ZERO},
        {"m2.absmax", QOPT_DTYPE_F32, blocks, uint64_t(blocks) * 4, QOPT_INIT_FILL},
        {"m3", QOPT_DTYPE_F32, n, uint64_t(n) * 4, QOPT_INIT_FILL},
    };
    for (size_t i = 0; i < 8; ++i) {
      SCOPED_TRACE(testing::Message() << "numel " << n << ", block " << block
                                      << ", stream " << want[i].name);
      EXPECT_STREQ(out[i].name, want[i].name);
      EXPECT_EQ(out[i].dtype, want[i].dtype);
      EXPECT_EQ(out[i].count, want[i].count);
      EXPECT_EQ(out[i].bytes, want[i].bytes);
      EXPECT_EQ(out[i].init, want[i].init);
      EXPECT_EQ(out[i].fill_bits, 0u);
    }
    EXPECT_EQ(out[4].per, QOPT_PER_GROUP);
    EXPECT_EQ(out[4].per_size, 32);
    EXPECT_EQ(out[6].per, QOPT_PER_BLOCK);
    EXPECT_EQ(out[6].per_size, block);
    qopt_manifest_destroy(m);
  }
}

INSTANTIATE_TEST_SUITE_P(Numels, StateLayoutSizes, ::testing::ValuesIn(kSizes),
                         [](const ::testing::TestParamInfo<Sizes> &info) {
                           return "numel_" + std::to_string(info.param.numel);
                         });

TEST(StateLayout, CodebookCodesStartAtTheCodeOfZero) {
  qopt_manifest *m = flashWithBlock(256);
  // Ascending table with an exact 0 at index 100: q[k] = (k - 100) / 128.
  std::vector<float> table(256);
  for (int k = 0; k < 256; ++k)
    table[k] = static_cast<float>(k - 100) / 128.0f;
  const float *tables[] = {table.data()};
  std::vector<qopt_buffer_layout> out(8);
  ASSERT_EQ(qopt_manifest_state_layout(m, 1000, tables, 1, out.data(), 8), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(out[5].init, QOPT_INIT_FILL);
  EXPECT_EQ(out[5].fill_bits, 100u);
  EXPECT_EQ(out[5].fill_value, 100.0);
  EXPECT_EQ(out[3].init, QOPT_INIT_FILL); // group codes: 0
  EXPECT_EQ(out[3].fill_bits, 0u);

  uint8_t code = 0xFF;
  ASSERT_EQ(qopt_codebook_zero_code(table.data(), &code), QOPT_SUCCESS);
  EXPECT_EQ(code, 100);
  // An unsigned map starting at 0 (bitsandbytes' unsigned dynamic map): code 0.
  for (int k = 0; k < 256; ++k)
    table[k] = static_cast<float>(k) / 255.0f;
  ASSERT_EQ(qopt_codebook_zero_code(table.data(), &code), QOPT_SUCCESS);
  EXPECT_EQ(code, 0);
  // All negative: 0 is above every midpoint, the last code.
  for (int k = 0; k < 256; ++k)
    table[k] = static_cast<float>(k - 300);
  ASSERT_EQ(qopt_codebook_zero_code(table.data(), &code), QOPT_SUCCESS);
  EXPECT_EQ(code, 255);
  // A value exactly on a midpoint takes the lower code: q = {..., -1, 1, ...}
  // around index 127/128 has its midpoint at 0.
  for (int k = 0; k < 256; ++k)
    table[k] = k < 128 ? static_cast<float>(k - 128) : static_cast<float>(k - 127);
  ASSERT_EQ(qopt_codebook_zero_code(table.data(), &code), QOPT_SUCCESS);
  EXPECT_EQ(code, 127);
  qopt_manifest_destroy(m);
}

TEST(StateLayout, Errors) {
  qopt_manifest *m = flashWithBlock(2048);
  std::vector<qopt_buffer_layout> out(8);
  EXPECT_EQ(qopt_manifest_state_layout(m, -1, nullptr, 0, out.data(), 8),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "numel -1 is negative");
  EXPECT_EQ(qopt_manifest_state_layout(m, 10, nullptr, 0, out.data(), 7),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "capacity 7 < 8 streams");
  std::vector<float> table(256, 0.0f);
  const float *two[] = {table.data(), table.data()};
  EXPECT_EQ(qopt_manifest_state_layout(m, 10, two, 2, out.data(), 8),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "kernel 'FlashAdamW_strict' has 1 table(s), got 2");
  table[7] = -1.0f;
  const float *one[] = {table.data()};
  EXPECT_EQ(qopt_manifest_state_layout(m, 10, one, 1, out.data(), 8),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("not ascending: entry 7"), std::string::npos)
      << qopt_last_error();
  table[7] = NAN;
  uint8_t code;
  EXPECT_EQ(qopt_codebook_zero_code(table.data(), &code), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("entry 7 is nan"), std::string::npos)
      << qopt_last_error();
  qopt_manifest_destroy(m);
}

TEST(StateLayout, DtypeSizes) {
  size_t n = 0;
  ASSERT_EQ(qopt_dtype_size(QOPT_DTYPE_BF16, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 2u);
  ASSERT_EQ(qopt_dtype_size(QOPT_DTYPE_F32, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 4u);
  ASSERT_EQ(qopt_dtype_size(QOPT_DTYPE_UINT8, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(qopt_dtype_size(static_cast<qopt_dtype>(42), &n), QOPT_ERROR_INVALID_ARGUMENT);
  const char *name = nullptr;
  ASSERT_EQ(qopt_dtype_name(QOPT_DTYPE_INT16, &name), QOPT_SUCCESS);
  EXPECT_STREQ(name, "int16");
}

} // namespace

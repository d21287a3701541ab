//===- CodeTableBucketsTest.cpp - The 4-bit table's code buckets ----------===//
//
// getCodeTableBuckets' lookup (CodeTableBuckets::code, what the GPU lowering
// computes lane by lane) against the C++ reference's group quantization of
// the same quotient (test/reference, numerics.md §2: the count of the
// table's float32 midpoints strictly below c, a NaN the entry nearest 0):
// every float32 within 64 ulps of each midpoint and of each bucket's edges,
// both signs, and a stride over every pattern of magnitude up to 1.
//
//===----------------------------------------------------------------------===//

#include "qopt/Codegen/StreamCodecs.h"
#include "qopt/reference/Group.h"

#include "llvm/ADT/bit.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using mlir::qopt::CodeTableBuckets;
using mlir::qopt::Companding;
using mlir::qopt::getCodeTableBuckets;

namespace {

/// The reference's codes of each c: group<i4, 2, dynamic, scale = f32> of
/// the pairs (c, 1), whose divisor is max(|c|, 1) = 1 for |c| <= 1, so the
/// quotient is c itself; c's code is the low nibble of its pair's byte.
std::vector<int64_t> referenceCodes(const std::vector<float> &cs) {
  qopt::ref::GroupScheme scheme;
  scheme.isSigned = true;
  scheme.bits = 4;
  scheme.group = 2;
  scheme.companding = qopt::ref::Companding::Dynamic;
  scheme.scaleDType = qopt::ref::ScaleDType::F32;
  std::vector<float> x;
  for (float c : cs) {
    x.push_back(c);
    x.push_back(1.0f);
  }
  std::vector<uint8_t> codes(scheme.codeBytes(int64_t(x.size())));
  std::vector<float> scales(scheme.numGroups(int64_t(x.size())));
  qopt::ref::groupQuantize(scheme, x.data(), int64_t(x.size()), codes.data(),
                           scales.data());
  std::vector<int64_t> out;
  for (uint8_t byte : codes)
    out.push_back(byte & 0xF);
  return out;
}

void expectSameCodes(const CodeTableBuckets &buckets,
                     const std::vector<float> &cs) {
  std::vector<int64_t> want = referenceCodes(cs);
  int64_t mismatches = 0;
  for (size_t i = 0; i < cs.size(); ++i)
    if (buckets.code(cs[i]) != want[i] && ++mismatches <= 5)
      ADD_FAILURE() << "c = " << cs[i] << " (0x" << std::hex
                    << llvm::bit_cast<uint32_t>(cs[i]) << std::dec
                    << "): buckets " << buckets.code(cs[i]) << ", reference "
                    << want[i];
  EXPECT_EQ(mismatches, 0) << "of " << cs.size() << " values";
}

/// The float32 of magnitude bits `bits`, of both signs.
void addBothSigns(std::vector<float> &cs, uint32_t bits) {
  float f = llvm::bit_cast<float>(bits);
  cs.push_back(f);
  cs.push_back(-f);
}

/// Every float32 of magnitude bits within 64 of `centre`, both signs,
/// magnitude at most 1.
void addAround(std::vector<float> &cs, uint32_t centre) {
  for (int64_t d = -64; d <= 64; ++d) {
    int64_t bits = int64_t(centre) + d;
    if (bits >= 0 && bits <= 0x3F800000)
      addBothSigns(cs, uint32_t(bits));
  }
}

TEST(CodeTableBuckets, DynamicTableHasBuckets) {
  const CodeTableBuckets *buckets = getCodeTableBuckets(Companding::dynamic);
  ASSERT_NE(buckets, nullptr);
  // 2^-9 lies below the smallest midpoint magnitude, 0.00275.
  EXPECT_EQ(buckets->magLo, 0x3B000000u);
  EXPECT_EQ(buckets->perSign, 73);
  EXPECT_EQ(buckets->entries.size(), 146u);
  // The arithmetic table has none.
  EXPECT_EQ(getCodeTableBuckets(Companding::nonzero), nullptr);
}

TEST(CodeTableBuckets, MatchesReferenceNearMidpointsAndEdges) {
  const CodeTableBuckets *buckets = getCodeTableBuckets(Companding::dynamic);
  ASSERT_NE(buckets, nullptr);
  std::vector<float> cs;
  {
    llvm::ArrayRef<float> table = mlir::qopt::getCodeTable(Companding::dynamic);
    for (size_t k = 0; k + 1 < table.size(); ++k)
      addAround(cs, llvm::bit_cast<uint32_t>(
                        std::abs((table[k] + table[k + 1]) * 0.5f)));
    for (float e : table)
      addAround(cs, llvm::bit_cast<uint32_t>(std::abs(e)));
  }
  for (int64_t k = 0; k <= buckets->perSign; ++k)
    addAround(cs, buckets->magLo + (uint32_t(k) << CodeTableBuckets::kShift));
  // Zeros, subnormals, the clamp's floor and below it, 1.
  for (float f : {0.0f, std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 1e-30f, 1e-3f, 1.0f})
    addBothSigns(cs, llvm::bit_cast<uint32_t>(f));
  expectSameCodes(*buckets, cs);
}

TEST(CodeTableBuckets, MatchesReferenceOnAStrideOfAllMagnitudes) {
  const CodeTableBuckets *buckets = getCodeTableBuckets(Companding::dynamic);
  ASSERT_NE(buckets, nullptr);
  std::vector<float> cs;
  // A prime stride over the patterns 0 .. bits(1.0), both signs.
  for (uint32_t bits = 0; bits <= 0x3F800000u; bits += 997)
    addBothSigns(cs, bits);
  expectSameCodes(*buckets, cs);
}

TEST(CodeTableBuckets, NaNTakesTheEntryNearestZero) {
  const CodeTableBuckets *buckets = getCodeTableBuckets(Companding::dynamic);
  ASSERT_NE(buckets, nullptr);
  // Entry 7 of torchao's signed map is 0.
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(buckets->code(nan), 7);
  EXPECT_EQ(buckets->code(-nan), 7);
  EXPECT_EQ(mlir::qopt::getCodeTable(Companding::dynamic)[7], 0.0f);
}

} // namespace

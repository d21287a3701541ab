//===- GoldenSeed003Test.cpp - Group quantizer vs seed 003 -----------------===//
//
// test/data/golden/seed003_battery.safetensors: seed 003's quantize / dequantize / nmse on seed 004's
// battery (reduced sizes) and numerics.md §5 edge inputs, run with PyTorch on the CPU.
//  - with seed 003's options the reference must give the same codes, scales and dequantized values
//    bit for bit, and the same NMSE (float64, up to summation order);
//  - with the authors' options (the product default) seed 004's agreement rates are reported and
//    held to stated bounds.
//
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

using namespace qopt::ref;
using namespace qopt::ref::test;

namespace {

struct Spec003 {
  const char *name;
  bool isSigned;
  Companding companding;
};
const Spec003 kSpecs[] = {{"momentum_companded", true, Companding::Softsign},
                          {"momentum_linear", true, Companding::Linear},
                          {"variance_companded", false, Companding::Sqrt},
                          {"variance_linear", false, Companding::Linear}};

const qopt::st::File &battery() {
  static const qopt::st::File f = qopt::st::File::load(goldenPath("seed003_battery.safetensors"));
  return f;
}

std::vector<std::string> tensorNames() {
  std::vector<std::string> out;
  for (const std::string &n : battery().names())
    if (n.size() > 2 && n.compare(n.size() - 2, 2, "/x") == 0)
      out.push_back(n.substr(0, n.size() - 2));
  return out;
}

std::vector<float> input(const std::string &tensor, const Spec003 &s) {
  std::vector<float> x = battery().vec<float>(tensor + "/x", "F32");
  if (!s.isSigned)
    for (float &v : x)
      v = std::fabs(v); // seed 004: the variance scheme gets abs() of each input
  return x;
}

struct Result {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
  std::vector<float> deq;
};

Result run(const GroupScheme &g, const std::vector<float> &x) {
  const int64_t n = static_cast<int64_t>(x.size());
  Result r;
  r.codes.resize(x.size());
  r.scales.resize(static_cast<size_t>(g.numGroups(n)));
  r.deq.resize(x.size());
  groupQuantize(g, x.data(), n, r.codes.data(), r.scales.data());
  groupDequantize(g, r.codes.data(), r.scales.data(), n, r.deq.data());
  return r;
}

} // namespace

TEST(GoldenSeed003Test, SeedOptionsBitForBit) {
  const std::vector<std::string> names = tensorNames();
  ASSERT_GE(names.size(), 12u);
  for (const std::string &t : names)
    for (const Spec003 &s : kSpecs) {
      SCOPED_TRACE(t + "/" + s.name);
      const GroupScheme g = GroupScheme::seed003(s.isSigned, s.companding);
      const std::vector<float> x = input(t, s);
      const Result r = run(g, x);
      const std::string p = t + "/" + s.name + "/";
      EXPECT_EQ(r.codes, battery().get(p + "q", s.isSigned ? "I8" : "U8").data);
      EXPECT_EQ(countBitDiffs(r.scales, battery().vec<uint16_t>(p + "scales", "F16")), 0);
      EXPECT_EQ(countBitDiffs(r.deq, battery().vec<float>(p + "deq", "F32")), 0);
      const double want = battery().vec<double>(p + "nmse", "F64").at(0);
      const double got = nmse(x.data(), r.deq.data(), static_cast<int64_t>(x.size()));
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got));
      else
        EXPECT_TRUE(close(got, want, 1e-9, 0.0)) << got << " vs seed " << want;
    }
}

TEST(GoldenSeed003Test, AuthorsOptionsAgreementRates) {
  // seed 004's metrics, this reference with the authors' options (half_up, divide by the float32
  // absmax floored at 1e-12) against seed 003: int_agree, int_within_1, nmse ratio.
  struct Bound {
    double agree, within1, ratioLo, ratioHi;
  };
  // Bounds per battery entry (measured values are printed). adam_v_like's group absmax (~1e-5) is in
  // float16's subnormal range, where rounding the scale before dividing (seed 003) and after
  // (authors) differ most. Entries whose group absmax leaves float16's range altogether (tiny,
  // f16_tiny, f16_huge) are reported without bounds: there the two rules differ by design (seed 003
  // divides by 1 where the float16 scale is 0, and by inf above 65504). NMSE ratios are checked
  // where both NMSEs are finite and nonzero (heavy_tail has groups above 65504: NaN for both).
  const std::map<std::string, Bound> bounds = {
      {"normal", {0.97, 0.9999, 0.98, 1.03}},      {"nonmult32", {0.97, 0.9999, 0.98, 1.03}},
      {"with_zeros", {0.97, 0.9999, 0.98, 1.03}},  {"heavy_tail", {0.99, 0.999, 0.98, 1.03}},
      {"adam_v_like", {0.85, 0.99, 0.95, 1.5}},    {"const_groups", {1.0, 1.0, 1.0, 1.0}},
      {"all_zeros", {1.0, 1.0, 1.0, 1.0}},         {"one_element", {1.0, 1.0, 1.0, 1.0}},
      {"empty", {1.0, 1.0, 1.0, 1.0}}};
  std::printf("[ measured ] %-32s %10s %12s %12s %12s %10s\n", "battery/spec", "int_agree", "int_within_1",
              "nmse_ours", "nmse_seed", "ratio");
  for (const std::string &t : tensorNames())
    for (const Spec003 &s : kSpecs) {
      GroupScheme g = s.isSigned ? GroupScheme::momentum() : GroupScheme::variance();
      g.companding = s.companding;
      g.overflow = Overflow::Ieee; // the authors' kernel stores an infinite scale, as seed 003
      const std::vector<float> x = input(t, s);
      const Result r = run(g, x);
      const std::string p = t + "/" + s.name + "/";
      const std::vector<uint8_t> &seedCodes = battery().get(p + "q").data;
      int64_t agree = 0, within1 = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const int a = s.isSigned ? static_cast<int8_t>(r.codes[i]) : r.codes[i];
        const int b = s.isSigned ? static_cast<int8_t>(seedCodes[i]) : seedCodes[i];
        agree += a == b;
        within1 += std::abs(a - b) <= 1;
      }
      const double n = x.empty() ? 1.0 : static_cast<double>(x.size());
      const double fa = x.empty() ? 1.0 : agree / n, fw = x.empty() ? 1.0 : within1 / n;
      const double ours = nmse(x.data(), r.deq.data(), static_cast<int64_t>(x.size()));
      const double seed = battery().vec<double>(p + "nmse", "F64").at(0);
      const bool comparable = std::isfinite(ours) && std::isfinite(seed);
      const double ratio = !comparable ? NAN : seed != 0.0 ? ours / seed : (ours == 0.0 ? 1.0 : INFINITY);
      std::printf("[ measured ] %-32s %10.6f %12.6f %12.4e %12.4e %10.4f\n", (t + "/" + s.name).c_str(), fa, fw,
                  ours, seed, ratio);
      auto it = bounds.find(t);
      if (it == bounds.end())
        continue;
      SCOPED_TRACE(t + "/" + s.name);
      EXPECT_GE(fa, it->second.agree);
      EXPECT_GE(fw, it->second.within1);
      if (comparable) {
        EXPECT_GE(ratio, it->second.ratioLo);
        EXPECT_LE(ratio, it->second.ratioHi);
      } else {
        EXPECT_EQ(std::isnan(ours), std::isnan(seed)) << "NMSE finite for one side only";
      }
    }
}

TEST(GoldenSeed003Test, CompandingAgainstLinearOnTheBattery) {
  // The paper's ablation (FlashOptim, Figs. 4-5): the NMSE of the companded
  // schemes against their linear baselines, authors' options, on seed 004's
  // battery. Measured, printed, and the direction the paper reports checked
  // where the data is not degenerate.
  std::printf("  %-14s %-9s %12s %12s %8s\n", "tensor", "state", "companded", "linear", "ratio");
  int compandedWins = 0, compared = 0;
  for (const std::string &t : tensorNames())
    for (bool isSigned : {true, false}) {
      GroupScheme companded = isSigned ? GroupScheme::momentum() : GroupScheme::variance();
      GroupScheme linear = companded;
      linear.companding = Companding::Linear;
      const Spec003 &s = kSpecs[isSigned ? 0 : 2];
      const std::vector<float> x = input(t, s);
      const Result rc = run(companded, x), rl = run(linear, x);
      const int64_t n = static_cast<int64_t>(x.size());
      const double c = nmse(x.data(), rc.deq.data(), n), l = nmse(x.data(), rl.deq.data(), n);
      std::printf("  %-14s %-9s %12.4e %12.4e %8.3f\n", t.c_str(), isSigned ? "momentum" : "variance",
                  c, l, l > 0 ? c / l : 0.0);
      if (std::isfinite(c) && std::isfinite(l) && l > 0) {
        ++compared;
        compandedWins += c < l;
      }
    }
  // Gaussian-like momentum and Adam-like variance are where companding pays.
  for (const char *t : {"normal", "adam_v_like"}) {
    const bool isSigned = std::string(t) == "normal";
    GroupScheme companded = isSigned ? GroupScheme::momentum() : GroupScheme::variance();
    GroupScheme linear = companded;
    linear.companding = Companding::Linear;
    const std::vector<float> x = input(t, kSpecs[isSigned ? 0 : 2]);
    const int64_t n = static_cast<int64_t>(x.size());
    EXPECT_LT(nmse(x.data(), run(companded, x).deq.data(), n),
              nmse(x.data(), run(linear, x).deq.data(), n))
        << t << ": companding should lower the NMSE";
  }
  EXPECT_GT(compared, 0);
  std::printf("  companded below linear on %d of %d comparable tensors\n", compandedWins, compared);
}

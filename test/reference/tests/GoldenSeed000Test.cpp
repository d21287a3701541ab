//===- GoldenSeed000Test.cpp - Seed 000's AdamW step, bit for bit ----------===//
//
// test/data/golden/seed000_adamw.safetensors holds seed 000's quantized_adamw_step run with PyTorch
// on a GPU ("cuda") and on the CPU ("cpu") from the same inputs. The reference must reproduce every
// output bit: the bf16 parameter, the dequantized moments, and the new absmax values.
//
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace qopt::ref;
using namespace qopt::ref::test;
using json = nlohmann::json;

namespace {

struct Golden {
  qopt::st::File file = qopt::st::File::load(goldenPath("seed000_adamw.safetensors"));
  json meta = json::parse(file.meta("cases"));
  std::vector<float> qmap1 = file.vec<float>("qmap1", "F32");
  std::vector<float> qmap2 = file.vec<float>("qmap2", "F32");
  int64_t n = std::stoll(file.meta("n"));
};

const Golden &golden() {
  static const Golden g;
  return g;
}

/// How each device's PyTorch evaluates `v_new / bc2` (a float32 tensor divided by a Python float).
ScalarDivision divisionFor(const std::string &device) {
  return device == "cuda" ? ScalarDivision::ReciprocalF64 : ScalarDivision::Ieee;
}

StepSpec specFor(const std::string &name, const std::string &device, double beta1Override = -1) {
  const Golden &G = golden();
  const json &c = G.meta.at(name);
  Hyper h;
  h.lr = c.at("lr");
  h.beta1 = beta1Override > 0 ? beta1Override : c.at("beta1").get<double>();
  h.beta2 = c.at("beta2");
  h.eps = c.at("eps");
  h.weightDecay = c.at("wd");
  const DType grad = c.at("grad_dtype") == "bfloat16" ? DType::BF16 : DType::F32;
  StepSpec spec = seed000AdamW(G.qmap1, G.qmap2, h, grad, 2048);
  spec.scalarDivision = divisionFor(device);
  return spec;
}

TensorBuffers inputsFor(const StepSpec &spec, const std::string &name) {
  const qopt::st::File &f = golden().file;
  TensorBuffers t = makeTensor(spec, golden().n);
  auto load = [&](Buffer &b, const std::string &tensor, DType dt, const std::string &stDtype) {
    const qopt::st::Tensor &x = f.get(name + "/" + tensor, stDtype);
    b = Buffer::fromBytes(dt, x.data.data(), x.data.size());
  };
  load(t.param, "p", DType::BF16, "BF16");
  load(t.grad, "g", spec.grad, spec.grad == DType::BF16 ? "BF16" : "F32");
  load(t.states[0].values, "m_code", DType::U8, "U8");
  load(t.states[0].scales, "m_absmax", DType::F32, "F32");
  load(t.states[1].values, "v_code", DType::U8, "U8");
  load(t.states[1].scales, "v_absmax", DType::F32, "F32");
  return t;
}

struct Mismatches {
  int64_t p = 0, m = 0, v = 0, mAbsmax = 0, vAbsmax = 0;
  int64_t total() const { return p + m + v + mAbsmax + vAbsmax; }
};

Mismatches compare(const StepSpec &spec, const TensorBuffers &t, const std::string &prefix) {
  const qopt::st::File &f = golden().file;
  Mismatches r;
  r.p = countBitDiffs(t.param.toFloats(), Buffer::fromBytes(DType::BF16, f.get(prefix + "p_out", "BF16").data.data(),
                                                            f.get(prefix + "p_out").data.size())
                                              .toFloats());
  r.m = countBitDiffs(readState(spec, t, 0), f.vec<float>(prefix + "m_out", "F32"));
  r.v = countBitDiffs(readState(spec, t, 1), f.vec<float>(prefix + "v_out", "F32"));
  r.mAbsmax = countBitDiffs(t.states[0].scales.toFloats(), f.vec<float>(prefix + "m_absmax_out", "F32"));
  r.vAbsmax = countBitDiffs(t.states[1].scales.toFloats(), f.vec<float>(prefix + "v_absmax_out", "F32"));
  return r;
}

std::vector<std::string> caseNames() {
  std::vector<std::string> out;
  for (auto it = golden().meta.begin(); it != golden().meta.end(); ++it)
    out.push_back(it.key());
  return out;
}

} // namespace

TEST(GoldenSeed000Test, AdamWStepBitForBit) {
  int64_t cases = 0;
  for (const std::string device : {"cpu", "cuda"})
    for (const std::string &name : caseNames()) {
      SCOPED_TRACE(name + " on " + device);
      const StepSpec spec = specFor(name, device);
      TensorBuffers t = inputsFor(spec, name);
      step(spec, t, golden().meta.at(name).at("step").get<int64_t>());
      const Mismatches r = compare(spec, t, name + "/" + device + "/");
      EXPECT_EQ(r.p, 0) << "p_out (bf16) elements differing";
      EXPECT_EQ(r.m, 0) << "m_out elements differing";
      EXPECT_EQ(r.v, 0) << "v_out elements differing";
      EXPECT_EQ(r.mAbsmax, 0);
      EXPECT_EQ(r.vAbsmax, 0);
      ++cases;
    }
  EXPECT_EQ(cases, 12);
}

TEST(GoldenSeed000Test, IntermediatesBitForBit) {
  // The float32 moments and the parameter before its bf16 rounding, from the seed's own lines
  // (seed000_intermediates in make_golden.py), on both devices.
  // Measured: PyTorch 2.11's CPU sqrt (AVX512) is not correctly rounded everywhere: in a few dozen of
  // 4096 elements its `(v_new / bc2).sqrt() + eps` is one float32 ULP below IEEE sqrtf(.) + eps.
  // The CUDA run is IEEE throughout. So on the CPU every p_f32 difference must sit on such an
  // element; on CUDA there must be none.
  for (const std::string device : {"cpu", "cuda"})
    for (const std::string name : {"rand10", "hyp1000"}) {
      SCOPED_TRACE(name + " on " + device);
      const StepSpec spec = specFor(name, device);
      const TensorBuffers t = inputsFor(spec, name);
      std::vector<float> p = readMaster(spec, t);
      std::vector<std::vector<float>> st = {readState(spec, t, 0), readState(spec, t, 1)};
      const int64_t stepIndex = golden().meta.at(name).at("step").get<int64_t>();
      updateElements(spec, stepIndex, t.numel, p, t.grad.toFloats(), st);
      const std::string d = name + "/" + device + "/diag/";
      const qopt::st::File &f = golden().file;
      EXPECT_EQ(countBitDiffs(st[0], f.vec<float>(d + "m_new", "F32")), 0);
      EXPECT_EQ(countBitDiffs(st[1], f.vec<float>(d + "v_new", "F32")), 0);
      const std::vector<float> vDiv = f.vec<float>(d + "v_div", "F32"), denom = f.vec<float>(d + "denom", "F32");
      std::vector<bool> sqrtOff(vDiv.size(), false);
      int64_t sqrtOffCount = 0;
      for (size_t i = 0; i < vDiv.size(); ++i) {
        sqrtOff[i] = floatBits(std::sqrt(vDiv[i]) + static_cast<float>(spec.hyper.eps)) != floatBits(denom[i]);
        sqrtOffCount += sqrtOff[i];
      }
      const std::vector<float> pf = f.vec<float>(d + "p_f32", "F32");
      int64_t pDiffs = 0, unexplained = 0;
      for (size_t i = 0; i < pf.size(); ++i)
        if (floatBits(p[i]) != floatBits(pf[i])) {
          ++pDiffs;
          unexplained += !sqrtOff[i];
        }
      std::printf("[ measured ] %s on %s: PyTorch denominators off IEEE sqrtf+eps: %lld of %zu; p_f32 "
                  "differences %lld (all on those elements: %s)\n",
                  name.c_str(), device.c_str(), static_cast<long long>(sqrtOffCount), vDiv.size(),
                  static_cast<long long>(pDiffs), unexplained == 0 ? "yes" : "NO");
      EXPECT_EQ(unexplained, 0);
      if (device == "cuda") {
        EXPECT_EQ(sqrtOffCount, 0);
        EXPECT_EQ(pDiffs, 0);
      }
    }
}

TEST(GoldenSeed000Test, DivisionRulePerDevice) {
  // The seed's `v_new / bc2` (float32 tensor / Python float) as each device's PyTorch evaluates it,
  // from the seed's own values (make_golden.py keeps v_new and v_new / bc2): the CPU divides
  // (ScalarDivision::Ieee); CUDA multiplies by float32(1.0 / bc2) computed in float64
  // (ScalarDivision::ReciprocalF64), not by the float32 reciprocal 1.0f / float32(bc2).
  int64_t f32RecipMismatches = 0;
  for (const std::string device : {"cpu", "cuda"})
    for (const std::string name : {"chain1", "chain2", "rand10", "hyp1000"}) {
      SCOPED_TRACE(name + " on " + device);
      const qopt::st::File &f = golden().file;
      const std::string d = name + "/" + device + "/diag/";
      const std::vector<float> vNew = f.vec<float>(d + "v_new", "F32"), vDiv = f.vec<float>(d + "v_div", "F32");
      const StepSpec spec = specFor(name, device);
      const double bc2 = 1.0 - std::pow(spec.hyper.beta2, golden().meta.at(name).at("step").get<double>());
      const float bc2f = static_cast<float>(bc2), r64 = static_cast<float>(1.0 / bc2), r32 = 1.0f / bc2f;
      int64_t diffs = 0;
      for (size_t i = 0; i < vNew.size(); ++i) {
        const float q = spec.scalarDivision == ScalarDivision::Ieee ? vNew[i] / bc2f : vNew[i] * r64;
        diffs += floatBits(q) != floatBits(vDiv[i]);
        if (device == "cuda")
          f32RecipMismatches += floatBits(vNew[i] * r32) != floatBits(vDiv[i]);
      }
      EXPECT_EQ(diffs, 0);
    }
  std::printf("[ measured ] cuda v_new / bc2 elements that a float32 reciprocal would get wrong: %lld\n",
              static_cast<long long>(f32RecipMismatches));
  EXPECT_GT(f32RecipMismatches, 0);
}

TEST(GoldenSeed000Test, ChainCodesMatchTheNextStepsInputs) {
  // chain{k+1}'s input codes are the codes behind chain{k}'s cuda outputs (recomputed by the
  // generator from the seed's own lines); the reference's stored codes must be the same bytes.
  for (int k = 1; k <= 2; ++k) {
    const std::string name = "chain" + std::to_string(k), next = "chain" + std::to_string(k + 1);
    const StepSpec spec = specFor(name, "cuda");
    TensorBuffers t = inputsFor(spec, name);
    step(spec, t, k);
    const qopt::st::File &f = golden().file;
    EXPECT_EQ(t.states[0].values.raw(), f.get(next + "/m_code", "U8").data) << name;
    EXPECT_EQ(t.states[1].values.raw(), f.get(next + "/v_code", "U8").data) << name;
    EXPECT_EQ(t.param.raw(), f.get(next + "/p", "BF16").data) << name;
  }
}

TEST(GoldenSeed000Test, NegativeControls) {
  // The comparison has teeth: a different beta1, or the other division rule, changes outputs.
  const std::string name = "hyp1000";
  for (const std::string device : {"cpu", "cuda"}) {
    const StepSpec wrongBeta = specFor(name, device, 0.81);
    TensorBuffers t = inputsFor(wrongBeta, name);
    step(wrongBeta, t, 1000);
    const Mismatches r = compare(wrongBeta, t, name + "/" + device + "/");
    EXPECT_GT(r.m, golden().n / 2) << device;
    EXPECT_GT(r.p, 0) << device;
  }
  int64_t divisionSensitive = 0;
  for (const std::string device : {"cpu", "cuda"})
    for (const std::string &other : caseNames()) {
      StepSpec spec = specFor(other, device);
      spec.scalarDivision = spec.scalarDivision == ScalarDivision::Ieee ? ScalarDivision::ReciprocalF64
                                                                        : ScalarDivision::Ieee;
      TensorBuffers t = inputsFor(spec, other);
      std::vector<float> p = readMaster(spec, t);
      std::vector<std::vector<float>> st = {readState(spec, t, 0), readState(spec, t, 1)};
      const StepSpec right = specFor(other, device);
      std::vector<float> p2 = p;
      std::vector<std::vector<float>> st2 = st;
      const int64_t stepIndex = golden().meta.at(other).at("step").get<int64_t>();
      updateElements(spec, stepIndex, t.numel, p, t.grad.toFloats(), st);
      updateElements(right, stepIndex, t.numel, p2, t.grad.toFloats(), st2);
      divisionSensitive += countBitDiffs(p, p2);
    }
  std::printf("[ measured ] float32 parameters (before bf16 rounding) that depend on the division rule: %lld "
              "over all cases and both devices\n",
              static_cast<long long>(divisionSensitive));
  EXPECT_GT(divisionSensitive, 0);
}

TEST(GoldenSeed000Test, RequantiseTiesBitForBit) {
  const qopt::st::File f = qopt::st::File::load(goldenPath("seed000_requantise.safetensors"));
  for (const std::string kind : {"signed", "unsigned"})
    for (const std::string device : {"cpu", "cuda"}) {
      SCOPED_TRACE(kind + " on " + device);
      const std::vector<float> qmap = f.vec<float>(kind == "signed" ? "qmap1" : "qmap2", "F32");
      const std::vector<float> x = f.vec<float>(kind + "/x", "F32");
      const int64_t n = static_cast<int64_t>(x.size());
      std::vector<uint8_t> codes(x.size());
      std::vector<float> absmax(static_cast<size_t>(n / 2048)), out(x.size());
      codebookQuantize(x.data(), n, 2048, qmap.data(), codes.data(), absmax.data());
      codebookDequantize(codes.data(), absmax.data(), n, 2048, qmap.data(), out.data());
      EXPECT_EQ(countBitDiffs(out, f.vec<float>(kind + "/" + device + "/out", "F32")), 0);
      EXPECT_EQ(countBitDiffs(absmax, f.vec<float>(kind + "/" + device + "/absmax", "F32")), 0);
    }
}

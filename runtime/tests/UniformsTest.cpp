//===- UniformsTest.cpp - Uniform expressions: float64, then one rounding -===//
//
// Expected values were computed independently in Python (float64 arithmetic,
// then struct.pack('<f') for the float32 rounding) and are written here as
// float32 bit patterns.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

/// A manifest whose uniforms are `exprs`, with hypers lr, beta1, beta2, wd,
/// nesterov (bool) and req (no default).
qopt_manifest *withUniforms(const json &exprs, bool withRequired = false) {
  json j = json::parse(sgdManifestJson());
  j["hypers"] = json::array({{{"name", "lr"}, {"default", 1e-3}},
                             {{"name", "beta1"}, {"default", 0.9}},
                             {{"name", "beta2"}, {"default", 0.999}},
                             {{"name", "wd"}, {"default", 0.01}},
                             {{"name", "nesterov"}, {"default", 0}, {"bool", true}}});
  if (withRequired)
    j["hypers"].push_back({{"name", "req"}});
  j["uniforms"] = json::array();
  for (size_t i = 0; i < exprs.size(); ++i)
    j["uniforms"].push_back({{"index", i}, {"expr", exprs[i]}});
  return parseOrDie(j.dump());
}

TEST(Uniforms, Float64ThenOneRoundingToFloat32) {
  json exprs = json::array({
      json::array({"sub", 1.0, json::array({"pow", "beta1", "step"})}),
      json::array({"div", "lr", json::array({"sub", 1.0, json::array({"pow", "beta1", "step"})})}),
      json::array({"sqrt", json::array({"sub", 1.0, json::array({"pow", "beta2", "step"})})}),
      json::array({"sub", 1.0, json::array({"mul", "lr", "wd"})}),
  });
  qopt_manifest *m = withUniforms(exprs);
  ASSERT_NE(m, nullptr);
  float out[4];
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 3, out, 4), QOPT_SUCCESS)
      << qopt_last_error();
  // 1 - 0.9**3 = 0.2709999999999999 -> f32 0x3e8ac083. (Computed in float32
  // instead it would be 0x3e8ac086.)
  EXPECT_EQ(bitsOf(out[0]), 0x3e8ac083u) << out[0];
  // 1e-3 / (1 - 0.9**3) = 0.003690036900369005 -> 0x3b71d48c
  EXPECT_EQ(bitsOf(out[1]), 0x3b71d48cu) << out[1];
  // sqrt(1 - 0.999**3) = 0.05474487190596028 -> 0x3d603c29
  EXPECT_EQ(bitsOf(out[2]), 0x3d603c29u) << out[2];
  // 1 - 1e-3 * 0.01 = 0.99999 -> 0x3f7fff58
  EXPECT_EQ(bitsOf(out[3]), 0x3f7fff58u) << out[3];
  qopt_manifest_destroy(m);
}

TEST(Uniforms, HyperparametersByNameOverrideDefaults) {
  qopt_manifest *m = withUniforms(json::array({
      json::array({"mul", "lr", 2.0}),
      json::array({"add", "beta1", "beta2", 1.0}),
      "step",
  }));
  qopt_hyper h[] = {{"lr", 0.25}, {"beta2", 0.5}};
  float out[3];
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, h, 2, 7, out, 3), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], static_cast<float>(0.9 + 0.5 + 1.0));
  EXPECT_EQ(out[2], 7.0f);
  qopt_manifest_destroy(m);
}

TEST(Uniforms, EveryOperation) {
  json e = json::array({
      json::array({"neg", "lr"}),                                   // -0.001
      json::array({"abs", -2.5}),                                   // 2.5
      json::array({"sign", -0.3}),                                  // -1
      json::array({"sign", 0.0}),                                   // 0
      json::array({"min", 3.0, -1.0, 2.0}),                         // -1
      json::array({"max", json::array({"neg", "lr"}), 0.5}),        // 0.5
      json::array({"lt", "step", 10}),                              // 1
      json::array({"le", 10, "step"}),                              // 0 (step 4)
      json::array({"gt", "beta2", "beta1"}),                        // 1
      json::array({"ge", 1, 1}),                                    // 1
      json::array({"eq", "nesterov", 0}),                           // 1
      json::array({"ne", "nesterov", 0}),                           // 0
      json::array({"and", json::array({"lt", "step", 10}), json::array({"not", "nesterov"})}), // 1
      json::array({"or", 0, "nesterov"}),                           // 0
      json::array({"not", 0.0}),                                    // 1
      json::array({"select", "nesterov", 2.0, 3.0}),                // 3
      json::array({"select", json::array({"gt", "step", 3}), "beta1", "beta2"}), // f32(0.9)
      json::array({"pow", 2, -3}),                                  // 0.125
      json::array({"div", 1, 0}),                                   // inf
      json::array({"sub", 3, 5}),                                   // -2
      json::array({"mul", true, 4}),                                // 4
      json::array({"sign", -0.0}),                                  // +0
      json::array({"sign", json::array({"sqrt", -1.0})}),           // NaN -> +0
  });
  qopt_manifest *m = withUniforms(e);
  ASSERT_NE(m, nullptr);
  std::vector<float> out(e.size());
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 4, out.data(), out.size()),
            QOPT_SUCCESS)
      << qopt_last_error();
  std::vector<float> want = {-0.001f, 2.5f, -1.0f, 0.0f, -1.0f, 0.5f, 1.0f,
                             0.0f,    1.0f, 1.0f,  1.0f, 0.0f,  1.0f, 0.0f,
                             1.0f,    3.0f, 0.9f,  0.125f, INFINITY, -2.0f, 4.0f,
                             0.0f,    0.0f};
  ASSERT_EQ(want.size(), out.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(out[i], want[i]) << "uniform " << i << ": " << e[i].dump();
  EXPECT_FALSE(std::signbit(out[21])) << "sign(-0.0) is +0, as torch.sign";
  // With nesterov on, the selects flip.
  qopt_hyper h[] = {{"nesterov", 1.0}};
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, h, 1, 4, out.data(), out.size()),
            QOPT_SUCCESS);
  EXPECT_EQ(out[15], 2.0f);
  EXPECT_EQ(out[13], 1.0f);
  EXPECT_EQ(out[12], 0.0f);
  qopt_manifest_destroy(m);
}

TEST(Uniforms, MinAndMaxPropagateNaNAsAnError) {
  qopt_manifest *m = withUniforms(json::array({
      json::array({"max", json::array({"sqrt", json::array({"neg", "lr"})}), 1.0}),
  }));
  float out[1];
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 1, out, 1),
            QOPT_ERROR_INVALID_ARGUMENT);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("uniform 0 of kernel 'qopt_test_sgd_f32' is NaN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[\"max\", [\"sqrt\", [\"neg\", \"lr\"]], 1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lr=0.001"), std::string::npos) << msg;
  EXPECT_NE(msg.find("step=1"), std::string::npos) << msg;
  qopt_manifest_destroy(m);
}

TEST(Uniforms, StepIsOneBased) {
  qopt_manifest *m = withUniforms(json::array({"lr"}));
  float out[1];
  for (int64_t step : {int64_t(0), int64_t(-5)}) {
    EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, step, out, 1),
              QOPT_ERROR_INVALID_ARGUMENT);
    std::string msg = qopt_last_error();
    EXPECT_NE(msg.find("the step count is 1-based"), std::string::npos) << msg;
  }
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 1, out, 1), QOPT_SUCCESS);
  qopt_manifest_destroy(m);
}

TEST(Uniforms, HyperparameterErrors) {
  qopt_manifest *m = withUniforms(json::array({"lr"}), /*withRequired=*/true);
  float out[1];
  qopt_hyper req = {"req", 1.0};

  qopt_hyper unknown[] = {req, {"lrr", 1.0}};
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, unknown, 2, 1, out, 1),
            QOPT_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(qopt_last_error())
                .find("unknown hyperparameter 'lrr' for kernel 'qopt_test_sgd_f32' "
                      "(it has: lr, beta1, beta2, wd, nesterov, req)"),
            std::string::npos)
      << qopt_last_error();

  qopt_hyper twice[] = {req, {"lr", 1.0}, {"lr", 2.0}};
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, twice, 3, 1, out, 1),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "hyperparameter 'lr' given twice");

  qopt_hyper notBool[] = {req, {"nesterov", 0.5}};
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, notBool, 2, 1, out, 1),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(),
               "hyperparameter 'nesterov' is a bool: expected 0 or 1, got 0.5");

  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 1, out, 1),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "hyperparameter 'req' of kernel 'qopt_test_sgd_f32' "
                                  "has no default and was not given");

  qopt_hyper nullName[] = {{nullptr, 1.0}};
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, nullName, 1, 1, out, 1),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "hypers[0].name is NULL");

  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, &req, 1, 1, out, 0),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "capacity 0 < 1 uniforms");

  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, &req, 1, 1, out, 1), QOPT_SUCCESS);
  EXPECT_EQ(out[0], 1e-3f);
  EXPECT_STREQ(qopt_last_error(), "");
  qopt_manifest_destroy(m);
}

TEST(Uniforms, LargeStepCountsStayExact) {
  // step is an int64; 2^40 + 1 is exact in float64 and rounds once to f32.
  qopt_manifest *m = withUniforms(json::array({json::array({"sub", "step", 1099511627776.0})}));
  float out[1];
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, (int64_t(1) << 40) + 1, out, 1),
            QOPT_SUCCESS);
  EXPECT_EQ(out[0], 1.0f);
  qopt_manifest_destroy(m);
}

} // namespace

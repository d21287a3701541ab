//===- KahanTest.cpp - The Kahan-compensated bf16 parameter ---------------===//
#include "qopt/reference/Float.h"
#include "qopt/reference/Step.h"

#include <gtest/gtest.h>

using namespace qopt::ref;

namespace {

/// Plain SGD (no momentum buffer, lr 1, no decay) on one element of 1.0 with the gradient
/// -2^-10: each step adds 2^-10, an eighth of bf16's ulp at 1 (2^-7).
std::pair<float, float> eightSmallSteps(Master master) {
  StepSpec s;
  s.optimizer = Optimizer::SGD;
  s.hyper.lr = 1.0;
  s.hyper.momentum = 0.0;
  s.hyper.weightDecay = 0.0;
  s.param = DType::BF16;
  s.grad = DType::BF16;
  s.master = master;
  TensorBuffers t = makeTensor(s, 1);
  setMaster(s, t, {1.0f});
  for (int64_t k = 1; k <= 8; ++k) {
    setGrad(s, t, {-0x1p-10f});
    step(s, t, k);
  }
  const float comp = master == Master::KahanBF16 ? t.ecc.toFloats()[0] : 0.0f;
  return {t.param.toFloats()[0], comp};
}

TEST(Kahan, SmallUpdatesAddUpWhereNearestRoundingLosesThem) {
  // Rounded to nearest, 1 + 2^-10 is 1 every step; with the compensation the eight steps add up
  // to 2^-7 exactly, so the parameter is 1 + 2^-7 and nothing is left over.
  EXPECT_EQ(eightSmallSteps(Master::None).first, 1.0f);
  auto [p, c] = eightSmallSteps(Master::KahanBF16);
  EXPECT_EQ(p, 1.0f + 0x1p-7f);
  EXPECT_EQ(c, 0.0f);
}

} // namespace

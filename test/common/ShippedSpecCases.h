//===- ShippedSpecCases.h - The shipped specs and their reference steps ---===//
//
// Every spec of specs/ paired with the C++ reference's description of its
// step and the hyperparameters the suites give the kernel. The GPU, host and
// fast-mode suites all step these cases.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_COMMON_SHIPPEDSPECCASES_H
#define QOPT_TEST_COMMON_SHIPPEDSPECCASES_H

#include "qopt/reference/Codebook.h"
#include "qopt/reference/Step.h"
#include "qopt/runtime.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace qopt::test {

namespace ref = qopt::ref;

/// A spec (file stem in specs/) and the reference step that specifies it.
struct SpecCase {
  std::string spec;
  std::function<ref::StepSpec()> make;
  std::vector<qopt_hyper> hypers;
};

/// Names a case by its spec in test listings (CTest's names stay stable).
inline void PrintTo(const SpecCase &c, std::ostream *os) { *os << c.spec; }

/// The Adam family's hyperparameters: a learning rate and weight decay off
/// their defaults, so that a kernel that ignored them would fail.
inline ref::Hyper adamHyper() {
  ref::Hyper h;
  h.lr = 2e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.eps = 1e-8;
  h.weightDecay = 0.05;
  return h;
}
inline const std::vector<qopt_hyper> kAdamHypers = {
    {"lr", 2e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.05}};

inline ref::StepSpec linearAdamW() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI8);
  for (ref::StateScheme &st : s.states)
    st.group.companding = ref::Companding::Linear;
  return s;
}

/// FlashSGD(W): momentum, dampening and Nesterov all on.
inline ref::StepSpec sgd(bool decoupled) {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI8);
  s.optimizer = ref::Optimizer::SGD;
  s.hyper.lr = 0.05;
  s.hyper.momentum = 0.9;
  s.hyper.dampening = 0.1;
  s.hyper.nesterov = true;
  s.hyper.weightDecay = 0.01;
  s.hyper.decoupled = decoupled;
  s.states.resize(1);
  s.states[0].name = "buf";
  return s;
}
inline const std::vector<qopt_hyper> kSgdHypers = {{"lr", 0.05},
                                                   {"momentum", 0.9},
                                                   {"dampening", 0.1},
                                                   {"weight_decay", 0.01},
                                                   {"nesterov", 1.0}};

inline ref::StepSpec lion() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI8);
  s.optimizer = ref::Optimizer::Lion;
  s.hyper.lr = 1e-3;
  s.hyper.beta1 = 0.9;
  s.hyper.beta2 = 0.99;
  s.hyper.weightDecay = 0.1;
  s.states.resize(1);
  return s;
}
inline const std::vector<qopt_hyper> kLionHypers = {
    {"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.99}, {"weight_decay", 0.1}};

inline ref::StepSpec adam() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI8);
  s.optimizer = ref::Optimizer::Adam;
  return s;
}

/// Seed 000's blockwise AdamW with bitsandbytes' dynamic maps.
inline ref::StepSpec seed000(int64_t block) {
  return ref::seed000AdamW(ref::createDynamicMap(/*isSigned=*/true),
                           ref::createDynamicMap(/*isSigned=*/false), adamHyper(),
                           ref::DType::BF16, block);
}

/// Every shipped spec.
inline std::vector<SpecCase> shippedSpecCases() {
  return {
      {"flash_adamw", [] { return ref::flashAdamW(adamHyper(), ref::Master::EccI8); },
       kAdamHypers},
      {"flash_adamw_ecc16", [] { return ref::flashAdamW(adamHyper(), ref::Master::EccI16); },
       kAdamHypers},
      {"flash_adamw_bf16", [] { return ref::flashAdamW(adamHyper(), ref::Master::None); },
       kAdamHypers},
      {"flash_adamw_linear", linearAdamW, kAdamHypers},
      {"flash_adam", adam, kAdamHypers},
      {"flash_sgd", [] { return sgd(/*decoupled=*/false); }, kSgdHypers},
      {"flash_sgdw", [] { return sgd(/*decoupled=*/true); }, kSgdHypers},
      {"flash_lion", lion, kLionHypers},
      {"adamw8bit_block2048", [] { return seed000(2048); }, kAdamHypers},
      {"adamw8bit_block256", [] { return seed000(256); }, kAdamHypers},
  };
}

} // namespace qopt::test

#endif // QOPT_TEST_COMMON_SHIPPEDSPECCASES_H

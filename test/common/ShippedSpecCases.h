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

/// A bf16 parameter without a master weight, a bf16 gradient (bitsandbytes'
/// layout), `optimizer` with `states` (8-bit codebook states on bitsandbytes'
/// block 256: `signed` says which dynamic map each takes; float32 states
/// where `state32`).
inline ref::StepSpec plainBf16(ref::Optimizer optimizer, ref::Hyper hyper,
                               std::vector<std::string> states, std::vector<bool> isSigned,
                               bool state32) {
  ref::StepSpec s;
  s.optimizer = optimizer;
  s.hyper = hyper;
  s.param = ref::DType::BF16;
  s.master = ref::Master::None;
  s.grad = ref::DType::BF16;
  for (size_t i = 0; i < states.size(); ++i)
    s.states.push_back(state32 ? ref::StateScheme::plainF32(states[i])
                               : ref::StateScheme::codebook(
                                     states[i], 256, ref::createDynamicMap(isSigned[i])));
  return s;
}

/// RMSprop8bit, Adagrad8bit and Lion8bit (bitsandbytes' 1-state optimizers keep their state on
/// the signed map) and their float32-state specs.
inline ref::Hyper rmspropHyper() {
  ref::Hyper h;
  h.lr = 3e-3;
  h.alpha = 0.95;
  h.eps = 1e-6;
  h.weightDecay = 0.01;
  return h;
}
inline const std::vector<qopt_hyper> kRmspropHypers = {
    {"lr", 3e-3}, {"alpha", 0.95}, {"eps", 1e-6}, {"weight_decay", 0.01}};
inline ref::Hyper adagradHyper() {
  ref::Hyper h;
  h.lr = 0.02;
  h.lrDecay = 0.01;
  h.eps = 1e-8;
  h.weightDecay = 0.01;
  return h;
}
inline const std::vector<qopt_hyper> kAdagradHypers = {
    {"lr", 0.02}, {"lr_decay", 0.01}, {"eps", 1e-8}, {"weight_decay", 0.01}};
inline ref::StepSpec lion8bit(bool state32) {
  return plainBf16(ref::Optimizer::Lion, lion().hyper, {"m"}, {true}, state32);
}

/// AdamAtan2 (float32 and bf16 states): every hyperparameter off its default.
inline ref::StepSpec adamAtan2(bool bf16States) {
  ref::Hyper h;
  h.lr = 2e-3;
  h.beta1 = 0.85;
  h.beta2 = 0.98;
  h.weightDecay = 0.05;
  h.a = 1.3;
  h.b = 0.9;
  ref::StepSpec s = plainBf16(ref::Optimizer::AdamAtan2, h, {"m", "v"}, {}, /*state32=*/true);
  if (bf16States)
    s.states = {ref::StateScheme::plainBF16("m"), ref::StateScheme::plainBF16("v")};
  return s;
}
inline const std::vector<qopt_hyper> kAdamAtan2Hypers = {
    {"lr", 2e-3}, {"beta1", 0.85}, {"beta2", 0.98}, {"weight_decay", 0.05}, {"a", 1.3}, {"b", 0.9}};

/// AdEMAMix: the 8-bit case with both warm-ups over 10 steps (the suites step fewer, so every
/// step is inside them), the float32 case without.
inline ref::Hyper ademamixHyper(bool warmUp) {
  ref::Hyper h;
  h.lr = 2e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.beta3 = 0.999;
  h.alpha = 4.0;
  h.tAlpha = warmUp ? 10.0 : 0.0;
  h.tBeta3 = warmUp ? 10.0 : 0.0;
  h.eps = 1e-8;
  h.weightDecay = 0.05;
  return h;
}
inline std::vector<qopt_hyper> ademamixHypers(bool warmUp) {
  return {{"lr", 2e-3},     {"beta1", 0.9},   {"beta2", 0.999},
          {"beta3", 0.999}, {"alpha", 4.0},   {"t_alpha", warmUp ? 10.0 : 0.0},
          {"t_beta3", warmUp ? 10.0 : 0.0},   {"eps", 1e-8},
          {"weight_decay", 0.05}};
}
inline ref::StepSpec ademamix(bool state32) {
  return plainBf16(ref::Optimizer::AdEMAMix, ademamixHyper(/*warmUp=*/!state32),
                   {"m1", "m2", "nu"}, {true, true, false}, state32);
}

/// AdamW4bit (torchao's layout): m on the signed 4-bit dynamic table, v on the unsigned
/// (k + 1) / 16 table, groups of 128 with float32 scales, a bf16 parameter; with
/// `stochastic` the parameter is rounded stochastically (seed 1234: off its default).
inline ref::StepSpec adamW4bit(bool stochastic) {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::None);
  for (ref::StateScheme &st : s.states) {
    st.group.bits = 4;
    st.group.group = 128;
    st.group.scaleDType = ref::ScaleDType::F32;
    st.group.companding = st.group.isSigned ? ref::Companding::Dynamic : ref::Companding::NonZero;
  }
  if (stochastic) {
    s.master = ref::Master::Stochastic;
    s.hyper.seed = 1234;
  }
  return s;
}
/// FlashAdamW with stochastic rounding in place of a master weight.
inline ref::StepSpec flashAdamWStochastic() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::Stochastic);
  s.hyper.seed = 1234;
  return s;
}
/// FlashAdamW's companding on 4-bit codes in groups of 128 (float16 scales).
inline ref::StepSpec flashAdamW4bit() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI8);
  for (ref::StateScheme &st : s.states) {
    st.group.bits = 4;
    st.group.group = 128;
  }
  return s;
}
/// FlashAdamW with optimi's Kahan-compensated bf16 parameter.
inline ref::StepSpec flashAdamWKahan() {
  return ref::flashAdamW(adamHyper(), ref::Master::KahanBF16);
}
inline std::vector<qopt_hyper> withSeed(std::vector<qopt_hyper> hypers) {
  hypers.push_back({"seed", 1234});
  return hypers;
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
      {"rmsprop8bit",
       [] { return plainBf16(ref::Optimizer::RMSprop, rmspropHyper(), {"v"}, {true}, false); },
       kRmspropHypers},
      {"rmsprop_state32",
       [] { return plainBf16(ref::Optimizer::RMSprop, rmspropHyper(), {"v"}, {true}, true); },
       kRmspropHypers},
      {"adagrad8bit",
       [] { return plainBf16(ref::Optimizer::Adagrad, adagradHyper(), {"s"}, {true}, false); },
       kAdagradHypers},
      {"adagrad_state32",
       [] { return plainBf16(ref::Optimizer::Adagrad, adagradHyper(), {"s"}, {true}, true); },
       kAdagradHypers},
      {"lion8bit", [] { return lion8bit(false); }, kLionHypers},
      {"lion_state32", [] { return lion8bit(true); }, kLionHypers},
      {"adam_atan2", [] { return adamAtan2(false); }, kAdamAtan2Hypers},
      {"adam_atan2_bf16", [] { return adamAtan2(true); }, kAdamAtan2Hypers},
      {"ademamix8bit", [] { return ademamix(false); }, ademamixHypers(true)},
      {"ademamix_state32", [] { return ademamix(true); }, ademamixHypers(false)},
      {"adamw4bit", [] { return adamW4bit(false); }, kAdamHypers},
      {"adamw4bit_sr", [] { return adamW4bit(true); }, withSeed(kAdamHypers)},
      {"flash_adamw_sr", flashAdamWStochastic, withSeed(kAdamHypers)},
      {"flash_adamw4bit", flashAdamW4bit, kAdamHypers},
      {"flash_adamw_kahan", flashAdamWKahan, kAdamHypers},
  };
}

/// The specs of specs/reductions (per-tensor norms and means; host backend
/// only): LAMB8bit, LARS8bit, StableAdamW and the float32-state forms, every
/// hyperparameter off its default.
inline ref::Hyper lambHyper() {
  ref::Hyper h = adamHyper();
  h.maxUnorm = 0.8;
  return h;
}
inline const std::vector<qopt_hyper> kLambHypers = {
    {"lr", 2e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.05},
    {"max_unorm", 0.8}};
inline ref::Hyper larsHyper() {
  ref::Hyper h;
  h.lr = 0.05;
  h.momentum = 0.85;
  h.weightDecay = 0.01;
  h.maxUnorm = 0.03;
  return h;
}
inline const std::vector<qopt_hyper> kLarsHypers = {
    {"lr", 0.05}, {"momentum", 0.85}, {"weight_decay", 0.01}, {"max_unorm", 0.03}};
inline ref::Hyper stableAdamWHyper() {
  ref::Hyper h;
  h.lr = 2e-3;
  h.beta1 = 0.85;
  h.beta2 = 0.98;
  h.weightDecay = 0.05;
  h.eps = 1e-5;
  return h;
}
inline const std::vector<qopt_hyper> kStableAdamWHypers = {
    {"lr", 2e-3}, {"beta1", 0.85}, {"beta2", 0.98}, {"weight_decay", 0.05}, {"eps", 1e-5}};

/// Whether the step of `s` reads a per-tensor reduction (so that a host
/// function's tile range must hold whole tensors).
inline bool readsReductions(const ref::StepSpec &s) {
  return s.optimizer == ref::Optimizer::LAMB || s.optimizer == ref::Optimizer::LARS ||
         s.optimizer == ref::Optimizer::StableAdamW ||
         s.optimizer == ref::Optimizer::ReductionProbe;
}

inline std::vector<SpecCase> reductionSpecCases() {
  return {
      {"lamb8bit",
       [] { return plainBf16(ref::Optimizer::LAMB, lambHyper(), {"m", "v"}, {true, false}, false); },
       kLambHypers},
      {"lamb_state32",
       [] { return plainBf16(ref::Optimizer::LAMB, lambHyper(), {"m", "v"}, {true, false}, true); },
       kLambHypers},
      {"lars8bit",
       [] { return plainBf16(ref::Optimizer::LARS, larsHyper(), {"buf"}, {true}, false); },
       kLarsHypers},
      {"lars_state32",
       [] { return plainBf16(ref::Optimizer::LARS, larsHyper(), {"buf"}, {true}, true); },
       kLarsHypers},
      {"stable_adamw",
       [] {
         return plainBf16(ref::Optimizer::StableAdamW, stableAdamWHyper(), {"m", "v"}, {}, true);
       },
       kStableAdamWHypers},
  };
}

/// The shipped specs the fast-mode suites measure: those whose states are
/// all quantized to 8 bits (their tolerance, FastModeTolerance.h, bounds codes, scales
/// and dequantized states; it states none for a plain float32 or bf16 state).
inline std::vector<SpecCase> fastModeSpecCases() {
  std::vector<SpecCase> out;
  for (const SpecCase &c : shippedSpecCases()) {
    // 4-bit codes are left out: one code of a 4-bit grid is up to a quarter of the group's
    // absmax, past the tolerance's bound on a dequantized state.
    // A Kahan compensation has no stated tolerance either.
    bool quantized = c.make().master != ref::Master::KahanBF16;
    for (const ref::StateScheme &st : c.make().states)
      quantized &= st.kind == ref::StateKind::Codebook ||
                   (st.kind == ref::StateKind::Group && st.group.bits == 8);
    if (quantized)
      out.push_back(c);
  }
  return out;
}

} // namespace qopt::test

#endif // QOPT_TEST_COMMON_SHIPPEDSPECCASES_H

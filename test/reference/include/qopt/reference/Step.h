//===- Step.h - Whole-tensor optimizer steps (numerics.md §4) -------------===//
//
// The reference steps over the ABI's streams (docs/abi.md). One call steps one
// tensor (or a list of tensors, each independently):
//   1. read the float32 master (16-bit value, + error bits when master = ecc),
//      the gradient (converted exactly) and each state (dequantized);
//   2. update every element in float32, one rounding per operation, in the order
//      given per optimizer below;
//   3. requantize each state (new scales/absmax), split the new master.
// Uniform scalars are computed in float64 and rounded to float32 once, where they
// meet a float32 value (PyTorch's rule for a Python scalar; docs/dsl.md).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_STEP_H
#define QOPT_REFERENCE_STEP_H

#include "qopt/reference/Buffer.h"
#include "qopt/reference/Group.h"
#include "qopt/reference/Reduce.h"

#include <cstdint>
#include <string>
#include <vector>

namespace qopt::ref {

enum class Optimizer {
  AdamW, Adam, SGD, Lion, RMSprop, Adagrad, AdamAtan2, AdEMAMix, LAMB, LARS, StableAdamW,
  ReductionProbe, GlobalProbe, FlashAdamWClip
};
const char *optimizerName(Optimizer o);

/// Hyperparameters (float64, like Python floats). Unused ones are ignored.
struct Hyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
  double momentum = 0.0;  ///< SGD
  double dampening = 0.0; ///< SGD
  bool nesterov = false;  ///< SGD
  bool decoupled = false; ///< SGD: decoupled decay p *= 1 - lr*wd instead of g += wd*p
  double alpha = 0.99;    ///< RMSprop's smoothing constant; AdEMAMix's slow-EMA weight
  double lrDecay = 0.0;   ///< Adagrad
  double a = 1.27;        ///< AdamAtan2: update scale
  double b = 1.0;         ///< AdamAtan2: scale of sqrt(v_hat)
  double beta3 = 0.9999;  ///< AdEMAMix: the slow EMA's decay
  double tAlpha = 0.0;    ///< AdEMAMix: alpha's warm-up steps (0: none)
  double tBeta3 = 0.0;    ///< AdEMAMix: beta3's warm-up steps (0: none)
  double seed = 0.0;      ///< Master::Stochastic: the rounding's seed (an integer below 2^24)
  double maxUnorm = 1.0;  ///< LAMB, LARS: the update norm's bound, times |p| (0: none)
  double maxGradNorm = 1.0; ///< FlashAdamWClip: the gradients' global norm bound
};

/// How `float32 tensor / uniform` is evaluated (AdamW's `v_new / bc2`, the only such division):
///  Ieee: one IEEE float32 division by f32(d) (numerics.md, docs/dsl.md strict mode, and what
///    PyTorch does on the CPU).
///  ReciprocalF64: x * f32(1.0 / d), the reciprocal computed in float64 and rounded once: what
///    PyTorch 2.11 does on CUDA when the divisor is a Python scalar (measured on an H200, see
///    test/data/golden/README.md), so the seed 000 reference run on a GPU.
///  ReciprocalF32: x * (1.0f / f32(d)), the reciprocal computed in float32 (the older PyTorch CUDA
///    kernel's documented behaviour; kept to show that it does NOT match the H200 run).
enum class ScalarDivision { Ieee, ReciprocalF64, ReciprocalF32 };

/// Stochastic: no error bits; the bf16 parameter is rounded stochastically (Philox.h,
/// stochasticRoundBF16) keyed by Hyper::seed, the step and the element's global index.
/// KahanBF16: a bf16 compensation c per element (stream `<param>.kahan`, the ecc buffer), as
/// optimi's kahan_sum: with p the bf16 parameter as float32 and x the update's float32 result,
///   s = c + (x - p); p' = bf16(p + s); c' = bf16(s - (p' - p))     (each op one f32 rounding)
enum class Master { None, EccI8, EccI16, Stochastic, KahanBF16 };

enum class StateKind { PlainF32, PlainBF16, Codebook, Group };

/// How one state is stored.
struct StateScheme {
  std::string name;
  StateKind kind = StateKind::PlainF32;
  int64_t block = 2048;       ///< Codebook block size
  std::vector<float> qmap;    ///< Codebook table (256 ascending float32), an input of the step
  Overflow overflow = Overflow::Saturate; ///< Codebook: its absmax's overflow policy
  GroupScheme group;          ///< Group options

  static StateScheme plainF32(std::string name);
  static StateScheme plainBF16(std::string name);
  static StateScheme codebook(std::string name, int64_t block, std::vector<float> qmap);
  static StateScheme grouped(std::string name, GroupScheme scheme);

  /// dtype of the per-element stream: f32 / bf16 values, uint8 codes (codebook), int8/uint8 (group).
  DType valueDType() const;
  /// dtype of the per-group stream: f16/f32 scales, f32 absmax; None for plain states.
  DType scaleDType() const;
  int64_t numScales(int64_t n) const;
  /// The value of a zero state's per-element stream (codes of 0; for a codebook, the code nearest 0).
  uint8_t zeroCode() const;
  /// Entries of the per-element stream for n elements (ceil(n / 2) bytes of 4-bit codes).
  int64_t valueCount(int64_t n) const;
};

/// One optimizer step specification: what a .qopt spec pins down.
///
/// Per element (p: float32 master, g: float32 gradient, uniforms in float64 then f32 once):
///  AdamW (seed 000 / numerics.md §1 order; states m, v):
///    m' = f32(b1)*m + f32(1-b1)*g
///    v' = f32(b2)*v + (f32(1-b2)*g)*g
///    d  = sqrt(v' / f32(bc2)) + f32(eps)          bc2 = 1 - b2^step (f64); `/` per ScalarDivision
///    u  = (f32(lr/bc1) * m') / d                  bc1 = 1 - b1^step (f64)
///    p' = p * f32(1 - lr*wd) - u
///  Adam (L2; states m, v): g = g + f32(wd)*p first (always, as specs/flash_adam.qopt; torch skips
///    it when wd == 0), then as AdamW with p' = p - u.
///  SGD (torch.optim.SGD semantics, specs/flash_sgd.qopt / flash_sgdw.qopt; one buffer state, or
///    none when momentum == 0, torch's buffer-less SGD, where d = g):
///    coupled decay (!decoupled): g = g + f32(wd)*p
///    buf' = step == 1 ? g : f32(mom)*buf + f32(1-dampening)*g
///    d = nesterov ? g + f32(mom)*buf' : buf'            (d = g when momentum == 0)
///    p' = decoupled ? p * f32(1 - lr*wd) - f32(lr)*d : p - f32(lr)*d
///  Lion (numerics.md §4; state m):
///    c = f32(b1)*m + f32(1-b1)*g; u = sign(c) (+-1; 0 for +-0 and NaN, as torch.sign)
///    p' = p * f32(1 - lr*wd) - f32(lr)*u; m' = f32(b2)*m + f32(1-b2)*g
///  RMSprop (torch.optim.RMSprop without momentum, specs/rmsprop8bit.qopt; state v):
///    d = g + f32(wd)*p; v' = f32(alpha)*v + (f32(1-alpha)*d)*d
///    p' = p - f32(lr) * (d / (sqrt(v') + f32(eps)))
///  Adagrad (torch.optim.Adagrad, specs/adagrad8bit.qopt; state s):
///    d = g + f32(wd)*p; s' = s + d*d; clr = lr / (1 + (step - 1) * lr_decay) (f64)
///    p' = p - f32(clr) * (d / (sqrt(s') + f32(eps)))
///  AdamAtan2 (specs/adam_atan2.qopt; states m, v): m' and v' as AdamW,
///    u = atan2(m' * f32(1/bc1), sqrt(v' * f32(b*b/bc2)))   (Elementary.h's atan2F32)
///    p' = p * f32(1 - lr*wd) - f32(lr*a) * u
///  AdEMAMix (bitsandbytes, specs/ademamix8bit.qopt; states m1, m2, nu), uniforms in f64:
///    alpha_t = t_alpha > 0 ? min(step*alpha/t_alpha, alpha) : alpha
///    beta3_t = t_beta3 > 0 ? min(exp(ln b1 ln b3 / ((1 - s) ln b3 + s ln b1)), b3) : b3,
///              s = step / t_beta3 (the C library's exp and log, as the runtime's)
///    m1' = f32(b1)*m1 + f32(1-b1)*g; m2' = f32(beta3_t)*m2 + f32(1-beta3_t)*g
///    nu' = f32(b2)*nu + (f32(1-b2)*g)*g; d = sqrt(nu') / f32(sqrt(bc2)) + f32(eps)
///    p' = p * f32(1 - lr*wd) - f32(lr) * ((m1' / f32(bc1) + f32(alpha_t)*m2') / d)
///  With per-tensor reductions (Reduce.h, over the tensor's new values; lib/TrustRatio.cpp):
///  LAMB (bitsandbytes, specs/reductions/lamb8bit.qopt; states m, v): m', v' as AdamW,
///    u = (m' / f32(bc1)) / (sqrt(v' / f32(bc2)) + f32(eps)); L = f32(max_unorm) * norm(p);
///    s = max_unorm > 0 && norm(u) > L ? L / norm(u) : 1; p' = (p - s * (f32(lr) * u)) * f32(1 - lr*wd)
///  LARS (bitsandbytes, specs/reductions/lars8bit.qopt; state buf): d = g + f32(wd)*p,
///    buf' = step == 1 ? d : f32(momentum)*buf + d; s as LAMB's with buf'; p' = p - s * (f32(lr) * buf')
///  StableAdamW (optimi, specs/reductions/stable_adamw.qopt; states m, v): b^ = (b^t - b) / (b^t - 1),
///    m' = m + f32(1-b1^)*(g - m); v' = f32(b2^)*v + f32(1-b2^)*(g*g);
///    r = sqrt(mean(g*g / max(v', f32(eps*eps)))); lr' = f32(lr) / (r > 1 ? r : 1);
///    p' = p * (1 - lr' * f32(wd)) - lr' * (m' / (sqrt(v') + f32(eps)))
///  ReductionProbe (test/host/specs/reduction_probe.qopt; plain states a, b, c, d):
///    a' = max(g), b' = mean(g), c' = norm(g), d' = rms(g), p' = sum(g)
///  With whole-step reductions (Reduce.h's reduceStep over every tensor of the step; stepWhole
///  computes them into StepSpec::stepValues, lib/WholeStep.cpp):
///  GlobalProbe (test/host/specs/global_probe.qopt; plain states a, b, c; values max, norm, sum of g):
///    a' = global_max(g), b' = global_norm(g), c' = norm(g) / global_norm(g), p' = global_sum(g)
///  FlashAdamWClip (specs/reductions/flash_adamw_clip.qopt; value norm of g):
///    c = min(1, f32(max_grad_norm) / (global_norm(g) + f32(1e-6))) (NaN-propagating min);
///    g = g * c, then AdamW
struct StepSpec {
  Optimizer optimizer = Optimizer::AdamW;
  Hyper hyper;
  DType param = DType::BF16; ///< f32, bf16 or f16
  Master master = Master::None;
  DType grad = DType::BF16;  ///< f32, bf16 or f16
  std::vector<StateScheme> states;
  ScalarDivision scalarDivision = ScalarDivision::Ieee;
  /// The launch's tile (the manifest's launch.tile_elements): a list of tensors places tensor k
  /// at global element firstTile_k * tileElements (docs/abi.md), which keys stochastic rounding.
  int64_t tileElements = 4096;
  /// The step's whole-step reduction values, in update order (stepWhole sets them).
  std::vector<float> stepValues;

  /// Throws std::invalid_argument with a message naming the problem.
  void validate() const;
  /// The number of states the optimizer needs (AdamW/Adam/AdamAtan2 2, SGD 1 (0 allowed at
  /// momentum 0), Lion/RMSprop/Adagrad 1, AdEMAMix 3).
  size_t expectedStates() const;
  /// dtype of the error-bits stream (I8, I16) or None.
  DType eccDType() const;
};

/// FlashOptim's FlashAdamW: bf16 parameter with int8 error bits (or `master`), bf16 gradient,
/// m = group<i8, 32, softsign>, v = group<u8, 32, sqrt>, authors' options.
StepSpec flashAdamW(const Hyper &hyper = Hyper(), Master master = Master::EccI8);
/// Seed 000's quantized_adamw_step: bf16 parameter, no master, `grad` gradient,
/// m = codebook<block>(qmap1), v = codebook<block>(qmap2).
StepSpec seed000AdamW(const std::vector<float> &qmap1, const std::vector<float> &qmap2,
                      const Hyper &hyper = Hyper(), DType grad = DType::BF16, int64_t block = 2048);

/// The streams of one tensor, in docs/abi.md order.
struct StateBuffers {
  Buffer values; ///< plain values (f32/bf16) or codes (int8/uint8)
  Buffer scales; ///< group scales (f16 bits / f32) or codebook absmax (f32); empty when plain
};
struct TensorBuffers {
  int64_t numel = 0;
  Buffer param;                     ///< stream 0
  Buffer ecc;                       ///< stream 1 with master ecc; empty otherwise
  Buffer grad;                      ///< gradient
  std::vector<StateBuffers> states; ///< one per state, declaration order

  /// Pointers to the non-empty streams in ABI order, and their names
  /// ("<param>", "<param>.ecc", "<grad>", "<state>" | "<state>.codes", "<state>.scales" | ".absmax").
  std::vector<Buffer *> streams();
  std::vector<std::string> streamNames(const StepSpec &spec, const std::string &paramName = "p",
                                       const std::string &gradName = "g") const;
};

/// Zero-initialised streams for n elements (parameter 0, error bits 0, gradient 0, zero states).
TensorBuffers makeTensor(const StepSpec &spec, int64_t n);
/// Sets the master weight: splits x32 into the 16-bit parameter (+ error bits), or stores it as f32.
void setMaster(const StepSpec &spec, TensorBuffers &t, const std::vector<float> &x32);
/// Sets the gradient from float32 values (rounded to nearest even for bf16/f16 gradients).
void setGrad(const StepSpec &spec, TensorBuffers &t, const std::vector<float> &g);
/// Reads the float32 master weight (reconstructed from the parameter and its error bits).
std::vector<float> readMaster(const StepSpec &spec, const TensorBuffers &t);
/// Reads state `index` dequantized to float32.
std::vector<float> readState(const StepSpec &spec, const TensorBuffers &t, size_t index);
/// Replaces state `index` with float32 values (quantized per its scheme), adding the groups and
/// blocks it saturated to `counts` (when given).
void writeState(const StepSpec &spec, TensorBuffers &t, size_t index, const std::vector<float> &x,
                NumericsCounts *counts = nullptr);

/// One optimizer step (`step` >= 1, the 1-based step count) on one tensor, in place; the groups
/// and blocks of its states that saturated are added to `counts` (when given).
/// `firstElement` is the tensor's first element's global index in its launch (0 alone).
void step(const StepSpec &spec, TensorBuffers &t, int64_t step, NumericsCounts *counts = nullptr,
          int64_t firstElement = 0);
/// One step on a list of tensors (each independently, as one launch does; tensor k's first
/// element is global element firstTile_k * spec.tileElements).
void step(const StepSpec &spec, std::vector<TensorBuffers> &tensors, int64_t step,
          NumericsCounts *counts = nullptr);

/// One launch of a step: a spec and its tensors.
struct Launch {
  StepSpec spec;
  std::vector<TensorBuffers> *tensors = nullptr;
};
/// The whole-step reductions that `spec`'s update reads, in update order, and the float32
/// operand of each over tensor `t` (the gradient, for GlobalProbe and FlashAdamWClip).
std::vector<std::pair<Reduction, std::vector<float>>> stepReductionOperands(const StepSpec &spec,
                                                                            const TensorBuffers &t);
/// One step of several launches whose updates read whole-step reductions (every launch reads
/// the same ones): each reduction over every tensor of every launch in order (reduceStep of the
/// tensors' accumulations), then each launch stepped as `step` does with those values.
void stepWhole(std::vector<Launch> &launches, int64_t step, NumericsCounts *counts = nullptr);

/// The float32 update of step 2 alone, for whole arrays (p, g, states in and out). Exposed for tests.
void updateElements(const StepSpec &spec, int64_t step, int64_t n, std::vector<float> &p,
                    std::vector<float> g, std::vector<std::vector<float>> &states);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_STEP_H

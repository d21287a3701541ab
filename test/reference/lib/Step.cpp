//===- Step.cpp - Whole-tensor optimizer steps (numerics.md §4) -----------===//
#include "qopt/reference/Step.h"

#include "qopt/reference/Codebook.h"
#include "qopt/reference/Ecc.h"
#include "qopt/reference/Elementary.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Philox.h"

#include "TrustRatio.h"

#include <cmath>
#include <stdexcept>

namespace qopt::ref {

const char *optimizerName(Optimizer o) {
  switch (o) {
  case Optimizer::AdamW: return "AdamW";
  case Optimizer::Adam: return "Adam";
  case Optimizer::SGD: return "SGD";
  case Optimizer::Lion: return "Lion";
  case Optimizer::RMSprop: return "RMSprop";
  case Optimizer::Adagrad: return "Adagrad";
  case Optimizer::AdamAtan2: return "AdamAtan2";
  case Optimizer::AdEMAMix: return "AdEMAMix";
  case Optimizer::LAMB: return "LAMB";
  case Optimizer::LARS: return "LARS";
  case Optimizer::StableAdamW: return "StableAdamW";
  case Optimizer::ReductionProbe: return "ReductionProbe";
  case Optimizer::GlobalProbe: return "GlobalProbe";
  case Optimizer::FlashAdamWClip: return "FlashAdamWClip";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// State schemes
//===----------------------------------------------------------------------===//

StateScheme StateScheme::plainF32(std::string name) {
  StateScheme s;
  s.name = std::move(name);
  s.kind = StateKind::PlainF32;
  return s;
}
StateScheme StateScheme::plainBF16(std::string name) {
  StateScheme s;
  s.name = std::move(name);
  s.kind = StateKind::PlainBF16;
  return s;
}
StateScheme StateScheme::codebook(std::string name, int64_t block, std::vector<float> qmap) {
  StateScheme s;
  s.name = std::move(name);
  s.kind = StateKind::Codebook;
  s.block = block;
  s.qmap = std::move(qmap);
  return s;
}
StateScheme StateScheme::grouped(std::string name, GroupScheme scheme) {
  StateScheme s;
  s.name = std::move(name);
  s.kind = StateKind::Group;
  s.group = scheme;
  return s;
}

DType StateScheme::valueDType() const {
  switch (kind) {
  case StateKind::PlainF32: return DType::F32;
  case StateKind::PlainBF16: return DType::BF16;
  case StateKind::Codebook: return DType::U8;
  case StateKind::Group: return group.isSigned && group.bits == 8 ? DType::I8 : DType::U8;
  }
  return DType::None;
}

int64_t StateScheme::valueCount(int64_t n) const {
  return kind == StateKind::Group ? group.codeBytes(n) : n;
}

DType StateScheme::scaleDType() const {
  switch (kind) {
  case StateKind::Codebook: return DType::F32;
  case StateKind::Group: return group.scaleDType == ScaleDType::F16 ? DType::F16 : DType::F32;
  default: return DType::None;
  }
}

int64_t StateScheme::numScales(int64_t n) const {
  switch (kind) {
  case StateKind::Codebook: return n == 0 ? 0 : (n + block - 1) / block;
  case StateKind::Group: return group.numGroups(n);
  default: return 0;
  }
}

uint8_t StateScheme::zeroCode() const {
  if (kind != StateKind::Codebook)
    return 0;
  float zero = 0.0f, absmax = 0.0f;
  uint8_t code = 0;
  codebookQuantize(&zero, 1, 1, qmap.data(), &code, &absmax);
  return code;
}

//===----------------------------------------------------------------------===//
// Step specification
//===----------------------------------------------------------------------===//

size_t StepSpec::expectedStates() const {
  switch (optimizer) {
  case Optimizer::AdamW:
  case Optimizer::Adam: return 2;
  case Optimizer::SGD: return 1; // 0 is also accepted when momentum == 0 (see validate)
  case Optimizer::Lion: return 1;
  case Optimizer::RMSprop: return 1;
  case Optimizer::Adagrad: return 1;
  case Optimizer::AdamAtan2: return 2;
  case Optimizer::AdEMAMix: return 3;
  case Optimizer::LAMB: return 2;
  case Optimizer::LARS: return 1;
  case Optimizer::StableAdamW: return 2;
  case Optimizer::ReductionProbe: return 4;
  case Optimizer::GlobalProbe: return 3;
  case Optimizer::FlashAdamWClip: return 2;
  }
  return 0;
}

DType StepSpec::eccDType() const {
  switch (master) {
  case Master::None: return DType::None;
  case Master::EccI8: return DType::I8;
  case Master::EccI16: return DType::I16;
  case Master::Stochastic: return DType::None;
  case Master::KahanBF16: return DType::BF16;
  }
  return DType::None;
}

void StepSpec::validate() const {
  auto fail = [&](const std::string &msg) {
    throw std::invalid_argument(std::string(optimizerName(optimizer)) + " step: " + msg);
  };
  if (!isFloatDType(param))
    fail(std::string("parameter dtype must be f32, bf16 or f16, got ") + dtypeName(param));
  if (!isFloatDType(grad))
    fail(std::string("gradient dtype must be f32, bf16 or f16, got ") + dtypeName(grad));
  if (eccDType() != DType::None && param == DType::F32)
    fail("an f32 parameter takes no error-correction bits (master must be none)");
  if (master == Master::KahanBF16 && param != DType::BF16)
    fail("a Kahan compensation needs a bf16 parameter");
  if (master == Master::Stochastic && param != DType::BF16)
    fail("stochastic rounding needs a bf16 parameter");
  if (master == Master::Stochastic &&
      !(hyper.seed >= 0 && hyper.seed < 16777216.0 && hyper.seed == std::floor(hyper.seed)))
    fail("the stochastic rounding's seed must be an integer in [0, 2^24)");
  const bool sgdWithoutBuffer = optimizer == Optimizer::SGD && hyper.momentum == 0.0 && states.empty();
  if (states.size() != expectedStates() && !sgdWithoutBuffer)
    fail("needs " + std::to_string(expectedStates()) + " state(s)" +
         (optimizer == Optimizer::SGD ? " (or none when momentum == 0)" : "") + ", got " +
         std::to_string(states.size()));
  for (const StateScheme &s : states) {
    if (s.kind == StateKind::Codebook) {
      if (s.qmap.size() != 256)
        fail("state '" + s.name + "': a codebook needs a 256-entry qmap, got " +
             std::to_string(s.qmap.size()));
      if (s.block < 1)
        fail("state '" + s.name + "': codebook block must be >= 1");
    }
    if (s.kind == StateKind::Group)
      s.group.validate();
  }
}

StepSpec flashAdamW(const Hyper &hyper, Master master) {
  StepSpec s;
  s.optimizer = Optimizer::AdamW;
  s.hyper = hyper;
  s.param = DType::BF16;
  s.master = master;
  s.grad = DType::BF16;
  s.states = {StateScheme::grouped("m", GroupScheme::momentum()),
              StateScheme::grouped("v", GroupScheme::variance())};
  return s;
}

StepSpec seed000AdamW(const std::vector<float> &qmap1, const std::vector<float> &qmap2,
                      const Hyper &hyper, DType grad, int64_t block) {
  StepSpec s;
  s.optimizer = Optimizer::AdamW;
  s.hyper = hyper;
  s.param = DType::BF16;
  s.master = Master::None;
  s.grad = grad;
  s.states = {StateScheme::codebook("m", block, qmap1), StateScheme::codebook("v", block, qmap2)};
  return s;
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

std::vector<Buffer *> TensorBuffers::streams() {
  std::vector<Buffer *> out{&param};
  if (!ecc.empty())
    out.push_back(&ecc);
  out.push_back(&grad);
  for (StateBuffers &s : states) {
    out.push_back(&s.values);
    if (!s.scales.empty())
      out.push_back(&s.scales);
  }
  return out;
}

std::vector<std::string> TensorBuffers::streamNames(const StepSpec &spec, const std::string &paramName,
                                                    const std::string &gradName) const {
  std::vector<std::string> out{paramName};
  if (spec.eccDType() != DType::None)
    out.push_back(paramName + (spec.master == Master::KahanBF16 ? ".kahan" : ".ecc"));
  out.push_back(gradName);
  for (const StateScheme &s : spec.states) {
    switch (s.kind) {
    case StateKind::PlainF32:
    case StateKind::PlainBF16: out.push_back(s.name); break;
    case StateKind::Codebook:
      out.push_back(s.name + ".codes");
      out.push_back(s.name + ".absmax");
      break;
    case StateKind::Group:
      out.push_back(s.name + ".codes");
      out.push_back(s.name + ".scales");
      break;
    }
  }
  return out;
}

static void checkTensor(const StepSpec &spec, const TensorBuffers &t) {
  spec.validate();
  auto fail = [&](const std::string &msg) {
    throw std::invalid_argument(std::string(optimizerName(spec.optimizer)) + " step: " + msg);
  };
  auto expect = [&](const Buffer &b, DType dt, int64_t count, const std::string &what) {
    if (b.dtype() != dt || b.count() != count)
      fail(what + " stream is " + std::to_string(b.count()) + " x " + dtypeName(b.dtype()) + ", expected " +
           std::to_string(count) + " x " + dtypeName(dt));
  };
  if (t.numel < 0)
    fail("negative element count");
  expect(t.param, spec.param, t.numel, "parameter");
  if (spec.eccDType() != DType::None)
    expect(t.ecc, spec.eccDType(), t.numel, "error-bits");
  else if (!t.ecc.empty())
    fail("error-bits stream given but master is none");
  expect(t.grad, spec.grad, t.numel, "gradient");
  if (t.states.size() != spec.states.size())
    fail("has " + std::to_string(t.states.size()) + " state buffers, spec has " +
         std::to_string(spec.states.size()));
  for (size_t k = 0; k < spec.states.size(); ++k) {
    const StateScheme &s = spec.states[k];
    expect(t.states[k].values, s.valueDType(), s.valueCount(t.numel), "state '" + s.name + "' value/code");
    if (s.scaleDType() != DType::None)
      expect(t.states[k].scales, s.scaleDType(), s.numScales(t.numel), "state '" + s.name + "' scale");
  }
}

TensorBuffers makeTensor(const StepSpec &spec, int64_t n) {
  spec.validate();
  TensorBuffers t;
  t.numel = n;
  t.param = Buffer(spec.param, n);
  if (spec.eccDType() != DType::None)
    t.ecc = Buffer(spec.eccDType(), n);
  t.grad = Buffer(spec.grad, n);
  for (const StateScheme &s : spec.states) {
    StateBuffers b;
    b.values = Buffer(s.valueDType(), s.valueCount(n));
    const uint8_t zc = s.zeroCode();
    if (zc != 0)
      for (int64_t i = 0; i < n; ++i)
        b.values.as<uint8_t>()[i] = zc;
    if (s.scaleDType() != DType::None)
      b.scales = Buffer(s.scaleDType(), s.numScales(n));
    t.states.push_back(std::move(b));
  }
  return t;
}

void setMaster(const StepSpec &spec, TensorBuffers &t, const std::vector<float> &x32) {
  if (static_cast<int64_t>(x32.size()) != t.numel)
    throw std::invalid_argument("setMaster: " + std::to_string(x32.size()) + " values for " +
                                std::to_string(t.numel) + " elements");
  if (spec.eccDType() == DType::None || spec.master == Master::KahanBF16) {
    t.param = Buffer::fromFloats(spec.param, x32); // one rounding to nearest even
    if (spec.master == Master::KahanBF16)
      t.ecc = Buffer(DType::BF16, t.numel); // a zero compensation
    return;
  }
  t.param = Buffer(spec.param, t.numel);
  t.ecc = Buffer(spec.eccDType(), t.numel);
  eccEncode(x32.data(), t.numel, spec.param, spec.eccDType(), t.param.as<uint16_t>(), t.ecc.data());
}

void setGrad(const StepSpec &spec, TensorBuffers &t, const std::vector<float> &g) {
  if (static_cast<int64_t>(g.size()) != t.numel)
    throw std::invalid_argument("setGrad: " + std::to_string(g.size()) + " values for " +
                                std::to_string(t.numel) + " elements");
  t.grad = Buffer::fromFloats(spec.grad, g);
}

std::vector<float> readMaster(const StepSpec &spec, const TensorBuffers &t) {
  if (spec.eccDType() == DType::None || spec.master == Master::KahanBF16)
    return t.param.toFloats();
  std::vector<float> out(static_cast<size_t>(t.numel));
  eccDecode(t.param.as<uint16_t>(), t.ecc.data(), t.numel, spec.param, spec.eccDType(), out.data());
  return out;
}

std::vector<float> readState(const StepSpec &spec, const TensorBuffers &t, size_t index) {
  const StateScheme &s = spec.states.at(index);
  const StateBuffers &b = t.states.at(index);
  std::vector<float> out(static_cast<size_t>(t.numel));
  switch (s.kind) {
  case StateKind::PlainF32:
  case StateKind::PlainBF16: return b.values.toFloats();
  case StateKind::Codebook:
    codebookDequantize(b.values.as<uint8_t>(), b.scales.as<float>(), t.numel, s.block, s.qmap.data(),
                       out.data());
    break;
  case StateKind::Group:
    groupDequantize(s.group, b.values.data(), b.scales.data(), t.numel, out.data());
    break;
  }
  return out;
}

void writeState(const StepSpec &spec, TensorBuffers &t, size_t index, const std::vector<float> &x,
                NumericsCounts *counts) {
  const StateScheme &s = spec.states.at(index);
  StateBuffers &b = t.states.at(index);
  if (static_cast<int64_t>(x.size()) != t.numel)
    throw std::invalid_argument("writeState: wrong element count for state '" + s.name + "'");
  switch (s.kind) {
  case StateKind::PlainF32:
  case StateKind::PlainBF16: b.values = Buffer::fromFloats(s.valueDType(), x); break;
  case StateKind::Codebook:
    codebookQuantize(x.data(), t.numel, s.block, s.qmap.data(), b.values.as<uint8_t>(),
                     b.scales.as<float>(), s.overflow, counts);
    break;
  case StateKind::Group:
    groupQuantize(s.group, x.data(), t.numel, b.values.data(), b.scales.data(), counts);
    break;
  }
}

//===----------------------------------------------------------------------===//
// The update
//===----------------------------------------------------------------------===//

/// sign(c): +-1; +0 for +-0 and NaN.
static float signOf(float c) {
  // torch.sign: +1, -1, and 0 for +-0 and NaN (docs/dsl.md's sign).
  if (std::isnan(c))
    return 0.0f;
  return c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
}

/// The DSL's min of uniforms: NaN-propagating (torch.minimum), as the runtime evaluates it.
static double minimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::nan("");
  return b < a ? b : a;
}

void updateElements(const StepSpec &spec, int64_t step, int64_t n, std::vector<float> &p,
                    std::vector<float> g, std::vector<std::vector<float>> &st) {
  const Hyper &h = spec.hyper;
  const double stepD = static_cast<double>(step);
  switch (spec.optimizer) {
  case Optimizer::LAMB:
  case Optimizer::LARS:
  case Optimizer::StableAdamW:
  case Optimizer::ReductionProbe:
    updateTrustRatio(spec, step, n, p, g, st);
    return;
  case Optimizer::GlobalProbe:
    updateGlobalProbe(spec, n, p, g, st);
    return;
  case Optimizer::FlashAdamWClip:
    clipGradients(spec, g);
    [[fallthrough]];
  case Optimizer::AdamW:
  case Optimizer::Adam: {
    const bool decoupled = spec.optimizer != Optimizer::Adam;
    // Uniforms: float64 on the host, one rounding to float32 where they meet a float32 value.
    const float b1 = toF32(h.beta1), omb1 = toF32(1.0 - h.beta1);     // beta1, (1 - beta1)
    const float b2 = toF32(h.beta2), omb2 = toF32(1.0 - h.beta2);     // beta2, (1 - beta2)
    const double bc1 = 1.0 - std::pow(h.beta1, stepD);                 // seed 000: 1 - beta1**step
    const double bc2 = 1.0 - std::pow(h.beta2, stepD);                 // seed 000: 1 - beta2**step
    const float bc2f = toF32(bc2);
    const float recipBc2 = spec.scalarDivision == ScalarDivision::ReciprocalF64
                               ? toF32(1.0 / bc2)                      // PyTorch 2.11 CUDA
                               : 1.0f / bc2f;                          // float32 reciprocal
    const float eps = toF32(h.eps);
    const float stepSize = toF32(h.lr / bc1);                          // seed 000: (lr / bc1), float64
    const float decay = toF32(1.0 - h.lr * h.weightDecay);             // seed 000: (1.0 - lr * wd)
    const float wd = toF32(h.weightDecay);
    std::vector<float> &m = st[0], &v = st[1];
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i];
      if (!decoupled)
        gi = gi + wd * p[i];                                           // Adam (L2): g + wd * p
      const float mNew = b1 * m[i] + omb1 * gi;                        // beta1 * m + (1 - beta1) * g
      const float vNew = b2 * v[i] + (omb2 * gi) * gi;                 // beta2 * v + (1 - beta2) * g * g
      const float vHat = spec.scalarDivision == ScalarDivision::Ieee ? vNew / bc2f
                                                                     : vNew * recipBc2; // v_new / bc2
      const float denom = std::sqrt(vHat) + eps;                       // (...).sqrt() + eps
      const float upd = (stepSize * mNew) / denom;                     // (lr / bc1) * m_new / denom
      p[i] = decoupled ? p[i] * decay - upd                            // p * (1 - lr * wd) - upd
                       : p[i] - upd;
      m[i] = mNew;
      v[i] = vNew;
    }
    return;
  }
  case Optimizer::SGD: {
    // torch.optim.SGD: d_p = g + wd * p; buf = d_p on the first step, else
    // momentum * buf + (1 - dampening) * d_p; d_p = d_p + momentum * buf (Nesterov) or buf;
    // p = p - lr * d_p. Decoupled decay (SGDW) scales p by (1 - lr * wd) first instead.
    // As in specs/flash_sgd.qopt: the L2 term is added even when wd == 0 (torch skips it; the two
    // differ only for a non-finite p or a -0 gradient), and with a buffer state the buffer formula
    // is used whatever the momentum (torch keeps no buffer when momentum == 0).
    const float lr = toF32(h.lr), wd = toF32(h.weightDecay), mom = toF32(h.momentum);
    const float omd = toF32(1.0 - h.dampening);
    const float decay = toF32(1.0 - h.lr * h.weightDecay);
    const bool coupled = !h.decoupled;
    const bool useMomentum = !st.empty();
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i];
      if (coupled)
        d = d + wd * p[i];                                             // g + wd * p
      if (useMomentum) {
        float &buf = st[0][i];
        buf = step == 1 ? d : mom * buf + omd * d;                     // first step: buf = g
        d = h.nesterov ? d + mom * buf : buf;                          // Nesterov: g + momentum * buf
      }
      p[i] = h.decoupled ? p[i] * decay - lr * d                       // p * (1 - lr * wd) - lr * d
                         : p[i] - lr * d;                              // p - lr * d
    }
    return;
  }
  case Optimizer::Lion: {
    // numerics.md §4: u = sign(beta1*m + (1-beta1)*g); p = p*(1 - lr*wd) - lr*u;
    // m = beta2*m + (1-beta2)*g
    const float b1 = toF32(h.beta1), omb1 = toF32(1.0 - h.beta1);
    const float b2 = toF32(h.beta2), omb2 = toF32(1.0 - h.beta2);
    const float lr = toF32(h.lr), decay = toF32(1.0 - h.lr * h.weightDecay);
    std::vector<float> &m = st[0];
    for (int64_t i = 0; i < n; ++i) {
      const float c = b1 * m[i] + omb1 * g[i];
      const float u = signOf(c);
      p[i] = p[i] * decay - lr * u;
      m[i] = b2 * m[i] + omb2 * g[i];
    }
    return;
  }
  case Optimizer::RMSprop:
  case Optimizer::Adagrad: {
    // torch.optim.RMSprop (no momentum, not centered): v = alpha*v + (1-alpha)*g*g;
    // p = p - lr * g / (sqrt(v) + eps). torch.optim.Adagrad: s = s + g*g, the learning rate
    // lr / (1 + (step - 1) * lr_decay). Both add wd*p to the gradient first (L2), as the specs
    // (always; torch only when wd != 0).
    const bool rms = spec.optimizer == Optimizer::RMSprop;
    const float wd = toF32(h.weightDecay), eps = toF32(h.eps);
    const float a = toF32(h.alpha), oma = toF32(1.0 - h.alpha);
    const float lr = rms ? toF32(h.lr) : toF32(h.lr / (1.0 + (stepD - 1.0) * h.lrDecay));
    std::vector<float> &v = st[0];
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * p[i];                               // g + wd * p
      v[i] = rms ? a * v[i] + (oma * d) * d                           // alpha*v + (1-alpha)*d*d
                 : v[i] + d * d;                                      // s + d*d
      p[i] = p[i] - lr * (d / (std::sqrt(v[i]) + eps));               // p - lr * (d / (sqrt + eps))
    }
    return;
  }
  case Optimizer::AdamAtan2: {
    // Adam-atan2 (lucidrains' adam-atan2-pytorch): the epsilon replaced by atan2,
    // a * atan2(m / bc1, b * sqrt(v / bc2)), as m * (1/bc1) and sqrt(v * (b*b/bc2)).
    const float b1 = toF32(h.beta1), omb1 = toF32(1.0 - h.beta1);
    const float b2 = toF32(h.beta2), omb2 = toF32(1.0 - h.beta2);
    const double bc1 = 1.0 - std::pow(h.beta1, stepD), bc2 = 1.0 - std::pow(h.beta2, stepD);
    const float invBc1 = toF32(1.0 / bc1), vScale = toF32(h.b * h.b / bc2);
    const float decay = toF32(1.0 - h.lr * h.weightDecay), step = toF32(h.lr * h.a);
    std::vector<float> &m = st[0], &v = st[1];
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + omb1 * g[i];
      v[i] = b2 * v[i] + (omb2 * g[i]) * g[i];
      const float u = atan2F32(m[i] * invBc1, std::sqrt(v[i] * vScale));
      p[i] = p[i] * decay - step * u;                                 // p*(1 - lr*wd) - (lr*a)*u
    }
    return;
  }
  case Optimizer::AdEMAMix: {
    // bitsandbytes' AdEMAMix with its alpha and beta3 warm-ups (optim/ademamix.py), the
    // uniforms in float64 as the spec writes them.
    double alphaT = h.alpha, beta3T = h.beta3;
    if (h.tAlpha > 0)
      alphaT = minimum(stepD * h.alpha / h.tAlpha, h.alpha);
    if (h.tBeta3 > 0) {
      const double s = stepD / h.tBeta3, lnB1 = std::log(h.beta1), lnB3 = std::log(h.beta3);
      beta3T = minimum(std::exp(lnB1 * lnB3 / ((1.0 - s) * lnB3 + s * lnB1)), h.beta3);
    }
    const float b1 = toF32(h.beta1), omb1 = toF32(1.0 - h.beta1);
    const float b2 = toF32(h.beta2), omb2 = toF32(1.0 - h.beta2);
    const float b3 = toF32(beta3T), omb3 = toF32(1.0 - beta3T);
    const float bc1 = toF32(1.0 - std::pow(h.beta1, stepD));
    const float sqrtBc2 = toF32(std::sqrt(1.0 - std::pow(h.beta2, stepD)));
    const float eps = toF32(h.eps), alpha = toF32(alphaT), lr = toF32(h.lr);
    const float decay = toF32(1.0 - h.lr * h.weightDecay);
    std::vector<float> &m1 = st[0], &m2 = st[1], &nu = st[2];
    for (int64_t i = 0; i < n; ++i) {
      m1[i] = b1 * m1[i] + omb1 * g[i];
      m2[i] = b3 * m2[i] + omb3 * g[i];
      nu[i] = b2 * nu[i] + (omb2 * g[i]) * g[i];
      const float denom = std::sqrt(nu[i]) / sqrtBc2 + eps;
      const float u = (m1[i] / bc1 + alpha * m2[i]) / denom;
      p[i] = p[i] * decay - lr * u;
    }
    return;
  }
  }
}

void step(const StepSpec &spec, TensorBuffers &t, int64_t stepIndex, NumericsCounts *counts,
          int64_t firstElement) {
  checkTensor(spec, t);
  if (stepIndex < 1)
    throw std::invalid_argument("step: the step count is 1-based, got " + std::to_string(stepIndex));
  const int64_t n = t.numel;
  // 1. load: the float32 master, the gradient, the dequantized states
  std::vector<float> p = readMaster(spec, t);
  const std::vector<float> p0 = p;
  std::vector<float> g = t.grad.toFloats();
  std::vector<std::vector<float>> st;
  for (size_t k = 0; k < spec.states.size(); ++k)
    st.push_back(readState(spec, t, k));
  // 2. update in float32
  updateElements(spec, stepIndex, n, p, std::move(g), st);
  // 3. store: requantize the states, split the master
  for (size_t k = 0; k < spec.states.size(); ++k)
    writeState(spec, t, k, st[k], counts);
  if (spec.master == Master::KahanBF16) {
    // optimi's kahan_sum: the change joins the compensation, the sum is rounded to the
    // parameter, what the rounding lost is the new compensation.
    std::vector<float> c = t.ecc.toFloats();
    for (int64_t i = 0; i < n; ++i) {
      const float s = c[i] + (p[i] - p0[i]);
      const uint16_t x16 = floatToBf16Bits(p0[i] + s);
      t.param.as<uint16_t>()[i] = x16;
      t.ecc.as<uint16_t>()[i] = floatToBf16Bits(s - (bf16BitsToFloat(x16) - p0[i]));
    }
    return;
  }
  if (spec.master != Master::Stochastic) {
    setMaster(spec, t, p);
    return;
  }
  // The seed and the step as the kernel reads them: float32 uniforms, exact integers.
  const auto seed = static_cast<uint32_t>(static_cast<float>(spec.hyper.seed));
  const auto stepKey = static_cast<uint32_t>(static_cast<float>(stepIndex));
  for (int64_t i = 0; i < n; ++i)
    t.param.as<uint16_t>()[i] =
        stochasticRoundBF16(p[i], seed, stepKey, static_cast<uint64_t>(firstElement + i));
}

void step(const StepSpec &spec, std::vector<TensorBuffers> &tensors, int64_t stepIndex,
          NumericsCounts *counts) {
  int64_t firstTile = 0;
  for (TensorBuffers &t : tensors) {
    step(spec, t, stepIndex, counts, firstTile * spec.tileElements);
    firstTile += (t.numel + spec.tileElements - 1) / spec.tileElements;
  }
}

} // namespace qopt::ref

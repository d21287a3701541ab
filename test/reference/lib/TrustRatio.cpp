//===- TrustRatio.cpp - LAMB, LARS and StableAdamW (per-tensor norms) -----===//
//
// The updates of the optimizers whose step reads a reduction over the tensor
// (Reduce.h), as specs/reductions/*.qopt write them: float32 with one rounding
// per operation, uniforms in float64 rounded to float32 once.
//
//===----------------------------------------------------------------------===//
#include "TrustRatio.h"

#include "qopt/reference/Float.h"
#include "qopt/reference/Reduce.h"

#include <cmath>
#include <limits>

namespace qopt::ref {

/// torch.maximum of float32 values: NaN-propagating.
static float maximumF32(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<float>::quiet_NaN();
  return a > b ? a : (b > a ? b : (std::signbit(a) ? b : a));
}

/// bitsandbytes' update-norm clipping: limit / unorm where unorm exceeds
/// limit = max_unorm * |p| (and max_unorm > 0), else 1.
static float unormScale(double maxUnorm, float pNorm, float uNorm) {
  const float limit = toF32(maxUnorm) * pNorm;
  return maxUnorm > 0.0 && uNorm > limit ? limit / uNorm : 1.0f;
}

void updateTrustRatio(const StepSpec &spec, int64_t step, int64_t n, std::vector<float> &p,
                      const std::vector<float> &g, std::vector<std::vector<float>> &st) {
  const Hyper &h = spec.hyper;
  const double t = static_cast<double>(step);
  if (n == 0)
    return;
  switch (spec.optimizer) {
  case Optimizer::LAMB: {
    // u = (m' / f32(bc1)) / (sqrt(v' / f32(bc2)) + eps); p' = (p - s * (lr * u)) * (1 - lr*wd).
    const float b1 = toF32(h.beta1), omb1 = toF32(1.0 - h.beta1);
    const float b2 = toF32(h.beta2), omb2 = toF32(1.0 - h.beta2);
    const float bc1 = toF32(1.0 - std::pow(h.beta1, t)), bc2 = toF32(1.0 - std::pow(h.beta2, t));
    const float eps = toF32(h.eps), lr = toF32(h.lr), decay = toF32(1.0 - h.lr * h.weightDecay);
    std::vector<float> &m = st[0], &v = st[1], u(n);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + omb1 * g[i];
      v[i] = b2 * v[i] + (omb2 * g[i]) * g[i];
      u[i] = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
    }
    const float s = unormScale(h.maxUnorm, reduce(Reduction::Norm, p), reduce(Reduction::Norm, u));
    for (int64_t i = 0; i < n; ++i)
      p[i] = (p[i] - s * (lr * u[i])) * decay;
    return;
  }
  case Optimizer::LARS: {
    // d = g + wd*p; buf' = step == 1 ? d : momentum*buf + d; p' = p - s * (lr * buf').
    const float wd = toF32(h.weightDecay), mom = toF32(h.momentum), lr = toF32(h.lr);
    std::vector<float> &buf = st[0];
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * p[i];
      buf[i] = step == 1 ? d : mom * buf[i] + d;
    }
    const float s = unormScale(h.maxUnorm, reduce(Reduction::Norm, p), reduce(Reduction::Norm, buf));
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] - s * (lr * buf[i]);
    return;
  }
  case Optimizer::StableAdamW: {
    // optimi: debiased betas b^ = (b^t - b) / (b^t - 1); m' = m + (1 - b1^)(g - m);
    // v' = b2^ v + (1 - b2^)(g*g); rms = sqrt(mean(g*g / max(v', eps^2)));
    // lr' = lr / (rms > 1 ? rms : 1) (Python's max(1, rms), which keeps lr for a NaN rms);
    // p' = p * (1 - lr' * wd) - lr' * (m' / (sqrt(v') + eps)).
    const double b1hat = (std::pow(h.beta1, t) - h.beta1) / (std::pow(h.beta1, t) - 1.0);
    const double b2hat = (std::pow(h.beta2, t) - h.beta2) / (std::pow(h.beta2, t) - 1.0);
    const float omb1 = toF32(1.0 - b1hat), b2 = toF32(b2hat), omb2 = toF32(1.0 - b2hat);
    const float eps = toF32(h.eps), epsSq = toF32(h.eps * h.eps), wd = toF32(h.weightDecay);
    std::vector<float> &m = st[0], &v = st[1], r(n);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = m[i] + omb1 * (g[i] - m[i]);
      v[i] = b2 * v[i] + omb2 * (g[i] * g[i]);
      r[i] = g[i] * g[i] / maximumF32(v[i], epsSq);
    }
    const float rms = std::sqrt(reduce(Reduction::Mean, r));
    const float lr = toF32(h.lr) / (rms > 1.0f ? rms : 1.0f); // Python's max(1, rms)
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] * (1.0f - lr * wd) - lr * (m[i] / (std::sqrt(v[i]) + eps));
    return;
  }
  case Optimizer::ReductionProbe: {
    const float sum = reduce(Reduction::Sum, g), max = reduce(Reduction::Max, g);
    const float mean = reduce(Reduction::Mean, g), norm = reduce(Reduction::Norm, g);
    const float rms = reduce(Reduction::Rms, g);
    for (int64_t i = 0; i < n; ++i) {
      st[0][i] = max;
      st[1][i] = mean;
      st[2][i] = norm;
      st[3][i] = rms;
      p[i] = sum;
    }
    return;
  }
  default:
    return;
  }
}

} // namespace qopt::ref

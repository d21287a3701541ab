//===- Reduce.cpp - Per-tensor reductions in the DSL's order ---------------===//
#include "qopt/reference/Reduce.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace qopt::ref {

/// max with NaN propagation and -0 below +0 (IEEE 754-2019 maximum).
static double maximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

static double combine(Reduction kind, double a, double b) {
  return kind == Reduction::Max ? maximum(a, b) : a + b;
}

/// The pairwise tree of t[0, n), n a power of two: left half, then right.
static double tree(Reduction kind, const double *t, int64_t n) {
  if (n == 1)
    return t[0];
  return combine(kind, tree(kind, t, n / 2), tree(kind, t + n / 2, n / 2));
}

static double identityOf(Reduction kind) {
  return kind == Reduction::Max ? -std::numeric_limits<double>::infinity() : -0.0;
}

/// The pairwise tree over `partials` padded with the identity to a power of
/// two, level by level: node i of the next level is nodes 2i and 2i + 1.
static double treeOverPartials(Reduction kind, std::vector<double> partials) {
  size_t width = 1;
  while (width < partials.size())
    width *= 2;
  partials.resize(width, identityOf(kind));
  for (; width > 1; width /= 2)
    for (size_t i = 0; i < width / 2; ++i)
      partials[i] = combine(kind, partials[2 * i], partials[2 * i + 1]);
  return partials[0];
}

/// One rounding to float32; a NaN is the canonical quiet NaN.
static float toF32Canonical(double acc) {
  float r = static_cast<float>(acc);
  if (std::isnan(r)) {
    const uint32_t qnan = 0x7fc00000u;
    std::memcpy(&r, &qnan, sizeof r);
  }
  return r;
}

double accumulate(Reduction kind, const std::vector<float> &x) {
  if (x.empty())
    throw std::invalid_argument("reduce: a reduction of no elements");
  const double identity = identityOf(kind);
  const int64_t n = static_cast<int64_t>(x.size());
  // Each chunk's partial, the pairwise tree of its terms.
  std::vector<double> chunk(kReductionChunk), partials;
  for (int64_t start = 0; start < n; start += kReductionChunk) {
    for (int64_t i = 0; i < kReductionChunk; ++i) {
      if (start + i >= n) {
        chunk[i] = identity;
        continue;
      }
      const double v = static_cast<double>(x[start + i]);
      chunk[i] = kind == Reduction::Norm || kind == Reduction::Rms ? v * v : v;
    }
    partials.push_back(tree(kind, chunk.data(), kReductionChunk));
  }
  return treeOverPartials(kind, std::move(partials));
}

float reduce(Reduction kind, const std::vector<float> &x) {
  double acc = accumulate(kind, x);
  if (kind == Reduction::Mean || kind == Reduction::Rms)
    acc /= static_cast<double>(x.size());
  if (kind == Reduction::Norm || kind == Reduction::Rms)
    acc = std::sqrt(acc);
  return toF32Canonical(acc);
}

float reduceStep(Reduction kind, const std::vector<double> &accumulations) {
  if (kind == Reduction::Mean || kind == Reduction::Rms)
    throw std::invalid_argument("reduceStep: mean and rms have no whole-step form");
  if (accumulations.empty())
    throw std::invalid_argument("reduceStep: a step of no tensors");
  double acc = treeOverPartials(kind, accumulations);
  if (kind == Reduction::Norm)
    acc = std::sqrt(acc);
  return toF32Canonical(acc);
}

} // namespace qopt::ref

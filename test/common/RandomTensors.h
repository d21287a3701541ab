//===- RandomTensors.h - The kernel suites' random master weights ---------===//
//
// The host and GPU kernel suites step tensors whose master weights are
// 0.5 * N(0, 1): one helper, so that every suite draws them the same way
// (n draws of `normal` from `rng` per tensor, in order).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_COMMON_RANDOMTENSORS_H
#define QOPT_TEST_COMMON_RANDOMTENSORS_H

#include "qopt/reference/Step.h"

#include <cstdint>
#include <random>
#include <vector>

namespace qopt::test {

namespace ref = qopt::ref;

/// One tensor of `n` elements of `spec`'s layout, its master weights
/// 0.5 * normal(rng).
inline ref::TensorBuffers randomTensor(const ref::StepSpec &spec, int64_t n, std::mt19937 &rng,
                                       std::normal_distribution<float> &normal) {
  ref::TensorBuffers t = ref::makeTensor(spec, n);
  std::vector<float> x(n);
  for (float &v : x)
    v = 0.5f * normal(rng);
  ref::setMaster(spec, t, x);
  return t;
}

/// A tensor of each of `sizes`, drawn in order as randomTensor draws them.
inline std::vector<ref::TensorBuffers> randomTensors(const ref::StepSpec &spec,
                                                     const std::vector<int64_t> &sizes,
                                                     std::mt19937 &rng,
                                                     std::normal_distribution<float> &normal) {
  std::vector<ref::TensorBuffers> tensors;
  for (int64_t n : sizes)
    tensors.push_back(randomTensor(spec, n, rng, normal));
  return tensors;
}

} // namespace qopt::test

#endif // QOPT_TEST_COMMON_RANDOMTENSORS_H

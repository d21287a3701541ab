//===- TestUtil.h - Helpers shared by the reference tests -----------------===//
#ifndef QOPT_REFERENCE_TESTS_TESTUTIL_H
#define QOPT_REFERENCE_TESTS_TESTUTIL_H

#include "qopt/reference/Reference.h"
#include "qopt/safetensors/SafeTensors.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace qopt::ref::test {

/// A file of test/data/golden/.
inline std::string goldenPath(const std::string &name) { return std::string(QOPT_GOLDEN_DIR) + "/" + name; }

/// Number of positions whose bytes differ (element size = sizeof(T)).
template <class T> int64_t countBitDiffs(const T *a, const T *b, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0)
      ++d;
  return d;
}
template <class T> int64_t countBitDiffs(const std::vector<T> &a, const std::vector<T> &b) {
  if (a.size() != b.size())
    return -1;
  return countBitDiffs(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

/// Deterministic random float32 values.
inline std::vector<float> randn(std::mt19937_64 &rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng) * scale;
  return v;
}

/// ULP-distance-free comparison helper: |a - b| <= atol + rtol * |b|.
inline bool close(double a, double b, double rtol, double atol) {
  const double d = a > b ? a - b : b - a;
  return d <= atol + rtol * (b < 0 ? -b : b);
}

} // namespace qopt::ref::test

#endif // QOPT_REFERENCE_TESTS_TESTUTIL_H

//===- FourBitTableValues.h - Gradients on the 4-bit tables' midpoints -*- C++ -*-===//
//
// Shared by the host and GPU suites. With beta1 = beta2 = 0 an Adam step's
// new states are m = g and v = RN(g * g) exactly; with the first element of
// every group +-1 (and no larger one) both absmaxes are 1, so c = g for m's
// codes and c = RN(g * g) for v's. The values: every midpoint of the signed
// dynamic table and the floats beside it, both signs; for the (k + 1) / 16
// table the floats g around the square root of each midpoint, among them
// those whose square rounds onto the midpoint (a tie); 0, +-1 and tiny
// values. The codes must be the reference's count of midpoints below c
// (the lower code on a tie).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_COMMON_FOURBITTABLEVALUES_H
#define QOPT_TEST_COMMON_FOURBITTABLEVALUES_H

#include "qopt/reference/Group.h"

#include <cmath>
#include <limits>
#include <vector>

namespace qopt::test {

inline std::vector<float> fourBitTableValues() {
  namespace ref = qopt::ref;
  const float inf = std::numeric_limits<float>::infinity();
  auto midpoints = [](ref::Companding c) {
    std::vector<float> t = ref::fourBitTable(c), mids;
    for (size_t k = 0; k + 1 < t.size(); ++k)
      mids.push_back((t[k] + t[k + 1]) * 0.5f);
    return mids;
  };
  std::vector<float> values;
  auto withNeighbours = [&](float x, int ulps) {
    float lo = x, hi = x;
    for (int i = 0; i < ulps; ++i) {
      lo = std::nextafter(lo, -inf);
      hi = std::nextafter(hi, inf);
    }
    for (float y = lo; y <= hi; y = std::nextafter(y, inf))
      if (std::fabs(y) <= 1.0f) {
        values.push_back(y);
        values.push_back(-y);
      }
  };
  for (float mid : midpoints(ref::Companding::Dynamic))
    withNeighbours(mid, 1);
  for (float mid : midpoints(ref::Companding::NonZero))
    withNeighbours(std::sqrt(mid), 3);
  for (float x : {0.0f, 1e-30f, 0x1p-126f, 1.0f, 0.5f, 1.0f / 16, 0.25f})
    withNeighbours(x, 1);
  return values;
}

/// Whether some value's square is one of the (k + 1) / 16 table's midpoints:
/// the values reach that table's ties.
inline bool fourBitTableValuesHitTies() {
  std::vector<float> t = qopt::ref::fourBitTable(qopt::ref::Companding::NonZero);
  for (float g : fourBitTableValues())
    for (size_t k = 0; k + 1 < t.size(); ++k)
      if (g * g == (t[k] + t[k + 1]) * 0.5f)
        return true;
  return false;
}

} // namespace qopt::test

#endif // QOPT_TEST_COMMON_FOURBITTABLEVALUES_H

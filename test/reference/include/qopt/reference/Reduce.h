//===- Reduce.h - Per-tensor reductions in the DSL's order ------*- C++ -*-===//
//
// docs/numerics.md, "Reductions": each element gives a float64 term (x for
// sum, mean and max; x * x, exact, for norm and rms); the tensor is cut into
// chunks of 2048 elements, a chunk's partial is the pairwise tree of its terms
// in index order (terms past the tensor's end are -0.0 for sums, -inf for the
// maximum, so they change nothing), and the partials, padded with the same
// identity to a power of two, are reduced by the same pairwise tree. The value is rounded to float32 once (after
// the division by n for mean and rms and the square root for norm and rms); a
// NaN is the canonical quiet NaN 0x7fc00000.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_REDUCE_H
#define QOPT_REFERENCE_REDUCE_H

#include <cstdint>
#include <vector>

namespace qopt::ref {

enum class Reduction { Sum, Mean, Max, Norm, Rms };

/// The elements of one chunk.
constexpr int64_t kReductionChunk = 2048;

/// The reduction `kind` of the float32 values `x` (not empty).
float reduce(Reduction kind, const std::vector<float> &x);

/// The float64 accumulation of `x` (not empty) before its finish: the
/// tree over the chunks' partials (the sum of squares for norm and rms).
double accumulate(Reduction kind, const std::vector<float> &x);

/// A whole-step reduction (docs/numerics.md, "Whole-step reductions";
/// Sum, Max or Norm): the tensors' accumulations in step order, padded with
/// the identity to a power of two, reduced by the same pairwise tree, then
/// the square root for Norm and one rounding to float32 (a NaN canonical).
float reduceStep(Reduction kind, const std::vector<double> &accumulations);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_REDUCE_H

//===- QoptMainData.h - qopt-main's list data and reference steps ---------===//
//
// The main job's data: the host data of a parameter list (float32 masters,
// bf16 gradients per step, a realistic spread) and the C++ reference's steps
// of one tensor, which both the GPU run and the host smoke check compare
// with byte for byte.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_BENCH_QOPTMAINDATA_H
#define QOPT_BENCH_QOPTMAINDATA_H

#include "BenchCommon.h"

#include "qopt/reference/Step.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qopt::mainjob {

namespace ref = qopt::ref;
using qopt::bench::NamedShape;

/// Group/block size of each reference stream in ABI order (1 per element).
std::vector<int64_t> refStreamPer(const ref::StepSpec &s);

/// The gradient's stream index in ABI order (after the parameter and its error bits).
size_t gradIndex(const ref::StepSpec &s);

/// Host data of the list, shared by both optimizers: float32 masters and
/// bf16 gradients for each step.
struct HostData {
  std::vector<NamedShape> shapes;
  std::vector<int64_t> numels;
  std::vector<std::vector<float>> master;                  // [tensor]
  std::vector<std::vector<std::vector<uint16_t>>> grads;   // [step-1][tensor]
  std::vector<double> gradScale;                           // [tensor]
};

/// Realistic spread: weights N(0, 0.02), LayerNorm weights 1 + N(0, 0.05),
/// biases N(0, 0.01); gradients N(0, sigma_k^2) with sigma_k log-uniform in
/// [1e-4, 1e-1] per tensor (jittered per step), 0.2% of elements x10..x100,
/// and 30% of the embedding's rows exactly zero (tokens not in the batch).
HostData makeHostData(std::vector<NamedShape> shapes, int steps);

/// The initial parameter (and error-bit) bytes of a tensor for an optimizer:
/// the bf16 parameter rounded to nearest even from the float32 master, and
/// the error bits of the runtime's qopt_error_bits_init (chunks in parallel).
void initialParam(const ref::StepSpec &spec, const std::vector<float> &master,
                  std::vector<uint8_t> &param, std::vector<uint8_t> &ecc);

/// Steps one tensor `steps` times with the C++ reference, from the stream
/// bytes `init` (ABI order) and one bf16 gradient per step, in chunks of
/// `chunk` elements stepped in parallel (chunk is a multiple of 4096, so no
/// group or block straddles two chunks and the result is the whole tensor's).
std::vector<std::vector<uint8_t>> referenceSteps(const ref::StepSpec &spec, int64_t n,
                                                 const std::vector<std::vector<uint8_t>> &init,
                                                 const std::vector<const uint16_t *> &grads,
                                                 int64_t chunk);

} // namespace qopt::mainjob

#endif // QOPT_BENCH_QOPTMAINDATA_H

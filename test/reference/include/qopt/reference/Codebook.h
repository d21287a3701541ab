//===- Codebook.h - Blockwise codebook quantization (seed 000) ------------===//
//
// numerics.md §1: one uint8 code per element, one float32 absmax per block of
// `block` consecutive elements, a 256-entry ascending float32 table (qmap).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_CODEBOOK_H
#define QOPT_REFERENCE_CODEBOOK_H

#include "qopt/reference/Overflow.h"

#include <array>
#include <cstdint>
#include <vector>

namespace qopt::ref {

/// The 255 float32 midpoints mid[k] = (qmap[k] + qmap[k+1]) * 0.5f (seed 000 `_requantise`).
std::array<float, 255> codebookMidpoints(const float *qmap);

/// The code of one normalised value: #{k : !(mid[k] >= c)}, which is #{k : mid[k] < c}
/// (torch.bucketize(c, mid, right=False): a value on a midpoint takes the LOWER code) and
/// 255 for NaN (what bucketize's binary search returns for NaN).
uint8_t codebookCode(float c, const std::array<float, 255> &mid);

/// Requantizes `n` float32 values in blocks of `block` (the last block may be partial:
/// its absmax comes from its valid elements only). Per block (seed 000 `_requantise`):
///   absmax = max |x|  (NaN if any |x| is NaN, as torch.amax)
///   c      = x / max(absmax, 1e-30f)      (float32 division; a NaN absmax stays NaN)
///   code   = codebookCode(c, mid)
/// Writes n codes and ceil(n / block) absmax values. Under Overflow::Saturate (the product's
/// default; docs/numerics.md "Overflow") a NaN absmax is stored, and divided by, as 0 (the block
/// restarts from zero) and an infinite one as FLT_MAX, each such block counted in `counts` (when
/// given); Overflow::Ieee (seed 000) stores it as it is.
void codebookQuantize(const float *x, int64_t n, int64_t block, const float *qmap,
                      uint8_t *codes, float *absmax, Overflow overflow = Overflow::Ieee,
                      NumericsCounts *counts = nullptr);

/// x = qmap[code] * absmax[i / block] (one float32 multiply).
void codebookDequantize(const uint8_t *codes, const float *absmax, int64_t n, int64_t block,
                        const float *qmap, float *out);

/// How torch.linspace(start, end, steps) is evaluated on the CPU that made a table: `start + step*i`
/// below steps/2 and `end - step*(steps-1-i)` from there on, step = (end - start) / (steps - 1) in
/// float32, each multiply-add fused or not. Older torch CPU kernels also had a vectorized loop (two
/// vectors of `vectorWidth` floats per iteration, scalar tail) whose lane k is `base + k*step`.
/// Measured (test/data/golden/README.md): torch 2.11 on the golden machine (AVX512) = torch211(),
/// every element by the fused formula; Debian's torch 1.13 on AVX2 = torch113Avx2().
struct LinspaceModel {
  int vectorWidth = 1;    ///< floats per vector; 1 = every element by the scalar formula
  bool fmaBase = true;    ///< a vector's first element `start + step*i` / `end - step*j` fused
  bool fmaLane = false;   ///< `base + k*step` of lanes k >= 2 fused
  bool fmaScalar = true;  ///< the scalar formula fused (tail, or every element when vectorWidth == 1)

  static LinspaceModel torch211() { return LinspaceModel{1, true, false, true}; }
  static LinspaceModel torch113Avx2() { return LinspaceModel{8, true, false, true}; }
};

/// float32 values of torch.linspace(start, end, steps) under `model`.
std::vector<float> torchLinspace(float start, float end, int64_t steps, const LinspaceModel &model);

/// bitsandbytes' create_dynamic_map(signed, max_exponent_bits, total_bits): for exponent level
/// i < E the midpoints of linspace(0.1, 1, k+1) times float32(10^(i-(E-1))), k = 2^(i+F-E)
/// per sign (F = total_bits-1; one more bit unsigned); then 0 and 1.0 (no -1.0); zero padding
/// to 256; ascending. Signed: exact 0 and +1.0, no -1.0; unsigned starts at 0.
std::vector<float> createDynamicMap(bool isSigned, int maxExponentBits = 7, int totalBits = 8,
                                    const LinspaceModel &model = LinspaceModel());

} // namespace qopt::ref

#endif // QOPT_REFERENCE_CODEBOOK_H

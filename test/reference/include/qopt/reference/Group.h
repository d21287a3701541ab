//===- Group.h - Companded / linear group quantization (numerics.md §2) ---===//
//
// FlashOptim's group-wise 8-bit scheme and seed 003's re-implementation, every
// difference between them an explicit option. Groups of `group` consecutive
// elements (flat index), ceil(n / group) scales, the last group may be partial
// (its scale comes from its valid elements only).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_GROUP_H
#define QOPT_REFERENCE_GROUP_H

#include "qopt/reference/Overflow.h"

#include <cstdint>
#include <string>
#include <vector>

namespace qopt::ref {

/// Dynamic and NonZero are 4-bit tables (bits == 4 only): torchao's signed dynamic map
/// (create_dynamic_map(signed=True, max_exponent_bits=3, total_bits=4)) and its unsigned map
/// (k + 1) / 16; the code is the index of the nearest entry (fourBitTable).
enum class Companding { Linear, Softsign, Sqrt, Dynamic, NonZero };
enum class ScaleDType { F16, F32 };
/// HalfUp = floorf(x + 0.5f) in float32 (authors' kernel); HalfEven = torch.round (seed 003).
enum class Rounding { HalfUp, HalfEven };
/// Absmax: divide by the float32 absmax floored at 1e-12, store it rounded (authors).
/// StoredScale: divide by the stored (rounded) scale, a zero stored scale read as 1 (seed 003).
enum class ScaleDivisor { Absmax, StoredScale };

/// One group scheme: `group<i8|u8, G, companding, scale=, round=, divide=>` of docs/dsl.md.
///
/// Quantize one group (s_div, s_store as chosen by `divisor`; t = sqrt(x) for Sqrt, else x):
///   absmax  = max |t| (signed) or max(0, max t) (unsigned); NaN if any t is NaN
///   Absmax:      s_div = max(absmax, 1e-12f); s_store = round_to_scale_dtype(s_div)
///   StoredScale: s_store = round_to_scale_dtype(absmax); s_div = s_store == 0 ? 1 : s_store
///   signed:   y = t / s_div; z = softsign ? (2*y) / (1 + |y|) : y; r = 127 * z     (§2, seed 003)
///   unsigned, Absmax:      r = (255 * t) / s_div      (numerics.md §2 `255 * u / s`, left to right)
///   unsigned, StoredScale: r = (t / s_div) * 255      (seed 003 `y = g / safe; y * 255.0`)
///   q = clamp(round(r), -127..127 or 0..255); a NaN r gives q = 0 (reference choice: §2 is silent)
/// Overflow::Saturate (the product's default; docs/numerics.md "Overflow"): an absmax that is NaN
/// or does not fit the scale type (f16: absmax >= 65520, which rounds to inf; f32: inf; f32 with
/// sqrt companding: >= 2^64, whose square is inf) is replaced by the largest value that does
/// (65504, FLT_MAX, 2^64 (1 - 2^-24)) before the lines above, and a
/// signed y is clamped to [-1, 1] (a NaN y stays NaN): an infinite value takes the extreme code.
/// An f16 scale's positive absmax of at most 2^-25 (which rounds to a zero float16) is replaced by
/// 2^-24, the smallest positive float16, so that the group does not dequantize to zeros; counted
/// in `underflowed` only (a rounding of small values, not a clip: not saturated).
/// Overflow::Ieee: the lines above as they are (an absmax above 65504 stores inf; FlashOptim).
/// Dequantize (the same for both divisors, numerics.md §2 inverse and seed 003 `dequantize`):
///   signed:   z = q / 127; y = softsign ? z / (2 - |z|) : z; x = y * s
///   unsigned: u = (q / 255) * s; x = sqrt-companded ? u * u : u
/// with s = float32(stored scale). Every operation one float32 rounding, in this order.
struct GroupScheme {
  bool isSigned = true;
  /// 8, or 4: codes in [-7, 7] / [0, 15] (r = 7 * z, 15 * u / s), two a byte, element 2j in the
  /// low nibble of byte j, an odd count's last high nibble 0 (docs/abi.md). A table's code is
  /// c = x / s_div's count of table midpoints (e_k + e_k+1) * 0.5f strictly below c, a NaN c the
  /// index of the entry nearest 0; its value table[q] * s.
  int bits = 8;
  int64_t group = 32;
  Companding companding = Companding::Linear;
  ScaleDType scaleDType = ScaleDType::F16;
  Rounding rounding = Rounding::HalfUp;
  ScaleDivisor divisor = ScaleDivisor::Absmax;
  Overflow overflow = Overflow::Saturate;

  /// FlashOptim's momentum: group<i8, 32, softsign> with the authors' defaults.
  static GroupScheme momentum();
  /// FlashOptim's variance: group<u8, 32, sqrt> with the authors' defaults.
  static GroupScheme variance();
  /// Seed 003's options (round=half_even, divide=stored_scale, scale=f16, overflow=ieee: its
  /// `scales.to(float16)` gives inf) for a signed/unsigned,
  /// softsign/sqrt/linear scheme: seed003(true, Softsign) is its `momentum_companded`.
  static GroupScheme seed003(bool isSigned, Companding companding);

  int64_t numGroups(int64_t n) const { return n == 0 ? 0 : (n + group - 1) / group; }
  /// Bytes of codes for n elements: n, or ceil(n / 2) with 4-bit codes.
  int64_t codeBytes(int64_t n) const { return bits == 4 ? (n + 1) / 2 : n; }
  bool isTable() const { return companding == Companding::Dynamic || companding == Companding::NonZero; }
  /// "group<i8, 32, softsign, scale=f16, round=half_up, divide=absmax>" (", overflow=ieee" before
  /// the '>' under Ieee)
  std::string str() const;
  /// Throws std::invalid_argument for group < 1, signed+sqrt, unsigned+softsign.
  void validate() const;
};

/// The 16 ascending entries of a 4-bit table (Dynamic, NonZero), built from torchao's
/// definition in float64 and rounded to float32 once.
std::vector<float> fourBitTable(Companding companding);

/// Quantizes n float32 values. `codes` receives n int8 (signed) or uint8 (unsigned) values;
/// `scales` receives numGroups(n) float16 bit patterns (uint16_t) or float32 values. Under
/// Overflow::Saturate each group it saturated is added to `counts` (when given).
void groupQuantize(const GroupScheme &scheme, const float *x, int64_t n, void *codes, void *scales,
                   NumericsCounts *counts = nullptr);

/// Dequantizes n values from codes and scales laid out as groupQuantize writes them.
void groupDequantize(const GroupScheme &scheme, const void *codes, const void *scales, int64_t n,
                     float *out);

/// Seed 003's nmse: mean((x - x_hat)^2) / mean(x^2) in float64, 0 when mean(x^2) == 0, NaN for
/// n == 0 (the mean of an empty tensor).
double nmse(const float *x, const float *xHat, int64_t n);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_GROUP_H

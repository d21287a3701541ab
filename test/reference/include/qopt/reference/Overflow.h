//===- Overflow.h - What a quantized state stores when its scale overflows ===//
//
// docs/numerics.md "Overflow": a group scale that its storage type cannot
// hold (float16 above 65504) and a non-finite group or block absmax. The
// product's default keeps the stored state finite (Saturate) and counts such
// groups and blocks; Ieee stores what IEEE rounding gives (an infinite or NaN
// scale), as FlashOptim's kernel and the seed references do.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_OVERFLOW_H
#define QOPT_REFERENCE_OVERFLOW_H

#include <cstdint>

namespace qopt::ref {

enum class Overflow { Saturate, Ieee };

/// What a quantizer saturated (docs/abi.md "Numerics counters"): groups or
/// blocks whose absmax was finite but too large for the scale type, and
/// groups or blocks that held a NaN or an infinity. Adds up over calls.
/// `underflowed` is the reference's own: groups whose positive f16 absmax
/// was at most 2^-25 and took 2^-24, which no kernel counts (so that a test
/// can tell that its inputs reached the rule).
struct NumericsCounts {
  int64_t saturated = 0;
  int64_t nonfinite = 0;
  int64_t underflowed = 0;
};

} // namespace qopt::ref

#endif // QOPT_REFERENCE_OVERFLOW_H

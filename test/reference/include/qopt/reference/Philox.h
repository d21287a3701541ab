//===- Philox.h - Philox4x32-10 and stochastic bf16 rounding --------------===//
//
// Written from the definition of Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3" (SC 2011), section 4.3, and tested
// against the published known-answer vectors (Random123's kat_vectors).
// docs/numerics.md, "Stochastic rounding".
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_PHILOX_H
#define QOPT_REFERENCE_PHILOX_H

#include <array>
#include <cstdint>

namespace qopt::ref {

/// Philox4x32 with `rounds` rounds (10 for Philox4x32-10) of counter `ctr` under key `key`:
///   round: (hi0, lo0) = M0 * ctr0, (hi1, lo1) = M1 * ctr2 (32 x 32 -> 64 bits);
///          ctr' = (hi1 ^ ctr1 ^ k0, lo1, hi0 ^ ctr3 ^ k1, lo0)
///   the key is bumped by (W0, W1) before every round but the first.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key,
                                   int rounds = 10);

/// The 16 random bits of global element `index` at step `step` under `seed`: block b = index / 8
/// gives ctr = (b mod 2^32, b / 2^32, step, 0), key = (seed, 0); the element takes word
/// (index % 8) / 2 of the output, its low half for an even index, else its high half.
uint16_t stochasticBits(uint32_t seed, uint32_t step, uint64_t index);

/// `x` rounded to bf16 (bit pattern) stochastically: the high half of bits(x) + r (32-bit
/// integer sum), r = stochasticBits(...), so x rounds away from zero with probability equal to
/// its distance from its truncation in units of its bf16 ulp (an infinity stays one; a finite
/// value above the largest bf16 may round to infinity); a NaN gives 0x7FC0.
uint16_t stochasticRoundBF16(float x, uint32_t seed, uint32_t step, uint64_t index);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_PHILOX_H

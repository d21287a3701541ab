//===- Philox.cpp - Philox4x32-10 and stochastic bf16 rounding ------------===//
#include "qopt/reference/Philox.h"

#include <cmath>
#include <cstring>

namespace qopt::ref {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key,
                                   int rounds) {
  // Salmon et al. 2011, §4.3: the multipliers and the Weyl sequence's increments (the golden
  // ratio and sqrt(3) - 1 in 32-bit fixed point).
  const uint64_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
  const uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      key[0] += w0;
      key[1] += w1;
    }
    const uint64_t p0 = m0 * ctr[0], p1 = m1 * ctr[2];
    const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

uint16_t stochasticBits(uint32_t seed, uint32_t step, uint64_t index) {
  const uint64_t block = index / 8;
  const std::array<uint32_t, 4> out = philox4x32(
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), step, 0u}, {seed, 0u});
  const uint32_t word = out[(index % 8) / 2];
  return static_cast<uint16_t>(index % 2 ? word >> 16 : word & 0xFFFFu);
}

uint16_t stochasticRoundBF16(float x, uint32_t seed, uint32_t step, uint64_t index) {
  if (std::isnan(x))
    return 0x7FC0;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint16_t>((bits + stochasticBits(seed, step, index)) >> 16);
}

} // namespace qopt::ref

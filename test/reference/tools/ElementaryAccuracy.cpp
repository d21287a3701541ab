//===- ElementaryAccuracy.cpp - exp, log, tanh, atan2, pow against long double ===//
//
// Not a test (a few seconds per function on 2 cores at the default density): the largest
// error, in float32 ULPs of the exact value, of the reference's elementary functions
// (Elementary.h, the definition the kernels reproduce bit for bit) over a dense sample, and how
// many results are not the float32 nearest to the exact value. The exact value is the x87
// long double function's (64-bit significand, within about 2^-63 relatively), rounded once
// to float32. docs/numerics.md, "Elementary functions", quotes its output.
//
// Usage: qopt-elementary-accuracy [log2 points per function, default 24] [threads, default 2]
// One-argument functions take every float32 bit pattern of a stride (2^(32 - points)) with a
// pseudo-random offset within it; atan2 takes pseudo-random pairs of bit patterns; x ** c takes
// the one-argument sample for each of a list of exponents.
//
#include "qopt/reference/Elementary.h"
#include "qopt/reference/Float.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

using namespace qopt::ref;

namespace {

struct Stats {
  uint64_t count = 0, misrounded = 0, badSpecial = 0;
  double maxUlp = 0;
  float worstX = 0, worstY = 0;
  void merge(const Stats &o) {
    count += o.count;
    misrounded += o.misrounded;
    badSpecial += o.badSpecial;
    if (o.maxUlp > maxUlp) {
      maxUlp = o.maxUlp;
      worstX = o.worstX;
      worstY = o.worstY;
    }
  }
};

/// |r - t| in float32 ULPs of t (the spacing of float32 at |t|; 2^-149 below 2^-126).
double ulpError(float r, long double t) {
  long double at = std::fabs(t);
  int e = at >= 0x1p-126L ? std::ilogb(at) : -126;
  long double ulp = std::ldexp(1.0L, e - 23);
  return static_cast<double>(std::fabs(static_cast<long double>(r) - t) / ulp);
}

/// Compares one result with the exact value t.
void account(Stats &s, float r, long double t, float x, float y) {
  ++s.count;
  const float nearest = static_cast<float>(t); // one rounding to nearest even
  if (std::isnan(t) || std::isinf(nearest)) {
    // NaN, or beyond float32's range: the result must be the same special value.
    bool same = std::isnan(t) ? std::isnan(r) : r == nearest;
    s.badSpecial += !same;
    return;
  }
  if (r != nearest || std::signbit(r) != std::signbit(nearest))
    ++s.misrounded;
  double err = std::isinf(r) ? std::numeric_limits<double>::infinity() : ulpError(r, t);
  if (err > s.maxUlp) {
    s.maxUlp = err;
    s.worstX = x;
    s.worstY = y;
  }
}

uint64_t mix(uint64_t z) { // splitmix64
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Stats run(unsigned threads, uint64_t points, const std::function<void(Stats &, uint64_t)> &one) {
  std::vector<Stats> part(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (uint64_t i = t; i < points; i += threads)
        one(part[t], i);
    });
  for (std::thread &th : pool)
    th.join();
  Stats total;
  for (const Stats &s : part)
    total.merge(s);
  return total;
}

void print(const char *name, const Stats &s) {
  std::printf("%-12s %12llu points  max %.4f ulp (x = %a, y = %a)  not nearest: %llu (%.3g)  "
              "special values wrong: %llu\n",
              name, static_cast<unsigned long long>(s.count), s.maxUlp, s.worstX, s.worstY,
              static_cast<unsigned long long>(s.misrounded),
              s.count ? static_cast<double>(s.misrounded) / s.count : 0.0,
              static_cast<unsigned long long>(s.badSpecial));
}

} // namespace

int main(int argc, char **argv) {
  const int logPoints = argc > 1 ? std::atoi(argv[1]) : 24;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 2u;
  if (logPoints < 1 || logPoints > 32 || threads < 1) {
    std::fprintf(stderr, "usage: qopt-elementary-accuracy [log2 points 1..32] [threads]\n");
    return 2;
  }
  const uint64_t points = uint64_t{1} << logPoints;
  const int shift = 32 - logPoints;
  // The i-th float32 of the one-argument sample: stride 2^shift, a pseudo-random offset.
  auto sample = [&](uint64_t i) {
    uint64_t offset = shift ? mix(i) & ((uint64_t{1} << shift) - 1) : 0;
    return bitsToFloat(static_cast<uint32_t>((i << shift) | offset));
  };

  print("exp", run(threads, points, [&](Stats &s, uint64_t i) {
          float x = sample(i);
          account(s, expF32(x), std::exp(static_cast<long double>(x)), x, 0);
        }));
  print("log", run(threads, points, [&](Stats &s, uint64_t i) {
          float x = sample(i);
          account(s, logF32(x), std::log(static_cast<long double>(x)), x, 0);
        }));
  print("tanh", run(threads, points, [&](Stats &s, uint64_t i) {
          float x = sample(i);
          account(s, tanhF32(x), std::tanh(static_cast<long double>(x)), x, 0);
        }));
  print("atan2", run(threads, points, [&](Stats &s, uint64_t i) {
          uint64_t bits = mix(i ^ 0xA7A2ull);
          float y = bitsToFloat(static_cast<uint32_t>(bits));
          float x = bitsToFloat(static_cast<uint32_t>(bits >> 32));
          // Half the pairs within 2^8 of each other in magnitude, where the reduction works.
          if (i & 1)
            x = std::ldexp(std::fabs(y) + 0x1p-149f, static_cast<int>(bits % 17) - 8) *
                (x < 0 ? -1.0f : 1.0f);
          account(s, atan2F32(y, x),
                  std::atan2(static_cast<long double>(y), static_cast<long double>(x)), y, x);
        }));
  for (float c : {0.5f, -0.5f, 1.5f, 3.0f, -1.0f, 1.0f / 3.0f, 2.5f, 7.0f, -2.25f, 0.25f, 10.0f,
                  1e-3f, -17.5f}) {
    char name[32];
    std::snprintf(name, sizeof name, "pow c=%g", c);
    print(name, run(threads, points >> 2, [&](Stats &s, uint64_t i) {
            float x = sample(i << 2);
            account(s, powF32(x, c), std::pow(static_cast<long double>(x), static_cast<long double>(c)),
                    x, c);
          }));
  }
  return 0;
}

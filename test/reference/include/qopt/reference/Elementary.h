//===- Elementary.h - The DSL's exp, log, tanh, atan2 and x ** c ----------===//
//
// Part of qopt's independent C++ reference (test oracle). Each function of a
// float32 argument is defined by one float64 algorithm (docs/numerics.md,
// "Elementary functions"): range reduction and a polynomial in IEEE float64
// additions, multiplications, fused multiply-adds (std::fma) and divisions,
// each correctly rounded, then one rounding to float32. No libm function
// other than fma, floor and the classification functions is used, so the
// result is the same bits on every IEEE machine; the compiler's kernels
// (lib/Codegen/ElementaryFunctions.cpp) emit the same sequence.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_ELEMENTARY_H
#define QOPT_REFERENCE_ELEMENTARY_H

namespace qopt::ref {

/// e^x. NaN gives x; +inf gives +inf, -inf +0; results above FLT_MAX
/// overflow to +inf, below 2^-150 underflow to +0 (subnormals in between).
float expF32(float x);
/// The natural logarithm. NaN gives x; x < 0 (-inf included) gives the quiet
/// NaN 0x7FC00000; +-0 gives -inf; +inf gives +inf; 1 gives +0.
float logF32(float x);
/// The hyperbolic tangent, odd (tanh(-0) = -0); NaN gives x; |x| >= 10
/// gives +-1 (tanh(x) rounds to +-1 in float32 from |x| = 9.01 on).
float tanhF32(float x);
/// The angle of (x, y) in (-pi, pi], C99's atan2 special values: atan2(+-0,
/// +0) = +-0, atan2(+-0, -0) = +-pi, atan2(+-y, -inf) = +-pi, atan2(+-inf,
/// +-inf) = +-pi/4 or +-3pi/4, and so on. A NaN operand gives y if y is NaN,
/// else x.
float atan2F32(float y, float x);
/// x ** c for a float32 c (a launch uniform rounded to float32): x * x when
/// c == 2 (one IEEE product, as torch); else e^(c ln|x|) in float64 with
/// ln|x| as a double-double, signed and special-cased as C99's pow: c == 0
/// or x == 1 gives 1; a NaN x (then c) gives itself; x < 0 finite with a
/// non-integer c gives 0x7FC00000; |x| == 1 gives +-1; 0 and inf as pow.
float powF32(float x, float c);

} // namespace qopt::ref

#endif // QOPT_REFERENCE_ELEMENTARY_H

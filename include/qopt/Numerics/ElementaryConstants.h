//===- ElementaryConstants.h - The constants of exp, log, tanh, atan2 -*- C++ -*-===//
//
// The polynomial coefficients and split constants that define qopt's strict
// elementary functions (docs/numerics.md, section 6): the compiler's lowering
// (lib/Codegen/ElementaryFunctions.cpp) and the C++ reference
// (test/reference/lib/Elementary.cpp) evaluate the same algorithm with these
// values, so one definition serves both. The polynomials are printed by
// test/reference/tools/elementary_coefficients.py. Plain C++: no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_NUMERICS_ELEMENTARYCONSTANTS_H
#define QOPT_NUMERICS_ELEMENTARYCONSTANTS_H

namespace qopt::elementary {

// exp: u(r) = (e^r - 1 - r) / r^2 on [-0.35, 0.35], max abs error 2^-58.70.
constexpr double kExpU[] = {
    0x1.0000000000000p-1,  0x1.5555555555557p-3,  0x1.5555555555556p-5,
    0x1.111111110ff8bp-7,  0x1.6c16c16c16214p-10, 0x1.a01a01ac9de9ep-13,
    0x1.a01a01a74077ap-16, 0x1.71ddfff6573d6p-19, 0x1.27e4da1e12fb1p-22,
    0x1.af5282aacdb2ep-26, 0x1.1f75a3caadff5p-29,
};
// log: P(z) = (2 atanh(s) / s - 2) / z, z = s^2 in [0, 0.0295], max abs
// error 2^-54.58.
constexpr double kLogP[] = {
    0x1.5555555555555p-1, 0x1.9999999999a3ap-2, 0x1.249249247670ap-2,
    0x1.c71c7201fc0e6p-3, 0x1.745cf8c09a9d4p-3, 0x1.3b1c43c68eb6dp-3,
    0x1.0fbd140544b63p-3, 0x1.0c135adcf3011p-3,
};
// atan: Q(z) = (atan(t) / t - 1) / z, z = t^2 in [0, (5/12)^2], max abs
// error 2^-55.58.
constexpr double kAtanQ[] = {
    -0x1.5555555555555p-2, 0x1.999999999994ap-3,  -0x1.249249248cf30p-3,
    0x1.c71c71c29ad8ep-4,  -0x1.745d16497f811p-4, 0x1.3b13908e0591fp-4,
    -0x1.110e5f0a96030p-4, 0x1.e1966a83a6225p-5, -0x1.ac5fc5e570d2ap-5,
    0x1.746449e4b2910p-5,  -0x1.19fcff0a1b52ap-5, 0x1.0826c4073e87dp-6,
};

// ln 2 as a 32-bit head (k * kLn2Hi is exact for |k| < 2^21) and the double
// nearest the rest.
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kInvLn2 = 0x1.71547652b82fep+0; // RN(1 / ln 2)
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;  // RN(sqrt 2)
// pi, pi/2 and pi/4 as the nearest double and the double nearest the rest.
constexpr double kPiHi = 0x1.921fb54442d18p+1, kPiLo = 0x1.1a62633145c07p-53;
constexpr double kPi2Hi = 0x1.921fb54442d18p+0, kPi2Lo = 0x1.1a62633145c07p-54;
constexpr double kPi4Hi = 0x1.921fb54442d18p-1, kPi4Lo = 0x1.1a62633145c07p-55;
// exp's argument is clamped to [kExpMin, kExpMax]: e^-110 < 2^-150 rounds to
// 0 in float32, e^100 > FLT_MAX to +inf, and 2^k stays a normal double.
constexpr double kExpMin = -110.0, kExpMax = 100.0;

} // namespace qopt::elementary

#endif // QOPT_NUMERICS_ELEMENTARYCONSTANTS_H

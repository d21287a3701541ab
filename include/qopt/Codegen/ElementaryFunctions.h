//===- ElementaryFunctions.h - exp, log, tanh, atan2, pow -------*- C++ -*-===//
//
// The DSL's elementary functions on f32 lanes (scalar or vector), for both
// lowerings: each is the float64 algorithm of docs/numerics.md, "Elementary
// functions" (range reduction, a polynomial by fused multiply-adds, one
// rounding to f32), built from IEEE float64 additions, multiplications, fmas
// and divisions that the NVPTX and x86 backends round the same way, so the
// GPU, the host and test/reference/lib/Elementary.cpp give the same bits.
// Strict and fast mode emit the same sequence (no fast-math flags on it).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CODEGEN_ELEMENTARYFUNCTIONS_H
#define QOPT_CODEGEN_ELEMENTARYFUNCTIONS_H

#include "qopt/Codegen/LaneMath.h"

namespace mlir::qopt {

/// e^x lane by lane; `x` f32 (scalar or vector), result of its type.
Value emitExp(LaneMath &m, Value x);
/// ln x lane by lane (x < 0 gives the quiet NaN 0x7FC00000, +-0 -inf).
Value emitLog(LaneMath &m, Value x);
/// tanh x lane by lane.
Value emitTanh(LaneMath &m, Value x);
/// atan2(y, x) lane by lane, C99's special values; `y` and `x` of one type.
Value emitAtan2(LaneMath &m, Value y, Value x);
/// x ** c lane by lane for lanes `c` that hold one value (a launch uniform
/// or a constant, broadcast): x * x where c == 2, else C99's pow by
/// e^(c ln|x|). A constant c of 2 emits the product alone.
Value emitPow(LaneMath &m, Value x, Value c);

} // namespace mlir::qopt

#endif // QOPT_CODEGEN_ELEMENTARYFUNCTIONS_H

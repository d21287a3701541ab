//===- CodecSupport.h - Helpers shared by the codecs ------------*- C++ -*-===//
//
// Private to lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_LIB_CODEGEN_CODECSUPPORT_H
#define QOPT_LIB_CODEGEN_CODECSUPPORT_H

#include "qopt/Codegen/StreamCodecs.h"

namespace mlir::qopt {

/// 1.5 * 2^23: an integer code q in (-2^22, 2^22) plus this is exact, and the
/// low bits of the sum's pattern are q in two's complement.
inline constexpr double kCodeBias = 0x1.8p23;

/// `like`'s shape with element type `elem`.
inline Type withElement(Type like, Type elem) {
  if (auto vec = dyn_cast<VectorType>(like))
    return VectorType::get(vec.getShape(), elem);
  return elem;
}

/// `x` reinterpreted as integers of the same width.
inline Value bitsOf(LaneMath &m, Value x, unsigned width) {
  OpBuilder &b = m.builder();
  return arith::BitcastOp::create(
      b, m.location(), withElement(x.getType(), b.getIntegerType(width)), x);
}

} // namespace mlir::qopt

#endif // QOPT_LIB_CODEGEN_CODECSUPPORT_H

//===- QoptDialect.cpp - The qopt dialect ---------------------------------===//
//
// Registers the qopt dialect's attributes and operations and verifies the
// parameters of each state scheme.
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptDialect.h"
#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::qopt;

#include "qopt/Dialect/Qopt/QoptOpsDialect.cpp.inc"
#include "qopt/Dialect/Qopt/QoptEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "qopt/Dialect/Qopt/QoptAttrs.cpp.inc"

void QoptDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "qopt/Dialect/Qopt/QoptAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "qopt/Dialect/Qopt/QoptOps.cpp.inc"
      >();
}

/// Folded qopt values (uniforms with a constant value) become arith constants.
Operation *QoptDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

/// Every group and block size must divide the 4096-element tile, so that no
/// group or block straddles two tiles of a multi-tensor launch.
static constexpr int64_t kTileElements = 4096;

static bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

LogicalResult
PlainSchemeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        FloatType storage) {
  if (!storage.isF32() && !storage.isBF16())
    return emitError() << "plain state storage must be f32 or bf16, got "
                       << storage;
  return success();
}

LogicalResult
CodebookSchemeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           int64_t block, Overflow) {
  if (!isPowerOfTwo(block) || block < 32 || block > kTileElements)
    return emitError() << "codebook block must be a power of two in [32, "
                       << kTileElements << "], got " << block;
  return success();
}

LogicalResult
GroupSchemeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        IntegerType storage, int64_t groupSize,
                        Companding companding, FloatType scale,
                        Rounding rounding, ScaleDivisor divisor, Overflow) {
  if ((storage.getWidth() != 8 && storage.getWidth() != 4) ||
      storage.isSignless())
    return emitError() << "group storage must be si8, ui8, si4 or ui4, got "
                       << storage;
  if (!isPowerOfTwo(groupSize) || groupSize < 2 || groupSize > kTileElements)
    return emitError() << "group_size must be a power of two in [2, "
                       << kTileElements << "], got " << groupSize;
  if (companding == Companding::softsign && !storage.isSigned())
    return emitError() << "softsign companding needs signed (si8) storage";
  if (companding == Companding::sqrt && !storage.isUnsigned())
    return emitError() << "sqrt companding needs unsigned (ui8) storage";
  if (companding == Companding::dynamic &&
      !(storage.isSigned() && storage.getWidth() == 4))
    return emitError() << "the dynamic table needs si4 storage";
  if (companding == Companding::nonzero &&
      !(storage.isUnsigned() && storage.getWidth() == 4))
    return emitError() << "the nonzero table needs ui4 storage";
  if (!scale.isF16() && !scale.isF32())
    return emitError() << "group scale must be f16 or f32, got " << scale;
  return success();
}

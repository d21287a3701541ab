//===- QoptDialect.h - The qopt dialect -------------------------*- C++ -*-===//
//
// Declares the qopt dialect, its attributes and its operations.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTDIALECT_H
#define QOPT_DIALECT_QOPT_QOPTDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "qopt/Dialect/Qopt/QoptOpsDialect.h.inc"
#include "qopt/Dialect/Qopt/QoptEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "qopt/Dialect/Qopt/QoptAttrs.h.inc"

#endif // QOPT_DIALECT_QOPT_QOPTDIALECT_H

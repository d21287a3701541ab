//===- QoptOps.h - qopt operations ------------------------------*- C++ -*-===//
//
// Declares the operations of the qopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTOPS_H
#define QOPT_DIALECT_QOPT_QOPTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"

namespace mlir::qopt {
class UpdateOp;
class UniformsOp;
class StateOp;
class HyperOp;
} // namespace mlir::qopt

#define GET_OP_CLASSES
#include "qopt/Dialect/Qopt/QoptOps.h.inc"

namespace mlir::qopt {
/// States of `optimizer` in declaration order: their order in the kernel ABI.
llvm::SmallVector<StateOp> getStates(OptimizerOp optimizer);
/// Hyperparameters of `optimizer` in declaration order.
llvm::SmallVector<HyperOp> getHypers(OptimizerOp optimizer);
} // namespace mlir::qopt

#endif // QOPT_DIALECT_QOPT_QOPTOPS_H

//===- LaneAccess.h - A vector of lanes loaded or stored at a tile's end -*- C++ -*-===//
//
// The memory access both lowerings emit for a vector of lanes that may run
// past the end of its tensor: one scf.if whose then-branch is the plain
// aligned access (every lane in bounds) and whose else-branch is the masked
// access (llvm.intr.masked.load/store by the lanes' mask; a masked-off lane
// loads 0 and stores nothing).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CODEGEN_LANEACCESS_H
#define QOPT_CODEGEN_LANEACCESS_H

#include "mlir/IR/Builders.h"

namespace mlir::qopt {

/// The `vecType` at `addr` (an !llvm.ptr), `align` bytes aligned: a load
/// where the i1 `full` holds, else a load of the lanes `laneMask`
/// (vector<lanes x i1>) enables, 0 in the others.
Value loadLanesGuarded(OpBuilder &b, Location loc, VectorType vecType,
                       Value addr, Value full, Value laneMask, unsigned align);

/// Stores `value` at `addr` as loadLanesGuarded loads: every lane where
/// `full` holds, else the lanes `laneMask` enables.
void storeLanesGuarded(OpBuilder &b, Location loc, Value value, Value addr,
                       Value full, Value laneMask, unsigned align);

} // namespace mlir::qopt

#endif // QOPT_CODEGEN_LANEACCESS_H

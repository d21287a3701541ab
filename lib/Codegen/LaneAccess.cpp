//===- LaneAccess.cpp - A vector of lanes loaded or stored at a tile's end --===//
#include "qopt/Codegen/LaneAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::qopt {

Value loadLanesGuarded(OpBuilder &b, Location loc, VectorType vecType,
                       Value addr, Value full, Value laneMask, unsigned align) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{vecType}, full,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, loc,
                       LLVM::LoadOp::create(b, loc, vecType, addr, align)
                           .getResult());
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(vecType));
  Value masked = LLVM::MaskedLoadOp::create(b, loc, vecType, addr, laneMask,
                                            zero, b.getI32IntegerAttr(align));
  scf::YieldOp::create(b, loc, masked);
  return ifOp.getResult(0);
}

void storeLanesGuarded(OpBuilder &b, Location loc, Value value, Value addr,
                       Value full, Value laneMask, unsigned align) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, full,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  LLVM::StoreOp::create(b, loc, value, addr, align);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  LLVM::MaskedStoreOp::create(b, loc, value, addr, laneMask,
                              b.getI32IntegerAttr(align));
}

} // namespace mlir::qopt

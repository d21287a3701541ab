//===- ReductionOrder.cpp - The fixed order of a per-tensor reduction ------===//
//
// docs/numerics.md §7.
//
//===----------------------------------------------------------------------===//

#include "qopt/Codegen/ReductionOrder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;
using namespace mlir::qopt;

static Value constI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
}

/// Element `index` of the float64 array `stack`.
static Value slot(OpBuilder &b, Location loc, Value stack, Value index) {
  return LLVM::GEPOp::create(b, loc, stack.getType(), b.getF64Type(), stack,
                             ValueRange{index});
}

double mlir::qopt::reductionIdentity(ReductionKind kind) {
  return kind == ReductionKind::max ? -INFINITY : -0.0;
}

Value mlir::qopt::combineReduction(OpBuilder &b, Location loc,
                                   ReductionKind kind, Value x, Value y) {
  return kind == ReductionKind::max
             ? Value(arith::MaximumFOp::create(b, loc, x, y))
             : Value(arith::AddFOp::create(b, loc, x, y));
}

Value mlir::qopt::pushTreeLeaf(OpBuilder &b, Location loc,
                               ArrayRef<ReductionKind> kinds,
                               ArrayRef<Value> stacks, ValueRange leaves,
                               Value leafIndex, Value depth) {
  Type f64 = b.getF64Type();
  Value merges = LLVM::CountTrailingZerosOp::create(
      b, loc, b.getI64Type(),
      arith::XOrIOp::create(b, loc, leafIndex, constI64(b, loc, -1)),
      /*is_zero_poison=*/false);
  auto merge = scf::ForOp::create(b, loc, constI64(b, loc, 0), merges,
                                  constI64(b, loc, 1), leaves);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(merge.getBody());
    Value below = arith::SubIOp::create(
        b, loc, arith::SubIOp::create(b, loc, depth, constI64(b, loc, 1)),
        merge.getInductionVar());
    SmallVector<Value> merged;
    for (auto [index, kind] : llvm::enumerate(kinds))
      merged.push_back(combineReduction(
          b, loc, kind,
          LLVM::LoadOp::create(b, loc, f64, slot(b, loc, stacks[index], below),
                               8),
          merge.getRegionIterArgs()[index]));
    scf::YieldOp::create(b, loc, merged);
  }
  Value top = arith::SubIOp::create(b, loc, depth, merges);
  for (auto [index, kind] : llvm::enumerate(kinds))
    LLVM::StoreOp::create(b, loc, merge.getResult(index),
                          slot(b, loc, stacks[index], top), 8);
  return arith::AddIOp::create(b, loc, top, constI64(b, loc, 1));
}

SmallVector<Value> mlir::qopt::foldTreeStacks(OpBuilder &b, Location loc,
                                              ArrayRef<ReductionKind> kinds,
                                              ArrayRef<Value> stacks,
                                              Value depth,
                                              ValueRange identities) {
  Type f64 = b.getF64Type();
  auto fold = scf::ForOp::create(b, loc, constI64(b, loc, 0), depth,
                                 constI64(b, loc, 1), identities);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fold.getBody());
    Value at = arith::SubIOp::create(
        b, loc, arith::SubIOp::create(b, loc, depth, constI64(b, loc, 1)),
        fold.getInductionVar());
    SmallVector<Value> next;
    for (auto [index, kind] : llvm::enumerate(kinds))
      next.push_back(combineReduction(
          b, loc, kind,
          LLVM::LoadOp::create(b, loc, f64, slot(b, loc, stacks[index], at), 8),
          fold.getRegionIterArgs()[index]));
    scf::YieldOp::create(b, loc, next);
  }
  return SmallVector<Value>(fold.getResults());
}

Value mlir::qopt::finishReduction(OpBuilder &b, Location loc,
                                  ReductionKind kind, Value acc, Value n,
                                  Value qnan,
                                  llvm::function_ref<Value(Value)> sqrt) {
  Value v = acc;
  if (kind == ReductionKind::mean || kind == ReductionKind::rms)
    v = arith::DivFOp::create(b, loc, v, n);
  if (kind == ReductionKind::norm || kind == ReductionKind::rms)
    v = sqrt(v);
  Value r = arith::TruncFOp::create(b, loc, b.getF32Type(), v);
  Value isNaN = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, r, r);
  return arith::SelectOp::create(b, loc, isNaN, qnan, r);
}

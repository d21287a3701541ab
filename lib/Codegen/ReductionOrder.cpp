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

/// Each reduction's `stack[index] ⊕ acc` (`older ⊕ newer`).
static SmallVector<Value> combineWithStacks(OpBuilder &b, Location loc,
                                            ArrayRef<ReductionKind> kinds,
                                            ArrayRef<Value> stacks, Value index,
                                            ValueRange acc) {
  SmallVector<Value> out;
  for (auto [k, kind] : llvm::enumerate(kinds))
    out.push_back(combineReduction(
        b, loc, kind,
        LLVM::LoadOp::create(b, loc, b.getF64Type(),
                             slot(b, loc, stacks[k], index), 8),
        acc[k]));
  return out;
}

/// `count` merges from the top of stacks of `depth` subtrees, starting from
/// `init`: merge i is `stack[depth - 1 - i] ⊕ acc` (older first).
static scf::ForOp mergeFromTop(OpBuilder &b, Location loc,
                               ArrayRef<ReductionKind> kinds,
                               ArrayRef<Value> stacks, Value depth, Value count,
                               ValueRange init) {
  auto loop = scf::ForOp::create(b, loc, constI64(b, loc, 0), count,
                                 constI64(b, loc, 1), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value at = arith::SubIOp::create(
      b, loc, arith::SubIOp::create(b, loc, depth, constI64(b, loc, 1)),
      loop.getInductionVar());
  scf::YieldOp::create(
      b, loc, combineWithStacks(b, loc, kinds, stacks, at, loop.getRegionIterArgs()));
  return loop;
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
  Value merges = LLVM::CountTrailingZerosOp::create(
      b, loc, b.getI64Type(),
      arith::XOrIOp::create(b, loc, leafIndex, constI64(b, loc, -1)),
      /*is_zero_poison=*/false);
  scf::ForOp merge = mergeFromTop(b, loc, kinds, stacks, depth, merges, leaves);
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
  scf::ForOp fold = mergeFromTop(b, loc, kinds, stacks, depth, depth, identities);
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

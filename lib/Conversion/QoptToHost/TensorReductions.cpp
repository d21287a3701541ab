//===- TensorReductions.cpp - A tensor's reductions in the host function --===//
//
// docs/numerics.md §7: each element's float64 term, each chunk of terms
// summed as a pairwise tree in index order, the chunks' partials by the same
// tree (padded with the identity to a power of two), one rounding to
// float32. The host function computes a tensor's reductions before its first
// tile in the range, from the ops their operands need.
//
//===----------------------------------------------------------------------===//

#include "HostKernelEmitter.h"

#include <cmath>

using namespace mlir;
using namespace mlir::qopt;
using namespace mlir::qopt::host;

/// The neutral term of a reduction: -0 for sums (x + -0 = x for every x),
/// -inf for the maximum.
static double reductionIdentity(ReductionKind kind) {
  return kind == ReductionKind::max ? -INFINITY : -0.0;
}

void HostKernelEmitter::emitReductionTree(Value terms, ReductionKind kind) {
  // Pairwise over the chunk in index order: level by level, term i of the
  // next level is terms 2i and 2i + 1 of this one (docs/numerics.md, §7).
  Type f64 = b.getF64Type();
  for (int64_t width = kReductionChunk / 2; width >= 1; width /= 2) {
    auto level = scf::ForOp::create(b, loc, constI64(0), constI64(width),
                                    constI64(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(level.getBody()->getTerminator());
    Value i = level.getInductionVar();
    Value left = arith::MulIOp::create(b, loc, i, constI64(2));
    Value right = arith::AddIOp::create(b, loc, left, constI64(1));
    Value x = load(f64, gep(terms, f64, left), 8);
    Value y = load(f64, gep(terms, f64, right), 8);
    Value r = kind == ReductionKind::max
                  ? Value(arith::MaximumFOp::create(b, loc, x, y))
                  : Value(arith::AddFOp::create(b, loc, x, y));
    LLVM::StoreOp::create(b, loc, r, gep(terms, f64, i), 8);
  }
}

Value HostKernelEmitter::combineReduction(ReductionKind kind, Value x,
                                          Value y) {
  return kind == ReductionKind::max
             ? Value(arith::MaximumFOp::create(b, loc, x, y))
             : Value(arith::AddFOp::create(b, loc, x, y));
}

Value HostKernelEmitter::pushChunkPartials(const FunctionContext &function,
                                           ArrayRef<Value> partials,
                                           Value chunkIndex, Value sp) {
  // The tree over the chunks' partials, one partial at a time: a stack of
  // the complete subtrees so far, one per bit set in the chunk count. Chunk
  // c's partial merges with the subtrees below it as often as c has
  // trailing ones (each merge `older ⊕ newer`), then is pushed. All
  // reductions push and merge together, so one stack pointer serves them.
  SmallVector<ReduceOp> reductions = getReductions(optimizer);
  Type f64 = b.getF64Type();
  // Merges: the trailing ones of the chunk's index.
  Value merges = LLVM::CountTrailingZerosOp::create(
      b, loc, i64(),
      arith::XOrIOp::create(b, loc, chunkIndex, constI64(-1)),
      /*is_zero_poison=*/false);
  auto merge =
      scf::ForOp::create(b, loc, constI64(0), merges, constI64(1), partials);
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(merge.getBody());
    Value below = arith::SubIOp::create(
        b, loc, arith::SubIOp::create(b, loc, sp, constI64(1)),
        merge.getInductionVar());
    SmallVector<Value> merged;
    for (auto [index, op] : llvm::enumerate(reductions))
      merged.push_back(combineReduction(
          op.getKind(),
          load(f64, gep(function.reductionStacks[index], f64, below), 8),
          merge.getRegionIterArgs()[index]));
    scf::YieldOp::create(b, loc, merged);
  }
  Value top = arith::SubIOp::create(b, loc, sp, merges);
  for (auto [index, op] : llvm::enumerate(reductions))
    LLVM::StoreOp::create(b, loc, merge.getResult(index),
                          gep(function.reductionStacks[index], f64, top), 8);
  return arith::AddIOp::create(b, loc, top, constI64(1));
}

SmallVector<Value>
HostKernelEmitter::foldReductionStacks(const FunctionContext &function,
                                       Value depth) {
  SmallVector<ReduceOp> reductions = getReductions(optimizer);
  Type f64 = b.getF64Type();
  // The subtrees left on the stack, the newest first, each `older ⊕ acc`:
  // the padding's identities change none of the tree's nodes.
  SmallVector<Value> init;
  for (ReduceOp op : reductions)
    init.push_back(arith::ConstantOp::create(
        b, loc, b.getF64FloatAttr(reductionIdentity(op.getKind()))));
  auto fold = scf::ForOp::create(b, loc, constI64(0), depth, constI64(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fold.getBody());
    Value at = arith::SubIOp::create(
        b, loc, arith::SubIOp::create(b, loc, depth, constI64(1)),
        fold.getInductionVar());
    SmallVector<Value> next;
    for (auto [index, op] : llvm::enumerate(reductions))
      next.push_back(combineReduction(
          op.getKind(), load(f64, gep(function.reductionStacks[index], f64, at), 8),
          fold.getRegionIterArgs()[index]));
    scf::YieldOp::create(b, loc, next);
  }
  return SmallVector<Value>(fold.getResults());
}

LogicalResult
HostKernelEmitter::emitTensorReductions(const FunctionContext &function,
                                        const TileContext &tile) {
  SmallVector<ReduceOp> reductions = getReductions(optimizer);
  Type f64 = b.getF64Type();
  VectorType f64Lanes = lanesOf(f64);
  auto identity = [&](ReduceOp op, Type type) -> Value {
    double v = reductionIdentity(op.getKind());
    if (auto vec = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vec, b.getF64FloatAttr(v)));
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  };
  // The chunks' partials go to the stacks of the tree over them
  // (pushChunkPartials); the stack pointer is the loop's.
  Value chunkSize = constI64(kReductionChunk);
  Value numChunks = arith::DivSIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, tile.numel, constI64(kReductionChunk - 1)),
      chunkSize);
  auto chunks = scf::ForOp::create(b, loc, constI64(0), numChunks, constI64(1),
                                   ValueRange{constI64(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(chunks.getBody());
    Value chunkIndex = chunks.getInductionVar();
    Value sp = chunks.getRegionIterArgs()[0];
    TileContext part = tile;
    part.start = arith::MulIOp::create(b, loc, chunkIndex, chunkSize);
    part.count = arith::MinSIOp::create(
        b, loc, arith::SubIOp::create(b, loc, tile.numel, part.start),
        chunkSize);
    auto elements =
        scf::ForOp::create(b, loc, constI64(0), part.count, constI64(lanes));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(elements.getBody()->getTerminator());
      ChunkContext chunk = makeChunk(function, part, elements.getInductionVar());
      ChunkUpdate target(*this, chunk);
      LogicalResult lowered = lowerReductionOperands(
          target, lanes, [&](unsigned index, ReduceOp op, Value x) {
            Value term = arith::ExtFOp::create(b, loc, f64Lanes, x);
            if (op.getKind() == ReductionKind::norm ||
                op.getKind() == ReductionKind::rms)
              term = arith::MulFOp::create(b, loc, term, term); // exact
            term = arith::SelectOp::create(b, loc, chunk.laneMask, term,
                                           identity(op, f64Lanes));
            LLVM::StoreOp::create(
                b, loc, term,
                gep(function.reductionTerms[index], f64, chunk.offset), 8);
          });
      if (failed(lowered))
        return failure();
      loc = optimizer.getLoc();
    }
    // The chunk's terms past the tensor's end are the identity.
    Value filled = arith::MulIOp::create(
        b, loc,
        arith::DivSIOp::create(
            b, loc, arith::AddIOp::create(b, loc, part.count, constI64(lanes - 1)),
            constI64(lanes)),
        constI64(lanes));
    auto pad = scf::ForOp::create(b, loc, filled, chunkSize, constI64(lanes));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(pad.getBody()->getTerminator());
      for (auto [index, op] : llvm::enumerate(reductions))
        LLVM::StoreOp::create(b, loc, identity(op, f64Lanes),
                              gep(function.reductionTerms[index], f64,
                                  pad.getInductionVar()),
                              8);
    }
    SmallVector<Value> partials;
    for (auto [index, op] : llvm::enumerate(reductions)) {
      emitReductionTree(function.reductionTerms[index], op.getKind());
      partials.push_back(load(f64, function.reductionTerms[index], 8));
    }
    Value top = pushChunkPartials(function, partials, chunkIndex, sp);
    scf::YieldOp::create(b, loc, ValueRange{top});
  }
  SmallVector<Value> values = foldReductionStacks(function, chunks.getResult(0));

  // Each value rounded to f32 once; a NaN is the canonical quiet NaN.
  Value n = arith::SIToFPOp::create(b, loc, f64, tile.numel);
  Value qnan = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(f32(), llvm::APFloat::getQNaN(llvm::APFloat::IEEEsingle())));
  for (auto [index, op] : llvm::enumerate(reductions)) {
    Value v = values[index];
    ReductionKind kind = op.getKind();
    if (kind == ReductionKind::mean || kind == ReductionKind::rms)
      v = arith::DivFOp::create(b, loc, v, n);
    if (kind == ReductionKind::norm || kind == ReductionKind::rms)
      v = LLVM::SqrtOp::create(b, loc, v);
    Value r = arith::TruncFOp::create(b, loc, f32(), v);
    Value isNaN =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, r, r);
    r = arith::SelectOp::create(b, loc, isNaN, qnan, r);
    LLVM::StoreOp::create(
        b, loc, r, gep(function.reductionValues, f32(), constI64(index)), 4);
  }
  return success();
}

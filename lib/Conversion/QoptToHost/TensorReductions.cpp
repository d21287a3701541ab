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

#include "qopt/Codegen/ReductionOrder.h"

#include <cmath>

using namespace mlir;
using namespace mlir::qopt;
using namespace mlir::qopt::host;

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
    Value r = combineReduction(b, loc, kind, x, y);
    LLVM::StoreOp::create(b, loc, r, gep(terms, f64, i), 8);
  }
}

LogicalResult
HostKernelEmitter::emitTensorReductions(const FunctionContext &function,
                                        const TileContext &tile) {
  SmallVector<ReduceOp> reductions = getReductions(optimizer);
  SmallVector<ReductionKind> kinds;
  for (ReduceOp op : reductions)
    kinds.push_back(op.getKind());
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
    Value top = pushTreeLeaf(b, loc, kinds, function.reductionStacks, partials,
                             chunkIndex, sp);
    scf::YieldOp::create(b, loc, ValueRange{top});
  }
  SmallVector<Value> identities;
  for (ReductionKind kind : kinds)
    identities.push_back(arith::ConstantOp::create(
        b, loc, b.getF64FloatAttr(reductionIdentity(kind))));
  SmallVector<Value> values = foldTreeStacks(
      b, loc, kinds, function.reductionStacks, chunks.getResult(0), identities);

  // Each value rounded to f32 once; a NaN is the canonical quiet NaN.
  Value n = arith::SIToFPOp::create(b, loc, f64, tile.numel);
  Value qnan = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(f32(), llvm::APFloat::getQNaN(llvm::APFloat::IEEEsingle())));
  for (auto [index, kind] : llvm::enumerate(kinds)) {
    Value r = finishReduction(b, loc, kind, values[index], n, qnan, [&](Value v) {
      return LLVM::SqrtOp::create(b, loc, v);
    });
    LLVM::StoreOp::create(
        b, loc, r, gep(function.reductionValues, f32(), constI64(index)), 4);
  }
  return success();
}

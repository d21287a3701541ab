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

LogicalResult HostKernelEmitter::emitTensorReductions(
    const FunctionContext &function, const TileContext &tile, bool global,
    Value stepPartials) {
  // The scope's reductions; position j of these lists is reduction
  // `indices[j]` of the update (its terms and stack buffers).
  SmallVector<ReduceOp> reductions;
  SmallVector<unsigned> indices;
  SmallVector<ReductionKind> kinds;
  SmallVector<Value> stacks;
  for (auto [index, op] : llvm::enumerate(getReductions(optimizer))) {
    if (op.getGlobal() != global)
      continue;
    reductions.push_back(op);
    indices.push_back(index);
    kinds.push_back(op.getKind());
    stacks.push_back(function.reductionStacks[index]);
  }
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
          target, lanes,
          [&](unsigned index, ReduceOp op, Value x) {
            Value term = arith::ExtFOp::create(b, loc, f64Lanes, x);
            if (op.getKind() == ReductionKind::norm ||
                op.getKind() == ReductionKind::rms)
              term = arith::MulFOp::create(b, loc, term, term); // exact
            term = arith::SelectOp::create(b, loc, chunk.laneMask, term,
                                           identity(op, f64Lanes));
            LLVM::StoreOp::create(
                b, loc, term,
                gep(function.reductionTerms[index], f64, chunk.offset), 8);
          },
          [&](ReduceOp op) { return op.getGlobal() == global; });
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
      for (auto [j, op] : llvm::enumerate(reductions))
        LLVM::StoreOp::create(b, loc, identity(op, f64Lanes),
                              gep(function.reductionTerms[indices[j]], f64,
                                  pad.getInductionVar()),
                              8);
    }
    SmallVector<Value> partials;
    for (auto [j, op] : llvm::enumerate(reductions)) {
      emitReductionTree(function.reductionTerms[indices[j]], op.getKind());
      partials.push_back(load(f64, function.reductionTerms[indices[j]], 8));
    }
    Value top = pushTreeLeaf(b, loc, kinds, stacks, partials, chunkIndex, sp);
    scf::YieldOp::create(b, loc, ValueRange{top});
  }
  SmallVector<Value> identities;
  for (ReductionKind kind : kinds)
    identities.push_back(arith::ConstantOp::create(
        b, loc, b.getF64FloatAttr(reductionIdentity(kind))));
  SmallVector<Value> values =
      foldTreeStacks(b, loc, kinds, stacks, chunks.getResult(0), identities);

  if (global) {
    // The tensor's accumulations, unfinished, at row k of the launch:
    // k * S + s.
    int64_t perStep = reductions.size();
    Value row = arith::MulIOp::create(b, loc, tile.tensor, constI64(perStep));
    for (auto [s, value] : llvm::enumerate(values))
      LLVM::StoreOp::create(
          b, loc, value,
          gep(stepPartials, f64,
              arith::AddIOp::create(b, loc, row, constI64(s))),
          8);
    return success();
  }
  // Each value rounded to f32 once; a NaN is the canonical quiet NaN.
  Value n = arith::SIToFPOp::create(b, loc, f64, tile.numel);
  Value qnan = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(f32(), llvm::APFloat::getQNaN(llvm::APFloat::IEEEsingle())));
  for (auto [r, kind] : llvm::enumerate(kinds)) {
    Value v = finishReduction(b, loc, kind, values[r], n, qnan, [&](Value x) {
      return LLVM::SqrtOp::create(b, loc, x);
    });
    LLVM::StoreOp::create(
        b, loc, v, gep(function.reductionValues, f32(), constI64(r)), 4);
  }
  return success();
}

void HostKernelEmitter::emitCombine(ModuleOp module) {
  // void <kernel>_combine(int64_t num_step_tensors, const double *rows,
  // float *uniforms): each whole-step reduction's tree over the rows (one
  // leaf per tensor of the step, at row * S + s), finished and rounded
  // once, into its uniform slot.
  SmallVector<ReduceOp> global = getReductions(optimizer, /*global=*/true);
  int64_t perStep = global.size();
  Type f64 = b.getF64Type();
  Block *entry = createFunction(module, "_combine", {i64(), ptr(), ptr()});
  Value numRows = entry->getArgument(0), rows = entry->getArgument(1);
  Value uniforms = entry->getArgument(2);
  SmallVector<ReductionKind> kinds;
  SmallVector<Value> stacks, identities;
  for (ReduceOp op : global) {
    kinds.push_back(op.getKind());
    stacks.push_back(LLVM::AllocaOp::create(b, loc, ptr(), f64,
                                            constI64(kReductionStackDepth),
                                            /*alignment=*/16));
    identities.push_back(arith::ConstantOp::create(
        b, loc, b.getF64FloatAttr(reductionIdentity(op.getKind()))));
  }
  auto leaves = scf::ForOp::create(b, loc, constI64(0), numRows, constI64(1),
                                   ValueRange{constI64(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(leaves.getBody());
    Value r = leaves.getInductionVar();
    Value row = arith::MulIOp::create(b, loc, r, constI64(perStep));
    SmallVector<Value> leaf;
    for (int64_t s = 0; s < perStep; ++s)
      leaf.push_back(load(
          f64, gep(rows, f64, arith::AddIOp::create(b, loc, row, constI64(s))),
          8));
    Value top = pushTreeLeaf(b, loc, kinds, stacks, leaf, r,
                             leaves.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, ValueRange{top});
  }
  SmallVector<Value> values =
      foldTreeStacks(b, loc, kinds, stacks, leaves.getResult(0), identities);
  Value one = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1.0));
  Value qnan = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(f32(), llvm::APFloat::getQNaN(llvm::APFloat::IEEEsingle())));
  unsigned firstSlot = getNumHostUniforms(optimizer);
  for (auto [s, kind] : llvm::enumerate(kinds)) {
    Value v = finishReduction(b, loc, kind, values[s], one, qnan, [&](Value x) {
      return LLVM::SqrtOp::create(b, loc, x);
    });
    LLVM::StoreOp::create(b, loc, v,
                          gep(uniforms, f32(), constI64(firstSlot + s)), 4);
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
}

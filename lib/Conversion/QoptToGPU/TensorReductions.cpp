//===- TensorReductions.cpp - Per-tensor reductions on the GPU ------------===//
//
// docs/numerics.md §7 in three entry points (docs/abi.md, "Reductions"):
// the reduce pre-pass `<kernel>_reduce` walks the step's tiles, lowers only
// what the reductions' operands need (no store) and writes each 2048-element
// chunk's float64 partial, the pairwise tree of its terms in index order
// (each thread's lanes pairwise, shuffles down by 1, 2, 4, 8, 16 lanes, then
// the chunk's warps through shared memory); `<kernel>_finish` reduces each
// tensor's partials by the same tree (each warp the subtree of an aligned,
// power-of-two run of them from coalesced segments, each lane's run of a
// segment in registers, then the shuffles, then the block's
// warps through shared memory) and writes one float32 per tensor and
// reduction; the step reads
// those (KernelEmitter::TileUpdate::reduction).
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include <cmath>

using namespace mlir;
using namespace mlir::qopt;

static constexpr int64_t kFinishThreads = kReductionFinishThreads;
/// Consecutive partials a finish lane loads and reduces in registers (a
/// power of two): the warp's shuffles, one a cycle per SM, bound the finish
/// otherwise (bench/NOTES.md#finish).
static constexpr int64_t kFinishLeavesPerLane = 4;
/// Partials of a finish segment: the warp's lanes' runs, consecutive.
static constexpr int64_t kFinishSegment = 32 * kFinishLeavesPerLane;
/// Segments a finish warp loads at once (a power of two).
static constexpr int64_t kFinishSegments = 4;
/// Partials of a finish warp's batch: the least run a warp owns.
static constexpr int64_t kFinishBatch = kFinishSegment * kFinishSegments;
/// Entries of a finish thread's stack of subtrees: one per bit set in its
/// count of partials (< 2^64).
static constexpr int64_t kFinishStackDepth = 64;

LogicalResult KernelEmitter::checkReductionShape(OptimizerOp optimizer,
                                                 KernelPlanAttr plan) {
  if (fitsReductionChunks(optimizer, plan.getThreads(), plan.getLanes()))
    return success();
  // The diagnostic points at the reduction, as a group's points at its state.
  ReduceOp first = getReductions(optimizer).front();
  return first.emitError("a per-tensor reduction's GPU lowering needs tiles "
                         "of whole ")
         << kReductionChunk << "-element chunks and warps of at most "
         << kReductionChunk << " elements (a divisor); the plan has "
         << plan.getThreads() << " threads of " << plan.getLanes()
         << " elements";
}

Value KernelEmitter::treeOf(ReductionKind kind, ArrayRef<Value> values) {
  SmallVector<Value> level(values.begin(), values.end());
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(combineReduction(kind, level[i], level[i + 1]));
    level = std::move(next);
  }
  return level.front();
}

Value KernelEmitter::warpTree(ReductionKind kind, Value v, int64_t width) {
  // A lane i that is a multiple of 2 * offset holds the tree of lanes
  // [i, i + 2 * offset) after the step of `offset`. A float64 crosses
  // lanes as two 32-bit halves.
  Type f64 = b.getF64Type();
  Value width32 = constI32(32);
  for (int64_t offset = 1; offset < width; offset *= 2) {
    Value bits = arith::BitcastOp::create(b, loc, i64(), v);
    Value lo = arith::TruncIOp::create(b, loc, i32(), bits);
    Value hi = arith::TruncIOp::create(
        b, loc, i32(), arith::ShRUIOp::create(b, loc, bits, constI64(32)));
    auto shuffle = [&](Value half) -> Value {
      return gpu::ShuffleOp::create(b, loc, half, constI32(offset), width32,
                                    gpu::ShuffleMode::DOWN)
          .getShuffleResult();
    };
    Value joined = arith::OrIOp::create(
        b, loc,
        arith::ShLIOp::create(b, loc,
                              arith::ExtUIOp::create(b, loc, i64(), shuffle(hi)),
                              constI64(32)),
        arith::ExtUIOp::create(b, loc, i64(), shuffle(lo)));
    v = combineReduction(kind, v, arith::BitcastOp::create(b, loc, f64, joined));
  }
  return v;
}

Value KernelEmitter::reductionTerms(ReductionKind kind, Value x, Value mask) {
  VectorType f64Lanes = lanesOf(b.getF64Type());
  Value term = arith::ExtFOp::create(b, loc, f64Lanes, x);
  if (kind == ReductionKind::norm || kind == ReductionKind::rms)
    term = arith::MulFOp::create(b, loc, term, term); // exact
  Value identity = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(f64Lanes,
                             b.getF64FloatAttr(reductionIdentity(kind))));
  return arith::SelectOp::create(b, loc, mask, term, identity);
}

LogicalResult KernelEmitter::emitChunkPartials(TileContext &tile) {
  const KernelContext &kernel = tile.kernel;
  SmallVector<ReduceOp> reductions = getReductions(optimizer);
  SmallVector<Value> operands(reductions.size());
  llvm::DenseSet<Value> noCodebookStores;
  TileUpdate target(*this, tile, noCodebookStores, {});
  if (failed(lowerReductionOperands(
          target, lanes,
          [&](unsigned index, ReduceOp, Value x) { operands[index] = x; })))
    return failure();
  loc = optimizer.getLoc();

  // Each warp's subtree: the thread's lanes pairwise, then the warp's
  // threads; lane 0 writes it to the warp's slot.
  Type f64 = b.getF64Type();
  int64_t warps = threads / 32;
  int64_t warpsPerChunk = kReductionChunk / (32 * lanes);
  int64_t chunksPerTile = this->tile / kReductionChunk;
  Value warp = arith::DivUIOp::create(b, loc, kernel.tid, constI64(32));
  Value laneId = arith::RemUIOp::create(b, loc, kernel.tid, constI64(32));
  SmallVector<Value> warpTrees;
  for (auto [index, op] : llvm::enumerate(reductions)) {
    Value terms = reductionTerms(op.getKind(), operands[index], tile.laneMask);
    SmallVector<Value> laneTerms;
    for (int64_t i = 0; i < lanes; ++i)
      laneTerms.push_back(vector::ExtractOp::create(b, loc, terms, i));
    warpTrees.push_back(
        warpTree(op.getKind(), treeOf(op.getKind(), laneTerms), 32));
  }
  {
    auto lane0 = ifZero(laneId);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&lane0.getThenRegion().front());
    for (auto [index, tree] : llvm::enumerate(warpTrees))
      LLVM::StoreOp::create(
          b, loc, tree,
          gep(kernel.chunkSlots, f64,
              arith::AddIOp::create(b, loc, constI64(index * warps), warp)),
          8);
  }
  gpu::BarrierOp::create(b, loc);
  // Thread c < chunksPerTile: chunk c's tree over its warps' subtrees, to
  // partial (tile * chunksPerTile + c) * R + r.
  {
    Value leads = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        kernel.tid, constI64(chunksPerTile));
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, leads, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value firstWarp =
        arith::MulIOp::create(b, loc, kernel.tid, constI64(warpsPerChunk));
    int64_t count = reductions.size();
    Value chunk = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, tile.index, constI64(chunksPerTile)),
        kernel.tid);
    for (auto [index, op] : llvm::enumerate(reductions)) {
      SmallVector<Value> subtrees;
      for (int64_t j = 0; j < warpsPerChunk; ++j)
        subtrees.push_back(load(
            f64,
            gep(kernel.chunkSlots, f64,
                arith::AddIOp::create(b, loc, firstWarp,
                                      constI64(index * warps + j))),
            8));
      Value at = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, chunk, constI64(count)),
          constI64(index));
      LLVM::StoreOp::create(b, loc, treeOf(op.getKind(), subtrees),
                            gep(kernel.reductionPartials, f64, at), 8);
    }
  }
  // The slots are written again by the next tile.
  gpu::BarrierOp::create(b, loc);
  return success();
}

LogicalResult KernelEmitter::emitFinish(gpu::GPUModuleOp module) {
  // (descriptors, num_tensors, uniforms, partials[, values][, step
  // partials]): block k steps tensors k, k + gridDim.x, ...
  SmallVector<ReduceOp> reductions = getReductions(optimizer);
  int64_t count = reductions.size();
  int64_t perTensor = getReductions(optimizer, /*global=*/false).size();
  int64_t perStep = count - perTensor;
  Type f64 = b.getF64Type();
  std::string name = (optimizer.getSymName() + "_finish").str();
  b.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> args = {globalPtr(), i64(), globalPtr(), globalPtr()};
  if (perTensor)
    args.push_back(globalPtr());
  if (perStep)
    args.push_back(globalPtr());
  auto func = gpu::GPUFuncOp::create(b, loc, name,
                                     b.getFunctionType(args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {static_cast<int32_t>(kFinishThreads), 1, 1}));
  Block *entry = &func.getBody().front();
  b.setInsertionPointToStart(entry);
  KernelContext kernel;
  kernel.module = module;
  kernel.func = func;
  kernel.entry = entry;
  kernel.prefix = "__qopt_" + name;
  kernel.descs = entry->getArgument(0);
  Value numTensors = entry->getArgument(1);
  Value uniformsPtr = entry->getArgument(2);
  Value partials = entry->getArgument(3);
  Value values = perTensor ? entry->getArgument(4) : Value();
  Value stepPartials = perStep ? entry->getArgument(perTensor ? 5 : 4) : Value();
  kernel.tid = indexToI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  // A skipped step's pre-pass wrote no partial: no tensor is finished.
  FailureOr<Value> skip = loadUniforms(kernel, uniformsPtr);
  if (failed(skip))
    return failure();
  if (*skip)
    numTensors = arith::SelectOp::create(b, loc, *skip, constI64(0), numTensors);
  Value slots = sharedArray(module, kernel.prefix + "_warps",
                            kFinishThreads / 32, f64);
  Value block = indexToI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  Value grid = indexToI64(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
  int64_t chunksPerTile = tile / kReductionChunk;
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(streams.size());

  auto tensors = scf::ForOp::create(b, loc, block, numTensors, grid);
  b.setInsertionPoint(tensors.getBody()->getTerminator());
  Value k = tensors.getInductionVar();
  Value desc = gep(kernel.descs, b.getI8Type(),
                   arith::MulIOp::create(b, loc, k, constI64(descBytes)));
  Value numel = load(i64(), desc, 8);
  Value firstTile = load(i64(), gep(desc, b.getI8Type(), constI64(8)), 8);
  // The tensor's partials from (firstTile * chunksPerTile).
  Value numPartials = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, numel, constI64(kReductionChunk - 1)),
      constI64(kReductionChunk));
  auto [begin, mine] = emitWarpRun(kernel.tid, numPartials);
  Value first = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, firstTile, constI64(chunksPerTile)),
      begin);
  Value n = arith::SIToFPOp::create(b, loc, f64, numel);
  auto [kinds, identities] = reductionKinds(reductions);
  SmallVector<Value> subtrees =
      emitRunSubtrees(kinds, partials, first, mine, identities, kernel.tid);
  for (auto [index, op] : llvm::enumerate(reductions)) {
    // A per-tensor value at k * Rt + r, a whole-step accumulation at
    // k * S + s of the launch's rows of the step.
    bool global = op.getGlobal();
    Value at = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, k, constI64(global ? perStep : perTensor)),
        constI64(getScopedReductionIndex(op)));
    emitFinishValue(kinds[index], subtrees[index], slots, identities[index], n,
                    global ? gep(stepPartials, f64, at) : gep(values, f32(), at),
                    /*accumulation=*/global);
    // The slots are written again by the next reduction or tensor.
    gpu::BarrierOp::create(b, loc);
  }
  b.setInsertionPointToEnd(entry);
  gpu::ReturnOp::create(b, loc);
  return success();
}

std::pair<Value, Value> KernelEmitter::emitWarpRun(Value tid,
                                                   Value numPartials) {
  // Warp w's run is [w * L, w * L + L): the tree over the partials padded
  // to L * warps is each run's subtree, then the tree over the warps'
  // subtrees.
  int64_t warps = kFinishThreads / 32;
  Value run;
  {
    auto grow = scf::WhileOp::create(b, loc, TypeRange{i64()},
                                     ValueRange{constI64(kFinishBatch)});
    Block *before = b.createBlock(&grow.getBefore(), {}, {i64()}, {loc});
    Value s = before->getArgument(0);
    Value small = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ult,
        arith::MulIOp::create(b, loc, s, constI64(warps)), numPartials);
    scf::ConditionOp::create(b, loc, small, ValueRange{s});
    Block *after = b.createBlock(&grow.getAfter(), {}, {i64()}, {loc});
    scf::YieldOp::create(
        b, loc,
        ValueRange{arith::MulIOp::create(b, loc, after->getArgument(0),
                                         constI64(2))});
    b.setInsertionPointAfter(grow);
    run = grow.getResult(0);
  }
  Value warp = arith::DivUIOp::create(b, loc, tid, constI64(32));
  Value begin = arith::MulIOp::create(b, loc, warp, run);
  Value mine = arith::MinSIOp::create(
      b, loc,
      arith::MaxSIOp::create(b, loc,
                             arith::SubIOp::create(b, loc, numPartials, begin),
                             constI64(0)),
      run);
  return {begin, mine};
}

LogicalResult KernelEmitter::emitCombine(gpu::GPUModuleOp module) {
  // (num_step_tensors, step partials, uniforms), one block: the step's rows
  // of accumulations, reduction s at row * S + s for the step's S
  // reductions.
  SmallVector<ReduceOp> global = getReductions(optimizer, /*global=*/true);
  Type f64 = b.getF64Type();
  std::string name = (optimizer.getSymName() + "_combine").str();
  b.setInsertionPointToEnd(module.getBody());
  auto func = gpu::GPUFuncOp::create(
      b, loc, name,
      b.getFunctionType({i64(), globalPtr(), globalPtr()}, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {static_cast<int32_t>(kFinishThreads), 1, 1}));
  Block *entry = &func.getBody().front();
  b.setInsertionPointToStart(entry);
  Value numRows = entry->getArgument(0);
  Value rows = entry->getArgument(1);
  Value uniforms = entry->getArgument(2);
  std::string prefix = "__qopt_" + name;
  Value slots = sharedArray(module, prefix + "_warps", kFinishThreads / 32, f64);
  Value tid = indexToI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  auto [first, mine] = emitWarpRun(tid, numRows);
  // No division: mean and rms have no whole-step form.
  Value n = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1.0));
  unsigned firstSlot = getNumHostUniforms(optimizer);
  auto [kinds, identities] = reductionKinds(global);
  SmallVector<Value> subtrees =
      emitRunSubtrees(kinds, rows, first, mine, identities, tid);
  for (auto [s, op] : llvm::enumerate(global)) {
    emitFinishValue(kinds[s], subtrees[s], slots, identities[s], n,
                    gep(uniforms, f32(), constI64(firstSlot + s)));
    gpu::BarrierOp::create(b, loc);
  }
  gpu::ReturnOp::create(b, loc);
  return success();
}

void KernelEmitter::emitFinishValue(ReductionKind kind, Value subtree,
                                    Value slots, Value identity, Value n,
                                    Value out, bool accumulation) {
  Type f64 = b.getF64Type();
  Value tid = indexToI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value warp = arith::DivUIOp::create(b, loc, tid, constI64(32));
  Value laneId = arith::RemUIOp::create(b, loc, tid, constI64(32));
  Value qnan = arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(f32(), llvm::APFloat::getQNaN(llvm::APFloat::IEEEsingle())));
  // The warps' subtrees in index order (each warp's lanes hold its own),
  // warp 0 over them through shared memory.
  Value tree = subtree;
  {
    auto lane0 = ifZero(laneId);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&lane0.getThenRegion().front());
    LLVM::StoreOp::create(b, loc, tree, gep(slots, f64, warp), 8);
  }
  gpu::BarrierOp::create(b, loc);
  {
    auto warp0 = ifZero(warp);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&warp0.getThenRegion().front());
    int64_t warps = kFinishThreads / 32;
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         laneId, constI64(warps));
    Value slot = arith::SelectOp::create(b, loc, inside, laneId, constI64(0));
    Value v = arith::SelectOp::create(b, loc, inside,
                                      load(f64, gep(slots, f64, slot), 8),
                                      identity);
    v = warpTree(kind, v, warps);
    auto lane0 = ifZero(laneId);
    b.setInsertionPointToStart(&lane0.getThenRegion().front());
    if (accumulation) {
      LLVM::StoreOp::create(b, loc, v, out, 8);
      return;
    }
    // One rounding to f32 (after the division by n and the square root
    // where the kind has them); a NaN is the canonical quiet NaN.
    Value r = finishReduction(b, loc, kind, v, n, qnan, [&](Value x) {
      return inlinePtx(b, loc, f64, x, "sqrt.rn.f64 $0, $1;", "=d,d");
    });
    LLVM::StoreOp::create(b, loc, r, out, 4);
  }
}

std::pair<SmallVector<ReductionKind>, SmallVector<Value>>
KernelEmitter::reductionKinds(ArrayRef<ReduceOp> reductions) {
  std::pair<SmallVector<ReductionKind>, SmallVector<Value>> out;
  for (ReduceOp op : reductions) {
    out.first.push_back(op.getKind());
    out.second.push_back(arith::ConstantOp::create(
        b, loc, b.getF64FloatAttr(reductionIdentity(op.getKind()))));
  }
  return out;
}

SmallVector<Value> KernelEmitter::emitRunSubtrees(
    ArrayRef<ReductionKind> kinds, Value partials, Value first, Value count,
    ArrayRef<Value> identities, Value tid) {
  // The warp's run (an aligned power-of-two run of at least a batch) in
  // batches of kFinishSegments segments of kFinishSegment partials, every
  // reduction in the same pass (a chunk's R partials are adjacent): lane i
  // loads the segment's partials [i * P, i * P + P) (P =
  // kFinishLeavesPerLane; the warp's loads cover consecutive lines), their
  // pairwise tree in registers is a subtree, the segment's tree is the
  // warp's shuffle tree over the lanes' and the batch's the pairwise tree
  // of its segments, a subtree of the run's (the partials past the run's
  // `count` the identity). Lane 0's batch tree, broadcast to the warp,
  // merges with the stack's subtrees as often as the batch's index has
  // trailing ones (each merge `older ⊕ newer`), then is pushed; what is left
  // is folded newest first, which the padding's identities do not change.
  // Every lane keeps the same stacks (local memory, one per reduction).
  Type f64 = b.getF64Type();
  int64_t numReductions = kinds.size();
  SmallVector<Value> stacks;
  for (int64_t r = 0; r < numReductions; ++r) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&b.getInsertionBlock()
                                    ->getParent()
                                    ->getParentOfType<gpu::GPUFuncOp>()
                                    .getBody()
                                    .front());
    stacks.push_back(LLVM::AllocaOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()), f64,
        constI64(kFinishStackDepth), 8));
  }
  Value lane = arith::RemUIOp::create(b, loc, tid, constI64(32));
  Value batches = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, count, constI64(kFinishBatch - 1)),
      constI64(kFinishBatch));
  auto push = scf::ForOp::create(b, loc, constI64(0), batches, constI64(1),
                                 ValueRange{constI64(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(push.getBody());
    Value j = push.getInductionVar();
    Value sp = push.getRegionIterArgs()[0];
    Value base = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, j, constI64(kFinishBatch)),
        arith::MulIOp::create(b, loc, lane, constI64(kFinishLeavesPerLane)));
    // leaves[r][i]: reduction r's leaves of segment i, in index order.
    SmallVector<SmallVector<SmallVector<Value>>> leaves(
        numReductions, SmallVector<SmallVector<Value>>(kFinishSegments));
    for (int64_t i = 0; i < kFinishSegments; ++i)
      for (int64_t k = 0; k < kFinishLeavesPerLane; ++k) {
        Value at = arith::AddIOp::create(b, loc, base,
                                         constI64(kFinishSegment * i + k));
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             at, count);
        Value safe = arith::SelectOp::create(b, loc, inside, at, constI64(0));
        Value chunk = arith::MulIOp::create(
            b, loc, arith::AddIOp::create(b, loc, first, safe),
            constI64(numReductions));
        for (int64_t r = 0; r < numReductions; ++r) {
          Value element = arith::AddIOp::create(b, loc, chunk, constI64(r));
          leaves[r][i].push_back(arith::SelectOp::create(
              b, loc, inside, load(f64, gep(partials, f64, element), 8),
              identities[r]));
        }
      }
    SmallVector<Value> batchTrees;
    for (int64_t r = 0; r < numReductions; ++r) {
      SmallVector<Value> segments;
      for (int64_t i = 0; i < kFinishSegments; ++i)
        segments.push_back(
            warpTree(kinds[r], treeOf(kinds[r], leaves[r][i]), 32));
      batchTrees.push_back(broadcastLane0(treeOf(kinds[r], segments)));
    }
    scf::YieldOp::create(
        b, loc, pushTreeLeaf(b, loc, kinds, stacks, batchTrees, j, sp));
  }
  return foldTreeStacks(b, loc, kinds, stacks, push.getResult(0), identities);
}

Value KernelEmitter::broadcastLane0(Value v) {
  // A float64 crosses lanes as two 32-bit halves.
  Value bits = arith::BitcastOp::create(b, loc, i64(), v);
  auto fromLane0 = [&](Value half) -> Value {
    return gpu::ShuffleOp::create(b, loc, half, constI32(0), constI32(32),
                                  gpu::ShuffleMode::IDX)
        .getShuffleResult();
  };
  Value lo = fromLane0(arith::TruncIOp::create(b, loc, i32(), bits));
  Value hi = fromLane0(arith::TruncIOp::create(
      b, loc, i32(), arith::ShRUIOp::create(b, loc, bits, constI64(32))));
  Value joined = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64(), hi),
                            constI64(32)),
      arith::ExtUIOp::create(b, loc, i64(), lo));
  return arith::BitcastOp::create(b, loc, b.getF64Type(), joined);
}

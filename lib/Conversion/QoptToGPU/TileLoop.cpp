//===- TileLoop.cpp - Runs of a tensor's tiles and their tile loop --------===//
//
// Within the block's range, the runs of one tensor's tiles: the run's
// descriptor, bounds and thread pointers, the copies ahead of its tile loop
// (cp.async or bulk copies), the loop with its L2 prefetch, and each tile's
// full and partial bodies. A run is a RunContext; each tile body a
// TileContext that the update (UpdateBody.cpp) fills.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::qopt;

void KernelEmitter::copyAheadIf(const KernelContext &kernel, Value when,
                                ArrayRef<Value> threadPtrs, Value stageIndex) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, when,
                                /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    copyTileToStage(kernel, threadPtrs, stageIndex);
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

SmallVector<Value> KernelEmitter::advance(ArrayRef<Value> ptrs,
                                          int64_t tiles) {
  SmallVector<Value> advanced;
  for (auto [i, ptr] : llvm::enumerate(ptrs))
    advanced.push_back(gep(ptr, b.getI8Type(), constI64(tiles * tileBytes(i))));
  return advanced;
}

Value KernelEmitter::plus(const RunContext &run, Value k, int64_t j) {
  return arith::AddIOp::create(b, loc, k,
                               run.relative ? constI32(j) : constI64(j));
}

Value KernelEmitter::stageOf(const RunContext &run, Value k) {
  int64_t stages = staging.stages;
  if (run.relative)
    return arith::ExtUIOp::create(
        b, loc, i64(), arith::RemUIOp::create(b, loc, k, constI32(stages)));
  return arith::RemUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, k, run.start), constI64(stages));
}

Value KernelEmitter::bulkStageOf(Value g) {
  return arith::ExtUIOp::create(
      b, loc, i64(),
      arith::RemUIOp::create(b, loc, g, constI32(staging.stages)));
}

Value KernelEmitter::tileThreadBase(const RunContext &run, Value t) {
  return arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc,
                            arith::SubIOp::create(b, loc, t, run.firstTile),
                            constI64(tile)),
      threadBase(run.kernel));
}

FailureOr<scf::WhileOp> KernelEmitter::emitRuns(KernelContext &kernel,
                                                const ClaimContext &claim) {
  // With bulk copies the runs also carry how many staged tiles the block
  // went through before the run: its g-th staged tile uses stage g % stages
  // for the (g / stages)-th time, which says the parity of the barrier's
  // phase to wait for.
  SmallVector<Type> runTypes = {i64()};
  SmallVector<Value> runInits = {claim.start};
  if (bulkCopy) {
    runTypes.push_back(i32());
    runInits.push_back(constI32(0));
  }
  SmallVector<Location> runLocs(runTypes.size(), loc);
  auto runs = scf::WhileOp::create(b, loc, runTypes, runInits);
  {
    Block *before = b.createBlock(&runs.getBefore(), {}, runTypes, runLocs);
    Value t = before->getArgument(0);
    scf::ConditionOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, t, claim.stop),
        before->getArguments());
  }
  Block *after = b.createBlock(&runs.getAfter(), {}, runTypes, runLocs);
  RunContext run(kernel);
  run.start = after->getArgument(0);
  run.stagedBefore = bulkCopy ? after->getArgument(1) : Value();
  beginRun(run, claim.stop);
  emitCopyPrologue(run);
  // Every kernel's loop carries them, the two-state ones too: computing the
  // copy pointers from the run's per tile costs a 64-bit add pair per stream
  // for both the current and the copies' pointers. docs/tuning.md#run-pointers
  SmallVector<Value> loopInits = advance(run.ptrs, run.ahead);
  // With the plan's register_prefetch the loop also carries the element
  // streams of its tile, loaded one tile ahead: the run's first here.
  llvm::append_range(loopInits,
                     loadFullTileIf(run, run.lower, run.start, /*tiles=*/0,
                                    run.ptrs, registerPrefetchStreams()));
  auto loop = scf::ForOp::create(
      b, loc, run.lower, run.upper,
      run.relative ? Value(constI32(1)) : Value(constI64(1)),
      ValueRange(loopInits));
  if (bulkCopy) {
    // Every thread is done with the run's stages before thread 0 fills them
    // with the next run's tiles (each issued tile was waited for, so no copy
    // is in flight either). A producer warp instead waits for each stage's
    // release, across runs.
    if (!producerWarp)
      gpu::BarrierOp::create(b, loc);
    Value staged = arith::MaxSIOp::create(b, loc, run.fullLimit, constI32(0));
    scf::YieldOp::create(
        b, loc,
        ValueRange{run.end,
                   arith::AddIOp::create(b, loc, run.stagedBefore, staged)});
  } else {
    scf::YieldOp::create(b, loc, ValueRange{run.end});
  }
  b.setInsertionPointToStart(loop.getBody());
  if (failed(emitTileLoopBody(run, loop)))
    return failure();
  return runs;
}

void KernelEmitter::beginRun(RunContext &run, Value stop, bool copiesOnly) {
  const KernelContext &kernel = run.kernel;
  Value tensor = arith::ExtSIOp::create(
      b, loc, i64(), load(i32(), gep(kernel.tileMap, i32(), run.start), 4));
  run.tensor = tensor;
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(streams.size());
  run.desc = gep(kernel.descs, b.getI8Type(),
                 arith::MulIOp::create(b, loc, tensor, constI64(descBytes)));
  // The step reads the tensor's per-tensor reductions once per run: value
  // r of tensor k at k * R + r.
  if (kernel.reductionValues && !copiesOnly) {
    int64_t count = getReductions(optimizer, /*global=*/false).size();
    Value first = arith::MulIOp::create(b, loc, tensor, constI64(count));
    for (int64_t r = 0; r < count; ++r)
      run.reductionValues.push_back(load(
          f32(),
          gep(kernel.reductionValues, f32(),
              arith::AddIOp::create(b, loc, first, constI64(r))),
          4));
  }
  // The update's arithmetic of the tensor's reductions, once per run.
  run.invariants = kernel.invariants;
  for (ReduceOp reduce : getReductions(optimizer, /*global=*/false)) {
    unsigned scoped = getScopedReductionIndex(reduce);
    if (scoped < run.reductionValues.size())
      run.invariants[reduce.getResult()] = run.reductionValues[scoped];
  }
  if (phase == KernelPhase::Step && !copiesOnly)
    lowerInvariants(math, optimizer, kernel.invariantScopes,
                    UpdateScope::Tensor, run.invariants);
  run.numel = load(i64(), run.desc, 8);
  run.firstTile = load(i64(), gep(run.desc, b.getI8Type(), constI64(8)), 8);
  // The run ends at the tensor's last tile or at `stop`; at least one tile,
  // so that a tile map that disagreed with the descriptors could not stall.
  Value tensorTiles = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, run.numel, constI64(tile - 1)),
      constI64(tile));
  run.end = arith::MaxSIOp::create(
      b, loc,
      arith::MinSIOp::create(
          b, loc, stop, arith::AddIOp::create(b, loc, run.firstTile, tensorTiles)),
      arith::AddIOp::create(b, loc, run.start, constI64(1)));
  // Tiles before `fullEnd` lie wholly inside the tensor.
  Value fullEnd = arith::AddIOp::create(
      b, loc, run.firstTile,
      arith::DivUIOp::create(b, loc, run.numel, constI64(tile)));
  // Each stream's thread pointer at the run's first tile, advanced by the
  // stream's bytes per tile: a full tile's loads, copies and stores take
  // their addresses from these, with no 64-bit index arithmetic per tile.
  // The loop carries those of the tile `ahead` on (the copies' sources); the
  // current tile's are those minus `ahead` tiles, an immediate offset of the
  // stores, so that one register pair per stream lives across the loop.
  run.firstInTensor = arith::SubIOp::create(b, loc, run.start, run.firstTile);
  Value firstBase = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, run.firstInTensor, constI64(tile)),
      threadBase(kernel));
  for (auto [i, info] : llvm::enumerate(streams)) {
    if (!runThreadPointers() || copiesOnly)
      break;
    Value index = info.perElements == 1
                      ? firstBase
                      : arith::DivUIOp::create(b, loc, firstBase,
                                               constI64(info.perElements));
    run.ptrs.push_back(
        gep(streamPtr(run, i), memoryType(info.storage), index));
  }
  // The copies run `ahead` tiles ahead of the computation: the run's first
  // `ahead` tiles are copied before the loop, tile t + ahead while tile t
  // computes; stage k % stages holds the run's k-th tile.
  run.ahead = std::max<int64_t>(staging.stages - 1, 0);
  // With run thread pointers the loop counts the run's tiles from 0 in 32
  // bits (the tile map's indices are 64-bit), which takes fewer uniform
  // instructions per tile (docs/tuning.md#run-pointers). A run holds at
  // most ceil(numTiles / gridDim.x) tiles, 2^31 of which would be 2^43
  // elements. Tiles before `copyEnd` (min(runEnd, fullEnd)) lie wholly
  // inside the tensor; only they are copied ahead.
  run.relative = runThreadPointers();
  Value copyEnd = arith::MinSIOp::create(b, loc, run.end, fullEnd);
  auto runRelative = [&](Value end) -> Value {
    return arith::TruncIOp::create(
        b, loc, i32(), arith::SubIOp::create(b, loc, end, run.start));
  };
  // The loop's bounds and the bound of its full tiles, in its own terms.
  run.lower = run.relative ? Value(constI32(0)) : run.start;
  run.upper = run.relative ? runRelative(run.end) : run.end;
  run.fullLimit = run.relative ? runRelative(copyEnd) : copyEnd;
}

void KernelEmitter::emitProducer(KernelContext &kernel,
                                 const ClaimContext &claim) {
  // Lane 0 issues every copy; the warp's other lanes have none to issue.
  auto issuer = scf::IfOp::create(
      b, loc, TypeRange{},
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kernel.tid,
                            constI64(threads)),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&issuer.getThenRegion().front());
  // The runs as the other warps walk them (emitRuns), carrying the staged
  // tiles before each: the block's g-th staged tile uses stage g % stages
  // for the (g / stages)-th time.
  SmallVector<Type> runTypes = {i64(), i32()};
  SmallVector<Location> runLocs(runTypes.size(), loc);
  auto runs = scf::WhileOp::create(b, loc, runTypes,
                                   ValueRange{claim.start, constI32(0)});
  {
    Block *before = b.createBlock(&runs.getBefore(), {}, runTypes, runLocs);
    scf::ConditionOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                              before->getArgument(0), claim.stop),
        before->getArguments());
  }
  Block *after = b.createBlock(&runs.getAfter(), {}, runTypes, runLocs);
  RunContext run(kernel);
  run.start = after->getArgument(0);
  run.stagedBefore = after->getArgument(1);
  beginRun(run, claim.stop, /*copiesOnly=*/true);
  Value count = arith::MaxSIOp::create(b, loc, run.fullLimit, constI32(0));
  auto fill = scf::ForOp::create(b, loc, constI32(0), count, constI32(1));
  {
    OpBuilder::InsertionGuard inFill(b);
    b.setInsertionPoint(fill.getBody()->getTerminator());
    Value j = fill.getInductionVar();
    Value g = arith::AddIOp::create(b, loc, run.stagedBefore, j);
    Value stage = bulkStageOf(g);
    Value use = arith::DivUIOp::create(b, loc, g, constI32(staging.stages));
    // A stage's use u > 0 waits for phase u - 1 of its release barrier:
    // every warp has read use u - 1. Then the generic proxy's reads before
    // the async proxy's writes.
    auto reused = scf::IfOp::create(
        b, loc, TypeRange{},
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, use,
                              constI32(0)),
        /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard inReused(b);
      b.setInsertionPointToStart(&reused.getThenRegion().front());
      waitForStage(kernel.stageEmpty, stage,
                   arith::AndIOp::create(
                       b, loc, arith::SubIOp::create(b, loc, use, constI32(1)),
                       constI32(1)));
      syncPtx(b, loc, Type(), ValueRange{}, "fence.proxy.async.shared::cta;",
              "");
    }
    bulkCopyTile(run, j, stage);
  }
  scf::YieldOp::create(
      b, loc,
      ValueRange{run.end, arith::AddIOp::create(b, loc, run.stagedBefore, count)});
}

void KernelEmitter::emitCopyPrologue(const RunContext &run) {
  if (bulkCopy && producerWarp)
    return; // the producer warp's (emitProducer)
  if (bulkCopy) {
    // Thread 0 fills every stage with the run's first full tiles, in a loop
    // (docs/tuning.md#bulk-copy); later tiles are issued by the last warp to
    // finish reading a stage.
    auto first = ifZero(run.kernel.tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    // The block's generic-proxy reads of the stages (the run before, behind
    // the barrier that ended it) before the async proxy's writes, as for a
    // refill.
    syncPtx(b, loc, Type(), ValueRange{}, "fence.proxy.async.shared::cta;", "");
    Value count =
        arith::MinSIOp::create(b, loc, run.fullLimit, constI32(staging.stages));
    auto fill = scf::ForOp::create(b, loc, constI32(0), count, constI32(1));
    b.setInsertionPoint(fill.getBody()->getTerminator());
    Value j = fill.getInductionVar();
    bulkCopyTile(run, j,
                 bulkStageOf(arith::AddIOp::create(b, loc, run.stagedBefore, j)));
  } else if (run.kernel.stagingBase) {
    for (int64_t j = 0; j < run.ahead; ++j)
      copyAheadIf(run.kernel,
                  arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        plus(run, run.lower, j), run.fullLimit),
                  advance(run.ptrs, j), constI64(j));
  }
}

LogicalResult KernelEmitter::emitTileLoopBody(const RunContext &run,
                                              scf::ForOp loop) {
  KernelContext &kernel = run.kernel;
  Value k = loop.getInductionVar();
  auto iterArgs = loop.getRegionIterArgs();
  SmallVector<Value> nextPtrs(iterArgs.begin(),
                              iterArgs.begin() + run.ptrs.size());
  SmallVector<Value> carried(iterArgs.begin() + run.ptrs.size(),
                             iterArgs.end());
  // The full tile's context; the partial tile's takes its index (and
  // without run thread pointers its base).
  TileContext fullTile(kernel, run);
  fullTile.ptrs = advance(nextPtrs, -run.ahead);
  Value t = run.relative
                ? Value(arith::AddIOp::create(
                      b, loc, run.start, arith::ExtUIOp::create(b, loc, i64(), k)))
                : k;
  fullTile.index = t;
  if (!runThreadPointers())
    fullTile.base = tileThreadBase(run, t);
  if (kernel.stagingBase && !bulkCopy) {
    Value next = plus(run, k, run.ahead);
    Value nextFull = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           next, run.fullLimit);
    copyAheadIf(kernel, nextFull, nextPtrs, stageOf(run, next));
  }
  // The register prefetch: the next full tile's loads issued before this
  // tile's work, whose own the loop carried in.
  SmallVector<unsigned> prefetched = registerPrefetchStreams();
  SmallVector<Value> nextLoads =
      loadFullTileIf(run, k, t, /*tiles=*/1, fullTile.ptrs, prefetched);
  for (auto [stream, value] : llvm::zip_equal(prefetched, carried))
    fullTile.preloaded[stream] = value;
  emitL2Prefetch(run, k, t);
  // A tile wholly inside its tensor (every tile of a run but a tensor's
  // last; the same for all threads of the block, so block reductions may
  // synchronize in it) gets a body of its own with no lane masks. Without
  // run thread pointers the test is (t - firstTile + 1) * tile <= numel,
  // which holds no bound across the loop. docs/tuning.md#run-pointers
  Value tileFull;
  if (runThreadPointers()) {
    tileFull =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, k, run.fullLimit);
  } else {
    Value tileEnd = arith::MulIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, t, run.firstTile),
                              constI64(1)),
        constI64(tile));
    tileFull = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                     tileEnd, run.numel);
  }
  auto split = scf::IfOp::create(b, loc, TypeRange{}, tileFull,
                                 /*withElseRegion=*/true);
  if (failed(emitFullTile(fullTile, split, k)))
    return failure();
  // The tile's successor's pointers, after all of the tile's uses (where
  // the loop carries them), and its prefetched loads.
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(split);
    // The advance is inline PTX: as a GEP, LLVM folds the phi of advanced
    // pointers into one of current pointers (InstCombine), the next
    // tile's then computed at the top for the copies, both live to the
    // stores and copied at the end of every tile.
    SmallVector<Value> yielded;
    for (auto [i, ptr] : llvm::enumerate(nextPtrs)) {
      Value bits = LLVM::PtrToIntOp::create(b, loc, i64(), ptr);
      Value sum = inlinePtx(
          b, loc, i64(), bits,
          "add.s64 $0, $1, " + std::to_string(tileBytes(i)) + ";", "=l,l");
      yielded.push_back(LLVM::IntToPtrOp::create(b, loc, globalPtr(), sum));
    }
    llvm::append_range(yielded, nextLoads);
    if (!yielded.empty())
      scf::YieldOp::create(b, loc, yielded);
  }
  b.setInsertionPointToStart(&split.getElseRegion().front());
  return emitPartialTile(fullTile, split);
}

SmallVector<unsigned> KernelEmitter::registerPrefetchStreams() const {
  SmallVector<unsigned> ids;
  if (!plan.getRegisterPrefetch() || phase != KernelPhase::Step)
    return ids;
  // Every stream the update reads but packed 4-bit codes: per element a
  // vector of the thread's lanes, per group or block the thread's scalar
  // (its lanes lie in one group).
  for (unsigned stream : getReadStreams(optimizer))
    if (!streams[stream].packed)
      ids.push_back(stream);
  return ids;
}

SmallVector<Value> KernelEmitter::loadFullTileIf(const RunContext &run,
                                                 Value k, Value t,
                                                 int64_t tiles,
                                                 ArrayRef<Value> ptrs,
                                                 ArrayRef<unsigned> streamIds) {
  SmallVector<Value> loaded;
  if (streamIds.empty())
    return loaded;
  SmallVector<Type> types;
  for (unsigned stream : streamIds) {
    Type elem = memoryType(streams[stream].storage);
    types.push_back(streams[stream].perElements == 1 ? Type(lanesOf(elem))
                                                     : elem);
  }
  // Only a tile wholly inside the run's tensor is loaded ahead (its
  // successor in the run is then the tensor's partial tile or none); the
  // values elsewhere are never used.
  Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                     plus(run, k, tiles), run.fullLimit);
  auto ifOp = scf::IfOp::create(b, loc, types, full, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value base;
  if (ptrs.empty())
    base = tileThreadBase(
        run, arith::AddIOp::create(b, loc, t, constI64(tiles)));
  for (auto [i, stream] : llvm::enumerate(streamIds)) {
    const StreamInfo &info = streams[stream];
    Type elem = memoryType(info.storage);
    Value index = info.perElements == 1
                      ? base
                      : arith::DivUIOp::create(b, loc, base,
                                               constI64(info.perElements));
    Value addr = ptrs.empty() ? gep(streamPtr(run, stream), elem, index)
                              : gep(ptrs[stream], b.getI8Type(),
                                    constI64(tiles * tileBytes(stream)));
    unsigned align = info.perElements == 1
                         ? vectorAlignment(elem, lanes)
                         : elem.getIntOrFloatBitWidth() / 8;
    loaded.push_back(load(types[i], addr, align));
  }
  scf::YieldOp::create(b, loc, loaded);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  SmallVector<Value> poison;
  for (Type type : types)
    poison.push_back(LLVM::PoisonOp::create(b, loc, type));
  scf::YieldOp::create(b, loc, poison);
  return SmallVector<Value>(ifOp.getResults());
}

void KernelEmitter::emitL2Prefetch(const RunContext &run, Value k, Value t) {
  // Without the plan's l2_prefetch_lines thread 0 has L2 fetch the read
  // streams of the run's full tile `prefetchAhead` tiles on (the plan's
  // l2_prefetch_tiles), one bulk prefetch per stream: a tile's loads then
  // wait on L2, not DRAM, with no register or shared memory held for them.
  int64_t prefetchAhead = plan.getL2PrefetchTiles();
  if (!prefetchAhead || plan.getL2PrefetchLines())
    return;
  {
    // Only the block's own tiles (the run's: the next run's first tiles are
    // another tensor's) that lie wholly inside the tensor.
    Value later = arith::AddIOp::create(b, loc, t, constI64(prefetchAhead));
    Value inRun = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        run.relative ? plus(run, k, prefetchAhead)
                                                     : later,
                                        run.fullLimit);
    Value first0 = isZero(run.kernel.tid);
    Value prefetch = arith::AndIOp::create(b, loc, first0, inRun);
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, prefetch, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value first = arith::MulIOp::create(
        b, loc, arith::SubIOp::create(b, loc, later, run.firstTile),
        constI64(tile));
    for (unsigned i : getReadStreams(optimizer))
      if (streams[i].perElements == 1)
        NVVM::CpAsyncBulkPrefetchOp::create(
            b, loc,
            gep(streamPtr(run, i), memoryType(streams[i].storage), first),
            constI32(tileBytes(i)), Value());
  }
}

void KernelEmitter::emitL2PrefetchLines(const TileContext &tile, Value k) {
  // With the plan's l2_prefetch_lines each thread has L2 fetch its own
  // lanes of the read streams `prefetchAhead` tiles on, from its own
  // pointers: no descriptor load, no uniform address and no branch that
  // ptxas if-converts into every warp (docs/tuning.md#l2-prefetch). The
  // warp's lanes make whole lines, as its loads do.
  int64_t prefetchAhead = plan.getL2PrefetchTiles();
  if (!prefetchAhead || !plan.getL2PrefetchLines())
    return;
  const RunContext &run = tile.run;
  Value inRun = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      plus(run, k, prefetchAhead), run.fullLimit);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, inRun, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  auto level = NVVM::PrefetchCacheLevelAttr::get(b.getContext(),
                                                 NVVM::PrefetchCacheLevel::L2);
  for (unsigned i : getReadStreams(optimizer))
    if (streams[i].perElements == 1)
      NVVM::PrefetchOp::create(
          b, loc, level, /*evictPriority=*/nullptr,
          gep(threadPtr(tile, i), b.getI8Type(),
              constI64(prefetchAhead * tileBytes(i))),
          /*predicate=*/Value());
}

LogicalResult KernelEmitter::emitFullTile(TileContext &tile, scf::IfOp split,
                                          Value k) {
  const RunContext &run = tile.run;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&split.getThenRegion().front());
    if (tile.kernel.stagingBase) {
      // Every group but the latest `ahead` (the next tiles') is complete:
      // this thread's copies of this tile are in shared memory. Each thread
      // reads only what it copied itself, so no barrier is needed, and a
      // stage is copied into again only after the thread has used what it
      // read.
      if (bulkCopy) {
        // The stage's barrier completes once per use; this is its
        // (g / stages)-th.
        Value g = arith::AddIOp::create(b, loc, run.stagedBefore, k);
        tile.stage = bulkStageOf(g);
        Value use = arith::DivUIOp::create(b, loc, g, constI32(staging.stages));
        waitForStage(tile.kernel.stageBarriers, tile.stage,
                     arith::AndIOp::create(b, loc, use, constI32(1)));
      } else {
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(run.ahead));
        tile.stage = stageOf(run, k);
      }
    }
    emitL2PrefetchLines(tile, k);
    tile.full = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    tile.active = tile.full;
    tile.laneMask = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(lanesOf(b.getI1Type()), true));
    if (failed(emitTile(tile)))
      return failure();
    if (bulkCopy)
      releaseStage(tile, k, run.fullLimit);
  }
  return success();
}

LogicalResult KernelEmitter::emitPartialTile(const TileContext &fullTile,
                                             scf::IfOp split) {
  const RunContext &run = fullTile.run;
  // The partial tile addresses its streams from `base`.
  TileContext tile(fullTile.kernel, run);
  tile.index = fullTile.index;
  tile.base = fullTile.base;
  if (runThreadPointers())
    tile.base = tileThreadBase(run, tile.index);
  Value end = arith::AddIOp::create(b, loc, tile.base, constI64(lanes));
  tile.full =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end, run.numel);
  tile.active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      tile.base, run.numel);
  SmallVector<int64_t> iota;
  for (int64_t i = 0; i < lanes; ++i)
    iota.push_back(i);
  Value laneIndex = arith::AddIOp::create(
      b, loc, vector::BroadcastOp::create(b, loc, lanesOf(i64()), tile.base),
      arith::ConstantOp::create(b, loc, b.getI64VectorAttr(iota)));
  tile.laneMask = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::slt, laneIndex,
      vector::BroadcastOp::create(b, loc, lanesOf(i64()), run.numel));
  return emitTile(tile);
}

//===- KernelSkeleton.cpp - The kernel's signature and loops --------------===//
//
// The kernel: its signature and launch attributes, shared memory, the claim
// loop over ranges of tiles, the runs of one tensor's tiles and the tile
// loop with its copy pipeline, L2 prefetch and full/partial tile bodies.
// Each step takes what it builds on as a context (KernelContext,
// ClaimContext, RunContext) and returns what the next one needs.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::qopt;

LogicalResult KernelEmitter::emit(gpu::GPUModuleOp module) {
  KernelContext kernel = createKernelFunction(module);
  if (failed(emitKernelEntry(kernel)))
    return failure();
  emitSharedMemory(kernel);
  ClaimContext claim = emitTileRanges(kernel);
  FailureOr<scf::WhileOp> runs = emitRuns(kernel, claim);
  if (failed(runs))
    return failure();
  if (claim.loop)
    emitClaimHandOver(kernel, claim, *runs);
  b.setInsertionPointToEnd(kernel.entry);
  gpu::ReturnOp::create(b, kernel.func.getLoc());
  return success();
}

KernelContext
KernelEmitter::createKernelFunction(gpu::GPUModuleOp module) {
  KernelContext kernel;
  kernel.module = module;
  kernel.prefix = ("__qopt_" + optimizer.getSymName()).str();
  // Signature: descriptors, tile map, tile count, uniforms, one qmap per
  // codebook state, and with tile claims the work counters (docs/abi.md).
  SmallVector<Type> args = {globalPtr(), globalPtr(), i64(), globalPtr()};
  for (auto [i, state] : llvm::enumerate(states))
    if (isa<CodebookSchemeAttr>(state.getScheme())) {
      kernel.codebookStates.push_back(i);
      args.push_back(globalPtr());
    }
  if (claims.enabled())
    args.push_back(globalPtr());
  b.setInsertionPointToEnd(module.getBody());
  auto func = gpu::GPUFuncOp::create(b, loc, optimizer.getSymName(),
                                     b.getFunctionType(args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  // The register bound of the plan (docs/tuning.md#registers).
  if (int64_t blocks = plan.getMinBlocksPerSm())
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(blocks));
  kernel.func = func;
  kernel.entry = &func.getBody().front();
  b.setInsertionPointToStart(kernel.entry);
  kernel.descs = kernel.entry->getArgument(0);
  kernel.tileMap = kernel.entry->getArgument(1);
  kernel.numTiles = kernel.entry->getArgument(2);
  return kernel;
}

LogicalResult KernelEmitter::emitKernelEntry(KernelContext &kernel) {
  Value uniformsPtr = kernel.entry->getArgument(3);
  unsigned numUniforms = 0;
  if (UniformsOp uniforms = optimizer.getUniforms())
    numUniforms = uniforms.getBody().front().getTerminator()->getNumOperands();
  kernel.tid =
      indexToI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  for (unsigned i = 0; i < numUniforms; ++i)
    kernel.uniformValues.push_back(
        load(f32(), gep(uniformsPtr, f32(), constI64(i)), 4));
  // A skipped step walks no tile.
  FailureOr<Value> skip = getSkipFlag(optimizer, kernel.uniformValues, math);
  if (failed(skip))
    return failure();
  if (*skip)
    kernel.numTiles = arith::SelectOp::create(b, loc, *skip, constI64(0),
                                             kernel.numTiles);

  return success();
}

void KernelEmitter::emitSharedMemory(KernelContext &kernel) {
  // Dynamic shared memory (the plan's shared_bytes, the manifest's
  // launch.shared_bytes): the tile stages, then the codebook buckets. Its
  // symbol is named after the first of them the kernel has.
  Value dynamicBase;
  if (plan.getSharedBytes() > 0)
    dynamicBase = sharedArray(
        kernel.module,
        kernel.prefix + (staging.streams.empty() ? "_buckets" : "_staging"), 0,
        b.getI8Type(), LLVM::Linkage::External);
  if (!staging.streams.empty())
    kernel.stagingBase = dynamicBase;
  int64_t bucketsOffset = staging.streams.empty() ? 0 : staging.sharedBytes();

  // Shared memory: per codebook state its table and midpoints (and bucket
  // table), filled once per block; per block reduction one slot per warp.
  for (auto [k, stateIndex] : llvm::enumerate(kernel.codebookStates))
    emitCodebookTable(kernel, k, stateIndex, dynamicBase, bucketsOffset);
  unsigned slot = 0;
  for (auto [i, state] : llvm::enumerate(states)) {
    if (getReductionSize(state) / lanes <= 32)
      continue;
    std::string name = kernel.prefix + "_warpmax" + std::to_string(slot++);
    // (One lane's |x| may be a NaN of any payload; two or more pass through
    // max.NaN, whose canonical NaN is the largest positive pattern.)
    if (isa<CodebookSchemeAttr>(state.getScheme()) && lanes >= 2)
      kernel.codebookSlots[i] =
          sharedArray(kernel.module, name, 2 * (threads / 32));
    else
      kernel.reductionSlots.push_back(
          sharedArray(kernel.module, name, threads / 32));
  }
  if (bulkCopy) {
    // Thread 0 sets up the stages' barriers (one arrival: the issuing
    // thread's expect_tx) and readers' counts; the barrier below publishes
    // them, fence.mbarrier_init to the bulk copies' async proxy.
    kernel.stageBarriers =
        sharedArray(kernel.module, kernel.prefix + "_stage_full",
                    staging.stages, i64());
    kernel.stageReaders =
        sharedArray(kernel.module, kernel.prefix + "_stage_readers",
                    staging.stages, i32());
    auto first = ifZero(kernel.tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    for (int64_t s = 0; s < staging.stages; ++s) {
      syncPtx(b, loc, Type(), stageBarrier(kernel, constI64(s)),
              "mbarrier.init.shared.b64 [$0], 1;", "l");
      LLVM::StoreOp::create(b, loc, constI32(0),
                            gep(kernel.stageReaders, i32(), constI64(s)), 4);
    }
    syncPtx(b, loc, Type(), ValueRange{}, "fence.mbarrier_init.release.cluster;",
            "");
  }
  gpu::BarrierOp::create(b, loc);
  for (auto [stateIndex, fits] : kernel.bucketsFitShared)
    kernel.bucketsFit[stateIndex] = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne, load(i32(), fits, 4), constI32(0));
}

void KernelEmitter::emitCodebookTable(KernelContext &kernel, int64_t k,
                                      int stateIndex, Value dynamicBase,
                                      int64_t bucketsOffset) {
  std::string qname = kernel.prefix + "_qmap" + std::to_string(stateIndex);
  std::string mname = kernel.prefix + "_mid" + std::to_string(stateIndex);
  std::string fname = kernel.prefix + "_bucketsfit" + std::to_string(stateIndex);
  Value qmap = sharedArray(kernel.module, qname, 256);
  // 255 midpoints and 8 of +inf after them, read by the bucketed search.
  Value mid = sharedArray(kernel.module, mname, 255 + kMidPadding);
  kernel.qmapShared[stateIndex] = qmap;
  kernel.midShared[stateIndex] = mid;
  if (codebookBuckets) {
    kernel.bucketShared[stateIndex] =
        gep(dynamicBase, b.getI8Type(),
            constI64(bucketsOffset +
                     int64_t(k) * CodebookBuckets::kBytesPerState));
    kernel.bucketsFitShared[stateIndex] =
        sharedArray(kernel.module, fname, 1, i32());
  }
  Value table = kernel.entry->getArgument(4 + k);
  // Whether no entry is below zero (a NaN or -0 entry allowed: the range
  // facts' "nonnegative" includes them), for the dequantized state's
  // range facts (emitLoadState): each thread's entries, then the
  // barrier's and-reduction over the block.
  Value trueFlag =
      arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  auto fill = scf::ForOp::create(b, loc, kernel.tid, constI64(256),
                                 constI64(threads), ValueRange{trueFlag});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fill.getBody());
    Value i = fill.getInductionVar();
    Value e = load(f32(), gep(table, f32(), i), 4);
    LLVM::StoreOp::create(b, loc, e, gep(qmap, f32(), i), 4);
    Value belowZero = math.cmp(arith::CmpFPredicate::OLT, e, math.constF(e, 0.0));
    Value notBelow = arith::XOrIOp::create(b, loc, belowZero, trueFlag);
    scf::YieldOp::create(
        b, loc,
        ValueRange{arith::AndIOp::create(b, loc, fill.getRegionIterArgs()[0],
                                         notBelow)});
  }
  Value allNotBelow = NVVM::BarrierOp::create(
      b, loc, i32(), Value(), Value(),
      NVVM::BarrierReductionAttr::get(b.getContext(),
                                      NVVM::BarrierReduction::AND),
      arith::ExtUIOp::create(b, loc, i32(), fill.getResult(0))).getRes();
  kernel.qmapNonnegative[stateIndex] = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne, allNotBelow, constI32(0));
  auto mids = scf::ForOp::create(b, loc, kernel.tid, constI64(255),
                                 constI64(threads));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(mids.getBody()->getTerminator());
    Value i = mids.getInductionVar();
    Value next = arith::AddIOp::create(b, loc, i, constI64(1));
    Value lo = load(f32(), gep(qmap, f32(), i), 4);
    Value hi = load(f32(), gep(qmap, f32(), next), 4);
    // mid[k] = (qmap[k] + qmap[k+1]) * 0.5, as seed 000 computes it.
    LLVM::StoreOp::create(
        b, loc, math.mul(math.add(lo, hi), math.constF(lo, 0.5)),
        gep(mid, f32(), i), 4);
  }
  auto pad = scf::ForOp::create(b, loc, kernel.tid, constI64(kMidPadding),
                                constI64(threads));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(pad.getBody()->getTerminator());
    Value i = arith::AddIOp::create(b, loc, pad.getInductionVar(),
                                    constI64(255));
    LLVM::StoreOp::create(
        b, loc, arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity())),
        gep(mid, f32(), i), 4);
  }
  if (codebookBuckets) {
    // The fits flag set before the barrier that starts the fill.
    Value fits = kernel.bucketsFitShared[stateIndex];
    auto first = ifZero(kernel.tid);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      LLVM::StoreOp::create(b, loc, constI32(1), fits, 4);
    }
    gpu::BarrierOp::create(b, loc);
    // One scratch array for every state: a barrier separates a state's
    // fill from the next state's midpoints.
    if (!kernel.bucketOfShared)
      kernel.bucketOfShared =
          sharedArray(kernel.module, kernel.prefix + "_bucketof",
                      255 + kMidPadding, i32());
    fillBuckets(kernel, mid, kernel.bucketShared[stateIndex], fits,
                kernel.bucketOfShared);
  }
}

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

ClaimContext KernelEmitter::emitTileRanges(KernelContext &kernel) {
  // Each block steps one contiguous range of tiles, [start, stop), in runs
  // of one tensor's tiles: a run loads its tile-map entry and descriptor
  // once, so a tile's loads wait on no tile-map load.
  //   chunk = ceil(numTiles / gridDim.x); start = min(blockIdx.x * chunk,
  //   numTiles); stop = min(start + chunk, numTiles)
  kernel.block =
      indexToI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  kernel.grid = indexToI64(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
  kernel.chunk = arith::DivUIOp::create(
      b, loc,
      arith::SubIOp::create(
          b, loc, arith::AddIOp::create(b, loc, kernel.numTiles, kernel.grid),
          constI64(1)),
      kernel.grid);
  ClaimContext claim;
  if (claims.enabled()) {
    claim.workCounters = kernel.entry->getArguments().back();
    claim.slots = sharedArray(kernel.module, kernel.prefix + "_claim", 2, i64());
    Value first = arith::DivUIOp::create(
        b, loc,
        arith::DivUIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, kernel.numTiles,
                                  constI64(claims.staticEighths)),
            constI64(8)),
        kernel.grid);
    claim.claiming = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, first,
                                     constI64(0));
    first = arith::SelectOp::create(b, loc, claim.claiming, first, kernel.chunk);
    claim.base = arith::MulIOp::create(b, loc, kernel.grid, first);
    Value c0 = arith::MulIOp::create(b, loc, kernel.block, first);
    Value e0 = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, c0, first), kernel.numTiles);
    SmallVector<Type> types = {i64(), i64(), i32()};
    SmallVector<Location> locs(types.size(), loc);
    claim.loop = scf::WhileOp::create(b, loc, types, ValueRange{c0, e0, constI32(0)});
    Block *before = b.createBlock(&claim.loop.getBefore(), {}, types, locs);
    scf::ConditionOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                              before->getArgument(0), kernel.numTiles),
        before->getArguments());
    Block *after = b.createBlock(&claim.loop.getAfter(), {}, types, locs);
    claim.start = after->getArgument(0);
    claim.stop = after->getArgument(1);
    claim.parity = after->getArgument(2);
    auto ifFirst = scf::IfOp::create(
        b, loc, TypeRange{i64()},
        arith::AndIOp::create(b, loc, isZero(kernel.tid), claim.claiming),
        /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
      Value old = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                                            claim.workCounters, constI64(claims.tiles),
                                            LLVM::AtomicOrdering::monotonic);
      scf::YieldOp::create(b, loc, old);
      b.setInsertionPointToStart(&ifFirst.getElseRegion().front());
      scf::YieldOp::create(b, loc, constI64(0));
    }
    claim.old = ifFirst.getResult(0);
  } else {
    claim.start = arith::MinSIOp::create(
        b, loc, arith::MulIOp::create(b, loc, kernel.block, kernel.chunk),
        kernel.numTiles);
    claim.stop = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, claim.start, kernel.chunk),
        kernel.numTiles);
  }
  return claim;
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
  RunContext run{kernel};
  run.start = after->getArgument(0);
  run.stagedBefore = bulkCopy ? after->getArgument(1) : Value();
  beginRun(run, claim.stop);
  emitCopyPrologue(run);
  // Every kernel's loop carries them, the two-state ones too: computing the
  // copy pointers from the run's per tile costs a 64-bit add pair per stream
  // for both the current and the copies' pointers. docs/tuning.md#run-pointers
  SmallVector<Value> aheadPtrs = advance(run.ptrs, run.ahead);
  auto loop = scf::ForOp::create(
      b, loc, run.lower, run.upper,
      run.relative ? Value(constI32(1)) : Value(constI64(1)),
      ValueRange(aheadPtrs));
  if (bulkCopy) {
    // Every thread is done with the run's stages before thread 0 fills them
    // with the next run's tiles (each issued tile was waited for, so no copy
    // is in flight either).
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

void KernelEmitter::beginRun(RunContext &run, Value stop) {
  const KernelContext &kernel = run.kernel;
  Value tensor = arith::ExtSIOp::create(
      b, loc, i64(), load(i32(), gep(kernel.tileMap, i32(), run.start), 4));
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(streams.size());
  run.desc = gep(kernel.descs, b.getI8Type(),
                 arith::MulIOp::create(b, loc, tensor, constI64(descBytes)));
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
    if (!runThreadPointers())
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

void KernelEmitter::emitCopyPrologue(const RunContext &run) {
  if (bulkCopy) {
    // Thread 0 fills every stage with the run's first full tiles (a loop:
    // unrolled, each tile's copies took about 60 instructions of code);
    // later tiles are issued by the last warp to finish reading a stage.
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
  SmallVector<Value> nextPtrs(loop.getRegionIterArgs().begin(),
                              loop.getRegionIterArgs().end());
  // The full tile's context; the partial tile's takes its index (and
  // without run thread pointers its base).
  TileContext fullTile{kernel, run};
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
  b.setInsertionPointToStart(&split.getElseRegion().front());
  return emitPartialTile(fullTile, split, nextPtrs);
}

void KernelEmitter::emitL2Prefetch(const RunContext &run, Value k, Value t) {
  // Thread 0 has L2 fetch the read streams of the run's full tile
  // `prefetchAhead` tiles on (the plan's l2_prefetch_tiles): a tile's loads
  // then wait on L2, not DRAM, with no register or shared memory held for
  // them.
  int64_t prefetchAhead = plan.getL2PrefetchTiles();
  if (!prefetchAhead)
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
        waitForStage(tile.kernel, tile.stage,
                     arith::AndIOp::create(b, loc, use, constI32(1)));
      } else {
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(run.ahead));
        tile.stage = stageOf(run, k);
      }
    }
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
                                             scf::IfOp split,
                                             ArrayRef<Value> nextPtrs) {
  const RunContext &run = fullTile.run;
  // The partial tile addresses its streams from `base`.
  TileContext tile{fullTile.kernel, run};
  tile.index = fullTile.index;
  tile.base = fullTile.base;
  if (runThreadPointers())
    tile.base = tileThreadBase(run, tile.index);
  // The tile's successor's pointers, after all of the tile's uses (where
  // the loop carries them).
  if (!nextPtrs.empty()) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(split);
    // The advance is inline PTX: as a GEP, LLVM folds the phi of advanced
    // pointers into one of current pointers (InstCombine), the next
    // tile's then computed at the top for the copies, both live to the
    // stores and copied at the end of every tile.
    SmallVector<Value> advanced;
    for (auto [i, ptr] : llvm::enumerate(nextPtrs)) {
      Value bits = LLVM::PtrToIntOp::create(b, loc, i64(), ptr);
      Value sum = inlinePtx(
          b, loc, i64(), bits,
          "add.s64 $0, $1, " + std::to_string(tileBytes(i)) + ";", "=l,l");
      advanced.push_back(LLVM::IntToPtrOp::create(b, loc, globalPtr(), sum));
    }
    scf::YieldOp::create(b, loc, advanced);
  }
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

void KernelEmitter::emitClaimHandOver(const KernelContext &kernel,
                                      const ClaimContext &claim,
                                      scf::WhileOp runs) {
  // The next claim, handed from thread 0 to the block; the slot of this
  // parity is written again only after the next claim's barrier.
  b.setInsertionPointAfter(runs);
  auto handOver = scf::IfOp::create(b, loc, TypeRange{i64()}, claim.claiming,
                                    /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard outer(b);
    b.setInsertionPointToStart(&handOver.getThenRegion().front());
    Value slot = gep(claim.slots, i64(),
                   arith::ExtUIOp::create(b, loc, i64(), claim.parity));
    {
      auto first = ifZero(kernel.tid);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      LLVM::StoreOp::create(
          b, loc, arith::AddIOp::create(b, loc, claim.base, claim.old), slot, 8);
    }
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, load(i64(), slot, 8));
    b.setInsertionPointToStart(&handOver.getElseRegion().front());
    scf::YieldOp::create(b, loc, kernel.numTiles);
  }
  Value next = handOver.getResult(0);
  Value nextEnd = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, next, constI64(claims.tiles)),
      kernel.numTiles);
  scf::YieldOp::create(
      b, loc,
      ValueRange{next, nextEnd,
                 arith::XOrIOp::create(b, loc, claim.parity, constI32(1))});
  // The last block to finish zeroes the counters for the next launch:
  // every other block counted itself done (acq_rel) after its last claim
  // returned, so no claim of this launch can follow the reset.
  b.setInsertionPointAfter(claim.loop);
  auto first = scf::IfOp::create(
      b, loc, TypeRange{},
      arith::AndIOp::create(b, loc, isZero(kernel.tid), claim.claiming),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&first.getThenRegion().front());
  Value doneCounter = gep(claim.workCounters, i64(), constI64(1));
  Value done = syncPtx(b, loc, i64(), ValueRange{doneCounter},
                       "atom.acq_rel.gpu.global.add.u64 $0, [$1], 1;", "=l,l");
  auto last = scf::IfOp::create(
      b, loc, TypeRange{},
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, done,
                            arith::SubIOp::create(b, loc, kernel.grid, constI64(1))),
      /*withElseRegion=*/false);
  b.setInsertionPointToStart(&last.getThenRegion().front());
  LLVM::StoreOp::create(b, loc, constI64(0), claim.workCounters, 8);
  LLVM::StoreOp::create(b, loc, constI64(0), doneCounter, 8);
}

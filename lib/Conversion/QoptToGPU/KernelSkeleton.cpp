//===- KernelSkeleton.cpp - The kernel's signature and tile ranges --------===//
//
// The kernel: its signature and launch attributes, the entry's thread index
// and uniforms, shared memory and its fills, and the block's ranges of tiles
// (static, or claimed from the launch's work counters) around the runs of
// TileLoop.cpp. Each step takes what it builds on as a context
// (KernelContext, ClaimContext) and returns what the next one needs.
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
  if (phase == KernelPhase::Reduce)
    kernel.chunkSlots = sharedArray(
        kernel.module, kernel.prefix + "_chunks",
        int64_t(getReductions(optimizer).size()) * (threads / 32),
        b.getF64Type());
  ClaimContext claim = emitTileRanges(kernel);
  if (producerWarp) {
    // Warp threads / 32 issues the copies, the others compute (a staged
    // kernel never claims: claim is the block's static range).
    auto split = scf::IfOp::create(
        b, loc, TypeRange{},
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, kernel.tid,
                              constI64(threads)),
        /*withElseRegion=*/true);
    b.setInsertionPointToStart(&split.getThenRegion().front());
    emitProducer(kernel, claim);
    b.setInsertionPointToStart(&split.getElseRegion().front());
  }
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
  // The reduce pre-pass is `<kernel>_reduce`, its symbols prefixed so.
  std::string name = optimizer.getSymName().str();
  if (phase == KernelPhase::Reduce)
    name += "_reduce";
  kernel.prefix = "__qopt_" + name;
  // Signature: descriptors, tile map, tile count, uniforms, one qmap per
  // codebook state, with per-tensor reductions their values (the step) or
  // chunk partials (the pre-pass), with tile claims the work counters, and
  // where a state saturates the numerics counters (docs/abi.md); the
  // pre-pass stores no state and takes no counters.
  SmallVector<Type> args = {globalPtr(), globalPtr(), i64(), globalPtr()};
  for (auto [i, state] : llvm::enumerate(states))
    if (isa<CodebookSchemeAttr>(state.getScheme())) {
      kernel.codebookStates.push_back(i);
      args.push_back(globalPtr());
    }
  // The step reads per-tensor values; the pre-pass writes every
  // reduction's chunk partials.
  bool step = phase == KernelPhase::Step;
  bool reductions = !getReductions(optimizer, /*global=*/false).empty() ||
                    (!step && !getReductions(optimizer).empty());
  if (reductions)
    args.push_back(globalPtr());
  if (claims.enabled() && step)
    args.push_back(globalPtr());
  if (countsNumerics(optimizer) && step)
    args.push_back(globalPtr());
  b.setInsertionPointToEnd(module.getBody());
  auto func = gpu::GPUFuncOp::create(b, loc, name,
                                     b.getFunctionType(args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  // With a producer warp the block holds one warp more than the tile's
  // threads (the manifest's launch.producer_warps).
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {static_cast<int32_t>(threads + (producerWarp ? 32 : 0)), 1, 1}));
  // The register bound of the plan (docs/tuning.md#registers).
  if (int64_t blocks = plan.getMinBlocksPerSm())
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(blocks));
  kernel.func = func;
  kernel.entry = &func.getBody().front();
  b.setInsertionPointToStart(kernel.entry);
  kernel.descs = kernel.entry->getArgument(0);
  kernel.tileMap = kernel.entry->getArgument(1);
  kernel.numTiles = kernel.entry->getArgument(2);
  // The reductions' buffer, the work counters, then the numerics counters.
  unsigned next = 4 + kernel.codebookStates.size();
  if (reductions)
    (step ? kernel.reductionValues : kernel.reductionPartials) =
        kernel.entry->getArgument(next++);
  if (claims.enabled() && step)
    kernel.workCounters = kernel.entry->getArgument(next++);
  if (countsNumerics(optimizer) && step)
    kernel.numericsCounters = kernel.entry->getArgument(next++);
  return kernel;
}

LogicalResult KernelEmitter::emitKernelEntry(KernelContext &kernel) {
  kernel.tid =
      indexToI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  // A skipped step walks no tile.
  FailureOr<Value> skip = loadUniforms(kernel, kernel.entry->getArgument(3));
  if (failed(skip))
    return failure();
  if (*skip)
    kernel.numTiles = arith::SelectOp::create(b, loc, *skip, constI64(0),
                                             kernel.numTiles);
  // The step's arithmetic of uniforms and whole-step reductions, once.
  if (phase != KernelPhase::Step)
    return success();
  kernel.invariantScopes = getInvariantValues(optimizer);
  unsigned firstSlot = getNumHostUniforms(optimizer);
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    unsigned index = kernel.uniformValues.size();
    if (auto uniform = dyn_cast<UniformOp>(op))
      index = uniform.getIndex();
    else if (auto reduce = dyn_cast<ReduceOp>(op); reduce && reduce.getGlobal())
      index = firstSlot + getScopedReductionIndex(reduce);
    if (index < kernel.uniformValues.size())
      kernel.invariants[op.getResult(0)] = kernel.uniformValues[index];
  }
  lowerInvariants(math, optimizer, kernel.invariantScopes, UpdateScope::Launch,
                  kernel.invariants);

  return success();
}

FailureOr<Value> KernelEmitter::loadUniforms(KernelContext &kernel,
                                             Value uniformsPtr) {
  // The host-evaluated uniforms, then one slot per whole-step reduction
  // (the combine phase writes them before the step).
  unsigned numUniforms = getNumHostUniforms(optimizer) +
                         getReductions(optimizer, /*global=*/true).size();
  for (unsigned i = 0; i < numUniforms; ++i)
    kernel.uniformValues.push_back(
        load(f32(), gep(uniformsPtr, f32(), constI64(i)), 4));
  return getSkipFlag(optimizer, kernel.uniformValues, math);
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
  emitCodeTables(kernel);
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
  if (splitAbsmaxBarrier && !kernel.codebookSlots.empty()) {
    // Every thread arrives once a tile (postCodebookMaxima); thread 0 sets
    // the count before the barrier below.
    kernel.absmaxArrivalsSymbol = kernel.prefix + "_absmax_arrivals";
    Value arrivals =
        sharedArray(kernel.module, kernel.absmaxArrivalsSymbol, 1, i64());
    kernel.absmaxArrivals = LLVM::PtrToIntOp::create(b, loc, i64(), arrivals);
    auto first = ifZero(kernel.tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    syncPtx(b, loc, Type(), kernel.absmaxArrivals,
            "mbarrier.init.shared.b64 [$0], " + std::to_string(threads) + ";",
            "l");
  }
  if (bulkCopy) {
    // Thread 0 sets up the stages' barriers (one arrival: the issuing
    // thread's expect_tx) and readers' counts; the barrier below publishes
    // them, fence.mbarrier_init to the bulk copies' async proxy.
    kernel.stageBarriers =
        sharedArray(kernel.module, kernel.prefix + "_stage_full",
                    staging.stages, i64());
    // With a producer warp, per stage a second barrier of one arrival per
    // computing thread, which the producer waits on before a refill.
    if (producerWarp)
      kernel.stageEmpty =
          sharedArray(kernel.module, kernel.prefix + "_stage_empty",
                      staging.stages, i64());
    else
      kernel.stageReaders =
          sharedArray(kernel.module, kernel.prefix + "_stage_readers",
                      staging.stages, i32());
    auto first = ifZero(kernel.tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    for (int64_t s = 0; s < staging.stages; ++s) {
      syncPtx(b, loc, Type(), stageBarrier(kernel, constI64(s)),
              "mbarrier.init.shared.b64 [$0], 1;", "l");
      if (producerWarp)
        syncPtx(b, loc, Type(), stageBarrier(kernel.stageEmpty, constI64(s)),
                "mbarrier.init.shared.b64 [$0], " + std::to_string(threads) +
                    ";",
                "l");
      else
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
    claim.workCounters = kernel.workCounters;
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

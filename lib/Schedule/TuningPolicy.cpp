//===- TuningPolicy.cpp - The measured launch choices ---------------------===//
//
// Each choice states its rule and cites the docs/tuning.md section that
// holds the measurements behind it.
//
//===----------------------------------------------------------------------===//

#include "qopt/Schedule/TuningPolicy.h"

#include <algorithm>
#include <optional>

using namespace mlir;
using namespace mlir::qopt;

template <typename Scheme> static bool hasStateOf(OptimizerOp optimizer) {
  return llvm::any_of(getStates(optimizer), [](StateOp state) {
    return isa<Scheme>(state.getScheme());
  });
}

static bool hasParamBits(OptimizerOp optimizer, unsigned bits) {
  return optimizer.getParamType().getIntOrFloatBitWidth() == bits;
}

/// Whether every element of `state` takes at most 16 bits: a group state or
/// a 16-bit plain one.
static bool hasNarrowElements(StateOp state) {
  if (isa<GroupSchemeAttr>(state.getScheme()))
    return true;
  auto plain = dyn_cast<PlainSchemeAttr>(state.getScheme());
  return plain && plain.getStorage().getWidth() <= 16;
}

/// A 16-bit parameter and states that are all group states or 16-bit plain
/// ones: steps bound by their instruction issue, where the staging frees the
/// registers that loads in flight would hold. docs/tuning.md#async-copy
static bool prefersStagedTiles(OptimizerOp optimizer) {
  SmallVector<StateOp> states = getStates(optimizer);
  return !states.empty() && hasParamBits(optimizer, 16) &&
         llvm::all_of(states, hasNarrowElements);
}

bool mlir::qopt::hasSmallCodebookBlocks(OptimizerOp optimizer) {
  SmallVector<StateOp> states = getStates(optimizer);
  return states.size() >= 2 && hasStateOf<CodebookSchemeAttr>(optimizer) &&
         llvm::all_of(states, [](StateOp state) {
           return !isa<CodebookSchemeAttr>(state.getScheme()) ||
                  getReductionSize(state) <= 256;
         });
}

/// Codebook steps of small blocks and a 16-bit parameter, staged at 256
/// threads: two blocks of up to 128 registers per SM.
/// docs/tuning.md#async-copy
static bool prefersStagedCodebookTiles(OptimizerOp optimizer) {
  return hasSmallCodebookBlocks(optimizer) && hasParamBits(optimizer, 16);
}

int64_t mlir::qopt::chooseThreadsPerBlock(OptimizerOp optimizer,
                                          int64_t requested) {
  if (requested > 0)
    return requested;
  // docs/tuning.md#threads
  if (prefersStagedTiles(optimizer))
    return 512;
  if (hasStateOf<CodebookSchemeAttr>(optimizer))
    return hasSmallCodebookBlocks(optimizer) && optimizer.getParamType().isF32()
               ? 512
               : 256;
  return getStates(optimizer).size() >= 2 ? 512 : 256;
}

int64_t mlir::qopt::chooseElementsPerThread(OptimizerOp optimizer,
                                            int64_t threads,
                                            int64_t requested) {
  int64_t minGroup = getMinGroupSize(optimizer);
  if (requested > 0)
    return std::min(requested, minGroup);
  int64_t maxGroup = 1;
  SmallVector<StateOp> states = getStates(optimizer);
  for (StateOp state : states)
    maxGroup = std::max(maxGroup, getReductionSize(state));
  // docs/tuning.md#lanes: 8, but 16 for one group state unstaged (an f32
  // parameter).
  bool oneGroupUnstaged = states.size() == 1 &&
                          isa<GroupSchemeAttr>(states.front().getScheme()) &&
                          !prefersStagedTiles(optimizer);
  int64_t lanes = std::min<int64_t>(oneGroupUnstaged ? 16 : 8, minGroup);
  while (threads > 0 && (threads * lanes) % maxGroup != 0 && lanes < 16 &&
         lanes * 2 <= minGroup)
    lanes *= 2;
  return lanes;
}

/// Whether the launch lowering takes `threads` x `lanes`: whole groups and
/// blocks per tile (fitsTileShape) and, for reductions, whole chunks.
static bool takesTileShape(OptimizerOp optimizer, int64_t threads,
                           int64_t lanes) {
  return fitsTileShape(optimizer, threads, lanes) &&
         fitsReductionChunks(optimizer, threads, lanes);
}

/// The shape nearest the measured default `threads` x `lanes` that the
/// lowering takes, where the default is not such a shape: the default's
/// lanes first (at more threads, then fewer), then fewer lanes, then more
/// (at most 16); a dimension the caller fixed stays. Unmeasured: a shape
/// that compiles where the policy's does not. docs/tuning.md#fallback-shape
static std::optional<TileShape> findTileShape(OptimizerOp optimizer,
                                              int64_t threads, int64_t lanes,
                                              bool threadsFixed,
                                              bool lanesFixed) {
  SmallVector<int64_t> laneChoices = {lanes};
  if (!lanesFixed) {
    for (int64_t l = lanes / 2; l >= 1; l /= 2)
      laneChoices.push_back(l);
    for (int64_t l = lanes * 2; l <= 16; l *= 2)
      laneChoices.push_back(l);
  }
  SmallVector<int64_t> threadChoices = {threads};
  if (!threadsFixed) {
    for (int64_t t = threads + 32; t <= 1024; t += 32)
      threadChoices.push_back(t);
    for (int64_t t = threads - 32; t >= 32; t -= 32)
      threadChoices.push_back(t);
  }
  for (int64_t l : laneChoices)
    for (int64_t t : threadChoices)
      if (takesTileShape(optimizer, t, l))
        return TileShape{t, l};
  return std::nullopt;
}

FailureOr<TileShape> mlir::qopt::chooseTileShape(OptimizerOp optimizer,
                                                 int64_t requestedThreads,
                                                 int64_t requestedLanes) {
  int64_t threads = chooseThreadsPerBlock(optimizer, requestedThreads);
  int64_t lanes = chooseElementsPerThread(optimizer, threads, requestedLanes);
  if (threads % 32 != 0 || threads < 32 || threads > 1024)
    return optimizer.emitError("threads-per-block must be a multiple of 32 in "
                               "[32, 1024], got ")
           << threads;
  if (takesTileShape(optimizer, threads, lanes))
    return TileShape{threads, lanes};
  if (std::optional<TileShape> found =
          findTileShape(optimizer, threads, lanes, requestedThreads > 0,
                        requestedLanes > 0))
    return *found;
  if (!fitsTileShape(optimizer, threads, lanes)) {
    // Where the search ran, say so before the measured shape's own error.
    if (requestedThreads <= 0 || requestedLanes <= 0)
      optimizer.emitError("no launch shape of 32 to 1024 threads")
          << (requestedThreads > 0 ? " (" + std::to_string(threads) + " asked)"
                                   : std::string())
          << " and 1 to 16 lanes"
          << (requestedLanes > 0 ? " (" + std::to_string(lanes) + " asked)"
                                 : std::string())
          << " holds every group and block of this optimizer whole; the "
             "measured shape is "
          << threads << " x " << lanes;
    return verifyTileShape(optimizer, threads, lanes), failure();
  }
  // Only the reductions' chunks do not fit: the host lowering takes the
  // shape, the GPU lowering names the rule (checkReductionShape).
  return TileShape{threads, lanes};
}

bool mlir::qopt::chooseAsyncCopy(OptimizerOp optimizer, AsyncCopy requested) {
  if (requested != AsyncCopy::Auto)
    return requested == AsyncCopy::On;
  return prefersStagedTiles(optimizer) || prefersStagedCodebookTiles(optimizer);
}

int64_t mlir::qopt::chooseStagingSharedLimit(OptimizerOp optimizer,
                                             int64_t threads) {
  // A codebook kernel's bucket tables lie beside the stages, and its static
  // tables beside both: the stages keep the whole within what every GPU
  // since sm_80 grants a block.
  int64_t tables = getCodebookStaticSharedBytes(optimizer, threads);
  if (tables == 0)
    return StagingLimits::kMaxSharedBytes;
  tables += getNumCodebookStates(optimizer) * CodebookBuckets::kBytesPerState;
  return std::min<int64_t>(StagingLimits::kMaxSharedBytes,
                           StagingLimits::kPortableSharedBytes - tables);
}

TileStaging mlir::qopt::chooseTileStaging(OptimizerOp optimizer,
                                          TileShape shape) {
  TileStaging staging = getStageLayout(optimizer, shape);
  if (staging.streams.empty())
    return TileStaging();
  // The most stages that fit: more tiles in flight per block.
  // docs/tuning.md#stages
  int64_t limit = chooseStagingSharedLimit(optimizer, shape.threads);
  for (staging.stages = StagingLimits::kMaxStages;
       staging.stages > 2 && staging.sharedBytes() > limit; --staging.stages) {
  }
  if (staging.sharedBytes() > limit)
    return TileStaging();
  return staging;
}

/// Whether a codebook block of `optimizer` spans more than a warp's 256
/// elements (its tile then waits at the block's barrier).
static bool hasCodebookBlocksAcrossWarps(OptimizerOp optimizer) {
  return llvm::any_of(getStates(optimizer), [](StateOp state) {
    return isa<CodebookSchemeAttr>(state.getScheme()) &&
           getReductionSize(state) > 256;
  });
}

int64_t mlir::qopt::chooseL2PrefetchTiles(OptimizerOp optimizer, bool staged) {
  if (staged)
    return 0;
  // docs/tuning.md#l2-prefetch
  bool codebook = hasStateOf<CodebookSchemeAttr>(optimizer);
  int64_t states = getStates(optimizer).size();
  // Thread 0's bulk prefetch 2 tiles ahead where a codebook block spans
  // warps and the parameter is 16-bit.
  if (codebook && hasParamBits(optimizer, 16) &&
      hasCodebookBlocksAcrossWarps(optimizer))
    return 2;
  // Three or more states with a codebook and an f32 parameter spill at
  // their 64 registers, more with the prefetch's.
  if (codebook && optimizer.getParamType().isF32() && states >= 3)
    return 0;
  // Each thread's lines 1 tile ahead for every other codebook update and
  // for two or more states with a group state (unstaged: an f32
  // parameter's). One state without a codebook lost, as did two float32
  // plain states (the *_state32 specs, StableAdamW).
  if (codebook)
    return 1;
  return states >= 2 && hasStateOf<GroupSchemeAttr>(optimizer) ? 1 : 0;
}

bool mlir::qopt::chooseL2PrefetchLines(OptimizerOp optimizer,
                                       L2PrefetchKind requested) {
  if (requested != L2PrefetchKind::Auto)
    return requested == L2PrefetchKind::Lines;
  // docs/tuning.md#l2-prefetch: lines lost 5 to 7% where a codebook block
  // spans warps (the bulk prefetch's branch is then warp 0's alone).
  return !(hasParamBits(optimizer, 16) &&
           hasCodebookBlocksAcrossWarps(optimizer));
}

int64_t mlir::qopt::getRegisterPrefetchRegisters(OptimizerOp optimizer,
                                                  int64_t lanes) {
  // A vector of the lanes per element stream, a register per group or
  // block stream (packed 4-bit codes are not carried).
  SmallVector<StreamInfo> streams = getStreams(optimizer);
  int64_t registers = 0;
  for (unsigned i : getReadStreams(optimizer)) {
    if (streams[i].packed)
      continue;
    int64_t bytes = streams[i].perElements == 1
                        ? lanes * streams[i].storage.getIntOrFloatBitWidth() / 8
                        : 4;
    registers += (bytes + 3) / 4;
  }
  return registers;
}

bool mlir::qopt::chooseRegisterPrefetch(OptimizerOp optimizer, bool staged,
                                        int64_t lanes,
                                        RegisterPrefetch requested) {
  if (staged || requested == RegisterPrefetch::Off)
    return false;
  if (requested == RegisterPrefetch::On)
    return true;
  // docs/tuning.md#register-prefetch: plain states only (the codebook
  // kernels lost 3 to 25%, the unstaged group-state kernels 0 to 10%), and
  // at most 24 registers carried (two float32 states of an f32 parameter,
  // 32, lost 1 to 6%).
  if (hasStateOf<CodebookSchemeAttr>(optimizer) ||
      hasStateOf<GroupSchemeAttr>(optimizer))
    return false;
  return getRegisterPrefetchRegisters(optimizer, lanes) <=
         kMaxRegisterPrefetchRegisters;
}

/// Whether the operand of a reduction of the update reads a state (a
/// qopt.load_state in the backward slice of the reductions' operands).
static bool reductionOperandsReadState(OptimizerOp optimizer) {
  Block &body = optimizer.getUpdate().getBody().front();
  llvm::SmallPtrSet<Operation *, 32> slice;
  SmallVector<Value> work;
  for (ReduceOp reduce : body.getOps<ReduceOp>())
    work.push_back(reduce.getOperand());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && slice.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  return llvm::any_of(slice,
                      [](Operation *op) { return isa<LoadStateOp>(op); });
}

int64_t mlir::qopt::chooseReducePassLanes(OptimizerOp optimizer,
                                          KernelPlanAttr step) {
  // docs/tuning.md#prepass: twice the lanes where the loads are all there
  // is (the gradient alone) or two reductions' trees per element (norm(p)
  // and norm(u)); one reduction over a state's arithmetic keeps 8.
  int64_t lanes = step.getLanes();
  bool twice = optimizer.getGradType().getIntOrFloatBitWidth() == 16 &&
               lanes == 8 &&
               (getReductions(optimizer).size() >= 2 ||
                !reductionOperandsReadState(optimizer));
  if (!twice)
    return lanes;
  // A warp's elements within one chunk, at least a warp per block, a
  // thread's lanes within one group or codebook block.
  return std::min({2 * lanes, kReductionChunk / 32, step.getTile() / 32,
                   getMinGroupSize(optimizer)});
}

KernelPlanAttr mlir::qopt::chooseReducePassPlan(OptimizerOp optimizer,
                                                KernelPlanAttr step) {
  int64_t lanes = chooseReducePassLanes(optimizer, step);
  return KernelPlanAttr::get(
      step.getContext(), step.getTile() / lanes, lanes, /*stages=*/0,
      /*shared_bytes=*/0, /*codebook_buckets=*/false, /*bulk_copy=*/false,
      /*run_pointers=*/false, /*invariant_descriptors=*/false,
      /*l2_prefetch_tiles=*/0, /*l2_prefetch_lines=*/false,
      /*register_prefetch=*/false, /*claim_tiles=*/0,
      /*claim_static_eighths=*/0, /*min_blocks_per_sm=*/0,
      step.getZeroShortcutLaneDivisors(),
      step.getScaledRangeChecks(), /*early_saturation_counts=*/false,
      /*split_absmax_barrier=*/false, /*waves=*/1, step.getMinTilesPerBlock(),
      step.getSuggestedBlocksPerSm(), /*producer_warp=*/false);
}

int64_t mlir::qopt::chooseGridWaves(OptimizerOp optimizer) {
  return !hasStateOf<CodebookSchemeAttr>(optimizer) &&
                 hasParamBits(optimizer, 16)
             ? 4
             : 1;
}

int64_t mlir::qopt::chooseGridMinTilesPerBlock(OptimizerOp optimizer) {
  return getStates(optimizer).size() <= 1 ? 24 : 128;
}

TileClaims mlir::qopt::chooseTileClaims(OptimizerOp optimizer, bool staged,
                                        int64_t requested,
                                        int64_t staticEighths) {
  // A staged kernel's copy pipeline (and a bulk-copy kernel's stage phases)
  // runs within one claim: never claims, even when asked.
  if (requested == 0 || staged)
    return {};
  auto share = [&](int64_t chosen) {
    return staticEighths > 0 ? std::clamp<int64_t>(staticEighths, 1, 8)
                             : chosen;
  };
  if (requested > 0)
    return {requested, share(5)};
  if (!hasStateOf<CodebookSchemeAttr>(optimizer))
    return {};
  // The block size stands for "its absmax crosses warps" (block / lanes >
  // 32) at the codebook kernels' default 8 lanes, which this choice precedes.
  int64_t largestBlock = 0;
  for (StateOp state : getStates(optimizer))
    if (auto codebook = dyn_cast<CodebookSchemeAttr>(state.getScheme()))
      largestBlock = std::max(largestBlock, codebook.getBlock());
  return largestBlock >= 1024 ? TileClaims{3, share(5)}
                              : TileClaims{1, share(6)};
}

bool mlir::qopt::chooseRunThreadPointers(OptimizerOp optimizer, bool staged) {
  // docs/tuning.md#run-pointers
  return staged;
}

bool mlir::qopt::chooseInvariantDescriptorLoads(OptimizerOp optimizer,
                                                bool runPointers) {
  // docs/tuning.md#descriptor-loads
  bool codebookF32 = optimizer.getParamType().isF32() &&
                     hasStateOf<CodebookSchemeAttr>(optimizer);
  return !runPointers && getStates(optimizer).size() >= 2 && !codebookF32;
}

bool mlir::qopt::chooseZeroShortcutLaneDivisors(OptimizerOp optimizer,
                                                bool runPointers) {
  // docs/tuning.md#zero-shortcut
  return runPointers || !hasStateOf<CodebookSchemeAttr>(optimizer) ||
         optimizer.getParamType().isF32();
}

bool mlir::qopt::chooseScaledRangeChecks(OptimizerOp optimizer,
                                         bool runPointers) {
  // docs/tuning.md#zero-shortcut
  return runPointers;
}

bool mlir::qopt::chooseEarlySaturationCounts(OptimizerOp optimizer,
                                             bool staged) {
  // docs/tuning.md#counters
  return !staged && hasStateOf<CodebookSchemeAttr>(optimizer);
}

int64_t mlir::qopt::getCodebookRegisterBound(OptimizerOp optimizer) {
  // docs/tuning.md#registers
  if (optimizer.getParamType().isF32() && getStates(optimizer).size() >= 2 &&
      !hasSmallCodebookBlocks(optimizer))
    return 80;
  return 64;
}

bool mlir::qopt::canUseProducerWarp(OptimizerOp optimizer, int64_t threads,
                                    int64_t lanes) {
  if (threads + 32 > 1024 || hasStateOf<CodebookSchemeAttr>(optimizer) ||
      !getReductions(optimizer).empty())
    return false;
  return llvm::all_of(getStates(optimizer), [&](StateOp state) {
    return getReductionSize(state) / lanes <= 32;
  });
}

bool mlir::qopt::chooseProducerWarp(OptimizerOp optimizer) {
  // Where a producer is asked for, two or more group states take it: the
  // rule, and why the option is off by default, are in
  // docs/tuning.md#producer-warp.
  return llvm::count_if(getStates(optimizer), [](StateOp state) {
           return isa<GroupSchemeAttr>(state.getScheme());
         }) >= 2;
}

bool mlir::qopt::chooseSplitAbsmaxBarrier(OptimizerOp optimizer,
                                          int64_t lanes, bool requested) {
  // docs/tuning.md#split-absmax: at the 64-register bound the split was
  // slower.
  if (!requested || lanes < 2 || getCodebookRegisterBound(optimizer) <= 64)
    return false;
  return llvm::any_of(getStates(optimizer), [&](StateOp state) {
    auto codebook = dyn_cast<CodebookSchemeAttr>(state.getScheme());
    return codebook && codebook.getBlock() / lanes > 32;
  });
}

int64_t mlir::qopt::chooseMinBlocksPerSM(OptimizerOp optimizer,
                                         int64_t threads,
                                         int64_t dynamicSharedBytes) {
  // docs/tuning.md#registers
  SmallVector<StateOp> states = getStates(optimizer);
  bool codebook = hasStateOf<CodebookSchemeAttr>(optimizer);
  int64_t codebookRegisters = getCodebookRegisterBound(optimizer);
  int64_t codebookBlocks = std::min<int64_t>(
      65536 / (threads * codebookRegisters),
      228 * 1024 / (dynamicSharedBytes +
                    getCodebookStaticSharedBytes(optimizer, threads) + 1024));
  if (codebook && codebookBlocks >= 2)
    return codebookBlocks;
  if (threads <= 256 && !codebook && states.size() <= 1)
    return 2;
  return 0;
}

int64_t mlir::qopt::chooseSuggestedBlocksPerSM(int64_t sharedBytes,
                                               int64_t threads) {
  int64_t byThreads =
      std::max<int64_t>(1, PlanRequest::kMaxThreadsPerSM / threads);
  int64_t byShared =
      sharedBytes ? std::clamp<int64_t>(228 * 1024 / (sharedBytes + 1024), 1, 4)
                  : 4;
  return std::min(byShared, byThreads);
}

FailureOr<KernelPlanAttr>
mlir::qopt::chooseKernelPlan(OptimizerOp optimizer,
                             const PlanRequest &request) {
  FailureOr<TileShape> shape = chooseTileShape(
      optimizer, request.threadsPerBlock, request.elementsPerThread);
  if (failed(shape))
    return failure();
  MLIRContext *ctx = optimizer.getContext();
  int64_t waves = chooseGridWaves(optimizer);
  int64_t minTiles = chooseGridMinTilesPerBlock(optimizer);
  // A producer warp takes one of the block's warps where the shape is the
  // policy's: the tile is 32 threads' lanes smaller and the block keeps its
  // size, a multiple of four warps, whose registers per thread ptxas bounds
  // as for the next such multiple (544 threads: 96, against 128 at 512).
  // The host plan takes the same shape: both walk the same tiles. Where the
  // smaller tile cannot be bulk-copied, the policy's shape keeps no
  // producer. docs/tuning.md#producer-warp
  bool producerShape = request.threadsPerBlock > 0;
  if (request.producerWarp && chooseProducerWarp(optimizer) &&
      request.threadsPerBlock <= 0 && shape->threads > 32 &&
      chooseAsyncCopy(optimizer, request.asyncCopy)) {
    TileShape computing{shape->threads - 32, shape->lanes};
    TileStaging trial = chooseTileStaging(optimizer, computing);
    if (!trial.streams.empty() &&
        isBulkStageable(optimizer, trial, computing) &&
        canUseProducerWarp(optimizer, computing.threads, computing.lanes)) {
      *shape = computing;
      producerShape = true;
    }
  }
  // The host functions step their tiles statically, from registers.
  if (request.target == PlanTarget::Host)
    return KernelPlanAttr::get(
        ctx, shape->threads, shape->lanes, /*stages=*/0, /*shared_bytes=*/0,
        /*codebook_buckets=*/false, /*bulk_copy=*/false,
        /*run_pointers=*/false, /*invariant_descriptors=*/false,
        /*l2_prefetch_tiles=*/0, /*l2_prefetch_lines=*/false,
        /*register_prefetch=*/false, /*claim_tiles=*/0,
        /*claim_static_eighths=*/0, /*min_blocks_per_sm=*/0,
        /*zero_shortcut_lane_divisors=*/false,
        /*scaled_range_checks=*/false, /*early_saturation_counts=*/false,
        /*split_absmax_barrier=*/false, waves, minTiles,
        chooseSuggestedBlocksPerSM(0, shape->threads),
        /*producer_warp=*/false);

  TileStaging staging = chooseAsyncCopy(optimizer, request.asyncCopy)
                            ? chooseTileStaging(optimizer, *shape)
                            : TileStaging();
  bool staged = !staging.streams.empty();
  // Where async copies were asked for (not Auto's choice, which falls back
  // quietly for a shape it was not measured at).
  if (request.asyncCopy == AsyncCopy::On && !staged)
    optimizer.emitWarning("async copies: no stream of a ")
        << shape->threads << " x " << shape->lanes
        << " tile can be staged (4 or 8 bytes, or a power of two of "
           "16-byte chunks per thread, two stages in at most "
        << chooseStagingSharedLimit(optimizer, shape->threads)
        << " bytes of shared memory): its loads go to registers";
  // As for async copies: where the register prefetch was asked for and the
  // kernel stages its tiles (its copies already run ahead of the compute).
  if (request.registerPrefetch == RegisterPrefetch::On && staged)
    optimizer.emitWarning("register prefetch: the ")
        << shape->threads << " x " << shape->lanes
        << " tiles are staged in shared memory by async copies, which "
           "already load the next tiles: no register prefetch";
  if (request.minBlocksPerSM >
      PlanRequest::kMaxThreadsPerSM / shape->threads) {
    optimizer.emitError("min-blocks-per-sm: ")
        << request.minBlocksPerSM << " blocks of " << shape->threads
        << " threads exceed the " << PlanRequest::kMaxThreadsPerSM
        << " threads a multiprocessor holds";
    return failure();
  }
  TileClaims claims = chooseTileClaims(optimizer, staged, request.tileClaims,
                                       request.tileClaimsStaticEighths);
  int64_t staticTables =
      getCodebookStaticSharedBytes(optimizer, shape->threads);
  if (staticTables > StagingLimits::kMaxStaticSharedBytes) {
    optimizer.emitError("the ")
        << getNumCodebookStates(optimizer) << " codebook states' tables need about " << staticTables
        << " bytes of static shared memory at " << shape->threads
        << " threads a block, more than the "
        << StagingLimits::kMaxStaticSharedBytes
        << " a GPU block has; use fewer codebook states (group states need "
           "no tables)";
    return failure();
  }
  // The bucket tables (one per codebook state) only where the kernel's
  // shared memory stays within what every GPU grants a block; past it the
  // codes are searched in the midpoint table alone (same codes).
  // (The flag also gates a kernel's 4-bit tables' buckets, in static shared
  // memory: a kernel without codebook states keeps the request.)
  int64_t codebookStates = getNumCodebookStates(optimizer);
  bool codebookBuckets =
      request.codebookBuckets &&
      (codebookStates == 0 ||
       staticTables + (staged ? staging.sharedBytes() : 0) +
               codebookStates * CodebookBuckets::kBytesPerState <=
           StagingLimits::kPortableSharedBytes);
  int64_t sharedBytes =
      getDynamicSharedBytes(optimizer, staging, codebookBuckets);
  // Bulk copies where asked, or where a producer warp issues them
  // (docs/tuning.md#producer-warp); the last warp done with a stage refills
  // it only where bulk copies alone were asked (docs/tuning.md#bulk-copy).
  bool bulkStageable = staged && isBulkStageable(optimizer, staging, *shape);
  bool producerWarp =
      bulkStageable && request.producerWarp && producerShape &&
      chooseProducerWarp(optimizer) &&
      canUseProducerWarp(optimizer, shape->threads, shape->lanes);
  bool bulkCopy = bulkStageable && (request.bulkCopy || producerWarp);
  // A staged kernel prefetches only where asked, past the tiles its copies
  // run ahead, by lines (its stages are filled per thread).
  int64_t l2Prefetch = 0;
  if (request.l2Prefetch && request.l2PrefetchTiles < 0)
    l2Prefetch = chooseL2PrefetchTiles(optimizer, staged);
  else if (request.l2Prefetch &&
           (!staged || request.l2PrefetchTiles >= staging.stages))
    l2Prefetch = request.l2PrefetchTiles;
  bool l2PrefetchLines =
      l2Prefetch > 0 &&
      (staged || chooseL2PrefetchLines(optimizer, request.l2PrefetchKind));
  bool runPointers = chooseRunThreadPointers(optimizer, staged);
  return KernelPlanAttr::get(
      ctx, shape->threads, shape->lanes, staged ? staging.stages : 0,
      sharedBytes, codebookBuckets, bulkCopy, runPointers,
      chooseInvariantDescriptorLoads(optimizer, runPointers), l2Prefetch,
      l2PrefetchLines,
      chooseRegisterPrefetch(optimizer, staged, shape->lanes,
                             request.registerPrefetch),
      claims.tiles, claims.staticEighths,
      request.minBlocksPerSM >= 0
          ? request.minBlocksPerSM
          : chooseMinBlocksPerSM(optimizer, shape->threads, sharedBytes),
      chooseZeroShortcutLaneDivisors(optimizer, runPointers),
      chooseScaledRangeChecks(optimizer, runPointers),
      chooseEarlySaturationCounts(optimizer, staged),
      chooseSplitAbsmaxBarrier(optimizer, shape->lanes,
                               request.splitAbsmaxBarrier),
      waves, minTiles,
      chooseSuggestedBlocksPerSM(sharedBytes, shape->threads), producerWarp);
}

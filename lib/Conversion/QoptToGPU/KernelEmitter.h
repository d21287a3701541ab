//===- KernelEmitter.h - One GPU kernel's builder ---------------*- C++ -*-===//
//
// The builder of convert-qopt-to-gpu's kernel, private to this folder. Its
// steps are defined by concept: KernelSkeleton.cpp (signature, shared memory,
// the block's tile ranges and claims), TileLoop.cpp (runs of a tensor's
// tiles, the tile loop, full and partial tile bodies), StreamAccess.cpp
// (stream addresses, element and group loads and stores), TileCopies.cpp
// (cp.async and bulk-copy stages), Reductions.cpp (group and codebook block
// maxima), CodebookCodes.cpp (codebook tables, bucket fill and codes),
// UpdateBody.cpp (a tile's update: lowerUpdate's GPU target, TileUpdate) and
// TensorReductions.cpp (per-tensor reductions: the reduce pre-pass's chunk
// partials and the finish kernel).
// Every choice of shape comes from the optimizer's #qopt.kernel_plan.
//
// The emitter's members are the kernel's immutable facts (the optimizer, its
// plan and streams, the options) and the builder. What the IR built so far
// holds lives in contexts with the lifetime of their scope, each step taking
// the ones it reads: KernelContext (the function, its arguments and
// kernel-wide values), ClaimContext (the block's range of tiles), RunContext
// (one run of a tensor's tiles) and TileContext (one tile body).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_LIB_CONVERSION_QOPTTOGPU_KERNELEMITTER_H
#define QOPT_LIB_CONVERSION_QOPTTOGPU_KERNELEMITTER_H

#include "qopt/Codegen/ReductionOrder.h"
#include "qopt/Codegen/StreamCodecs.h"
#include "qopt/Codegen/UpdateLowering.h"

#include "qopt/Conversion/Passes.h"
#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Schedule/KernelLayout.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"

#include <limits>

namespace mlir::qopt {

/// Signless integer storage for a stream's element type (codes, error bits).
inline Type memoryType(Type storage) {
  if (auto intType = dyn_cast<IntegerType>(storage))
    return IntegerType::get(storage.getContext(), intType.getWidth());
  return storage;
}

/// The kernel's function and the kernel-wide values that later steps read,
/// in the order they are built: the entry's arguments and thread index, the
/// uniforms, and the shared memory (emitSharedMemory).
struct KernelContext {
  gpu::GPUModuleOp module;
  gpu::GPUFuncOp func;
  Block *entry = nullptr;
  Value descs, tileMap, numTiles; ///< numTiles: 0 for a skipped step
  Value workCounters;             ///< with tile claims, else null
  /// The numerics counters (the last argument; null where no state
  /// saturates).
  Value numericsCounters;
  /// Per-tensor reductions: the reduce pre-pass's chunk partials (f64) and
  /// the step's per-tensor values (f32); null where the kernel has none.
  Value reductionPartials, reductionValues;
  /// The reduce pre-pass's per-warp subtrees of a tile's chunks: R x warps
  /// f64 in shared memory.
  Value chunkSlots;
  std::string prefix;             ///< of the kernel's shared symbols
  SmallVector<int> codebookStates;
  Value block, grid, chunk;       ///< i64; chunk = ceil(numTiles / grid)
  Value tid;                      ///< i64
  SmallVector<Value> uniformValues; ///< f32 scalars
  /// The step's update values that are the same on every lane of the launch
  /// or of a tensor (getInvariantValues), and the launch's computed at the
  /// entry: update value -> scalar (lowerInvariants).
  llvm::DenseMap<Value, UpdateScope> invariantScopes;
  llvm::DenseMap<Value, Value> invariants;

  /// Dynamic shared memory's tile stages (null: not staged); with bulk
  /// copies per stage an mbarrier (S x i64) and a count of the warps done
  /// reading it (S x i32), or with a producer warp a second mbarrier (S x
  /// i64) at which each of the other warps arrives once done with it.
  Value stagingBase, stageBarriers, stageReaders, stageEmpty;
  /// Per codebook state its qmap and midpoints (+inf padded) in shared
  /// memory, and whether no qmap entry is below zero (i1, the same in every
  /// thread of the block).
  llvm::DenseMap<int, Value> qmapShared, midShared, qmapNonnegative;
  /// Per codebook state its bucket table (CodebookBuckets, in dynamic
  /// shared memory): bucket s * kBucketsPerSign + k holds the magnitudes
  /// [kMagLo + k * 2^16, kMagLo + (k + 1) * 2^16) of sign s (bucket 0 also
  /// all below kMagLo, the last one 1.0 alone). Its entry is the number of
  /// midpoints below the bucket times 2^16 plus, where one midpoint lies in
  /// it, 0xFFFF minus its magnitude's low 16 bits (positive) or those bits
  /// (negative); bits 16..23 of the entry plus c's low 16 bits (of |c|,
  /// complemented where c is negative) count the midpoints below c.
  llvm::DenseMap<int, Value> bucketShared;
  /// fillBuckets' scratch: each midpoint's bucket (shared by the states).
  Value bucketOfShared;
  /// Per codebook state: whether every bucket holds at most one midpoint
  /// and no midpoint's magnitude is at most kMagLo (an i32 in shared
  /// memory, cleared by the fill where not; then the i1).
  llvm::DenseMap<int, Value> bucketsFitShared, bucketsFit;
  /// Per group state of a 4-bit table that is not computed arithmetically
  /// (`dynamic`): its 16 entries in shared memory, stored by thread 0.
  llvm::DenseMap<int, Value> codeTableShared;
  /// ... and its code buckets (CodeTableBuckets' entries), stored with it.
  llvm::DenseMap<int, Value> codeBucketsShared;
  /// One slot per warp for each block reduction of a group across warps.
  SmallVector<Value> reductionSlots;
  /// Per codebook state whose block spans warps: 2 x warps slots (two
  /// tiles' parities).
  llvm::DenseMap<int, Value> codebookSlots;
  /// With the plan's split_absmax_barrier, the mbarrier (i64 address in
  /// shared memory) at which every thread arrives once a tile's maxima are
  /// posted and waits before its codes; else null (a bar.sync between).
  Value absmaxArrivals;
  /// ... and its symbol, which the arrivals and waits name in their PTX so
  /// that no register holds the address across the tile loop.
  std::string absmaxArrivalsSymbol;
  /// The range facts of the tile bodies' lanes, for the guards. Each tile
  /// body clears its own (LaneFacts::clear); what is placed at the kernel's
  /// entry (reciprocals and roots of uniforms) serves every body.
  LaneFacts facts;
};

/// The block's range of tiles: with tile claims the claim loop, whose body
/// steps [start, stop), else the block's one static range.
struct ClaimContext {
  scf::WhileOp loop; ///< null without tile claims
  Value slots, old, parity, base, workCounters, claiming;
  Value start, stop;
};

/// One run of a tensor's tiles within the block's range.
struct RunContext {
  explicit RunContext(KernelContext &kernel) : kernel(kernel) {}
  KernelContext &kernel;
  Value start, end;   ///< i64 tile indices; the run's tiles [start, end)
  Value stagedBefore; ///< bulk copies: staged tiles of the block before it
  Value tensor;       ///< i64: the tensor's index in the list
  Value desc;         ///< the tensor's descriptor
  /// The step's per-tensor reductions of the tensor (f32 scalars, in
  /// getReductions' order); empty without reductions.
  SmallVector<Value> reductionValues;
  /// The kernel's invariants and the tensor's, computed once per run:
  /// update value -> scalar.
  llvm::DenseMap<Value, Value> invariants;
  Value numel;        ///< i64: the tensor's elements
  Value firstTile;    ///< the tensor's first tile
  Value firstInTensor; ///< the run's first tile, counted in its tensor
  /// The tile loop's bounds and the end of its full tiles, counted from 0
  /// in i32 where `relative`, else as i64 tile indices.
  Value lower, upper, fullLimit;
  bool relative = false;
  int64_t ahead = 0;  ///< tiles copied ahead of the one computed
  SmallVector<Value> ptrs; ///< run thread pointers at the run's first tile
};

/// One tile body (full or partial) and what its update builds up.
struct TileContext {
  TileContext(KernelContext &kernel, const RunContext &run)
      : kernel(kernel), run(run) {}
  KernelContext &kernel;
  const RunContext &run;
  Value index; ///< i64: the tile computed
  /// In a full tile of a staged kernel, the stage holding it (i64).
  Value stage;
  /// The thread's first element in its tensor (i64), whether its lanes all
  /// lie inside the tensor (`full`, the constant true in a full tile body),
  /// whether its first does (`active`), and the lanes inside (`laneMask`).
  Value base, full, active, laneMask;
  /// With run thread pointers, in a full tile body, the thread pointers of
  /// the tile's streams; else empty.
  SmallVector<Value> ptrs;
  /// Element streams loaded at the top of the tile, all under one branch, so
  /// that every load of the tile is in flight before the first use.
  llvm::DenseMap<unsigned, Value> preloaded;
  /// Element stores, issued together at the end of the tile.
  SmallVector<std::pair<unsigned, Value>> pendingStores;
  /// The next of kernel.reductionSlots to use.
  unsigned nextReductionSlot = 0;
  /// Per codebook state whose block spans warps, its absmax once reduced.
  llvm::DenseMap<int, Value> codebookAbsmax;
  /// The thread's arrival (mbarrier state, i64) at kernel.absmaxArrivals
  /// once this tile's maxima are posted early; else null.
  Value absmaxArrival;

  /// Whether this is the body of a tile wholly inside its tensor: plain
  /// vector loads and stores, no masks.
  bool isFull() const { return matchPattern(full, m_One()); }
};

/// Which of an optimizer's entry points a KernelEmitter builds: the step, or
/// the reduce pre-pass of a kernel with per-tensor reductions (docs/abi.md,
/// "Reductions").
enum class KernelPhase { Step, Reduce };

/// Builds the body of one kernel.
class KernelEmitter {
public:
  /// Builds the kernel of `optimizer` as its launch plan `plan` says.
  KernelEmitter(OptimizerOp optimizer, KernelPlanAttr plan, OpBuilder &b,
                bool fast, bool checkedRounding, bool guardedIEEE,
                KernelPhase phase = KernelPhase::Step)
      : optimizer(optimizer), plan(plan), phase(phase), b(b),
        loc(optimizer.getLoc()),
        math(b, loc, fast), guardedMath(math.guarded(guardedIEEE)),
        checkedRounding(checkedRounding),
        codebookBuckets(plan.getCodebookBuckets()),
        bulkCopy(plan.getBulkCopy()),
        producerWarp(plan.getBulkCopy() && plan.getProducerWarp()),
        splitAbsmaxBarrier(plan.getSplitAbsmaxBarrier()),
        claims{plan.getClaimTiles(), plan.getClaimStaticEighths()},
        threads(plan.getThreads()), lanes(plan.getLanes()),
        tile(plan.getTile()), staging(getTileStaging(optimizer, plan)),
        streams(getStreams(optimizer)), states(getStates(optimizer)) {}

  LogicalResult emit(gpu::GPUModuleOp module);

  // Per-tensor reductions (TensorReductions.cpp).
  /// Whether the optimizer's tiles hold whole chunks and a warp's lanes lie
  /// in one chunk, as the reduce pre-pass needs; an error emitted if not.
  static LogicalResult checkReductionShape(OptimizerOp optimizer,
                                           KernelPlanAttr plan);
  /// The finish kernel `<kernel>_finish`: one block per tensor, the tree
  /// over its chunk partials, one f32 value per tensor and per-tensor
  /// reduction, one f64 accumulation per tensor and whole-step reduction.
  LogicalResult emitFinish(gpu::GPUModuleOp module);
  /// The combine kernel `<kernel>_combine` (one block): the tree over the
  /// step's tensors' accumulations of each whole-step reduction, its value
  /// into the reduction's uniform slot.
  LogicalResult emitCombine(gpu::GPUModuleOp module);

private:
  // Types.
  Type f32() { return b.getF32Type(); }
  Type i32() { return b.getI32Type(); }
  Type i64() { return b.getI64Type(); }
  Type globalPtr() { return LLVM::LLVMPointerType::get(b.getContext(), 1); }
  Type sharedPtr() { return LLVM::LLVMPointerType::get(b.getContext(), 3); }
  VectorType lanesOf(Type elem) { return VectorType::get({lanes}, elem); }

  // Scalars.
  Value constI64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  /// `v == 0` for an i64 index, and an scf.if (no results, no else) on it.
  Value isZero(Value v) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, v,
                                 constI64(0));
  }
  scf::IfOp ifZero(Value v) {
    return scf::IfOp::create(b, loc, TypeRange{}, isZero(v),
                             /*withElseRegion=*/false);
  }
  Value constI32(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value indexToI64(Value v) {
    return arith::IndexCastUIOp::create(b, loc, i64(), v);
  }
  Value gep(Value ptr, Type elem, Value index) {
    return LLVM::GEPOp::create(b, loc, ptr.getType(), elem, ptr,
                               ValueRange{index});
  }
  Value load(Type type, Value ptr, unsigned align) {
    return LLVM::LoadOp::create(b, loc, type, ptr, align);
  }
  /// A 16-byte aligned shared-memory array of `count` `elem`s (f32 by
  /// default) in `module`, and its address here. External with no elements:
  /// the kernel's dynamic shared memory.
  Value sharedArray(gpu::GPUModuleOp module, StringRef name, int64_t count,
                    Type elem = {},
                    LLVM::Linkage linkage = LLVM::Linkage::Internal);

  // Streams (StreamAccess.cpp).
  unsigned streamIndex(StreamRole role, int state = -1) {
    return findStream(streams, role, state);
  }
  /// Stream `index`'s pointer, from the run's descriptor.
  Value streamPtr(const RunContext &run, unsigned index);
  /// The address of this thread's data of `stream` in the full tile `tile`
  /// (its first element, or its group's scalar). Where tiles are staged the
  /// run's loop carries it, so a full tile computes no address of its own.
  Value threadPtr(const TileContext &tile, unsigned stream);
  /// Bytes of `stream` per tile: what its thread pointer advances by.
  int64_t tileBytes(unsigned stream) const;
  /// The element of the tile at which this thread's lanes start (i64).
  Value threadBase(const KernelContext &kernel) {
    return arith::MulIOp::create(b, loc, kernel.tid, constI64(lanes));
  }
  Value loadElements(TileContext &tile, unsigned stream);
  void storeElements(TileContext &tile, unsigned stream, Value value);
  /// A packed 4-bit code stream's bytes of the thread's lanes (lanes / 2
  /// i8), masked as the lanes are in a partial tile; its store is
  /// storeElements' of such bytes (docs/abi.md, "Packed 4-bit codes").
  Value loadPackedBytes(TileContext &tile, unsigned stream);
  /// The launch's index of the thread's first element (i64): the tile's
  /// index times the tile's elements plus the thread's offset in it.
  Value globalIndex(const TileContext &tile);
  void preloadElements(TileContext &tile, ArrayRef<unsigned> streamIds);
  void flushStores(TileContext &tile);
  Value loadPerGroup(const TileContext &tile, unsigned stream,
                     int64_t groupSize);
  /// Whether this thread leads its group of `groupSize` elements (i1): its
  /// first element starts the group, and it is active.
  Value leadsGroup(const TileContext &tile, int64_t groupSize);
  /// Stores a group's scalar from the thread that leads the group, which
  /// then runs `inLeader` (if given) in the same branch.
  void storePerGroup(const TileContext &tile, unsigned stream,
                     int64_t groupSize, Value value,
                     llvm::function_ref<void()> inLeader = nullptr);
  /// Counts the saturated ones among groups or blocks of `groupSize`
  /// elements (each state's scheme and raw absmax; lib/Codegen/Overflow.cpp)
  /// from the thread that leads them, in one branch, where the raw absmaxes
  /// are known: they then live no longer than their saturation (the plan's
  /// early_saturation_counts, docs/tuning.md#counters).
  void countSaturatedGroups(const TileContext &tile, int64_t groupSize,
                            ArrayRef<std::pair<Attribute, Value>> rawAbsmaxes);

  // Async copies (TileCopies.cpp): a full tile copied into stage
  // `stageIndex`, and a staged stream read back.
  void copyTileToStage(const KernelContext &kernel,
                       ArrayRef<Value> threadPtrs, Value stageIndex);
  Value stagedAddress(const KernelContext &kernel, const StagedStream &staged,
                      Value stageIndex, int64_t chunk);
  Value loadStaged(const TileContext &tile, const StagedStream &staged,
                   Type type);
  // Bulk copies (cp.async.bulk): per stage an mbarrier that the copies
  // complete and a count of the warps that finished reading the stage.
  Value stageBarrier(const KernelContext &kernel, Value stageIndex);
  /// The address (i64) of stage `stageIndex`'s mbarrier in `barriers`.
  Value stageBarrier(Value barriers, Value stageIndex);
  /// Issues the copies of the run's full tile `k` (i32, from the run's
  /// first) into stage `stageIndex` and has them complete the stage's
  /// barrier. The sources come from the run's descriptor where they are
  /// issued: no pointer of them lives across the tile loop
  /// (docs/tuning.md#bulk-copy).
  void bulkCopyTile(const RunContext &run, Value k, Value stageIndex);
  /// Waits until stage `stageIndex`'s barrier in `barriers` (the kernel's
  /// stageBarriers or stageEmpty) completes its phase of parity `parity`
  /// (i32): the tile's copies have landed, or every warp is done with it.
  void waitForStage(Value barriers, Value stageIndex, Value parity);
  /// The producer warp's branch (its lane 0): every full tile of the
  /// block's runs in [claim.start, claim.stop), in the consumers' order,
  /// each copied into its stage once the stage's previous use is released.
  void emitProducer(KernelContext &kernel, const ClaimContext &claim);
  /// The end of a full tile's use of its stage: each warp counts itself a
  /// reader done with it, and the last of the tile's warps refills the
  /// stage with the run's tile k + stages (when it is a full one, before
  /// `fullLimit`).
  void releaseStage(const TileContext &tile, Value k, Value fullLimit);

  // Per-tensor reductions (TensorReductions.cpp).
  /// The reduce pre-pass's tile body: the reductions' operands, each
  /// chunk's tree of their terms into the partials.
  LogicalResult emitChunkPartials(TileContext &tile);
  /// `x ⊕ y` (qopt/Codegen/ReductionOrder.h).
  Value combineReduction(ReductionKind kind, Value x, Value y) {
    return qopt::combineReduction(b, loc, kind, x, y);
  }
  /// The pairwise tree of `values` (a power of two of them) in index order.
  Value treeOf(ReductionKind kind, ArrayRef<Value> values);
  /// Lane 0 gets the index-order tree of the f64 `v` of the warp's first
  /// `width` lanes (shuffles down by 1, 2, ..., width / 2).
  Value warpTree(ReductionKind kind, Value v, int64_t width);
  /// The kinds of `reductions` and their identities (f64 constants).
  std::pair<SmallVector<ReductionKind>, SmallVector<Value>>
  reductionKinds(ArrayRef<ReduceOp> reductions);
  /// The finish warp's subtrees of its run of `count` partials from `first`
  /// of every reduction of `kinds` (interleaved: chunk c's at c * R + r), in
  /// every lane of the warp of thread `tid`, in one pass: coalesced segments
  /// (each lane's run of consecutive partials in registers, then the warp's
  /// shuffles), a stack of subtrees per reduction (local memory).
  SmallVector<Value> emitRunSubtrees(ArrayRef<ReductionKind> kinds,
                                     Value partials, Value first, Value count,
                                     ArrayRef<Value> identities, Value tid);
  /// Lane 0's f64 `v` in every lane of the warp.
  Value broadcastLane0(Value v);
  /// The finish's value from each warp's `subtree`: the tree over the
  /// block's warps (warp 0 over their `slots` in shared memory), the
  /// division by `n` and square root as the kind has them, one rounding to
  /// f32 (a NaN canonical), stored to `out` by thread 0.
  /// With `accumulation` the f64 tree itself is stored, unfinished.
  void emitFinishValue(ReductionKind kind, Value subtree, Value slots,
                       Value identity, Value n, Value out,
                       bool accumulation = false);
  /// The aligned run of `numPartials` partials of thread `tid`'s warp for
  /// the finish and combine trees: its first index and its count (>= 0), the
  /// run's length the least power of two L of at least a batch of segments
  /// with L * warps >= numPartials.
  std::pair<Value, Value> emitWarpRun(Value tid, Value numPartials);
  /// The reduction's float64 term of f32 lanes `x` (x, or x * x for norm
  /// and rms), the identity where `mask` is false.
  Value reductionTerms(ReductionKind kind, Value x, Value mask);

  // Reductions (Reductions.cpp).
  /// The maximum of `scalar` over the threads of a group of `groupSize`
  /// elements (warp shuffles, then shared memory across warps).
  /// `magnitudes`: the values are lane maxima of magnitudes (+0 or more, or
  /// the canonical NaN 0x7FFFFFFF), whose bit patterns order as unsigned
  /// integers: a whole warp's maximum is then one redux.sync.
  Value reduceGroupMax(TileContext &tile, Value scalar, int64_t groupSize,
                       bool magnitudes = false);
  /// The absmax of each codebook state whose block spans warps, all behind
  /// one barrier, into tile.codebookAbsmax, in two parts. Per warp a redux.sync of each state's lanes maximum, lane 0's into the
  /// state's slots of this tile's parity; then the block's bar.sync, or
  /// with kernel.absmaxArrivals the thread's arrival (tile.absmaxArrival),
  /// so that the tile's work that needs no absmax runs before the wait. The
  /// slots alternate by tile (a block's tiles are consecutive within a
  /// claim, and a barrier ends each claim), so no second barrier keeps a
  /// tile's writes behind the reads of the one before: a warp writes a
  /// buffer again two tiles on, after every warp has read it and arrived at
  /// (or passed) the barrier between.
  void postCodebookMaxima(TileContext &tile,
                          ArrayRef<std::pair<int, Value>> lanesMax);
  /// After the arrival's phase completes (where split), each state's block
  /// maximum from its warps' slots by one more redux.sync, into
  /// tile.codebookAbsmax.
  void readCodebookAbsmaxes(TileContext &tile, ArrayRef<int> stateIndices);
  /// The maximum of |value| over the thread's lanes, lanes past the end of
  /// the tensor as 0 (a codebook block's absmax before its reduction).
  Value lanesAbsMax(const TileContext &tile, Value value) {
    return math.laneMaximum(math.select(tile.laneMask, math.abs(value),
                                        math.constF(value, 0.0)));
  }
  /// The warp's maximum of magnitudes (+0 or more, or a NaN with its sign
  /// clear): one redux.sync of their bit patterns as unsigned integers.
  Value warpMaxOfMagnitudes(Value v) {
    Value bits = arith::BitcastOp::create(b, loc, i32(), v);
    Value max = NVVM::ReduxOp::create(b, loc, i32(), bits,
                                      NVVM::ReduxKind::UMAX, constI32(-1));
    return arith::BitcastOp::create(b, loc, f32(), max);
  }

  // The kernel's skeleton (KernelSkeleton.cpp; the runs and tiles in
  // TileLoop.cpp, the codebook tables in CodebookCodes.cpp), in the order it
  // is built.
  KernelContext createKernelFunction(gpu::GPUModuleOp module);
  /// The thread index, uniforms and skip flag at the kernel's entry.
  LogicalResult emitKernelEntry(KernelContext &kernel);
  /// Loads the launch's uniforms (`uniformsPtr`, f32) into
  /// kernel.uniformValues; returns the step's skip flag (i1; null where the
  /// kernel cannot skip).
  FailureOr<Value> loadUniforms(KernelContext &kernel, Value uniformsPtr);
  /// Dynamic and static shared memory and their fills, behind one barrier.
  void emitSharedMemory(KernelContext &kernel);
  /// The `k`-th codebook state's qmap, midpoints and bucket table.
  void emitCodebookTable(KernelContext &kernel, int64_t k, int stateIndex,
                         Value dynamicBase, int64_t bucketsOffset);
  ClaimContext emitTileRanges(KernelContext &kernel);
  FailureOr<scf::WhileOp> emitRuns(KernelContext &kernel,
                                   const ClaimContext &claim);
  /// The run's descriptor, bounds and thread pointers (`stop`: the range's).
  /// With `copiesOnly` (the producer warp's) only what the run's bulk
  /// copies need: no reduction values, invariants or thread pointers.
  void beginRun(RunContext &run, Value stop, bool copiesOnly = false);
  /// The copies of the run's first tiles, before its tile loop.
  void emitCopyPrologue(const RunContext &run);
  LogicalResult emitTileLoopBody(const RunContext &run, scf::ForOp loop);
  void emitL2Prefetch(const RunContext &run, Value k, Value t);
  /// The plan's l2_prefetch_lines: each thread's prefetch of its own lanes
  /// of the full tile `l2_prefetch_tiles` after `tile` (loop index `k`).
  void emitL2PrefetchLines(const TileContext &tile, Value k);
  /// The body of a full tile `tile` (its index, and its base or thread
  /// pointers set) in `split`'s then region.
  LogicalResult emitFullTile(TileContext &tile, scf::IfOp split, Value k);
  /// The body of the partial tile of `fullTile`'s index, at the builder's
  /// insertion point (`split`'s else region).
  LogicalResult emitPartialTile(const TileContext &fullTile, scf::IfOp split);
  /// The streams the plan's register_prefetch carries across the step's
  /// tile loop (those read but packed 4-bit codes: per element the lanes'
  /// vector, per group or block the thread's scalar); empty without it.
  SmallVector<unsigned> registerPrefetchStreams() const;
  /// The streams `streamIds` of the run's tile `tiles` after loop
  /// index `k` (tile index `t`), loaded as a full tile's where that tile is
  /// one, poison elsewhere; `ptrs`: tile k's run thread pointers, or empty
  /// to address them from the descriptor.
  SmallVector<Value> loadFullTileIf(const RunContext &run, Value k, Value t,
                                    int64_t tiles, ArrayRef<Value> ptrs,
                                    ArrayRef<unsigned> streamIds);
  /// The next claim handed to the block, and the counters' reset.
  void emitClaimHandOver(const KernelContext &kernel,
                         const ClaimContext &claim, scf::WhileOp runs);
  /// Copies the tile whose thread pointers are `threadPtrs` into stage
  /// `stageIndex` where `when` holds, then commits a cp.async group (an empty
  /// one otherwise, so that "all groups but the latest" is always the current
  /// tile's).
  void copyAheadIf(const KernelContext &kernel, Value when,
                   ArrayRef<Value> threadPtrs, Value stageIndex);
  /// `ptrs` (one per stream) moved on by `tiles` tiles.
  SmallVector<Value> advance(ArrayRef<Value> ptrs, int64_t tiles);
  /// k + j in the run's loop's terms.
  Value plus(const RunContext &run, Value k, int64_t j);
  /// The stage of the run's tile k (i64).
  Value stageOf(const RunContext &run, Value k);
  /// Bulk copies: the stage of the block's g-th staged tile (i64).
  Value bulkStageOf(Value g);
  /// The thread's first element in its tensor of tile `t` (i64).
  Value tileThreadBase(const RunContext &run, Value t);

  // The update (UpdateBody.cpp).
  class TileUpdate;
  LogicalResult emitTile(TileContext &tile);
  FailureOr<Value> emitLoadState(TileContext &tile, int index);
  LogicalResult emitStoreState(TileContext &tile, int index, Value value);

  // Codebook codes (CodebookCodes.cpp).
  static constexpr int64_t kMagLo = CodebookBuckets::kMagLo;
  static constexpr int64_t kMagHi = CodebookBuckets::kMagHi;
  static constexpr int64_t kBucketsPerSign = CodebookBuckets::kBucketsPerSign;
  static constexpr int64_t kBuckets = CodebookBuckets::kBuckets;
  /// +inf padding after the 255 midpoints (mids[255] is read for start 255).
  static constexpr int64_t kMidPadding = 8;
  void fillBuckets(const KernelContext &kernel, Value mids, Value buckets,
                   Value fits, Value bucketOf);
  /// fillBuckets' pass 1: each midpoint's bucket into `bucketOf`, and the
  /// entry of a bucket a midpoint lies in.
  void fillMidpointBuckets(const KernelContext &kernel, Value mids,
                           Value buckets, Value fits, Value bucketOf);
  /// fillBuckets' pass 2: each thread's run of buckets by one cursor over
  /// `bucketOf`.
  void fillBucketRuns(const KernelContext &kernel, Value mids, Value buckets,
                      Value fits, Value bucketOf);
  /// A branchless binary search of the sorted midpoints from `pos` (i32):
  /// steps of firstStep, firstStep / 2, ..., 1, each moving to the candidate
  /// when `pred(mids[candidate - 1], x)`. From 0 with 128 first it counts the
  /// midpoints for which `pred` holds, over all 255.
  Value searchMidpoints(Value mids, Value x, Value pos, int64_t firstStep,
                        arith::CmpFPredicate pred);
  /// The code of each lane of c = `value` / `divisor` (max(absmax, 1e-30)
  /// of the lanes' block) by its bucket's entry, or by the binary search of
  /// all midpoints where the qmap's buckets do not fit, absmax is not finite
  /// or the divisor lies outside [2^-30, 2^60].
  Value codebookCodes(const TileContext &tile, int stateIndex, Value value,
                      Value divisor, Value absmax);
  /// TableCodes.cpp: each 4-bit `dynamic` table state's entries and code
  /// buckets in shared memory, stored by thread 0.
  void emitCodeTables(KernelContext &kernel);
  /// A 4-bit table state's codes (i8 lanes) of `value` in a group whose
  /// absmax is `absmax` (scalar, saturated as stored; `rawAbsmax` before
  /// that) and stored scale `storedScale` (widened to f32): c = x / d by
  /// d's reciprocal and the table's buckets where that is exact, else
  /// quantizeGroup's IEEE chain.
  Value tableCodes(const TileContext &tile, int stateIndex,
                   GroupSchemeAttr group, Value value, Value absmax,
                   Value rawAbsmax, Value storedScale);
  /// A 4-bit table state's entries (f32 lanes) from its 16 in shared memory
  /// (`table`), indexed by the nibbles of `packed` (lanes / 2 bytes).
  Value tableEntriesFromShared(Value table, Value packed);
  /// The codes of the lanes of c by the bucket table `table` in shared
  /// memory (CodeTableBuckets::code); `withinOne`: every lane's |c| <= 1 or
  /// NaN.
  Value bucketTableCodes(Value table, const CodeTableBuckets &buckets, Value c,
                         bool withinOne);
  /// The bucket path's codes of the lanes of `normalized` (c), from the
  /// bucket table `buckets`; `nonnegative`: every c is >= 0 or -0.
  Value bucketCodes(const TileContext &tile, Value buckets, Value normalized,
                    bool nonnegative);

  /// Whether a full tile addresses its streams from thread pointers set up
  /// per run (carried by the run's loop) and the loop counts the run's tiles
  /// in 32 bits: the plan's run_pointers.
  bool runThreadPointers() const { return plan.getRunPointers(); }

  OptimizerOp optimizer;
  KernelPlanAttr plan;
  KernelPhase phase;
  OpBuilder &b;
  /// Where the IR being built is located (in a tile body, the update op's).
  Location loc;
  LaneMath math;
  /// `math` with div.rn / sqrt.rn of f32 lanes under one range check per
  /// thread (LaneMath::guarded) where the option asks for it: the update's
  /// arithmetic and the codes' quantization. Arithmetic on 8-bit codes
  /// (dequantization, error bits) keeps `math`'s plain ops.
  LaneMath guardedMath;
  bool checkedRounding;
  bool codebookBuckets;
  /// Stages filled by bulk copies (cp.async.bulk, sm_90+): the plan says so
  /// only for an sm_90 or newer target and a staging that allows them.
  bool bulkCopy;
  /// The plan's producer_warp (with bulkCopy): warp `threads / 32` issues
  /// the copies and the block is threads + 32 threads.
  bool producerWarp;
  /// The plan's split_absmax_barrier: codebook blocks that span warps
  /// exchange their maxima through an mbarrier's arrive and wait.
  bool splitAbsmaxBarrier;
  /// The plan's tile claims; where enabled the kernel takes the work
  /// counters as its last argument.
  TileClaims claims;
  int64_t threads, lanes, tile;
  /// The streams copied ahead into dynamic shared memory (empty: none).
  TileStaging staging;
  SmallVector<StreamInfo> streams;
  SmallVector<StateOp> states;
};

/// The update of one tile body (lowerUpdate's target): element streams
/// preloaded and stores held until the tile's end, quantized states through
/// the block's reductions, the guarded arithmetic for the update's ops.
class KernelEmitter::TileUpdate : public UpdateTarget {
public:
  /// `codebookStored`: the update's values stored into codebook states.
  /// `codebookStored`: the update's values stored into codebook states;
  /// `crossWarpStored`: per codebook state whose block spans warps, its
  /// index and the update value stored into it.
  TileUpdate(KernelEmitter &emitter, TileContext &tile,
             const llvm::DenseSet<Value> &codebookStored,
             ArrayRef<std::pair<int, Value>> crossWarpStored)
      : UpdateTarget(emitter.optimizer, emitter.streams, emitter.states),
        e(emitter), tile(tile), codebookStored(codebookStored),
        crossWarpStored(crossWarpStored) {}

  LaneMath &codecMath() override { return e.math; }
  LaneMath &updateMath() override { return e.guardedMath; }
  void setLocation(Location loc) override { e.loc = loc; }
  Value loadElements(unsigned stream) override {
    return e.loadElements(tile, stream);
  }
  void storeElements(unsigned stream, Value value) override {
    e.storeElements(tile, stream, value);
  }
  unsigned getNumUniforms() override {
    return tile.kernel.uniformValues.size();
  }
  Value uniform(unsigned index) override {
    return vector::BroadcastOp::create(e.b, e.loc, e.lanesOf(e.f32()),
                                       tile.kernel.uniformValues[index]);
  }
  FailureOr<Value> loadState(int state) override {
    return e.emitLoadState(tile, state);
  }
  LogicalResult storeState(int state, Value value) override {
    return e.emitStoreState(tile, state, value);
  }
  Value globalIndex() override { return e.globalIndex(tile); }
  /// The run's scalar of a value of the launch or the tensor, broadcast.
  Value invariant(Value result) override {
    Value scalar = tile.run.invariants.lookup(result);
    if (!scalar)
      return {};
    return vector::BroadcastOp::create(e.b, e.loc,
                                       e.lanesOf(scalar.getType()), scalar);
  }
  /// A value stored into a codebook state is one whose maximum of
  /// magnitudes the tile takes (LaneFacts::magnitudeMaxima).
  /// Where the kernel splits the absmax barrier, the tile's maxima are
  /// posted (postCodebookMaxima) as soon as every value stored into a
  /// codebook state whose block spans warps is lowered: the arithmetic
  /// that follows (the parameter's update) runs before the wait.
  void noteLowered(Operation &op, IRMapping &mapping) override;
  /// The codebook states' block absmax, all behind one barrier.
  LogicalResult beginStores(ArrayRef<UpdateStore> stores) override;
  /// A per-tensor value, which the run read (the finish kernel wrote it),
  /// or a whole-step value, a uniform slot (the combine kernel wrote it).
  FailureOr<Value> reduction(unsigned, ReduceOp op) override {
    unsigned scoped = getScopedReductionIndex(op);
    Value value;
    if (op.getGlobal()) {
      unsigned slot = getNumHostUniforms(e.optimizer) + scoped;
      if (slot < tile.kernel.uniformValues.size())
        value = tile.kernel.uniformValues[slot];
    } else if (scoped < tile.run.reductionValues.size()) {
      value = tile.run.reductionValues[scoped];
    }
    if (!value)
      return UpdateTarget::reduction(scoped, op);
    return Value(
        vector::BroadcastOp::create(e.b, e.loc, e.lanesOf(e.f32()), value));
  }

private:
  KernelEmitter &e;
  TileContext &tile;
  const llvm::DenseSet<Value> &codebookStored;
  ArrayRef<std::pair<int, Value>> crossWarpStored;
  /// Whether this tile's maxima are posted (by noteLowered).
  bool posted = false;
};

/// The alignment of a thread's vector of `lanes` elements: the stream's base
/// is 16-byte aligned and the thread's first element a multiple of `lanes`.
inline unsigned vectorAlignment(Type elem, int64_t lanes) {
  return static_cast<unsigned>(
      std::min<int64_t>(16, lanes * elem.getIntOrFloatBitWidth() / 8));
}

} // namespace mlir::qopt

#endif // QOPT_LIB_CONVERSION_QOPTTOGPU_KERNELEMITTER_H

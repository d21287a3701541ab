//===- QoptToGPU.cpp - qopt.optimizer to a multi-tensor GPU kernel --------===//
//
// Emits one gpu.func per qopt.optimizer with the calling convention of
// docs/abi.md. The kernel is a persistent grid-stride loop over tiles; each
// thread owns `elements-per-thread` consecutive elements of a tile as one
// vector of f32 lanes, so every per-element operation of the update becomes
// one vector operation and every stream access one (or a few) 16-byte
// accesses. A partial last tile uses masked accesses. Group absmax is reduced
// with warp shuffles, a codebook block's absmax by redux.sync within a warp and
// through shared memory across warps (one barrier per tile for all states);
// codebook codes come from a bucket table in dynamic shared memory, and the
// unstaged codebook kernels prefetch a later tile into L2. With
// async copies each thread copies its part of the full tile stages - 1 ahead
// into shared memory (cp.async) before it computes the current one, so the
// tiles' loads are in flight without holding registers; a full tile then
// addresses its streams from thread pointers set up once per run.
//
//===----------------------------------------------------------------------===//

#include "StreamCodecs.h"

#include "qopt/Conversion/Passes.h"
#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Schedule/KernelLayout.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_CONVERTQOPTTOGPU
#include "qopt/Conversion/Passes.h.inc"

#include <limits>
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {

/// Signless integer storage for a stream's element type (codes, error bits).
static Type memoryType(Type storage) {
  if (auto intType = dyn_cast<IntegerType>(storage))
    return IntegerType::get(storage.getContext(), intType.getWidth());
  return storage;
}

/// Builds the body of one kernel.
class KernelEmitter {
public:
  /// Builds the kernel of `optimizer` as its launch plan `plan` says.
  KernelEmitter(OptimizerOp optimizer, KernelPlanAttr plan, OpBuilder &b,
                bool fast, bool checkedRounding, bool guardedIEEE)
      : optimizer(optimizer), plan(plan), b(b), loc(optimizer.getLoc()),
        math(b, loc, fast), guardedMath(math.guarded(guardedIEEE)),
        checkedRounding(checkedRounding),
        codebookBuckets(plan.getCodebookBuckets()),
        bulkCopy(plan.getBulkCopy()),
        claims{plan.getClaimTiles(), plan.getClaimStaticEighths()},
        threads(plan.getThreads()), lanes(plan.getLanes()),
        tile(plan.getTile()), staging(getTileStaging(optimizer, plan)) {}

  LogicalResult emit(gpu::GPUModuleOp module);

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

  // Streams of the current tile.
  Value streamPtr(unsigned index);
  /// The address of this thread's data of `stream` in the current full tile
  /// (its first element, or its group's scalar). Where tiles are staged the
  /// run's loop carries it, so a full tile computes no address of its own.
  Value threadPtr(unsigned stream);
  /// Bytes of `stream` per tile: what its thread pointer advances by.
  int64_t tileBytes(unsigned stream) const;
  /// The element of the tile at which this thread's lanes start (i64).
  Value threadBase() {
    return arith::MulIOp::create(b, loc, tid, constI64(lanes));
  }
  Value loadElements(unsigned stream);
  void storeElements(unsigned stream, Value value);
  void preloadElements(ArrayRef<unsigned> streamIds);
  void flushStores();
  Value loadPerGroup(unsigned stream, int64_t groupSize);
  // Async copies (TileStaging): the full tile `tileInTensor` of the run's
  // tensor copied into stage `stageIndex`, and a staged stream read back.
  void copyTileToStage(ArrayRef<Value> threadPtrs, Value stageIndex);
  Value stagedAddress(const StagedStream &staged, Value stageIndex,
                      int64_t chunk);
  Value loadStaged(const StagedStream &staged, Type type);
  // Bulk copies (cp.async.bulk): per stage an mbarrier that the copies
  // complete and a count of the warps that finished reading the stage.
  Value stageBarrier(Value stageIndex);
  /// Issues the copies of the run's full tile `k` (i32, from the run's
  /// first, `runFirstInTensor` in its tensor) into stage `stageIndex` and
  /// has them complete the stage's barrier. The sources come from the run's
  /// descriptor where they are issued: no pointer of them lives across the
  /// tile loop (docs/tuning.md#bulk-copy).
  void bulkCopyTile(Value k, Value stageIndex);
  /// Waits until stage `stageIndex`'s barrier completes its phase of parity
  /// `parity` (i32): the tile's copies have landed.
  void waitForStage(Value stageIndex, Value parity);
  /// The end of a full tile's use of `stage`: each warp counts itself a
  /// reader done with it, and the last of the tile's warps refills the
  /// stage with the run's tile k + stages (when it is a full one, before
  /// `fullLimit`).
  void releaseStage(Value k, Value fullLimit);
  void storePerGroup(unsigned stream, int64_t groupSize, Value value);
  unsigned streamIndex(StreamRole role, int state = -1);

  // Reductions.
  /// The maximum of `scalar` over the threads of a group of `groupSize`
  /// elements (warp shuffles, then shared memory across warps).
  /// `magnitudes`: the values are lane maxima of magnitudes (+0 or more, or
  /// the canonical NaN 0x7FFFFFFF), whose bit patterns order as unsigned
  /// integers: a whole warp's maximum is then one redux.sync.
  Value reduceGroupMax(Value scalar, int64_t groupSize, bool magnitudes = false);
  /// The absmax of each codebook state whose block spans warps, all behind
  /// one barrier (codebookAbsmax): per warp a redux.sync, lane 0's maximum
  /// into the state's slots of this tile's parity, the barrier, then each
  /// group's warps' maxima by one more redux.sync. The slots alternate by
  /// tile (a block's tiles are consecutive within a claim, and a barrier
  /// ends each claim), so no second barrier keeps a tile's writes behind the
  /// reads of the one before: a warp writes a buffer again two tiles on,
  /// after all warps passed the barrier between.
  void reduceCodebookAbsmaxes(ArrayRef<std::pair<int, Value>> lanesMax);
  /// The maximum of |value| over the thread's lanes, lanes past the end of
  /// the tensor as 0 (a codebook block's absmax before its reduction).
  Value lanesAbsMax(Value value) {
    return math.laneMaximum(
        math.select(laneMask, math.abs(value), math.constF(value, 0.0)));
  }
  /// The warp's maximum of magnitudes (+0 or more, or a NaN with its sign
  /// clear): one redux.sync of their bit patterns as unsigned integers.
  Value warpMaxOfMagnitudes(Value v) {
    Value bits = arith::BitcastOp::create(b, loc, i32(), v);
    Value max = NVVM::ReduxOp::create(b, loc, i32(), bits,
                                      NVVM::ReduxKind::UMAX, constI32(-1));
    return arith::BitcastOp::create(b, loc, f32(), max);
  }

  // The update.
  LogicalResult emitTile();
  FailureOr<Value> emitLoadState(StateOp state);
  LogicalResult emitStoreState(StateOp state, Value value);
  void emitStoreParam(Value value);
  FailureOr<Value> emitArith(Operation *op, IRMapping &mapping);

  OptimizerOp optimizer;
  KernelPlanAttr plan;
  OpBuilder &b;
  Location loc;
  LaneMath math;
  /// `math` with div.rn / sqrt.rn of f32 lanes under one range check per
  /// thread (LaneMath::guarded) where the option asks for it: the update's
  /// arithmetic and the codes' quantization. Arithmetic on 8-bit codes
  /// (dequantization, error bits) keeps `math`'s plain ops.
  LaneMath guardedMath;
  /// Range facts of the tile body's lanes, for the guards (per body).
  LaneFacts facts;
  bool checkedRounding;
  bool codebookBuckets;
  /// Stages filled by bulk copies (cp.async.bulk, sm_90+): the plan says so
  /// only for an sm_90 or newer target and a staging that allows them.
  bool bulkCopy;
  /// The plan's tile claims; where enabled the kernel takes the work
  /// counters as its last argument.
  TileClaims claims;
  int64_t threads, lanes, tile;
  /// The streams copied ahead into dynamic shared memory (empty: none), the
  /// memory, and in a full tile body the stage holding the tile (i64).
  TileStaging staging;
  Value stagingBase, stage;
  Value stageBarriers, stageReaders; ///< bulk copies: S x i64, S x i32
  Value runFirstInTensor; ///< bulk copies: the run's first tile in its tensor
  SmallVector<StreamInfo> streams;
  SmallVector<StateOp> states;

  // Kernel-wide values.
  Value tid;                       // i64
  SmallVector<Value> uniformValues;// f32 scalars
  llvm::DenseMap<int, Value> qmapShared, midShared; // per codebook state
  /// Per codebook state: whether no qmap entry is below zero (i1, the same
  /// in every thread of the block).
  llvm::DenseMap<int, Value> qmapNonnegative;
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
  /// Per codebook state, kernel-wide: whether every bucket holds at most
  /// one midpoint and no midpoint's magnitude is at most kMagLo (an i32 in
  /// shared memory, cleared by the fill where not; then the i1).
  llvm::DenseMap<int, Value> bucketsFitShared, bucketsFit;
  static constexpr int64_t kMagLo = CodebookBuckets::kMagLo;
  static constexpr int64_t kMagHi = CodebookBuckets::kMagHi;
  static constexpr int64_t kBucketsPerSign = CodebookBuckets::kBucketsPerSign;
  static constexpr int64_t kBuckets = CodebookBuckets::kBuckets;
  /// +inf padding after the 255 midpoints (mids[255] is read for start 255).
  static constexpr int64_t kMidPadding = 8;
  void fillBuckets(Value mids, Value buckets, Value fits, Value bucketOf);
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
  Value codebookCodes(int stateIndex, Value value, Value divisor, Value absmax);
  /// The bucket path's codes of the lanes of `normalized` (c), from the
  /// bucket table `buckets`; `nonnegative`: every c is >= 0 or -0.
  Value bucketCodes(Value buckets, Value normalized, bool nonnegative);
  SmallVector<Value> reductionSlots;                // one per block reduction
  /// Per codebook state whose block spans warps: 2 x warps slots (two
  /// tiles' parities), and in a tile body its absmax once reduced.
  llvm::DenseMap<int, Value> codebookSlots, codebookAbsmax;
  Value tileIndex; // i64: the tile a body computes
  unsigned nextReductionSlot = 0;

  // Per-run values (a run of one tensor's tiles): its descriptor and element
  // count, loaded once.
  Value desc, numel;
  // Per-tile values: the thread's first element in its tensor, the masks of
  // a partial tile, and (with run thread pointers, else empty) the thread
  // pointers of the tile's streams.
  Value base, full, active, laneMask;
  SmallVector<Value> tilePtrs;
  /// Whether a full tile addresses its streams from thread pointers set up
  /// per run (carried by the run's loop, or computed from the run's per tile
  /// with two or more states): where the tiles are staged, whose kernels run
  /// one or two blocks per multiprocessor and have registers to spare (128
  /// at 512 threads; up to 128 at 256 for the staged codebook kernels). The
  /// unstaged codebook kernels take 64 registers for four blocks; carrying
  /// would take them to 106.
  bool runThreadPointers() const { return !staging.streams.empty(); }
  /// Whether this tile body is the one for a tile wholly inside its tensor
  /// (`full` the constant true): plain vector loads and stores, no masks.
  bool isFullTile() { return matchPattern(full, m_One()); }
  /// Element streams loaded at the top of the tile, all under one branch, so
  /// that every load of the tile is in flight before the first use.
  llvm::DenseMap<unsigned, Value> preloaded;
  /// Element stores, issued together at the end of the tile.
  SmallVector<std::pair<unsigned, Value>> pendingStores;
};

} // namespace

Value KernelEmitter::sharedArray(gpu::GPUModuleOp module, StringRef name,
                                 int64_t count, Type elem,
                                 LLVM::Linkage linkage) {
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto arrayType = LLVM::LLVMArrayType::get(elem ? elem : f32(), count);
    LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/false, linkage,
                           name, Attribute(), /*alignment=*/16,
                           /*addrSpace=*/3);
  }
  return LLVM::AddressOfOp::create(b, loc, sharedPtr(), name);
}

unsigned KernelEmitter::streamIndex(StreamRole role, int state) {
  for (auto [i, s] : llvm::enumerate(streams))
    if (s.role == role && (state < 0 || s.stateIndex == state))
      return i;
  llvm_unreachable("stream not in the ABI");
}

Value KernelEmitter::streamPtr(unsigned index) {
  // Loaded where used, from the run's descriptor (L1-resident). Unstaged
  // kernels of two or more states, except the codebook kernels of an f32
  // parameter, mark the load invariant (the descriptors are written before
  // the launch), so that LLVM reuses a pointer across the tile's stores.
  // docs/tuning.md#descriptor-loads
  bool codebookF32 =
      optimizer.getParamType().isF32() && llvm::any_of(states, [](StateOp state) {
        return isa<CodebookSchemeAttr>(state.getScheme());
      });
  bool invariant = !runThreadPointers() && states.size() >= 2 && !codebookF32;
  // With an even number of streams every descriptor is 16-byte aligned (the
  // array is, docs/abi.md): an invariant pointer comes with its pair's
  // other one in one 16-byte load, which the pair's other use shares (one
  // LDG.128 and one address where ptxas built an address per LDG.64).
  if (invariant && streams.size() % 2 == 0) {
    auto pairType = VectorType::get({2}, b.getI64Type());
    Value pairAddr = gep(desc, b.getI8Type(), constI64(16 + 8 * (index & ~1u)));
    Value pair = LLVM::LoadOp::create(b, loc, pairType, pairAddr, 16,
                                      /*isVolatile=*/false,
                                      /*isNonTemporal=*/false,
                                      /*isInvariant=*/true);
    Value bitsOfPtr = vector::ExtractOp::create(b, loc, pair, int64_t(index & 1));
    return LLVM::IntToPtrOp::create(b, loc, globalPtr(), bitsOfPtr);
  }
  Value addr = gep(desc, b.getI8Type(), constI64(16 + 8 * index));
  return LLVM::LoadOp::create(b, loc, globalPtr(), addr, 8, /*isVolatile=*/false,
                              /*isNonTemporal=*/false, invariant);
}

Value KernelEmitter::threadPtr(unsigned stream) {
  if (!tilePtrs.empty())
    return tilePtrs[stream];
  const StreamInfo &info = streams[stream];
  Value index = info.perElements == 1
                    ? base
                    : arith::DivUIOp::create(b, loc, base,
                                             constI64(info.perElements));
  return gep(streamPtr(stream), memoryType(info.storage), index);
}

int64_t KernelEmitter::tileBytes(unsigned stream) const {
  const StreamInfo &info = streams[stream];
  return tile / info.perElements * memoryType(info.storage).getIntOrFloatBitWidth() /
         8;
}

/// The alignment of a thread's vector of `lanes` elements: the stream's base
/// is 16-byte aligned and the thread's first element a multiple of `lanes`.
static unsigned vectorAlignment(Type elem, int64_t lanes) {
  return static_cast<unsigned>(
      std::min<int64_t>(16, lanes * elem.getIntOrFloatBitWidth() / 8));
}

void KernelEmitter::preloadElements(ArrayRef<unsigned> streamIds) {
  // An update that reads no element stream (p = 2) has nothing to load; an
  // scf.if without results would also get a terminator of its own.
  if (streamIds.empty())
    return;
  SmallVector<Type> types;
  SmallVector<Value> addrs;
  for (unsigned stream : streamIds) {
    Type elem = memoryType(streams[stream].storage);
    types.push_back(lanesOf(elem));
    addrs.push_back(isFullTile() ? (staging.lookup(stream) ? Value()
                                                           : threadPtr(stream))
                                 : gep(streamPtr(stream), elem, base));
  }
  if (isFullTile()) {
    for (auto [i, stream] : llvm::enumerate(streamIds)) {
      if (const StagedStream *staged = staging.lookup(stream))
        preloaded[stream] = loadStaged(*staged, types[i]);
      else
        preloaded[stream] =
            load(types[i], addrs[i],
                 vectorAlignment(getElementTypeOrSelf(types[i]), lanes));
    }
    return;
  }
  auto ifOp = scf::IfOp::create(b, loc, types, full, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<Value> loaded;
    for (auto [i, stream] : llvm::enumerate(streamIds))
      loaded.push_back(load(types[i], addrs[i],
                            vectorAlignment(getElementTypeOrSelf(types[i]),
                                            lanes)));
    scf::YieldOp::create(b, loc, loaded);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    SmallVector<Value> masked;
    for (auto [i, stream] : llvm::enumerate(streamIds)) {
      Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(types[i]));
      masked.push_back(LLVM::MaskedLoadOp::create(
          b, loc, types[i], addrs[i], laneMask, zero,
          b.getI32IntegerAttr(vectorAlignment(
              getElementTypeOrSelf(types[i]), lanes))));
    }
    scf::YieldOp::create(b, loc, masked);
  }
  for (auto [i, stream] : llvm::enumerate(streamIds))
    preloaded[stream] = ifOp.getResult(i);
}

void KernelEmitter::flushStores() {
  if (pendingStores.empty())
    return;
  SmallVector<Value> addrs;
  for (auto &[stream, value] : pendingStores)
    addrs.push_back(isFullTile()
                        ? threadPtr(stream)
                        : gep(streamPtr(stream),
                              memoryType(streams[stream].storage), base));
  auto storeAll = [&] {
    for (auto [i, entry] : llvm::enumerate(pendingStores)) {
      Type elem = memoryType(streams[entry.first].storage);
      LLVM::StoreOp::create(b, loc, entry.second, addrs[i],
                            vectorAlignment(elem, lanes));
    }
  };
  if (isFullTile()) {
    storeAll();
    pendingStores.clear();
    return;
  }
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, full,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  storeAll();
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  for (auto [i, entry] : llvm::enumerate(pendingStores)) {
    Type elem = memoryType(streams[entry.first].storage);
    LLVM::MaskedStoreOp::create(
        b, loc, entry.second, addrs[i], laneMask,
        b.getI32IntegerAttr(vectorAlignment(elem, lanes)));
  }
  pendingStores.clear();
}

Value KernelEmitter::loadElements(unsigned stream) {
  if (Value v = preloaded.lookup(stream))
    return v;
  Type elem = memoryType(streams[stream].storage);
  VectorType vecType = lanesOf(elem);
  unsigned align = vectorAlignment(elem, lanes);
  if (isFullTile())
    return load(vecType, threadPtr(stream), align);
  Value addr = gep(streamPtr(stream), elem, base);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{vecType}, full,
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, loc, load(vecType, addr, align));
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(vecType));
    Value masked = LLVM::MaskedLoadOp::create(b, loc, vecType, addr, laneMask,
                                              zero, b.getI32IntegerAttr(align));
    scf::YieldOp::create(b, loc, masked);
  }
  return ifOp.getResult(0);
}

void KernelEmitter::storeElements(unsigned stream, Value value) {
  pendingStores.push_back({stream, value});
}

Value KernelEmitter::loadPerGroup(unsigned stream, int64_t groupSize) {
  Type elem = memoryType(streams[stream].storage);
  if (const StagedStream *staged = staging.lookup(stream);
      staged && isFullTile())
    return widenToF32(math, loadStaged(*staged, elem));
  if (isFullTile())
    return widenToF32(math, load(elem, threadPtr(stream),
                                 elem.getIntOrFloatBitWidth() / 8));
  // A thread past the end reads group 0 (which exists: a tile's tensor is not
  // empty) so that it can still take part in the group's shuffles.
  Value group = arith::DivUIOp::create(b, loc, base, constI64(groupSize));
  Value safe = arith::SelectOp::create(b, loc, active, group, constI64(0));
  Value scalar = load(elem, gep(streamPtr(stream), elem, safe),
                      elem.getIntOrFloatBitWidth() / 8);
  return widenToF32(math, scalar);
}

Value KernelEmitter::stagedAddress(const StagedStream &staged, Value stageIndex,
                                   int64_t chunk) {
  Value offset = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, stageIndex, constI64(staging.stageBytes)),
      arith::MulIOp::create(
          b, loc,
          arith::AddIOp::create(b, loc, tid, constI64(chunk * threads)),
          constI64(staged.chunkBytes)));
  return gep(stagingBase, b.getI8Type(),
             arith::AddIOp::create(b, loc, offset, constI64(staged.offset)));
}

void KernelEmitter::copyTileToStage(ArrayRef<Value> threadPtrs,
                                    Value stageIndex) {
  for (const StagedStream &staged : staging.streams) {
    Value src = threadPtrs[staged.stream];
    // The aligned word that holds the thread's scale: the stream's base is
    // 16-byte aligned, so aligning the address aligns the index.
    if (staged.elementsPerCopy > 1)
      src = LLVM::PtrMaskOp::create(b, loc, src.getType(), src,
                                    constI64(-staged.chunkBytes));
    // 16-byte chunks bypass L1 (.cg: the data is read once, from shared
    // memory); cp.async takes 4 and 8 bytes only through L1 (.ca).
    auto cache = staged.chunkBytes == 16 ? NVVM::LoadCacheModifierKind::CG
                                         : NVVM::LoadCacheModifierKind::CA;
    for (int64_t j = 0; j < staged.bytesPerThread / staged.chunkBytes; ++j) {
      Value chunkSrc = gep(src, b.getI8Type(), constI64(j * staged.chunkBytes));
      NVVM::CpAsyncOp::create(
          b, loc, stagedAddress(staged, stageIndex, j), chunkSrc,
          b.getI32IntegerAttr(staged.chunkBytes),
          NVVM::LoadCacheModifierKindAttr::get(b.getContext(), cache),
          /*cpSize=*/Value());
    }
  }
}

Value KernelEmitter::stageBarrier(Value stageIndex) {
  return LLVM::PtrToIntOp::create(
      b, loc, i64(), gep(stageBarriers, i64(), stageIndex));
}

void KernelEmitter::bulkCopyTile(Value k, Value stageIndex) {
  // The barrier expects the tile's bytes, which the copies then complete
  // (complete_tx): its phase ends when the last of them has landed.
  int64_t bytes = 0;
  for (const StagedStream &staged : staging.streams)
    bytes += tileBytes(staged.stream);
  Value barrier = stageBarrier(stageIndex);
  syncPtx(b, loc, Type(), barrier,
          "{ .reg .b64 state; mbarrier.arrive.expect_tx.shared.b64 state, [$0], " +
              std::to_string(bytes) + "; }",
          "l");
  Value tileInTensor = arith::AddIOp::create(
      b, loc, runFirstInTensor, arith::ExtUIOp::create(b, loc, i64(), k));
  Value stageStart = arith::MulIOp::create(b, loc, stageIndex,
                                           constI64(staging.stageBytes));
  for (const StagedStream &staged : staging.streams) {
    int64_t size = tileBytes(staged.stream);
    Value src = gep(streamPtr(staged.stream), b.getI8Type(),
                    arith::MulIOp::create(b, loc, tileInTensor, constI64(size)));
    Value dst = gep(stagingBase, b.getI8Type(),
                    arith::AddIOp::create(b, loc, stageStart,
                                          constI64(staged.offset)));
    syncPtx(b, loc, Type(),
            ValueRange{LLVM::PtrToIntOp::create(b, loc, i64(), dst),
                       LLVM::PtrToIntOp::create(b, loc, i64(), src), barrier},
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[$0], [$1], " + std::to_string(size) + ", [$2];",
            "l,l,l");
  }
}

void KernelEmitter::waitForStage(Value stageIndex, Value parity) {
  // try_wait suspends the thread for a while before it reports the phase
  // still open; the loop asks again.
  Value barrier = stageBarrier(stageIndex);
  auto wait = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
  OpBuilder::InsertionGuard guard(b);
  b.createBlock(&wait.getBefore());
  Value done = syncPtx(
      b, loc, i32(), ValueRange{barrier, parity},
      "{ .reg .pred done; mbarrier.try_wait.parity.shared.b64 done, [$1], $2; "
      "selp.u32 $0, 1, 0, done; }",
      "=r,l,r");
  scf::ConditionOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, done, constI32(0)),
      ValueRange{});
  b.createBlock(&wait.getAfter());
  scf::YieldOp::create(b, loc);
}

void KernelEmitter::releaseStage(Value k, Value fullLimit) {
  // bar.warp.sync orders the warp's shared loads of the stage (their values
  // are all used by now: the tile's stores take them) before lane 0's
  // arrival; its release and the last arrival's acquire order every warp's
  // loads before the copies that refill the stage.
  syncPtx(b, loc, Type(), ValueRange{}, "bar.warp.sync -1;", "");
  Value lane = arith::AndIOp::create(b, loc, tid, constI64(31));
  auto leader = ifZero(lane);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&leader.getThenRegion().front());
  Value readers = LLVM::PtrToIntOp::create(
      b, loc, i64(), gep(stageReaders, i32(), stage));
  Value before = syncPtx(b, loc, i32(), readers,
                         "atom.acq_rel.cta.shared.add.u32 $0, [$1], 1;",
                         "=r,l");
  // The count grows by one per warp and use: the warp that makes it a
  // multiple of the warps is the tile's last.
  Value last = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, before, constI32(1)),
          constI32(threads / 32)),
      constI32(0));
  Value next = arith::AddIOp::create(b, loc, k, constI32(staging.stages));
  Value inRun = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, next,
                                      fullLimit);
  auto refill = scf::IfOp::create(b, loc, TypeRange{},
                                  arith::AndIOp::create(b, loc, last, inRun),
                                  /*withElseRegion=*/false);
  b.setInsertionPointToStart(&refill.getThenRegion().front());
  // The generic proxy's reads before the async proxy's writes.
  syncPtx(b, loc, Type(), ValueRange{}, "fence.proxy.async.shared::cta;", "");
  bulkCopyTile(next, stage);
}

Value KernelEmitter::loadStaged(const StagedStream &staged, Type type) {
  // One shared load per chunk (a 16-byte chunk is one ld.shared.v4), then the
  // chunks joined into the thread's vector.
  auto vecType = dyn_cast<VectorType>(type);
  if (!vecType) {
    int64_t bytes = type.getIntOrFloatBitWidth() / 8;
    // The thread's group within the tile (a group stream's scalar).
    auto groupInTile = [&] {
      return arith::DivUIOp::create(
          b, loc, threadBase(), constI64(streams[staged.stream].perElements));
    };
    if (bulkCopy && streams[staged.stream].perElements != 1) {
      // A bulk-copied stage holds the tile's scalars as they lie in memory.
      Value group = groupInTile();
      Value offset = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, stage, constI64(staging.stageBytes)),
          arith::AddIOp::create(b, loc, constI64(staged.offset),
                                arith::MulIOp::create(b, loc, group,
                                                      constI64(bytes))));
      return load(type, gep(stagingBase, b.getI8Type(), offset), bytes);
    }
    Value addr = stagedAddress(staged, stage, 0);
    if (staged.elementsPerCopy == 1)
      return load(type, addr, staged.chunkBytes);
    // The thread's scalar within the copied word: a tile holds whole words
    // of groups (getStageLayout), so its place in the tile says which.
    Value within = arith::AndIOp::create(b, loc, groupInTile(),
                                         constI64(staged.elementsPerCopy - 1));
    return load(type, gep(addr, type, within), bytes);
  }
  int64_t chunks = staged.bytesPerThread / staged.chunkBytes;
  int64_t perChunk = vecType.getNumElements() / chunks;
  VectorType chunkType = VectorType::get({perChunk}, vecType.getElementType());
  SmallVector<Value> parts = {
      load(chunkType, stagedAddress(staged, stage, 0), staged.chunkBytes)};
  for (int64_t j = 1; j < chunks; ++j)
    parts.push_back(load(chunkType, stagedAddress(staged, stage, j),
                         staged.chunkBytes));
  // Pairwise concatenation: chunks is a power of two.
  while (parts.size() > 1) {
    SmallVector<Value> joined;
    for (size_t k = 0; k < parts.size(); k += 2) {
      int64_t n = cast<VectorType>(parts[k].getType()).getNumElements();
      SmallVector<int64_t> mask;
      for (int64_t i = 0; i < 2 * n; ++i)
        mask.push_back(i);
      joined.push_back(
          vector::ShuffleOp::create(b, loc, parts[k], parts[k + 1], mask));
    }
    parts = std::move(joined);
  }
  return parts.front();
}

void KernelEmitter::storePerGroup(unsigned stream, int64_t groupSize,
                                  Value value) {
  Type elem = memoryType(streams[stream].storage);
  // A tile holds whole groups: in a full one the thread's place in the tile
  // says whether it leads its group.
  Value rem = arith::RemUIOp::create(
      b, loc, isFullTile() ? threadBase() : base, constI64(groupSize));
  Value leader = arith::AndIOp::create(
      b, loc, active,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem,
                            constI64(0)));
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, leader,
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value addr =
      isFullTile()
          ? threadPtr(stream)
          : gep(streamPtr(stream), elem,
                arith::DivUIOp::create(b, loc, base, constI64(groupSize)));
  LLVM::StoreOp::create(b, loc, value, addr, elem.getIntOrFloatBitWidth() / 8);
}

Value KernelEmitter::reduceGroupMax(Value scalar, int64_t groupSize,
                                    bool magnitudes) {
  int64_t threadsPerGroup = groupSize / lanes;
  // One lane's |x| may be a NaN of any payload; two or more pass through
  // max.NaN, which gives the canonical one, the largest positive pattern.
  bool redux = magnitudes && lanes >= 2 && threadsPerGroup >= 32;
  if (redux) {
    scalar = warpMaxOfMagnitudes(scalar);
  } else {
    Value width = constI32(32);
    for (int64_t offset = 1; offset < std::min<int64_t>(threadsPerGroup, 32);
         offset *= 2) {
      auto shuffle = gpu::ShuffleOp::create(b, loc, scalar, constI32(offset),
                                            width, gpu::ShuffleMode::XOR);
      scalar = math.maximum(scalar, shuffle.getShuffleResult());
    }
  }
  if (threadsPerGroup <= 32)
    return scalar;

  // Across warps: each warp's lane 0 writes its maximum, then every thread
  // reads the maxima of its group's warps.
  Value slots = reductionSlots[nextReductionSlot++];
  int64_t warpsPerGroup = threadsPerGroup / 32;
  Value warp = arith::DivUIOp::create(b, loc, tid, constI64(32));
  Value laneId = arith::RemUIOp::create(b, loc, tid, constI64(32));
  Value isLane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        laneId, constI64(0));
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, isLane0, false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    LLVM::StoreOp::create(b, loc, scalar, gep(slots, f32(), warp), 4);
  }
  gpu::BarrierOp::create(b, loc);
  Value firstWarp = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, warp, constI64(warpsPerGroup)),
      constI64(warpsPerGroup));
  Value result;
  for (int64_t j = 0; j < warpsPerGroup; ++j) {
    Value index = arith::AddIOp::create(b, loc, firstWarp, constI64(j));
    Value v = load(f32(), gep(slots, f32(), index), 4);
    result = result ? math.maximum(result, v) : v;
  }
  // The slots are written again in the next tile. With one cross-warp
  // reduction per tile a barrier must keep that write behind these reads.
  // With two or more (each its own slots, the same sequence in every tile,
  // whichever body runs) the next reduction's barrier already does: a
  // thread reads here before it reaches that barrier, and a thread writes
  // these slots again only after passing it.
  if (reductionSlots.size() < 2)
    gpu::BarrierOp::create(b, loc);
  return result;
}

void KernelEmitter::reduceCodebookAbsmaxes(
    ArrayRef<std::pair<int, Value>> lanesMax) {
  int64_t warps = threads / 32;
  Value warp = arith::DivUIOp::create(b, loc, tid, constI64(32));
  Value laneId = arith::RemUIOp::create(b, loc, tid, constI64(32));
  Value parity = arith::MulIOp::create(
      b, loc, arith::RemUIOp::create(b, loc, tileIndex, constI64(2)),
      constI64(warps));
  SmallVector<Value> warpMaxima;
  for (auto [index, value] : lanesMax)
    warpMaxima.push_back(warpMaxOfMagnitudes(value));
  auto ifOp = ifZero(laneId);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    for (auto [k, entry] : llvm::enumerate(lanesMax))
      LLVM::StoreOp::create(
          b, loc, warpMaxima[k],
          gep(codebookSlots.lookup(entry.first), f32(),
              arith::AddIOp::create(b, loc, parity, warp)),
          4);
  }
  gpu::BarrierOp::create(b, loc);
  for (auto [index, value] : lanesMax) {
    int64_t warpsPerGroup = getReductionSize(states[index]) / lanes / 32;
    // Lane j reads warp j of its group (the group's last where j is past).
    Value firstWarp = arith::MulIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, warp, constI64(warpsPerGroup)),
        constI64(warpsPerGroup));
    Value j = arith::MinUIOp::create(b, loc, laneId, constI64(warpsPerGroup - 1));
    Value slot = arith::AddIOp::create(
        b, loc, parity, arith::AddIOp::create(b, loc, firstWarp, j));
    codebookAbsmax[index] = warpMaxOfMagnitudes(
        load(f32(), gep(codebookSlots.lookup(index), f32(), slot), 4));
  }
}

FailureOr<Value> KernelEmitter::emitLoadState(StateOp state) {
  int index = llvm::find(states, state) - states.begin();
  Attribute scheme = state.getScheme();
  if (isa<PlainSchemeAttr>(scheme))
    return widenToF32(math, loadElements(streamIndex(StreamRole::State, index)));
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    Value codes = loadElements(streamIndex(StreamRole::StateCodes, index));
    Value scale = loadPerGroup(streamIndex(StreamRole::StateScales, index),
                               group.getGroupSize());
    Value scaleLanes = vector::BroadcastOp::create(b, loc, lanesOf(f32()), scale);
    return dequantizeGroup(math, group, codes, scaleLanes);
  }
  auto codebook = cast<CodebookSchemeAttr>(scheme);
  Value codes = loadElements(streamIndex(StreamRole::StateCodes, index));
  Value absmax = loadPerGroup(streamIndex(StreamRole::StateAbsmax, index),
                              codebook.getBlock());
  // x = qmap[code] * absmax (seed 000), the table read from shared memory.
  Value table = qmapShared.lookup(index);
  Value entries = arith::ConstantOp::create(b, loc, b.getZeroAttr(lanesOf(f32())));
  for (int64_t i = 0; i < lanes; ++i) {
    Value code = vector::ExtractOp::create(b, loc, codes, i);
    Value idx = arith::ExtUIOp::create(b, loc, i32(), code);
    Value entry = load(f32(), gep(table, f32(), idx), 4);
    entries = vector::InsertOp::create(b, loc, entry, entries, i);
  }
  // Entries none of which is below zero: the state is nonnegative where the
  // block's absmax is (recordMul's fact), as Adam's v with bitsandbytes'
  // unsigned map, which spares the guards of sqrt(v / bc2) and of the
  // division by it their looks at the lanes.
  if (Value nonneg = qmapNonnegative.lookup(index); nonneg && guardedMath.isGuarded())
    facts.nonnegative[entries] = nonneg;
  Value absmaxLanes = vector::BroadcastOp::create(b, loc, lanesOf(f32()), absmax);
  return math.mul(entries, absmaxLanes);
}

LogicalResult KernelEmitter::emitStoreState(StateOp state, Value value) {
  int index = llvm::find(states, state) - states.begin();
  Attribute scheme = state.getScheme();
  Value zeros = math.constF(value, 0.0);
  if (auto plain = dyn_cast<PlainSchemeAttr>(scheme)) {
    storeElements(streamIndex(StreamRole::State, index),
                  narrowFromF32(math, value, plain.getStorage()));
    return success();
  }
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    // Lanes past the end of the tensor take no part in the absmax.
    Value absmax;
    if (group.getCompanding() == Companding::sqrt) {
      // max_i sqrt(v_i) = sqrt(max_i v_i): sqrt.rn is monotone on [-0, inf]
      // and NaN below -0, so a negative v becomes NaN before the maximum.
      // One square root per thread instead of one per lane.
      auto lanesMax = [&](bool known) {
        Value domain = value;
        if (!known)
          domain = math.select(
              math.cmp(arith::CmpFPredicate::OLT, value, zeros),
              math.constF(value, std::numeric_limits<double>::quiet_NaN()),
              value);
        return math.laneMaximum(math.select(laneMask, domain, zeros));
      };
      // Where the range facts know v is nonnegative (Adam's v with beta2 and
      // 1 - beta2 >= 0: a uniform condition), no lane needs the select.
      Value lanesMaxValue;
      auto nonneg = facts.nonnegative.find(value);
      if (nonneg != facts.nonnegative.end() && nonneg->second) {
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32()}, nonneg->second,
                                      /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifOp.getThenRegion().front());
        scf::YieldOp::create(b, loc, lanesMax(true));
        b.setInsertionPointToStart(&ifOp.getElseRegion().front());
        scf::YieldOp::create(b, loc, lanesMax(false));
        lanesMaxValue = ifOp.getResult(0);
      } else {
        lanesMaxValue = lanesMax(nonneg != facts.nonnegative.end());
      }
      Value maxValue = reduceGroupMax(lanesMaxValue, group.getGroupSize());
      absmax = math.sqrt(maxValue);
    } else {
      Value magnitude =
          math.select(laneMask, groupMagnitude(math, group, value), zeros);
      absmax = reduceGroupMax(math.laneMaximum(magnitude), group.getGroupSize());
    }
    Value stored = groupStoredScale(math, group, absmax);
    Value storedF32 = widenToF32(math, stored);
    Value codes = quantizeGroup(
        guardedMath, group, value,
        vector::BroadcastOp::create(b, loc, lanesOf(f32()), absmax),
        vector::BroadcastOp::create(b, loc, lanesOf(f32()), storedF32),
        checkedRounding);
    storeElements(streamIndex(StreamRole::StateCodes, index), codes);
    storePerGroup(streamIndex(StreamRole::StateScales, index),
                  group.getGroupSize(), stored);
    return success();
  }
  auto codebook = cast<CodebookSchemeAttr>(scheme);
  // Seed 000: absmax over the block; c = x / max(absmax, 1e-30); the code is
  // the number of midpoints strictly below c (torch.bucketize, right=False).
  Value absmax = codebookAbsmax.lookup(index);
  if (!absmax)
    absmax = reduceGroupMax(lanesAbsMax(value), codebook.getBlock(),
                            /*magnitudes=*/true);
  Value divisor = math.maxKeepNaN(absmax, math.constF(absmax, 1e-30));
  Value codes = codebookCodes(index, value, divisor, absmax);
  storeElements(streamIndex(StreamRole::StateCodes, index), codes);
  storePerGroup(streamIndex(StreamRole::StateAbsmax, index),
                codebook.getBlock(), absmax);
  return success();
}

Value KernelEmitter::searchMidpoints(Value mids, Value x, Value pos,
                                     int64_t firstStep,
                                     arith::CmpFPredicate pred) {
  for (int64_t step = firstStep; step >= 1; step /= 2) {
    Value candidate = arith::AddIOp::create(b, loc, pos, constI32(step));
    Value mid = load(f32(), gep(mids, f32(), arith::SubIOp::create(
                                               b, loc, candidate, constI32(1))),
                     4);
    Value below = arith::CmpFOp::create(b, loc, pred, mid, x);
    pos = arith::SelectOp::create(b, loc, below, candidate, pos);
  }
  return pos;
}

void KernelEmitter::fillBuckets(Value mids, Value buckets, Value fits,
                                Value bucketOf) {
  // Buckets in ascending order of c: v < kBucketsPerSign is the negative
  // bucket k = kBucketsPerSign - 1 - v, the rest the positive k = v -
  // kBucketsPerSign; the table holds the positive k at k, the negative at
  // kBucketsPerSign + k. For ascending midpoints of magnitude above kMagLo,
  // "mid < the lowest c of bucket v" is "mid's bucket < v", so a bucket's
  // entry counts the midpoints whose bucket is below it. Two passes:
  //  1. one thread per midpoint j: its bucket in that order goes to
  //     `bucketOf` (-1 below bucket 0, kBuckets above the last; +0 and -0
  //     in the two buckets of k = 0), and a midpoint inside the buckets
  //     writes its bucket's entry itself: j << 16 plus its offset.
  //  2. each thread fills a run of kBuckets / threads buckets with one
  //     integer cursor over `bucketOf` (the first midpoint whose bucket is
  //     not below the current one, and that bucket), started by one binary
  //     search of the midpoints: a bucket the cursor's midpoint lies in is
  //     pass 1's and moves the cursor on; the others get the count. Branch
  //     free, about 14 instructions a bucket (one cursor per thread with
  //     the midpoints' buckets in the loop took about 25 and diverged).
  // A block size that does not divide kBuckets leaves the last runs short
  // or empty. Midpoints that do not ascend (or a NaN), two in one bucket,
  // or one of magnitude <= kMagLo (where the lookup's clamp would misplace
  // c) clear `fits` (every such thread stores the same 0; the barrier after
  // the fill publishes it), and the codes take the full search: the table
  // is then not read, and some of it not written.
  int64_t perThread = (kBuckets + threads - 1) / threads;
  auto bits = [&](Value f) { return arith::BitcastOp::create(b, loc, i32(), f); };
  auto clearFits = [&](Value when) {
    auto clear = scf::IfOp::create(b, loc, TypeRange{}, when, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&clear.getThenRegion().front());
    LLVM::StoreOp::create(b, loc, constI32(0), fits, 4);
  };
  // A midpoint's bucket: {its place in ascending order of c (beyond: -1 or
  // kBuckets), whether it lies inside, its table index}.
  struct MidBucket {
    Value order, inside, index, mag, negative;
  };
  auto bucketOfMid = [&](Value mid) {
    Value pattern = bits(mid);
    Value mag = arith::AndIOp::create(b, loc, pattern, constI32(INT32_MAX));
    Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           pattern, constI32(0));
    Value k = arith::ShRUIOp::create(
        b, loc,
        arith::SubIOp::create(
            b, loc, arith::MaxUIOp::create(b, loc, mag, constI32(kMagLo)),
            constI32(kMagLo)),
        constI32(16));
    Value ordered = arith::SelectOp::create(
        b, loc, negative,
        arith::SubIOp::create(b, loc, constI32(kBucketsPerSign - 1), k),
        arith::AddIOp::create(b, loc, k, constI32(kBucketsPerSign)));
    Value beyond = arith::SelectOp::create(b, loc, negative, constI32(-1),
                                           constI32(kBuckets));
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, mag,
                                         constI32(kMagHi));
    Value index = arith::SelectOp::create(
        b, loc, negative, arith::AddIOp::create(b, loc, k, constI32(kBucketsPerSign)),
        k);
    return MidBucket{arith::SelectOp::create(b, loc, inside, ordered, beyond),
                     inside, index, mag, negative};
  };
  {
    // Pass 1: bucketOf[j] for j < 255, the padding past it above every
    // bucket.
    auto each = scf::ForOp::create(b, loc, tid, constI64(255 + kMidPadding),
                                   constI64(threads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(each.getBody()->getTerminator());
    Value j = each.getInductionVar();
    Value isMid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j,
                                        constI64(255));
    auto ifMid = scf::IfOp::create(b, loc, TypeRange{i32()}, isMid, true);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifMid.getThenRegion().front());
      Value mid = load(f32(), gep(mids, f32(), j), 4);
      Value next = load(f32(), gep(mids, f32(), arith::AddIOp::create(
                                                    b, loc, j, constI64(1))),
                        4);
      // mids[255] is +inf padding; a NaN compares false.
      clearFits(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT, mid, next));
      MidBucket own = bucketOfMid(mid);
      MidBucket after = bucketOfMid(next);
      auto write = scf::IfOp::create(b, loc, TypeRange{}, own.inside, false);
      {
        // c lies above the midpoint where c's low 16 bits exceed its: for a
        // positive bucket where low(c) + 0xFFFF - low(mid) carries into bit
        // 16, for a negative one (the bits complemented) where 0xFFFF -
        // low(c) + low(mid) does.
        OpBuilder::InsertionGuard body(b);
        b.setInsertionPointToStart(&write.getThenRegion().front());
        Value midLow = arith::AndIOp::create(b, loc, own.mag, constI32(0xFFFF));
        Value complement = arith::SubIOp::create(b, loc, constI32(0xFFFF), midLow);
        Value offset = arith::SelectOp::create(b, loc, own.negative, midLow, complement);
        Value count = arith::ShLIOp::create(
            b, loc, arith::TruncIOp::create(b, loc, i32(), j), constI32(16));
        LLVM::StoreOp::create(b, loc, arith::AddIOp::create(b, loc, count, offset),
                              gep(buckets, i32(), own.index), 4);
        // (One op per statement: the IR's order is not the C++ compiler's
        // order of evaluating arguments.)
        Value two = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          after.order, own.order);
        Value tiny = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule,
                                           own.mag, constI32(kMagLo));
        clearFits(arith::OrIOp::create(b, loc, two, tiny));
      }
      scf::YieldOp::create(b, loc, ValueRange{own.order});
      b.setInsertionPointToStart(&ifMid.getElseRegion().front());
      scf::YieldOp::create(b, loc, ValueRange{constI32(INT32_MAX)});
    }
    LLVM::StoreOp::create(b, loc, ifMid.getResult(0), gep(bucketOf, i32(), j), 4);
  }
  gpu::BarrierOp::create(b, loc);
  // Pass 2. The run's first bucket (clamped to the last for the search of
  // a run past the end) and its lowest c (bounds as the lookup's: k = 0
  // holds every magnitude up to kMagLo + 0xFFFF, the last only 1.0).
  Value runFirst = arith::TruncIOp::create(
      b, loc, i32(), arith::MulIOp::create(b, loc, tid, constI64(perThread)));
  Value first = arith::MinUIOp::create(b, loc, runFirst, constI32(kBuckets - 1));
  Value firstNegative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              first, constI32(kBucketsPerSign));
  Value firstK = arith::SelectOp::create(
      b, loc, firstNegative,
      arith::SubIOp::create(b, loc, constI32(kBucketsPerSign - 1), first),
      arith::SubIOp::create(b, loc, first, constI32(kBucketsPerSign)));
  Value firstStart = arith::AddIOp::create(
      b, loc, constI32(kMagLo), arith::ShLIOp::create(b, loc, firstK, constI32(16)));
  Value firstMagLo = arith::SelectOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, firstK, constI32(0)),
      constI32(0), firstStart);
  Value firstMagHi = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, firstStart, constI32(0xFFFF)),
      constI32(kMagHi));
  Value firstLo = arith::BitcastOp::create(
      b, loc, f32(),
      arith::SelectOp::create(
          b, loc, firstNegative,
          arith::OrIOp::create(b, loc, firstMagHi, constI32(INT32_MIN)), firstMagLo));
  Value startBelow =
      searchMidpoints(mids, firstLo, constI32(0), 128, arith::CmpFPredicate::OLT);
  auto fill = scf::ForOp::create(
      b, loc, constI64(0), constI64(perThread), constI64(1),
      ValueRange{startBelow, load(i32(), gep(bucketOf, i32(), startBelow), 4)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(fill.getBody());
  Value below = fill.getRegionIterArgs()[0];
  Value belowBucket = fill.getRegionIterArgs()[1];
  Value v = arith::AddIOp::create(
      b, loc, runFirst, arith::TruncIOp::create(b, loc, i32(), fill.getInductionVar()));
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, v,
                                        constI32(kBuckets));
  Value cursorHere = arith::AndIOp::create(
      b, loc, inRange,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, belowBucket, v));
  Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, v,
                                         constI32(kBucketsPerSign));
  Value index = arith::SelectOp::create(
      b, loc, negative, arith::SubIOp::create(b, loc, constI32(kBuckets - 1), v),
      arith::SubIOp::create(b, loc, v, constI32(kBucketsPerSign)));
  Value countOnly = arith::AndIOp::create(
      b, loc, inRange,
      arith::XOrIOp::create(b, loc, cursorHere,
                            arith::ConstantOp::create(b, loc, b.getBoolAttr(true))));
  auto store = scf::IfOp::create(b, loc, TypeRange{}, countOnly, false);
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    LLVM::StoreOp::create(b, loc,
                          arith::ShLIOp::create(b, loc, below, constI32(16)),
                          gep(buckets, i32(), index), 4);
  }
  // Past the cursor's midpoint: the next one and its bucket (bucketOf's
  // padding keeps the index within it).
  Value nextBelow = arith::AddIOp::create(
      b, loc, below, arith::ExtUIOp::create(b, loc, i32(), cursorHere));
  Value nextBucket = arith::SelectOp::create(
      b, loc, cursorHere, load(i32(), gep(bucketOf, i32(), nextBelow), 4),
      belowBucket);
  scf::YieldOp::create(b, loc, ValueRange{nextBelow, nextBucket});
}

Value KernelEmitter::codebookCodes(int stateIndex, Value value, Value divisor,
                                   Value absmax) {
  // Seed 000's code is the number of midpoints strictly below c
  // (torch.bucketize, right=False; a NaN c gets the last code). Where the
  // qmap's buckets fit (at most one midpoint each, none of magnitude <=
  // kMagLo) and the block's absmax is finite (so |c| <= 1, no NaN), c's
  // bucket entry gives the count in integer operations; else the 8-step
  // search over all midpoints.
  //
  // On the bucket path c is div.rn's fast-path sequence without a look at
  // the lanes (divByUniformUnchecked), for a divisor d in [2^-30, 2^60]:
  // where |x| >= 2^-60 it is guardedDiv's domain (|x| <= d), so c is
  // RN(x / d); where |x| < 2^-60, both RN(x / d) and the sequence's result
  // are below 2^-28 in magnitude (|q0| <= 2^-30 (1 + 2^-21), |r * rem| <=
  // 2^30 * 2^-59), and every c within kMagLo of 0, of either sign, has the
  // same code: no midpoint lies there.
  auto exactNormalized = [&] {
    return guardedMath.div(
        value, vector::BroadcastOp::create(b, loc, lanesOf(f32()), divisor));
  };
  Value mids = midShared.lookup(stateIndex);
  Value buckets = bucketShared.lookup(stateIndex);
  VectorType codeType = lanesOf(b.getI8Type());
  auto fullSearch = [&](Value normalized) {
    Value codes = arith::ConstantOp::create(b, loc, b.getZeroAttr(codeType));
    for (int64_t i = 0; i < lanes; ++i) {
      Value c = vector::ExtractOp::create(b, loc, normalized, i);
      // !(mid >= c): a NaN c takes the last code, as torch.bucketize does.
      Value pos = searchMidpoints(mids, c, constI32(0), 128,
                                  arith::CmpFPredicate::ULT);
      codes = vector::InsertOp::create(
          b, loc, arith::TruncIOp::create(b, loc, b.getI8Type(), pos), codes, i);
    }
    return codes;
  };
  if (!codebookBuckets)
    return fullSearch(exactNormalized());
  // absmax < inf (not NaN) and d in [2^-30, 2^60] (d >= 1e-30 > 0).
  Value belowMax = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE,
                                         divisor, math.constF(divisor, 0x1p60));
  Value aboveMin = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE,
                                         divisor, math.constF(divisor, 0x1p-30));
  Value divisorOk = arith::AndIOp::create(b, loc, aboveMin, belowMax);
  Value finite = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OLT, absmax,
      math.constF(absmax, std::numeric_limits<double>::infinity()));
  Value inRange = arith::AndIOp::create(b, loc, finite, divisorOk);
  auto ifOp = scf::IfOp::create(
      b, loc, TypeRange{codeType},
      arith::AndIOp::create(b, loc, bucketsFit.lookup(stateIndex), inRange),
      /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value normalized = math.divByUniformUnchecked(value, divisor);
  // A state known nonnegative (Adam's v with an unsigned map, where the
  // facts' condition holds) has every c >= 0 or -0, whose code is +0's
  // (no midpoint lies between them): the positive buckets alone, with no
  // look at c's sign (two instructions a lane fewer).
  auto nonneg = facts.nonnegative.find(value);
  if (nonneg == facts.nonnegative.end() || !nonneg->second) {
    bool always = nonneg != facts.nonnegative.end();
    scf::YieldOp::create(b, loc, bucketCodes(buckets, normalized, always));
  } else {
    auto signs = scf::IfOp::create(b, loc, TypeRange{codeType}, nonneg->second,
                                   /*withElseRegion=*/true);
    b.setInsertionPointToStart(&signs.getThenRegion().front());
    scf::YieldOp::create(b, loc, bucketCodes(buckets, normalized, true));
    b.setInsertionPointToStart(&signs.getElseRegion().front());
    scf::YieldOp::create(b, loc, bucketCodes(buckets, normalized, false));
    b.setInsertionPointAfter(signs);
    scf::YieldOp::create(b, loc, signs.getResult(0));
  }
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc, fullSearch(exactNormalized()));
  b.setInsertionPointAfter(ifOp);
  return ifOp.getResult(0);
}

Value KernelEmitter::bucketCodes(Value buckets, Value normalized,
                                 bool nonnegative) {
  VectorType codeType = lanesOf(b.getI8Type());
  Value codes = arith::ConstantOp::create(b, loc, b.getZeroAttr(codeType));
  SmallVector<Value> sums; // entry + low: the code in bits 16..23
  for (int64_t i = 0; i < lanes; ++i) {
    Value c = vector::ExtractOp::create(b, loc, normalized, i);
    // |c| clamped below to kMagLo (bucket 0 of its sign; no midpoint lies
    // below it); a partial tile's unused lanes (any value) also above to 1.
    // (llvm.maxnum/minnum: a NaN lane is clamped too; a nonnegative c needs
    // no |c|: the clamp takes -0 to kMagLo.)
    Value mag = math.intrinsic(
        "llvm.maxnum",
        {nonnegative ? c : math.abs(c),
         math.constF(c, llvm::bit_cast<float>(uint32_t(kMagLo)))});
    if (!isFullTile())
      mag = math.intrinsic("llvm.minnum", {mag, math.constF(c, 1.0)});
    Value magBits = arith::BitcastOp::create(b, loc, i32(), mag);
    // The table holds the positive buckets first (fillBuckets); a negative
    // c's are kBucketsPerSign on.
    Value step = arith::ShRUIOp::create(b, loc, magBits, constI32(16));
    Value sign;
    if (!nonnegative) {
      sign = arith::ShRSIOp::create(
          b, loc, arith::BitcastOp::create(b, loc, i32(), c), constI32(31));
      step = arith::AddIOp::create(
          b, loc, step, arith::AndIOp::create(b, loc, sign, constI32(kBucketsPerSign)));
    }
    Value bucket = arith::AddIOp::create(b, loc, step, constI32(-(kMagLo >> 16)));
    Value entry = load(i32(), gep(buckets, i32(), bucket), 4);
    Value low = arith::AndIOp::create(
        b, loc, sign ? arith::XOrIOp::create(b, loc, magBits, sign) : magBits,
        constI32(0xFFFF));
    sums.push_back(arith::AddIOp::create(b, loc, entry, low));
  }
  if (lanes % 4 == 0) {
    // Each code is byte 2 of its sum: four lanes' bytes into a word by three
    // prmt (byte selectors 2 and 6, then the two low halves), no shifts.
    SmallVector<Value> words;
    for (int64_t i = 0; i < lanes; i += 4) {
      auto pair = [&](Value lo, Value hi) {
        return math.intrinsic("llvm.nvvm.prmt", {lo, hi, constI32(0x62)}, i32());
      };
      words.push_back(math.intrinsic(
          "llvm.nvvm.prmt",
          {pair(sums[i], sums[i + 1]), pair(sums[i + 2], sums[i + 3]),
           constI32(0x5410)},
          i32()));
    }
    codes = vector::BitCastOp::create(
        b, loc, codeType,
        vector::FromElementsOp::create(
            b, loc, VectorType::get({lanes / 4}, i32()), words));
  } else {
    for (int64_t i = 0; i < lanes; ++i)
      codes = vector::InsertOp::create(
          b, loc,
          arith::TruncIOp::create(
              b, loc, b.getI8Type(),
              arith::ShRUIOp::create(b, loc, sums[i], constI32(16))),
          codes, i);
  }
  return codes;
}

void KernelEmitter::emitStoreParam(Value value) {
  Type paramType = optimizer.getParamType();
  Value x16 = narrowFromF32(math, value, paramType);
  storeElements(streamIndex(StreamRole::Param), x16);
  if (optimizer.getMaster() != MasterFormat::none)
    storeElements(streamIndex(StreamRole::ErrorBits),
                  splitMaster(math, value, x16, optimizer.getMaster()));
}

/// Vectorizes one arith/math operation of the update.
FailureOr<Value> KernelEmitter::emitArith(Operation *op, IRMapping &mapping) {
  return vectorizeUpdateOp(guardedMath, op, mapping, lanes);
}

LogicalResult KernelEmitter::emitTile() {
  // Each tile body (full, partial) starts afresh; the two share the block
  // reduction slots, as only one of them runs per tile.
  preloaded.clear();
  facts.clear();
  facts.registersToSpare = runThreadPointers();
  // The fallbacks' all-zero shortcut (a thread whose gradient and states
  // stay zero: rows that never had a gradient) in every kernel; in the
  // divisions by lane divisors too but in the unstaged codebook kernels of
  // a 16-bit parameter (block2048, its f16 and scaled forms), where that
  // part cost 2% on the bench's gradients at their 64-register bound. H200,
  // 64 Mi (bench/NOTES.md, fourteenth session): block2048 on the realistic
  // pool 0.271 -> 0.244 ms, within 0.2% on the bench's gradients; the f32
  // variants 1 to 5% faster on the pool, the same on the bench's.
  facts.zeroShortcutLaneDivisors = runThreadPointers() ||
                                   qmapShared.empty() ||
                                   optimizer.getParamType().isF32();
  if (guardedMath.isGuarded()) {
    math.setFacts(&facts);
    guardedMath.setFacts(&facts);
  }
  pendingStores.clear();
  nextReductionSlot = 0;
  IRMapping mapping;
  SmallVector<std::pair<Operation *, Value>> stores;

  // Every element stream the update reads, loaded up front (the scales and
  // absmax are loaded where used).
  SmallVector<unsigned> reads;
  for (unsigned stream : getReadStreams(optimizer))
    if (streams[stream].perElements == 1)
      reads.push_back(stream);
  preloadElements(reads);
  // The update's values stored into codebook states, whose absmax (the
  // maximum of magnitudes) the tile computes.
  llvm::DenseSet<Value> codebookStored;
  for (Operation &op : optimizer.getUpdate().getBody().front())
    if (auto store = dyn_cast<StoreStateOp>(op))
      if (isa<CodebookSchemeAttr>(
              SymbolTable::lookupNearestSymbolFrom<StateOp>(
                  optimizer, store.getStateAttr())
                  .getScheme()))
        codebookStored.insert(store.getValue());
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    loc = op.getLoc();
    if (auto loadGrad = dyn_cast<LoadGradOp>(op)) {
      Value g = widenToF32(math, loadElements(streamIndex(StreamRole::Grad)));
      if (Value inv = loadGrad.getInvScale())
        g = unscaleGrad(math, g, mapping.lookup(inv), optimizer.getGradType());
      mapping.map(op.getResult(0), g);
    } else if (isa<SkipIfOp>(op)) {
      // Tested once per launch (emit).
    } else if (isa<LoadParamOp>(op)) {
      Value x16 = loadElements(streamIndex(StreamRole::Param));
      Value x = optimizer.getMaster() == MasterFormat::none
                    ? widenToF32(math, x16)
                    : reconstructMaster(
                          math, x16,
                          loadElements(streamIndex(StreamRole::ErrorBits)),
                          optimizer.getMaster());
      mapping.map(op.getResult(0), x);
    } else if (auto loadState = dyn_cast<LoadStateOp>(op)) {
      auto state = SymbolTable::lookupNearestSymbolFrom<StateOp>(
          optimizer, loadState.getStateAttr());
      FailureOr<Value> value = emitLoadState(state);
      if (failed(value))
        return failure();
      mapping.map(op.getResult(0), *value);
    } else if (auto uniform = dyn_cast<UniformOp>(op)) {
      uint64_t index = uniform.getIndex();
      if (index >= uniformValues.size())
        return uniform.emitOpError("reads uniform ")
               << index << " but the optimizer yields only "
               << uniformValues.size();
      mapping.map(op.getResult(0),
                  vector::BroadcastOp::create(b, loc, lanesOf(f32()),
                                              uniformValues[index]));
    } else if (isa<StoreStateOp, StoreParamOp>(op)) {
      stores.push_back({&op, mapping.lookup(op.getOperand(op.getNumOperands() - 1))});
    } else if (isa<HyperValueOp, StepCountOp>(op)) {
      return op.emitOpError("must be outlined first: run qopt-outline-uniforms");
    } else {
      FailureOr<Value> value = emitArith(&op, mapping);
      if (failed(value))
        return failure();
      mapping.map(op.getResult(0), *value);
    }
    for (Value result : op.getResults())
      if (codebookStored.count(result))
        facts.magnitudeMaxima.insert(mapping.lookup(result));
  }
  // The codebook states' block absmax first, behind one barrier.
  codebookAbsmax.clear();
  SmallVector<std::pair<int, Value>> lanesMax;
  for (auto [op, value] : stores)
    if (auto store = dyn_cast<StoreStateOp>(op)) {
      int index = llvm::find(states,
                             SymbolTable::lookupNearestSymbolFrom<StateOp>(
                                 optimizer, store.getStateAttr())) -
                  states.begin();
      if (codebookSlots.count(index)) {
        loc = op->getLoc();
        lanesMax.push_back({index, lanesAbsMax(value)});
      }
    }
  if (!lanesMax.empty())
    reduceCodebookAbsmaxes(lanesMax);
  for (auto [op, value] : stores) {
    loc = op->getLoc();
    if (auto store = dyn_cast<StoreStateOp>(op)) {
      auto state = SymbolTable::lookupNearestSymbolFrom<StateOp>(
          optimizer, store.getStateAttr());
      if (failed(emitStoreState(state, value)))
        return failure();
    } else {
      emitStoreParam(value);
    }
  }
  flushStores();
  return success();
}

LogicalResult KernelEmitter::emit(gpu::GPUModuleOp module) {
  streams = getStreams(optimizer);
  states = getStates(optimizer);
  UniformsOp uniforms = optimizer.getUniforms();
  unsigned numUniforms = 0;
  if (uniforms)
    numUniforms = uniforms.getBody().front().getTerminator()->getNumOperands();

  // Signature: descriptors, tile map, tile count, uniforms, one qmap per
  // codebook state, and with tile claims the work counters (docs/abi.md).
  SmallVector<Type> args = {globalPtr(), globalPtr(), i64(), globalPtr()};
  SmallVector<int> codebookStates;
  for (auto [i, state] : llvm::enumerate(states))
    if (isa<CodebookSchemeAttr>(state.getScheme())) {
      codebookStates.push_back(i);
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
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value descs = entry.getArgument(0), tileMap = entry.getArgument(1);
  Value numTiles = entry.getArgument(2), uniformsPtr = entry.getArgument(3);

  tid = indexToI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  for (unsigned i = 0; i < numUniforms; ++i)
    uniformValues.push_back(
        load(f32(), gep(uniformsPtr, f32(), constI64(i)), 4));
  // A skipped step walks no tile.
  FailureOr<Value> skip = getSkipFlag(optimizer, uniformValues, math);
  if (failed(skip))
    return failure();
  if (*skip)
    numTiles = arith::SelectOp::create(b, loc, *skip, constI64(0), numTiles);

  std::string prefix = ("__qopt_" + optimizer.getSymName()).str();
  // Dynamic shared memory (the plan's shared_bytes, the manifest's
  // launch.shared_bytes): the tile stages, then the codebook buckets. Its
  // symbol is named after the first of them the kernel has.
  Value dynamicBase;
  if (plan.getSharedBytes() > 0)
    dynamicBase = sharedArray(
        module, prefix + (staging.streams.empty() ? "_buckets" : "_staging"),
        0, b.getI8Type(), LLVM::Linkage::External);
  if (!staging.streams.empty())
    stagingBase = dynamicBase;
  int64_t bucketsOffset = staging.streams.empty() ? 0 : staging.sharedBytes();

  // Shared memory: per codebook state its table and midpoints (and bucket
  // table), filled once per block; per block reduction one slot per warp.
  for (auto [k, stateIndex] : llvm::enumerate(codebookStates)) {
    std::string qname = prefix + "_qmap" + std::to_string(stateIndex);
    std::string mname = prefix + "_mid" + std::to_string(stateIndex);
    std::string fname = prefix + "_bucketsfit" + std::to_string(stateIndex);
    Value qmap = sharedArray(module, qname, 256);
    // 255 midpoints and 8 of +inf after them, read by the bucketed search.
    Value mid = sharedArray(module, mname, 255 + kMidPadding);
    qmapShared[stateIndex] = qmap;
    midShared[stateIndex] = mid;
    if (codebookBuckets) {
      bucketShared[stateIndex] =
          gep(dynamicBase, b.getI8Type(),
              constI64(bucketsOffset +
                       int64_t(k) * CodebookBuckets::kBytesPerState));
      bucketsFitShared[stateIndex] = sharedArray(module, fname, 1, i32());
    }
    Value table = entry.getArgument(4 + k);
    // Whether no entry is below zero (a NaN or -0 entry allowed: the range
    // facts' "nonnegative" includes them), for the dequantized state's
    // range facts (emitLoadState): each thread's entries, then the
    // barrier's and-reduction over the block.
    Value trueFlag =
        arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    auto fill = scf::ForOp::create(b, loc, tid, constI64(256), constI64(threads),
                                   ValueRange{trueFlag});
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
    qmapNonnegative[stateIndex] = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne, allNotBelow, constI32(0));
    auto mids = scf::ForOp::create(b, loc, tid, constI64(255), constI64(threads));
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
    auto pad = scf::ForOp::create(b, loc, tid, constI64(kMidPadding),
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
      Value fits = bucketsFitShared[stateIndex];
      auto first = ifZero(tid);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&first.getThenRegion().front());
        LLVM::StoreOp::create(b, loc, constI32(1), fits, 4);
      }
      gpu::BarrierOp::create(b, loc);
      // One scratch array for every state: a barrier separates a state's
      // fill from the next state's midpoints.
      if (!bucketOfShared)
        bucketOfShared = sharedArray(module, prefix + "_bucketof",
                                     255 + kMidPadding, i32());
      fillBuckets(mid, bucketShared[stateIndex], fits, bucketOfShared);
    }
  }
  unsigned slot = 0;
  for (auto [i, state] : llvm::enumerate(states)) {
    if (getReductionSize(state) / lanes <= 32)
      continue;
    std::string name = prefix + "_warpmax" + std::to_string(slot++);
    // (One lane's |x| may be a NaN of any payload; two or more pass through
    // max.NaN, whose canonical NaN is the largest positive pattern.)
    if (isa<CodebookSchemeAttr>(state.getScheme()) && lanes >= 2)
      codebookSlots[i] = sharedArray(module, name, 2 * (threads / 32));
    else
      reductionSlots.push_back(sharedArray(module, name, threads / 32));
  }
  if (bulkCopy) {
    // Thread 0 sets up the stages' barriers (one arrival: the issuing
    // thread's expect_tx) and readers' counts; the barrier below publishes
    // them, fence.mbarrier_init to the bulk copies' async proxy.
    stageBarriers = sharedArray(module, prefix + "_stage_full",
                                staging.stages, i64());
    stageReaders = sharedArray(module, prefix + "_stage_readers",
                               staging.stages, i32());
    auto first = ifZero(tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    for (int64_t s = 0; s < staging.stages; ++s) {
      syncPtx(b, loc, Type(), stageBarrier(constI64(s)),
              "mbarrier.init.shared.b64 [$0], 1;", "l");
      LLVM::StoreOp::create(b, loc, constI32(0),
                            gep(stageReaders, i32(), constI64(s)), 4);
    }
    syncPtx(b, loc, Type(), ValueRange{}, "fence.mbarrier_init.release.cluster;",
            "");
  }
  gpu::BarrierOp::create(b, loc);
  for (auto [stateIndex, fits] : bucketsFitShared)
    bucketsFit[stateIndex] = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne, load(i32(), fits, 4), constI32(0));

  // Copies the tile whose thread pointers are `threadPtrs` into stage
  // `stageIndex` where `when` holds, then commits a cp.async group (an empty
  // one otherwise, so that "all groups but the latest" is always the current
  // tile's).
  auto copyAheadIf = [&](Value when, ArrayRef<Value> threadPtrs,
                         Value stageIndex) {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, when,
                                  /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      copyTileToStage(threadPtrs, stageIndex);
    }
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
  };

  // Each block steps one contiguous range of tiles, [start, stop), in runs
  // of one tensor's tiles: a run loads its tile-map entry and descriptor
  // once, so a tile's loads wait on no tile-map load.
  //   chunk = ceil(numTiles / gridDim.x); start = min(blockIdx.x * chunk,
  //   numTiles); stop = min(start + chunk, numTiles)
  Value block = indexToI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  Value grid = indexToI64(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
  Value chunk = arith::DivUIOp::create(
      b, loc,
      arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, numTiles, grid),
                            constI64(1)),
      grid);
  Value start, stop;
  // With tile claims (the plan's claim_tiles) the runs below sit in a loop over the
  // block's claims: first its static range [b * first, (b + 1) * first),
  // first = numTiles * eighths / 8 / grid, then the tiles from grid * first
  // on, `claims.tiles` at a time from the work counters' first (docs/abi.md).
  // Thread 0 adds to it at a claim's start and hands the value to the block
  // through shared memory (one slot per claim parity) after the claim's
  // tiles, so that the atomic's round trip overlaps them. A launch with
  // fewer tiles than 8 / eighths per block (first 0: a block's few tiles
  // would wait on the claims' barriers and atomics, 1 Mi elements 4% slower
  // on the H200) steps ceil(numTiles / grid) static tiles per block and
  // claims none; the condition is the same in every block.
  scf::WhileOp claimLoop;
  Value claimSlots, claimOld, claimParity, claimBase, workCounters, claiming;
  if (claims.enabled()) {
    workCounters = entry.getArguments().back();
    claimSlots = sharedArray(module, prefix + "_claim", 2, i64());
    Value first = arith::DivUIOp::create(
        b, loc,
        arith::DivUIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, numTiles, constI64(claims.staticEighths)),
            constI64(8)),
        grid);
    claiming = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, first,
                                     constI64(0));
    first = arith::SelectOp::create(b, loc, claiming, first, chunk);
    claimBase = arith::MulIOp::create(b, loc, grid, first);
    Value c0 = arith::MulIOp::create(b, loc, block, first);
    Value e0 = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, c0, first), numTiles);
    SmallVector<Type> types = {i64(), i64(), i32()};
    SmallVector<Location> locs(types.size(), loc);
    claimLoop = scf::WhileOp::create(b, loc, types, ValueRange{c0, e0, constI32(0)});
    Block *before = b.createBlock(&claimLoop.getBefore(), {}, types, locs);
    scf::ConditionOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                              before->getArgument(0), numTiles),
        before->getArguments());
    Block *after = b.createBlock(&claimLoop.getAfter(), {}, types, locs);
    start = after->getArgument(0);
    stop = after->getArgument(1);
    claimParity = after->getArgument(2);
    auto ifFirst = scf::IfOp::create(
        b, loc, TypeRange{i64()}, arith::AndIOp::create(b, loc, isZero(tid), claiming),
        /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
      Value old = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                                            workCounters, constI64(claims.tiles),
                                            LLVM::AtomicOrdering::monotonic);
      scf::YieldOp::create(b, loc, old);
      b.setInsertionPointToStart(&ifFirst.getElseRegion().front());
      scf::YieldOp::create(b, loc, constI64(0));
    }
    claimOld = ifFirst.getResult(0);
  } else {
    start = arith::MinSIOp::create(
        b, loc, arith::MulIOp::create(b, loc, block, chunk), numTiles);
    stop = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, start, chunk), numTiles);
  }
  // With bulk copies the runs also carry how many staged tiles the block
  // went through before the run: its g-th staged tile uses stage g % stages
  // for the (g / stages)-th time, which says the parity of the barrier's
  // phase to wait for.
  SmallVector<Type> runTypes = {i64()};
  SmallVector<Value> runInits = {start};
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
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, t, stop),
        before->getArguments());
  }
  Block *after = b.createBlock(&runs.getAfter(), {}, runTypes, runLocs);
  Value runStart = after->getArgument(0);
  Value stagedBefore = bulkCopy ? after->getArgument(1) : Value();
  Value tensor = arith::ExtSIOp::create(
      b, loc, i64(), load(i32(), gep(tileMap, i32(), runStart), 4));
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(streams.size());
  desc = gep(descs, b.getI8Type(),
             arith::MulIOp::create(b, loc, tensor, constI64(descBytes)));
  numel = load(i64(), desc, 8);
  Value firstTile = load(i64(), gep(desc, b.getI8Type(), constI64(8)), 8);
  // The run ends at the tensor's last tile or at `stop`; at least one tile,
  // so that a tile map that disagreed with the descriptors could not stall.
  Value tensorTiles = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, numel, constI64(tile - 1)),
      constI64(tile));
  Value runEnd = arith::MaxSIOp::create(
      b, loc,
      arith::MinSIOp::create(
          b, loc, stop, arith::AddIOp::create(b, loc, firstTile, tensorTiles)),
      arith::AddIOp::create(b, loc, runStart, constI64(1)));
  // Tiles before `fullEnd` lie wholly inside the tensor.
  Value fullEnd = arith::AddIOp::create(
      b, loc, firstTile, arith::DivUIOp::create(b, loc, numel, constI64(tile)));
  // Each stream's thread pointer at the run's first tile, advanced by the
  // stream's bytes per tile: a full tile's loads, copies and stores take
  // their addresses from these, with no 64-bit index arithmetic per tile.
  // The loop carries those of the tile `ahead` on (the copies' sources); the
  // current tile's are those minus `ahead` tiles, an immediate offset of the
  // stores, so that one register pair per stream lives across the loop.
  Value firstInTensor = arith::SubIOp::create(b, loc, runStart, firstTile);
  Value firstBase = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, firstInTensor, constI64(tile)),
      threadBase());
  SmallVector<Value> runPtrs;
  for (auto [i, info] : llvm::enumerate(streams)) {
    if (!runThreadPointers())
      break;
    Value index = info.perElements == 1
                      ? firstBase
                      : arith::DivUIOp::create(b, loc, firstBase,
                                               constI64(info.perElements));
    runPtrs.push_back(gep(streamPtr(i), memoryType(info.storage), index));
  }
  auto advance = [&](ArrayRef<Value> ptrs, int64_t tiles) {
    SmallVector<Value> advanced;
    for (auto [i, ptr] : llvm::enumerate(ptrs))
      advanced.push_back(
          gep(ptr, b.getI8Type(), constI64(tiles * tileBytes(i))));
    return advanced;
  };
  // The copies run `ahead` tiles ahead of the computation: the run's first
  // `ahead` tiles are copied before the loop, tile t + ahead while tile t
  // computes; stage k % stages holds the run's k-th tile.
  int64_t stages = staging.stages, ahead = stages - 1;
  // With run thread pointers the loop counts the run's tiles from 0 in 32
  // bits (the tile map's indices are 64-bit): one uniform add and compare
  // per tile where 64-bit ones took two each. A run holds at most
  // ceil(numTiles / gridDim.x) tiles, 2^31 of which would be 2^43 elements.
  // (The unstaged codebook kernels, at their 64 registers, keep the tile
  // index: with the 32-bit count they were 2.3% slower, H200.) Tiles before `copyEnd`
  // (min(runEnd, fullEnd)) lie wholly inside the tensor; only they are
  // copied ahead.
  bool relative = runThreadPointers();
  Value copyEnd = arith::MinSIOp::create(b, loc, runEnd, fullEnd);
  auto runRelative = [&](Value end) -> Value {
    return arith::TruncIOp::create(b, loc, i32(),
                                   arith::SubIOp::create(b, loc, end, runStart));
  };
  // The loop's bounds and the bound of its full tiles, in its own terms.
  Value lower = relative ? Value(constI32(0)) : runStart;
  Value upper = relative ? runRelative(runEnd) : runEnd;
  Value fullLimit = relative ? runRelative(copyEnd) : copyEnd;
  auto plus = [&](Value k, int64_t j) -> Value {
    return arith::AddIOp::create(b, loc, k, relative ? constI32(j) : constI64(j));
  };
  auto stageOf = [&](Value k) -> Value {
    if (relative)
      return arith::ExtUIOp::create(
          b, loc, i64(), arith::RemUIOp::create(b, loc, k, constI32(stages)));
    return arith::RemUIOp::create(b, loc, arith::SubIOp::create(b, loc, k, runStart),
                                  constI64(stages));
  };
  // Bulk copies: the run's k-th staged tile is the block's g-th, g =
  // stagedBefore + k, and lies in stage g % stages.
  auto bulkStageOf = [&](Value g) -> Value {
    return arith::ExtUIOp::create(
        b, loc, i64(), arith::RemUIOp::create(b, loc, g, constI32(stages)));
  };
  if (bulkCopy) {
    runFirstInTensor = firstInTensor;
    // Thread 0 fills every stage with the run's first full tiles (a loop:
    // unrolled, each tile's copies took about 60 instructions of code);
    // later tiles are issued by the last warp to finish reading a stage.
    auto first = ifZero(tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    // The block's generic-proxy reads of the stages (the run before, behind
    // the barrier that ended it) before the async proxy's writes, as for a
    // refill.
    syncPtx(b, loc, Type(), ValueRange{}, "fence.proxy.async.shared::cta;", "");
    Value count = arith::MinSIOp::create(b, loc, fullLimit, constI32(stages));
    auto fill = scf::ForOp::create(b, loc, constI32(0), count, constI32(1));
    b.setInsertionPoint(fill.getBody()->getTerminator());
    Value j = fill.getInductionVar();
    bulkCopyTile(j, bulkStageOf(arith::AddIOp::create(b, loc, stagedBefore, j)));
  } else if (stagingBase) {
    for (int64_t j = 0; j < ahead; ++j)
      copyAheadIf(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        plus(lower, j), fullLimit),
                  advance(runPtrs, j), constI64(j));
  }
  // Every kernel's loop carries them, the two-state ones too: their copy
  // pointers as the run's plus k tiles by mad.wide.u32 took ptxas 66
  // instructions per warp and tile from the loop's top to the stage (the
  // product in uniform registers, then a 64-bit add pair per stream for
  // both the current and the copies' pointers), and measured on the H200
  // the same for FlashAdamW and ecc16, 1.1 to 1.8% slower for FlashAdam,
  // FlashAdamW_bf16 and _linear (bench/NOTES.md, tenth session).
  SmallVector<Value> aheadPtrs = advance(runPtrs, ahead);
  auto loop = scf::ForOp::create(
      b, loc, lower, upper, relative ? Value(constI32(1)) : Value(constI64(1)),
      ValueRange(aheadPtrs));
  if (bulkCopy) {
    // Every thread is done with the run's stages before thread 0 fills them
    // with the next run's tiles (each issued tile was waited for, so no copy
    // is in flight either).
    gpu::BarrierOp::create(b, loc);
    Value staged = arith::MaxSIOp::create(b, loc, fullLimit, constI32(0));
    scf::YieldOp::create(
        b, loc,
        ValueRange{runEnd, arith::AddIOp::create(b, loc, stagedBefore, staged)});
  } else {
    scf::YieldOp::create(b, loc, ValueRange{runEnd});
  }
  b.setInsertionPointToStart(loop.getBody());
  Value k = loop.getInductionVar();
  SmallVector<Value> nextPtrs(loop.getRegionIterArgs().begin(),
                              loop.getRegionIterArgs().end());
  tilePtrs = advance(nextPtrs, -ahead);
  Value t = relative ? Value(arith::AddIOp::create(
                           b, loc, runStart, arith::ExtUIOp::create(b, loc, i64(), k)))
                     : k;
  tileIndex = t;
  auto tileBase = [&] {
    return arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc,
                              arith::SubIOp::create(b, loc, t, firstTile),
                              constI64(tile)),
        threadBase());
  };
  if (!runThreadPointers())
    base = tileBase();
  if (stagingBase && !bulkCopy) {
    Value next = plus(k, ahead);
    Value nextFull = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           next, fullLimit);
    copyAheadIf(nextFull, nextPtrs, stageOf(next));
  }
  // Thread 0 has L2 fetch the read streams of the run's full tile
  // `prefetchAhead` tiles on (the plan's l2_prefetch_tiles): a tile's loads
  // then wait on L2, not DRAM, with no register or shared memory held for
  // them.
  int64_t prefetchAhead = plan.getL2PrefetchTiles();
  if (prefetchAhead) {
    // Only the block's own tiles (the run's: the next run's first tiles are
    // another tensor's) that lie wholly inside the tensor.
    Value later = arith::AddIOp::create(b, loc, t, constI64(prefetchAhead));
    Value inRun = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        relative ? plus(k, prefetchAhead) : later,
                                        fullLimit);
    Value first0 = isZero(tid);
    Value prefetch = arith::AndIOp::create(b, loc, first0, inRun);
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, prefetch, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value first = arith::MulIOp::create(
        b, loc, arith::SubIOp::create(b, loc, later, firstTile), constI64(tile));
    for (unsigned i : getReadStreams(optimizer))
      if (streams[i].perElements == 1)
        NVVM::CpAsyncBulkPrefetchOp::create(
            b, loc, gep(streamPtr(i), memoryType(streams[i].storage), first),
            constI32(tileBytes(i)), Value());
  }
  // A tile wholly inside its tensor (every tile of a run but a tensor's
  // last; the same for all threads of the block, so block reductions may
  // synchronize in it) gets a body of its own with no lane masks.
  // (The codebook kernels keep (t - firstTile + 1) * tile <= numel: at 64
  // registers, the bound held across the loop took one more than they have.)
  Value tileFull;
  if (runThreadPointers()) {
    tileFull =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, k, fullLimit);
  } else {
    Value tileEnd = arith::MulIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, t, firstTile),
                              constI64(1)),
        constI64(tile));
    tileFull = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                     tileEnd, numel);
  }
  auto split = scf::IfOp::create(b, loc, TypeRange{}, tileFull,
                                 /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&split.getThenRegion().front());
    if (stagingBase) {
      // Every group but the latest `ahead` (the next tiles') is complete:
      // this thread's copies of this tile are in shared memory. Each thread
      // reads only what it copied itself, so no barrier is needed, and a
      // stage is copied into again only after the thread has used what it
      // read.
      if (bulkCopy) {
        // The stage's barrier completes once per use; this is its
        // (g / stages)-th.
        Value g = arith::AddIOp::create(b, loc, stagedBefore, k);
        stage = bulkStageOf(g);
        Value use = arith::DivUIOp::create(b, loc, g, constI32(stages));
        waitForStage(stage, arith::AndIOp::create(b, loc, use, constI32(1)));
      } else {
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(ahead));
        stage = stageOf(k);
      }
    }
    full = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    active = full;
    laneMask = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(lanesOf(b.getI1Type()), true));
    if (failed(emitTile()))
      return failure();
    if (bulkCopy)
      releaseStage(k, fullLimit);
  }
  b.setInsertionPointToStart(&split.getElseRegion().front());
  // The partial tile addresses its streams from `base`.
  tilePtrs.clear();
  if (runThreadPointers())
    base = tileBase();
  // The tile's successor's pointers, after all of the tile's uses (where
  // the loop carries them).
  if (!nextPtrs.empty()) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(split);
    // The advance is inline PTX: as a GEP, LLVM folds the phi of advanced
    // pointers into one of current pointers (InstCombine), the next
    // tile's then computed at the top for the copies, both live to the
    // stores and copied with 14 moves at the end of every tile.
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
  Value end = arith::AddIOp::create(b, loc, base, constI64(lanes));
  full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end, numel);
  active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, base, numel);
  SmallVector<int64_t> iota;
  for (int64_t i = 0; i < lanes; ++i)
    iota.push_back(i);
  Value laneIndex = arith::AddIOp::create(
      b, loc, vector::BroadcastOp::create(b, loc, lanesOf(i64()), base),
      arith::ConstantOp::create(b, loc, b.getI64VectorAttr(iota)));
  laneMask = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::slt, laneIndex,
      vector::BroadcastOp::create(b, loc, lanesOf(i64()), numel));
  if (failed(emitTile()))
    return failure();
  if (claimLoop) {
    // The next claim, handed from thread 0 to the block; the slot of this
    // parity is written again only after the next claim's barrier.
    b.setInsertionPointAfter(runs);
    auto handOver = scf::IfOp::create(b, loc, TypeRange{i64()}, claiming,
                                      /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard outer(b);
      b.setInsertionPointToStart(&handOver.getThenRegion().front());
      Value slot = gep(claimSlots, i64(),
                       arith::ExtUIOp::create(b, loc, i64(), claimParity));
      {
        auto first = ifZero(tid);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&first.getThenRegion().front());
        LLVM::StoreOp::create(
            b, loc, arith::AddIOp::create(b, loc, claimBase, claimOld), slot, 8);
      }
      gpu::BarrierOp::create(b, loc);
      scf::YieldOp::create(b, loc, load(i64(), slot, 8));
      b.setInsertionPointToStart(&handOver.getElseRegion().front());
      scf::YieldOp::create(b, loc, numTiles);
    }
    Value next = handOver.getResult(0);
    Value nextEnd = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, next, constI64(claims.tiles)),
        numTiles);
    scf::YieldOp::create(
        b, loc,
        ValueRange{next, nextEnd,
                   arith::XOrIOp::create(b, loc, claimParity, constI32(1))});
    // The last block to finish zeroes the counters for the next launch:
    // every other block counted itself done (acq_rel) after its last claim
    // returned, so no claim of this launch can follow the reset.
    b.setInsertionPointAfter(claimLoop);
    auto first = scf::IfOp::create(
        b, loc, TypeRange{}, arith::AndIOp::create(b, loc, isZero(tid), claiming),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    Value doneCounter = gep(workCounters, i64(), constI64(1));
    Value done = syncPtx(b, loc, i64(), ValueRange{doneCounter},
                         "atom.acq_rel.gpu.global.add.u64 $0, [$1], 1;", "=l,l");
    auto last = scf::IfOp::create(
        b, loc, TypeRange{},
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, done,
                              arith::SubIOp::create(b, loc, grid, constI64(1))),
        /*withElseRegion=*/false);
    b.setInsertionPointToStart(&last.getThenRegion().front());
    LLVM::StoreOp::create(b, loc, constI64(0), workCounters, 8);
    LLVM::StoreOp::create(b, loc, constI64(0), doneCounter, 8);
  }
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b, func.getLoc());
  return success();
}

namespace {
struct ConvertQoptToGPUPass
    : public qopt::impl::ConvertQoptToGPUBase<ConvertQoptToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<OptimizerOp> optimizers(module.getOps<OptimizerOp>());
    for (OptimizerOp optimizer : optimizers) {
      KernelPlanAttr plan = getKernelPlan(optimizer);
      if (!plan) {
        optimizer.emitOpError("needs a launch plan (qopt-plan-kernel) before "
                              "convert-qopt-to-gpu");
        return signalPassFailure();
      }
      OpBuilder b(module.getContext());
      b.setInsertionPointToEnd(module.getBody());
      auto gpuModule = gpu::GPUModuleOp::create(
          b, optimizer.getLoc(), (optimizer.getSymName() + "_kernels").str());
      KernelEmitter emitter(optimizer, plan, b, mode == ArithMode::Fast, checkedRounding,
                            guardedIeee);
      if (failed(emitter.emit(gpuModule)))
        return signalPassFailure();
      optimizer.erase();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
  }
};
} // namespace

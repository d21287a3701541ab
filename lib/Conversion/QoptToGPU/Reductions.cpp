//===- Reductions.cpp - Group and block maxima ----------------------------===//
//
// The absmax of a group by warp shuffles and shared memory, and of codebook
// blocks that span warps by redux.sync behind one barrier per tile.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::qopt;

Value KernelEmitter::reduceGroupMax(TileContext &tile, Value scalar,
                                    int64_t groupSize, bool magnitudes) {
  const KernelContext &kernel = tile.kernel;
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
  Value slots = kernel.reductionSlots[tile.nextReductionSlot++];
  int64_t warpsPerGroup = threadsPerGroup / 32;
  Value warp = arith::DivUIOp::create(b, loc, kernel.tid, constI64(32));
  Value laneId = arith::RemUIOp::create(b, loc, kernel.tid, constI64(32));
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
  if (kernel.reductionSlots.size() < 2)
    gpu::BarrierOp::create(b, loc);
  return result;
}

/// The warp's index and its slot offset for this tile's parity.
static std::pair<Value, Value> warpAndParity(OpBuilder &b, Location loc,
                                             Value tid, Value tileIndex,
                                             int64_t warps) {
  Value c32 = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32));
  Value warp = arith::DivUIOp::create(b, loc, tid, c32);
  Value parity = arith::MulIOp::create(
      b, loc,
      arith::RemUIOp::create(
          b, loc, tileIndex,
          arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(2))),
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(warps)));
  return {warp, parity};
}

void KernelEmitter::postCodebookMaxima(
    TileContext &tile, ArrayRef<std::pair<int, Value>> lanesMax) {
  const KernelContext &kernel = tile.kernel;
  auto [warp, parity] =
      warpAndParity(b, loc, kernel.tid, tile.index, threads / 32);
  Value laneId = arith::RemUIOp::create(b, loc, kernel.tid, constI64(32));
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
          gep(kernel.codebookSlots.lookup(entry.first), f32(),
              arith::AddIOp::create(b, loc, parity, warp)),
          4);
  }
  if (!kernel.absmaxArrivals) {
    gpu::BarrierOp::create(b, loc);
    return;
  }
  // Every thread arrives (release: lane 0's stores above are visible to
  // whoever acquires the phase). One arrival a warp, its state shuffled to
  // the warp, measured no faster (docs/tuning.md#split-absmax).
  tile.absmaxArrival = syncPtx(
      b, loc, i64(), ValueRange{},
      "mbarrier.arrive.shared.b64 $0, [" + kernel.absmaxArrivalsSymbol + "];",
      "=l");
}

void KernelEmitter::readCodebookAbsmaxes(TileContext &tile,
                                         ArrayRef<int> stateIndices) {
  const KernelContext &kernel = tile.kernel;
  if (Value state = tile.absmaxArrival) {
    // try_wait suspends the thread for a while before it reports the phase
    // still open; the loop asks again. Its acquire orders the slot reads.
    auto wait = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
    OpBuilder::InsertionGuard guard(b);
    b.createBlock(&wait.getBefore());
    Value done = syncPtx(
        b, loc, i32(), ValueRange{state},
        "{ .reg .pred done; mbarrier.try_wait.shared.b64 done, [" +
            kernel.absmaxArrivalsSymbol + "], $1; selp.u32 $0, 1, 0, done; }",
        "=r,l");
    scf::ConditionOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, done,
                              constI32(0)),
        ValueRange{});
    b.createBlock(&wait.getAfter());
    scf::YieldOp::create(b, loc);
  }
  tile.absmaxArrival = Value();
  auto [warp, parity] =
      warpAndParity(b, loc, kernel.tid, tile.index, threads / 32);
  Value laneId = arith::RemUIOp::create(b, loc, kernel.tid, constI64(32));
  for (int index : stateIndices) {
    int64_t warpsPerGroup = getReductionSize(states[index]) / lanes / 32;
    // Lane j reads warp j of its group (the group's last where j is past).
    Value firstWarp = arith::MulIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, warp, constI64(warpsPerGroup)),
        constI64(warpsPerGroup));
    Value j = arith::MinUIOp::create(b, loc, laneId, constI64(warpsPerGroup - 1));
    Value slot = arith::AddIOp::create(
        b, loc, parity, arith::AddIOp::create(b, loc, firstWarp, j));
    tile.codebookAbsmax[index] = warpMaxOfMagnitudes(
        load(f32(), gep(kernel.codebookSlots.lookup(index), f32(), slot), 4));
  }
}

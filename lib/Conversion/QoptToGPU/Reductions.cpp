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

void KernelEmitter::reduceCodebookAbsmaxes(
    TileContext &tile, ArrayRef<std::pair<int, Value>> lanesMax) {
  const KernelContext &kernel = tile.kernel;
  int64_t warps = threads / 32;
  Value warp = arith::DivUIOp::create(b, loc, kernel.tid, constI64(32));
  Value laneId = arith::RemUIOp::create(b, loc, kernel.tid, constI64(32));
  Value parity = arith::MulIOp::create(
      b, loc, arith::RemUIOp::create(b, loc, tile.index, constI64(2)),
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
          gep(kernel.codebookSlots.lookup(entry.first), f32(),
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
    tile.codebookAbsmax[index] = warpMaxOfMagnitudes(
        load(f32(), gep(kernel.codebookSlots.lookup(index), f32(), slot), 4));
  }
}

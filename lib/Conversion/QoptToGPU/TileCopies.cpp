//===- TileCopies.cpp - Tile stages in shared memory ----------------------===//
//
// The async copies of full tiles into their stages (cp.async per thread, or
// bulk copies completing an mbarrier per stage) and the reads back.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::qopt;

Value KernelEmitter::stagedAddress(const KernelContext &kernel,
                                   const StagedStream &staged, Value stageIndex,
                                   int64_t chunk) {
  Value offset = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, stageIndex, constI64(staging.stageBytes)),
      arith::MulIOp::create(
          b, loc,
          arith::AddIOp::create(b, loc, kernel.tid, constI64(chunk * threads)),
          constI64(staged.chunkBytes)));
  return gep(kernel.stagingBase, b.getI8Type(),
             arith::AddIOp::create(b, loc, offset, constI64(staged.offset)));
}

void KernelEmitter::copyTileToStage(const KernelContext &kernel,
                                    ArrayRef<Value> threadPtrs,
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
          b, loc, stagedAddress(kernel, staged, stageIndex, j), chunkSrc,
          b.getI32IntegerAttr(staged.chunkBytes),
          NVVM::LoadCacheModifierKindAttr::get(b.getContext(), cache),
          /*cpSize=*/Value());
    }
  }
}

Value KernelEmitter::stageBarrier(const KernelContext &kernel,
                                  Value stageIndex) {
  return stageBarrier(kernel.stageBarriers, stageIndex);
}

Value KernelEmitter::stageBarrier(Value barriers, Value stageIndex) {
  return LLVM::PtrToIntOp::create(b, loc, i64(),
                                  gep(barriers, i64(), stageIndex));
}

void KernelEmitter::bulkCopyTile(const RunContext &run, Value k,
                                 Value stageIndex) {
  // The barrier expects the tile's bytes, which the copies then complete
  // (complete_tx): its phase ends when the last of them has landed.
  int64_t bytes = 0;
  for (const StagedStream &staged : staging.streams)
    bytes += tileBytes(staged.stream);
  Value barrier = stageBarrier(run.kernel, stageIndex);
  syncPtx(b, loc, Type(), barrier,
          "{ .reg .b64 state; mbarrier.arrive.expect_tx.shared.b64 state, [$0], " +
              std::to_string(bytes) + "; }",
          "l");
  Value tileInTensor = arith::AddIOp::create(
      b, loc, run.firstInTensor, arith::ExtUIOp::create(b, loc, i64(), k));
  Value stageStart = arith::MulIOp::create(b, loc, stageIndex,
                                           constI64(staging.stageBytes));
  for (const StagedStream &staged : staging.streams) {
    int64_t size = tileBytes(staged.stream);
    Value src = gep(streamPtr(run, staged.stream), b.getI8Type(),
                    arith::MulIOp::create(b, loc, tileInTensor, constI64(size)));
    Value dst = gep(run.kernel.stagingBase, b.getI8Type(),
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

void KernelEmitter::waitForStage(Value barriers, Value stageIndex,
                                 Value parity) {
  // try_wait suspends the thread for a while before it reports the phase
  // still open; the loop asks again.
  Value barrier = stageBarrier(barriers, stageIndex);
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

void KernelEmitter::releaseStage(const TileContext &tile, Value k,
                                 Value fullLimit) {
  if (producerWarp) {
    // Every computing thread arrives at the stage's second barrier (its
    // count is the threads), each arrival releasing that thread's own
    // shared loads of the stage; the producer's wait acquires them all
    // before it refills the stage. With one arrival per warp after
    // bar.warp.sync, racecheck reported the other lanes' loads against the
    // refill (docs/tuning.md#producer-warp).
    syncPtx(b, loc, Type(),
            stageBarrier(tile.kernel.stageEmpty, tile.stage),
            "{ .reg .b64 state; mbarrier.arrive.shared.b64 state, [$0]; }",
            "l");
    return;
  }
  // bar.warp.sync orders the warp's shared loads of the stage (their values
  // are all used by now: the tile's stores take them) before lane 0's
  // arrival; its release and the last arrival's acquire order every warp's
  // loads before the copies that refill the stage.
  syncPtx(b, loc, Type(), ValueRange{}, "bar.warp.sync -1;", "");
  Value lane = arith::AndIOp::create(b, loc, tile.kernel.tid, constI64(31));
  auto leader = ifZero(lane);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&leader.getThenRegion().front());
  Value readers = LLVM::PtrToIntOp::create(
      b, loc, i64(), gep(tile.kernel.stageReaders, i32(), tile.stage));
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
  bulkCopyTile(tile.run, next, tile.stage);
}

Value KernelEmitter::loadStaged(const TileContext &tile,
                                const StagedStream &staged, Type type) {
  // One shared load per chunk (a 16-byte chunk is one ld.shared.v4), then the
  // chunks joined into the thread's vector.
  auto vecType = dyn_cast<VectorType>(type);
  if (!vecType) {
    int64_t bytes = type.getIntOrFloatBitWidth() / 8;
    // The thread's group within the tile (a group stream's scalar).
    auto groupInTile = [&] {
      return arith::DivUIOp::create(
          b, loc, threadBase(tile.kernel),
          constI64(streams[staged.stream].perElements));
    };
    if (bulkCopy && streams[staged.stream].perElements != 1) {
      // A bulk-copied stage holds the tile's scalars as they lie in memory.
      Value group = groupInTile();
      Value offset = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, tile.stage,
                                constI64(staging.stageBytes)),
          arith::AddIOp::create(b, loc, constI64(staged.offset),
                                arith::MulIOp::create(b, loc, group,
                                                      constI64(bytes))));
      return load(type, gep(tile.kernel.stagingBase, b.getI8Type(), offset),
                  bytes);
    }
    Value addr = stagedAddress(tile.kernel, staged, tile.stage, 0);
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
      load(chunkType, stagedAddress(tile.kernel, staged, tile.stage, 0),
           staged.chunkBytes)};
  for (int64_t j = 1; j < chunks; ++j)
    parts.push_back(load(chunkType,
                         stagedAddress(tile.kernel, staged, tile.stage, j),
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

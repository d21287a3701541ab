//===- StreamAccess.cpp - Stream addresses, loads and stores --------------===//
//
// Where each stream of a tile lies (the run's descriptor, thread pointers)
// and its element and per-group loads and stores: one vector access per
// thread, masked in a partial tile, staged streams read from shared memory.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "qopt/Codegen/LaneAccess.h"

using namespace mlir;
using namespace mlir::qopt;

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

Value KernelEmitter::streamPtr(const RunContext &run, unsigned index) {
  // Loaded where used, from the run's descriptor (L1-resident). Where the
  // plan says so (invariant_descriptors) the load is marked invariant (the
  // descriptors are written before the launch), so that LLVM reuses a
  // pointer across the tile's stores.
  bool invariant = plan.getInvariantDescriptors();
  // With an even number of streams every descriptor is 16-byte aligned (the
  // array is, docs/abi.md): an invariant pointer comes with its pair's
  // other one in one 16-byte load, which the pair's other use shares (one
  // LDG.128 and one address where ptxas built an address per LDG.64).
  if (invariant && streams.size() % 2 == 0) {
    auto pairType = VectorType::get({2}, b.getI64Type());
    Value pairAddr =
        gep(run.desc, b.getI8Type(), constI64(16 + 8 * (index & ~1u)));
    Value pair = LLVM::LoadOp::create(b, loc, pairType, pairAddr, 16,
                                      /*isVolatile=*/false,
                                      /*isNonTemporal=*/false,
                                      /*isInvariant=*/true);
    Value bitsOfPtr = vector::ExtractOp::create(b, loc, pair, int64_t(index & 1));
    return LLVM::IntToPtrOp::create(b, loc, globalPtr(), bitsOfPtr);
  }
  Value addr = gep(run.desc, b.getI8Type(), constI64(16 + 8 * index));
  return LLVM::LoadOp::create(b, loc, globalPtr(), addr, 8, /*isVolatile=*/false,
                              /*isNonTemporal=*/false, invariant);
}

Value KernelEmitter::threadPtr(const TileContext &tile, unsigned stream) {
  if (!tile.ptrs.empty())
    return tile.ptrs[stream];
  const StreamInfo &info = streams[stream];
  Value index = info.perElements == 1
                    ? tile.base
                    : arith::DivUIOp::create(b, loc, tile.base,
                                             constI64(info.perElements));
  return gep(streamPtr(tile.run, stream), memoryType(info.storage), index);
}

int64_t KernelEmitter::tileBytes(unsigned stream) const {
  const StreamInfo &info = streams[stream];
  return tile / info.perElements * memoryType(info.storage).getIntOrFloatBitWidth() /
         8;
}

void KernelEmitter::preloadElements(TileContext &tile,
                                    ArrayRef<unsigned> streamIds) {
  // An update that reads no element stream (p = 2) has nothing to load; an
  // scf.if without results would also get a terminator of its own.
  if (streamIds.empty())
    return;
  SmallVector<Type> types;
  SmallVector<Value> addrs;
  for (unsigned stream : streamIds) {
    Type elem = memoryType(streams[stream].storage);
    types.push_back(lanesOf(elem));
    addrs.push_back(tile.isFull()
                        ? (staging.lookup(stream) ? Value()
                                                  : threadPtr(tile, stream))
                        : gep(streamPtr(tile.run, stream), elem, tile.base));
  }
  if (tile.isFull()) {
    for (auto [i, stream] : llvm::enumerate(streamIds)) {
      if (const StagedStream *staged = staging.lookup(stream))
        tile.preloaded[stream] = loadStaged(tile, *staged, types[i]);
      else
        tile.preloaded[stream] =
            load(types[i], addrs[i],
                 vectorAlignment(getElementTypeOrSelf(types[i]), lanes));
    }
    return;
  }
  auto ifOp =
      scf::IfOp::create(b, loc, types, tile.full, /*withElseRegion=*/true);
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
          b, loc, types[i], addrs[i], tile.laneMask, zero,
          b.getI32IntegerAttr(vectorAlignment(
              getElementTypeOrSelf(types[i]), lanes))));
    }
    scf::YieldOp::create(b, loc, masked);
  }
  for (auto [i, stream] : llvm::enumerate(streamIds))
    tile.preloaded[stream] = ifOp.getResult(i);
}

/// Where a partial tile's thread accesses `stream`: its lanes' first
/// element, or for packed codes its first byte.
static Value partialIndex(OpBuilder &b, Location loc, const StreamInfo &info,
                          Value base) {
  if (!info.packed)
    return base;
  return arith::DivUIOp::create(
      b, loc, base, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(2)));
}

void KernelEmitter::flushStores(TileContext &tile) {
  if (tile.pendingStores.empty())
    return;
  SmallVector<Value> addrs;
  for (auto &[stream, value] : tile.pendingStores)
    addrs.push_back(
        tile.isFull()
            ? threadPtr(tile, stream)
            : gep(streamPtr(tile.run, stream),
                  memoryType(streams[stream].storage),
                  partialIndex(b, loc, streams[stream], tile.base)));
  // A packed stream's thread stores lanes / 2 bytes.
  auto alignOf = [&](unsigned stream) {
    return vectorAlignment(memoryType(streams[stream].storage),
                           streams[stream].packed ? lanes / 2 : lanes);
  };
  auto storeAll = [&] {
    for (auto [i, entry] : llvm::enumerate(tile.pendingStores))
      LLVM::StoreOp::create(b, loc, entry.second, addrs[i],
                            alignOf(entry.first));
  };
  if (tile.isFull()) {
    storeAll();
    tile.pendingStores.clear();
    return;
  }
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, tile.full,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  storeAll();
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  for (auto [i, entry] : llvm::enumerate(tile.pendingStores)) {
    Value mask = streams[entry.first].packed
                     ? packedByteMask(b, loc, tile.laneMask)
                     : tile.laneMask;
    LLVM::MaskedStoreOp::create(b, loc, entry.second, addrs[i], mask,
                                b.getI32IntegerAttr(alignOf(entry.first)));
  }
  tile.pendingStores.clear();
}

Value KernelEmitter::loadPackedBytes(TileContext &tile, unsigned stream) {
  Type i8 = b.getI8Type();
  auto type = VectorType::get({lanes / 2}, i8);
  unsigned align = vectorAlignment(i8, lanes / 2);
  if (tile.isFull()) {
    if (const StagedStream *staged = staging.lookup(stream))
      return loadStaged(tile, *staged, type);
    return load(type, threadPtr(tile, stream), align);
  }
  Value addr = gep(streamPtr(tile.run, stream), i8,
                   partialIndex(b, loc, streams[stream], tile.base));
  return loadLanesGuarded(b, loc, type, addr, tile.full,
                          packedByteMask(b, loc, tile.laneMask), align);
}

Value KernelEmitter::globalIndex(const TileContext &tile) {
  Value t = tile.index;
  if (!t.getType().isInteger(64))
    t = arith::ExtUIOp::create(b, loc, i64(), t);
  return arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, t, constI64(this->tile)),
      threadBase(tile.kernel));
}

Value KernelEmitter::loadElements(TileContext &tile, unsigned stream) {
  if (Value v = tile.preloaded.lookup(stream))
    return v;
  Type elem = memoryType(streams[stream].storage);
  VectorType vecType = lanesOf(elem);
  unsigned align = vectorAlignment(elem, lanes);
  if (tile.isFull())
    return load(vecType, threadPtr(tile, stream), align);
  Value addr = gep(streamPtr(tile.run, stream), elem, tile.base);
  return loadLanesGuarded(b, loc, vecType, addr, tile.full, tile.laneMask,
                          align);
}

void KernelEmitter::storeElements(TileContext &tile, unsigned stream,
                                  Value value) {
  tile.pendingStores.push_back({stream, value});
}

Value KernelEmitter::loadPerGroup(const TileContext &tile, unsigned stream,
                                  int64_t groupSize) {
  if (Value v = tile.preloaded.lookup(stream))
    return widenToF32(math, v);
  Type elem = memoryType(streams[stream].storage);
  if (const StagedStream *staged = staging.lookup(stream);
      staged && tile.isFull())
    return widenToF32(math, loadStaged(tile, *staged, elem));
  if (tile.isFull())
    return widenToF32(math, load(elem, threadPtr(tile, stream),
                                 elem.getIntOrFloatBitWidth() / 8));
  // A thread past the end reads group 0 (which exists: a tile's tensor is not
  // empty) so that it can still take part in the group's shuffles.
  Value group = arith::DivUIOp::create(b, loc, tile.base, constI64(groupSize));
  Value safe =
      arith::SelectOp::create(b, loc, tile.active, group, constI64(0));
  Value scalar = load(elem, gep(streamPtr(tile.run, stream), elem, safe),
                      elem.getIntOrFloatBitWidth() / 8);
  return widenToF32(math, scalar);
}

Value KernelEmitter::leadsGroup(const TileContext &tile, int64_t groupSize) {
  // A tile holds whole groups: in a full one the thread's place in the tile
  // says whether it leads its group.
  Value rem = arith::RemUIOp::create(
      b, loc, tile.isFull() ? threadBase(tile.kernel) : tile.base,
      constI64(groupSize));
  return arith::AndIOp::create(
      b, loc, tile.active,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem,
                            constI64(0)));
}

void KernelEmitter::storePerGroup(const TileContext &tile, unsigned stream,
                                  int64_t groupSize, Value value,
                                  llvm::function_ref<void()> inLeader) {
  Type elem = memoryType(streams[stream].storage);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{},
                                leadsGroup(tile, groupSize),
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value addr =
      tile.isFull()
          ? threadPtr(tile, stream)
          : gep(streamPtr(tile.run, stream), elem,
                arith::DivUIOp::create(b, loc, tile.base, constI64(groupSize)));
  LLVM::StoreOp::create(b, loc, value, addr, elem.getIntOrFloatBitWidth() / 8);
  if (inLeader)
    inLeader();
}

void KernelEmitter::countSaturatedGroups(
    const TileContext &tile, int64_t groupSize,
    ArrayRef<std::pair<Attribute, Value>> rawAbsmaxes) {
  if (!tile.kernel.numericsCounters || rawAbsmaxes.empty())
    return;
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{},
                                leadsGroup(tile, groupSize),
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  for (auto [scheme, rawAbsmax] : rawAbsmaxes)
    countSaturation(math, scheme, rawAbsmax, tile.kernel.numericsCounters);
}

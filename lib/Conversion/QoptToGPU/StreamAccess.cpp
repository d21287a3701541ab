//===- StreamAccess.cpp - Stream addresses, loads and stores --------------===//
//
// Where each stream of a tile lies (the run's descriptor, thread pointers)
// and its element and per-group loads and stores: one vector access per
// thread, masked in a partial tile, staged streams read from shared memory.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

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

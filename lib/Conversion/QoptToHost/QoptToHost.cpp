//===- QoptToHost.cpp - qopt.optimizer to a multi-tensor host function ----===//
//
// Emits one llvm.func @<name>_host per qopt.optimizer with the runtime's
// qopt_host_kernel_fn signature (docs/abi.md): the GPU kernel's descriptors,
// tile map and uniforms, the codebook tables as one array, and a tile range.
// Each tile runs in two phases on vectors of f32 lanes. Phase 1 computes the
// update chunk by chunk (a masked last chunk), stores the parameter and plain
// states, and keeps the new values of each group or codebook state in a
// tile-sized stack buffer. Phase 2 reduces each group's or block's absmax
// from the buffer, then quantizes and stores codes and scale (and counts a
// saturated one). Where the update reads per-tensor reductions
// (qopt.reduce), the first tile of each tensor in the range is preceded by
// their computation over the whole tensor: the operands' slice of the update
// (lowerReductionOperands) chunk by chunk into float64 terms, a pairwise tree
// per 2048-element chunk, the chunks folded in order (docs/numerics.md, §7).
// A chunk's update is lowerUpdate's walk
// (qopt/Codegen/UpdateLowering.h) over ChunkUpdate; the per-element
// arithmetic is StreamCodecs' (the GPU kernel's), in the same order.
//
//===----------------------------------------------------------------------===//

#include "HostKernelEmitter.h"

#include "qopt/Conversion/Passes.h"

#include <cmath>

namespace mlir::qopt {
#define GEN_PASS_DEF_CONVERTQOPTTOHOST
#include "qopt/Conversion/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;
using namespace mlir::qopt::host;


Value HostKernelEmitter::toMemory(Value value, Type storage) {
  Type mem = memoryType(storage);
  if (mem == storage || isa<IntegerType>(storage))
    return value;
  Type type = isa<VectorType>(value.getType()) ? Type(lanesOf(mem)) : mem;
  return arith::BitcastOp::create(b, loc, type, value);
}

Value HostKernelEmitter::fromMemory(Value value, Type storage) {
  Type mem = memoryType(storage);
  if (mem == storage || isa<IntegerType>(storage))
    return value;
  Type type =
      isa<VectorType>(value.getType()) ? Type(lanesOf(storage)) : storage;
  return arith::BitcastOp::create(b, loc, type, value);
}

Value HostKernelEmitter::gather(Value table, Value indices) {
  Value ptrs = LLVM::GEPOp::create(b, loc, lanesOf(ptr()), f32(), table,
                                   ValueRange{indices});
  Value all = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(lanesOf(b.getI1Type()), true));
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(lanesOf(f32())));
  return LLVM::masked_gather::create(b, loc, lanesOf(f32()), ptrs, all,
                                     ValueRange{zero}, b.getI32IntegerAttr(4));
}

Value HostKernelEmitter::reduceLanesMax(Value value) {
  // Halve the vector while it is even; maximum is order-independent (the
  // NaN it gives is replaced by the caller).
  int64_t n = lanes;
  while (n > 1 && n % 2 == 0) {
    n /= 2;
    auto half = [&](int64_t offset) {
      return vector::ExtractStridedSliceOp::create(
          b, loc, value, ArrayRef<int64_t>{offset}, ArrayRef<int64_t>{n},
          ArrayRef<int64_t>{1});
    };
    value = math.maximum(half(0), half(n));
  }
  Value acc = vector::ExtractOp::create(b, loc, value, 0);
  for (int64_t i = 1; i < n; ++i)
    acc = math.maximum(acc, vector::ExtractOp::create(b, loc, value, i));
  return acc;
}

ChunkContext HostKernelEmitter::makeChunk(const FunctionContext &function,
                                          const TileContext &tile,
                                          Value offset) {
  ChunkContext chunk{function, tile, offset, Value(), Value(), Value()};
  chunk.base = arith::AddIOp::create(b, loc, tile.start, offset);
  Value end = arith::AddIOp::create(b, loc, offset, constI64(lanes));
  chunk.full =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end, tile.count);
  chunk.laneMask = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::slt,
      arith::AddIOp::create(b, loc, broadcast(offset), function.iota),
      broadcast(tile.count));
  return chunk;
}

Value HostKernelEmitter::loadElements(const ChunkContext &chunk,
                                      unsigned stream) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  VectorType vecType = lanesOf(elem);
  unsigned align = vectorAlign(elem);
  Value addr = gep(chunk.tile.streamPtrs[stream], elem, chunk.base);
  return fromMemory(loadLanesGuarded(b, loc, vecType, addr, chunk.full,
                                     chunk.laneMask, align),
                    storage);
}

void HostKernelEmitter::storeElements(const ChunkContext &chunk,
                                      unsigned stream, Value value) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  unsigned align = vectorAlign(elem);
  value = toMemory(value, storage);
  Value addr = gep(chunk.tile.streamPtrs[stream], elem, chunk.base);
  storeLanesGuarded(b, loc, value, addr, chunk.full, chunk.laneMask, align);
}

Value HostKernelEmitter::loadPackedBytes(const ChunkContext &chunk,
                                         unsigned stream) {
  Type i8 = b.getI8Type();
  auto type = VectorType::get({lanes / 2}, i8);
  Value byte = arith::DivUIOp::create(b, loc, chunk.base, constI64(2));
  Value addr = gep(chunk.tile.streamPtrs[stream], i8, byte);
  int64_t bytes = lanes / 2;
  return loadLanesGuarded(b, loc, type, addr, chunk.full,
                          packedByteMask(b, loc, chunk.laneMask),
                          std::min<int64_t>(16, bytes & -bytes));
}

void HostKernelEmitter::storePackedBytes(const ChunkContext &chunk,
                                         unsigned stream, Value bytes) {
  Type i8 = b.getI8Type();
  Value byte = arith::DivUIOp::create(b, loc, chunk.base, constI64(2));
  Value addr = gep(chunk.tile.streamPtrs[stream], i8, byte);
  int64_t count = lanes / 2;
  storeLanesGuarded(b, loc, bytes, addr, chunk.full,
                    packedByteMask(b, loc, chunk.laneMask),
                    std::min<int64_t>(16, count & -count));
}

Value HostKernelEmitter::loadPerGroup(const ChunkContext &chunk,
                                      unsigned stream, int64_t size) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  // A chunk lies in one group: lanes divides every group size.
  Value group = arith::DivUIOp::create(b, loc, chunk.base, constI64(size));
  Value scalar = load(elem, gep(chunk.tile.streamPtrs[stream], elem, group),
                      elem.getIntOrFloatBitWidth() / 8);
  return widenToF32(math, fromMemory(scalar, storage));
}

void HostKernelEmitter::storePerGroup(const TileContext &tile, unsigned stream,
                                      int64_t size, Value first, Value value) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  Value group = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, tile.start, first), constI64(size));
  LLVM::StoreOp::create(b, loc, toMemory(value, storage),
                        gep(tile.streamPtrs[stream], elem, group),
                        elem.getIntOrFloatBitWidth() / 8);
}

Value HostKernelEmitter::emitLoadState(const ChunkContext &chunk, int index) {
  Attribute scheme = states[index].getScheme();
  if (isa<PlainSchemeAttr>(scheme))
    return widenToF32(
        math, loadElements(chunk, streamIndex(StreamRole::State, index)));
  unsigned codesStream = streamIndex(StreamRole::StateCodes, index);
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    // A table's nibble is an index; other 4-bit codes are two's complement
    // where the storage is signed.
    Value codes =
        isPacked(group)
            ? unpackNibbles(math, loadPackedBytes(chunk, codesStream),
                            group.getStorage().isSigned() &&
                                !isCodeTable(group.getCompanding()))
            : loadElements(chunk, codesStream);
    Value scale = loadPerGroup(chunk,
                               streamIndex(StreamRole::StateScales, index),
                               group.getGroupSize());
    return dequantizeGroup(math, group, codes, broadcast(scale));
  }
  Value codes = loadElements(chunk, codesStream);
  auto codebook = cast<CodebookSchemeAttr>(scheme);
  Value absmax = loadPerGroup(chunk,
                              streamIndex(StreamRole::StateAbsmax, index),
                              codebook.getBlock());
  // x = qmap[code] * absmax (seed 000).
  Value idx = arith::ExtUIOp::create(b, loc, lanesOf(i32()), codes);
  return math.mul(gather(chunk.function.qmaps.lookup(index), idx),
                  broadcast(absmax));
}

void HostKernelEmitter::emitStoreState(const ChunkContext &chunk, int index,
                                       Value value) {
  if (auto plain = dyn_cast<PlainSchemeAttr>(states[index].getScheme())) {
    storeElements(chunk, streamIndex(StreamRole::State, index),
                  narrowFromF32(math, value, plain.getStorage()));
    return;
  }
  // Requantized in phase 2, once the whole group or block is known.
  LLVM::StoreOp::create(
      b, loc, value,
      gep(chunk.function.buffers.lookup(index), f32(), chunk.offset),
      vectorAlign(f32()));
}

LogicalResult HostKernelEmitter::emitChunk(const ChunkContext &chunk) {
  ChunkUpdate target(*this, chunk);
  if (failed(lowerUpdate(target, lanes)))
    return failure();
  loc = optimizer.getLoc();
  return success();
}

void HostKernelEmitter::emitRequantize(const FunctionContext &function,
                                       const TileContext &tile, int index) {
  StateOp state = states[index];
  int64_t size = getReductionSize(state);
  auto group = dyn_cast<GroupSchemeAttr>(state.getScheme());
  Value buffer = function.buffers.lookup(index);
  Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(lanesOf(f32())));
  auto loadBuffered = [&](Value offset) {
    return load(lanesOf(f32()), gep(buffer, f32(), offset), vectorAlign(f32()));
  };

  auto groups =
      scf::ForOp::create(b, loc, constI64(0), tile.count, constI64(size));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(groups.getBody()->getTerminator());
  Value first = groups.getInductionVar();
  Value last = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, first, constI64(size)), tile.count);

  // The absmax from +0 over the valid elements, as the reference's; a NaN
  // anywhere gives the reference's NaN (0x7fc00000) whatever its payload.
  auto reduce = scf::ForOp::create(b, loc, first, last, constI64(lanes),
                                   ValueRange{zeros});
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(reduce.getBody());
    ChunkContext chunk = makeChunk(function, tile, reduce.getInductionVar());
    Value x = loadBuffered(chunk.offset);
    Value magnitude = group ? groupMagnitude(math, group, x) : math.abs(x);
    magnitude = math.select(chunk.laneMask, magnitude, zeros);
    scf::YieldOp::create(
        b, loc, math.maximum(reduce.getRegionIterArgs()[0], magnitude));
  }
  Value absmax = reduceLanesMax(reduce.getResult(0));
  Value qnan = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(f32(), llvm::APFloat::getQNaN(
                                        llvm::APFloat::IEEEsingle())));
  absmax = math.select(math.cmp(arith::CmpFPredicate::UNO, absmax, absmax),
                       qnan, absmax);

  countSaturation(math, state.getScheme(), absmax,
                  function.numericsCounters);
  Value stored, absmaxLanes, storedLanes, divisorLanes;
  if (group) {
    absmax = saturateGroupAbsmax(math, group, absmax);
    stored = groupStoredScale(math, group, absmax);
    absmaxLanes = broadcast(absmax);
    storedLanes = broadcast(widenToF32(math, stored));
  } else {
    // Seed 000: c = x / max(absmax, 1e-30), the max keeping a NaN.
    absmax = saturateCodebookAbsmax(
        math, cast<CodebookSchemeAttr>(state.getScheme()), absmax);
    stored = absmax;
    divisorLanes =
        broadcast(math.maxKeepNaN(absmax, math.constF(absmax, 1e-30)));
  }

  auto quantize = scf::ForOp::create(b, loc, first, last, constI64(lanes));
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPoint(quantize.getBody()->getTerminator());
    ChunkContext chunk = makeChunk(function, tile, quantize.getInductionVar());
    Value x = loadBuffered(chunk.offset);
    Value codes;
    if (group) {
      codes = quantizeGroup(math, group, x, absmaxLanes, storedLanes);
    } else {
      // The code is the number of midpoints strictly below c
      // (torch.bucketize, right=False), by an 8-step search; !(mid >= c)
      // gives a NaN c the last code, as torch.bucketize does.
      Value c = math.div(x, divisorLanes);
      Type i32Lanes = lanesOf(i32());
      Value pos = math.constI(i32Lanes, 0);
      for (int64_t step = 128; step >= 1; step /= 2) {
        Value candidate =
            arith::AddIOp::create(b, loc, pos, math.constI(i32Lanes, step));
        Value midIndex = arith::SubIOp::create(b, loc, candidate,
                                               math.constI(i32Lanes, 1));
        Value mid = gather(function.mids.lookup(index), midIndex);
        Value below = math.cmp(arith::CmpFPredicate::ULT, mid, c);
        pos = arith::SelectOp::create(b, loc, below, candidate, pos);
      }
      codes = arith::TruncIOp::create(b, loc, lanesOf(b.getI8Type()), pos);
    }
    unsigned codesStream = streamIndex(StreamRole::StateCodes, index);
    if (group && isPacked(group))
      storePackedBytes(chunk, codesStream,
                       packNibbles(math, codes, chunk.laneMask));
    else
      storeElements(chunk, codesStream, codes);
  }
  storePerGroup(tile,
                streamIndex(group ? StreamRole::StateScales
                                  : StreamRole::StateAbsmax,
                            index),
                size, first, stored);
}

SmallVector<Type> HostKernelEmitter::tileFunctionParams() {
  return {ptr(), ptr(), i64(), ptr(), ptr(), i64(), i64()};
}

Block *HostKernelEmitter::createFunction(ModuleOp module, StringRef suffix,
                                         ArrayRef<Type> params) {
  b.setInsertionPointToEnd(module.getBody());
  auto fnType = LLVM::LLVMFunctionType::get(
      LLVM::LLVMVoidType::get(b.getContext()), params);
  auto func = LLVM::LLVMFuncOp::create(
      b, loc, (optimizer.getSymName() + suffix).str(), fnType);
  func.setPassthroughAttr(b.getArrayAttr({b.getStringAttr("nounwind")}));
  Block *entry = func.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  return entry;
}

LogicalResult HostKernelEmitter::emitEntry(FunctionContext &function,
                                           Block *entry, Value &tileEnd) {
  Value uniformsPtr = entry->getArgument(3), tables = entry->getArgument(4);
  Value tileBegin = entry->getArgument(5);
  // The host-evaluated uniforms, then one slot per whole-step reduction
  // (the combine function wrote them).
  unsigned numUniforms = getNumHostUniforms(optimizer) +
                         getReductions(optimizer, /*global=*/true).size();
  // Stack buffers first, in the entry block: one tile of new values per
  // quantized state, the midpoints of each codebook's table.
  for (auto [i, state] : llvm::enumerate(states)) {
    if (!getReductionSize(state))
      continue;
    function.buffers[i] = LLVM::AllocaOp::create(
        b, loc, ptr(), f32(), constI64(tile), /*alignment=*/64);
    if (isa<CodebookSchemeAttr>(state.getScheme()))
      function.mids[i] = LLVM::AllocaOp::create(
          b, loc, ptr(), f32(), constI64(255), /*alignment=*/16);
  }
  size_t numReductions = getReductions(optimizer).size();
  for (size_t i = 0; i < numReductions; ++i)
    function.reductionTerms.push_back(LLVM::AllocaOp::create(
        b, loc, ptr(), b.getF64Type(), constI64(kReductionChunk),
        /*alignment=*/64));
  for (size_t i = 0; i < numReductions; ++i)
    function.reductionStacks.push_back(LLVM::AllocaOp::create(
        b, loc, ptr(), b.getF64Type(), constI64(kReductionStackDepth),
        /*alignment=*/16));
  if (size_t perTensor = getReductions(optimizer, /*global=*/false).size())
    function.reductionValues = LLVM::AllocaOp::create(
        b, loc, ptr(), f32(), constI64(perTensor), /*alignment=*/16);
  for (unsigned i = 0; i < numUniforms; ++i)
    function.uniformValues.push_back(
        load(f32(), gep(uniformsPtr, f32(), constI64(i)), 4));
  // A skipped step walks no tile.
  FailureOr<Value> skip = getSkipFlag(optimizer, function.uniformValues, math);
  if (failed(skip))
    return failure();
  if (*skip)
    tileEnd = arith::SelectOp::create(b, loc, *skip, tileBegin, tileEnd);
  unsigned table = 0;
  for (auto [i, state] : llvm::enumerate(states)) {
    if (!isa<CodebookSchemeAttr>(state.getScheme()))
      continue;
    Value qmap = load(ptr(), gep(tables, ptr(), constI64(table++)), 8);
    function.qmaps[i] = qmap;
    // mid[k] = (qmap[k] + qmap[k+1]) * 0.5, as seed 000 computes it.
    auto fill = scf::ForOp::create(b, loc, constI64(0), constI64(255),
                                   constI64(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(fill.getBody()->getTerminator());
    Value k = fill.getInductionVar();
    Value next = arith::AddIOp::create(b, loc, k, constI64(1));
    Value lo = load(f32(), gep(qmap, f32(), k), 4);
    Value hi = load(f32(), gep(qmap, f32(), next), 4);
    LLVM::StoreOp::create(
        b, loc, math.mul(math.add(lo, hi), math.constF(lo, 0.5)),
        gep(function.mids[i], f32(), k), 4);
  }
  SmallVector<int64_t> indices;
  for (int64_t i = 0; i < lanes; ++i)
    indices.push_back(i);
  function.iota = arith::ConstantOp::create(b, loc, b.getI64VectorAttr(indices));
  return success();
}

TileContext HostKernelEmitter::emitTileStart(Value descs, Value tileMap,
                                             Value t) {
  TileContext tileContext;
  tileContext.index = t;
  Value tensor = arith::ExtSIOp::create(
      b, loc, i64(), load(i32(), gep(tileMap, i32(), t), 4));
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(streams.size());
  Value desc = gep(descs, b.getI8Type(),
                   arith::MulIOp::create(b, loc, tensor, constI64(descBytes)));
  Value numel = load(i64(), desc, 8);
  Value firstTile = load(i64(), gep(desc, b.getI8Type(), constI64(8)), 8);
  tileContext.tensor = tensor;
  tileContext.numel = numel;
  tileContext.firstTile = firstTile;
  tileContext.start = arith::MulIOp::create(
      b, loc, arith::SubIOp::create(b, loc, t, firstTile), constI64(tile));
  tileContext.count = arith::MinSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, numel, tileContext.start),
      constI64(tile));
  for (unsigned i = 0; i < streams.size(); ++i)
    tileContext.streamPtrs.push_back(load(
        ptr(), gep(desc, b.getI8Type(), constI64(16 + 8 * int64_t(i))), 8));
  return tileContext;
}

LogicalResult HostKernelEmitter::emit(ModuleOp module) {
  // qopt_host_kernel_fn: descriptors, tile map, tile count, uniforms, tables,
  // tile_begin, tile_end; where a state saturates, the numerics counters
  // (qopt_host_counted_kernel_fn).
  SmallVector<Type> params = tileFunctionParams();
  if (countsNumerics(optimizer))
    params.push_back(ptr());
  Block *entry = createFunction(module, "_host", params);
  Value descs = entry->getArgument(0), tileMap = entry->getArgument(1);
  Value tileBegin = entry->getArgument(5), tileEnd = entry->getArgument(6);
  FunctionContext function;
  if (countsNumerics(optimizer))
    function.numericsCounters = entry->getArgument(7);
  if (failed(emitEntry(function, entry, tileEnd)))
    return failure();

  // for (t = tile_begin; t < tile_end; ++t)
  auto tiles = scf::ForOp::create(b, loc, tileBegin, tileEnd, constI64(1));
  b.setInsertionPoint(tiles.getBody()->getTerminator());
  TileContext tile = emitTileStart(descs, tileMap, tiles.getInductionVar());
  if (function.reductionValues) {
    // A tensor's reductions, once, at the first of its tiles in the range.
    Value t = tiles.getInductionVar();
    Value first = arith::OrIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, t, tileBegin),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, t,
                              tile.firstTile));
    auto ifFirst = scf::IfOp::create(b, loc, TypeRange{}, first, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    if (failed(emitTensorReductions(function, tile, /*global=*/false)))
      return failure();
  }

  // Phase 1: the update, `lanes` elements at a time.
  auto chunks =
      scf::ForOp::create(b, loc, constI64(0), tile.count, constI64(lanes));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(chunks.getBody()->getTerminator());
    if (failed(emitChunk(makeChunk(function, tile, chunks.getInductionVar()))))
      return failure();
  }
  // Phase 2: each group or codebook state, group by group.
  for (auto [i, state] : llvm::enumerate(states))
    if (getReductionSize(state))
      emitRequantize(function, tile, i);

  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  if (getReductions(optimizer, /*global=*/true).empty())
    return success();
  if (failed(emitPartials(module)))
    return failure();
  emitCombine(module);
  return success();
}

LogicalResult HostKernelEmitter::emitPartials(ModuleOp module) {
  // void <kernel>_partials(descriptors, tile map, tile count, uniforms,
  // tables, tile_begin, tile_end, double *step_partials): the whole-step
  // reductions' accumulations of each tensor whose first tile is in the
  // range, at row k (its index in the launch) * S + s. Writes nothing else.
  SmallVector<Type> params = tileFunctionParams();
  params.push_back(ptr());
  Block *entry = createFunction(module, "_partials", params);
  Value descs = entry->getArgument(0), tileMap = entry->getArgument(1);
  Value tileBegin = entry->getArgument(5), tileEnd = entry->getArgument(6);
  Value stepPartials = entry->getArgument(7);
  FunctionContext function;
  if (failed(emitEntry(function, entry, tileEnd)))
    return failure();
  auto tiles = scf::ForOp::create(b, loc, tileBegin, tileEnd, constI64(1));
  b.setInsertionPoint(tiles.getBody()->getTerminator());
  TileContext tile = emitTileStart(descs, tileMap, tiles.getInductionVar());
  auto ifFirst = scf::IfOp::create(
      b, loc, TypeRange{},
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            tiles.getInductionVar(), tile.firstTile),
      false);
  b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
  if (failed(emitTensorReductions(function, tile, /*global=*/true,
                                  stepPartials)))
    return failure();
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return success();
}

namespace {
struct ConvertQoptToHostPass
    : public qopt::impl::ConvertQoptToHostBase<ConvertQoptToHostPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<OptimizerOp> optimizers(module.getOps<OptimizerOp>());
    for (OptimizerOp optimizer : optimizers) {
      // The GPU kernel's tile (the manifest's launch), and chunks that lie
      // in one group.
      KernelPlanAttr plan = getKernelPlan(optimizer);
      if (!plan) {
        optimizer.emitOpError("needs a launch plan (qopt-plan-kernel "
                              "target=host) before convert-qopt-to-host");
        return signalPassFailure();
      }
      int64_t lanes = plan.getLanes(), tile = plan.getTile();
      OpBuilder b(module.getContext());
      HostKernelEmitter emitter(optimizer, b, mode == ArithMode::Fast, lanes, tile);
      if (failed(emitter.emit(module)))
        return signalPassFailure();
      optimizer.erase();
    }
  }
};
} // namespace

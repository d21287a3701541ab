//===- QoptToHost.cpp - qopt.optimizer to a multi-tensor host function ----===//
//
// Emits one llvm.func @<name>_host per qopt.optimizer with the runtime's
// qopt_host_kernel_fn signature (docs/abi.md): the GPU kernel's descriptors,
// tile map and uniforms, the codebook tables as one array, and a tile range.
// Each tile runs in two phases on vectors of f32 lanes. Phase 1 computes the
// update chunk by chunk (a masked last chunk), stores the parameter and plain
// states, and keeps the new values of each group or codebook state in a
// tile-sized stack buffer. Phase 2 reduces each group's or block's absmax
// from the buffer, then quantizes and stores codes and scale. The per-element
// arithmetic is StreamCodecs' (the GPU kernel's), in the same order.
//
//===----------------------------------------------------------------------===//

#include "qopt/Codegen/StreamCodecs.h"

#include "qopt/Conversion/Passes.h"
#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_CONVERTQOPTTOHOST
#include "qopt/Conversion/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {

/// Builds the body of one host function.
class HostKernelEmitter {
public:
  HostKernelEmitter(OptimizerOp optimizer, OpBuilder &b, bool fast,
                    int64_t lanes, int64_t tile)
      : optimizer(optimizer), b(b), loc(optimizer.getLoc()),
        math(b, loc, fast, LaneMath::Target::Host), lanes(lanes), tile(tile) {}

  LogicalResult emit(ModuleOp module);

private:
  // Types.
  Type f32() { return b.getF32Type(); }
  Type i32() { return b.getI32Type(); }
  Type i64() { return b.getI64Type(); }
  Type ptr() { return LLVM::LLVMPointerType::get(b.getContext()); }
  VectorType lanesOf(Type elem) { return VectorType::get({lanes}, elem); }
  /// In memory, 16-bit floats are i16 (bitcast around every access) so that
  /// no bf16/f16 value reaches the LLVM backend; codes are signless.
  Type memoryType(Type storage) {
    if (storage.isBF16() || storage.isF16())
      return b.getI16Type();
    if (auto intType = dyn_cast<IntegerType>(storage))
      return b.getIntegerType(intType.getWidth());
    return storage;
  }
  /// The alignment a vector of `lanes` elements at a multiple of `lanes`
  /// elements from a 16-byte aligned stream has.
  unsigned vectorAlign(Type elem) {
    int64_t bytes = lanes * (elem.getIntOrFloatBitWidth() / 8);
    return std::min<int64_t>(16, bytes & -bytes);
  }

  // Scalars and memory.
  Value constI64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value gep(Value base, Type elem, Value index) {
    return LLVM::GEPOp::create(b, loc, ptr(), elem, base, ValueRange{index});
  }
  Value load(Type type, Value addr, unsigned align) {
    return LLVM::LoadOp::create(b, loc, type, addr, align);
  }
  Value broadcast(Value scalar) {
    return vector::BroadcastOp::create(b, loc, lanesOf(scalar.getType()),
                                       scalar);
  }
  Value toMemory(Value value, Type storage);
  Value fromMemory(Value value, Type storage);
  Value gather(Value table, Value indices);
  Value reduceLanesMax(Value lanesValue);
  unsigned streamIndex(StreamRole role, int state = -1);

  // The current chunk: `lanes` elements from `off` in the tile.
  void setChunk(Value offset);
  Value loadElements(unsigned stream);
  void storeElements(unsigned stream, Value value);
  Value loadPerGroup(unsigned stream, int64_t size);
  void storePerGroup(unsigned stream, int64_t size, Value first, Value value);

  // Phase 1: the update of one chunk.
  LogicalResult emitChunk();
  Value emitLoadState(int index);
  void emitStoreState(int index, Value value);
  void emitStoreParam(Value value);
  FailureOr<Value> emitArith(Operation *op, IRMapping &mapping);

  // Phase 2: requantize one state over the tile.
  void emitRequantize(int index);

  OptimizerOp optimizer;
  OpBuilder &b;
  Location loc;
  LaneMath math;
  int64_t lanes, tile;
  SmallVector<StreamInfo> streams;
  SmallVector<StateOp> states;

  // Function-wide values.
  SmallVector<Value> uniformValues;          // f32 scalars
  llvm::DenseMap<int, Value> buffers;        // per quantized state
  llvm::DenseMap<int, Value> qmaps, mids;    // per codebook state
  Value iota;                                // vector<lanes x i64>

  // Per-tile values.
  Value tileStart, count;
  SmallVector<Value> streamPtrs;

  // Per-chunk values.
  Value off, base, full, laneMask;
};

} // namespace

unsigned HostKernelEmitter::streamIndex(StreamRole role, int state) {
  for (auto [i, s] : llvm::enumerate(streams))
    if (s.role == role && (state < 0 || s.stateIndex == state))
      return i;
  llvm_unreachable("stream not in the ABI");
}

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

void HostKernelEmitter::setChunk(Value offset) {
  off = offset;
  base = arith::AddIOp::create(b, loc, tileStart, off);
  Value end = arith::AddIOp::create(b, loc, off, constI64(lanes));
  full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end, count);
  laneMask = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::slt,
      arith::AddIOp::create(b, loc, broadcast(off), iota), broadcast(count));
}

Value HostKernelEmitter::loadElements(unsigned stream) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  VectorType vecType = lanesOf(elem);
  unsigned align = vectorAlign(elem);
  Value addr = gep(streamPtrs[stream], elem, base);
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
  return fromMemory(ifOp.getResult(0), storage);
}

void HostKernelEmitter::storeElements(unsigned stream, Value value) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  unsigned align = vectorAlign(elem);
  value = toMemory(value, storage);
  Value addr = gep(streamPtrs[stream], elem, base);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, full,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  LLVM::StoreOp::create(b, loc, value, addr, align);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  LLVM::MaskedStoreOp::create(b, loc, value, addr, laneMask,
                              b.getI32IntegerAttr(align));
}

Value HostKernelEmitter::loadPerGroup(unsigned stream, int64_t size) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  // A chunk lies in one group: lanes divides every group size.
  Value group = arith::DivUIOp::create(b, loc, base, constI64(size));
  Value scalar = load(elem, gep(streamPtrs[stream], elem, group),
                      elem.getIntOrFloatBitWidth() / 8);
  return widenToF32(math, fromMemory(scalar, storage));
}

void HostKernelEmitter::storePerGroup(unsigned stream, int64_t size,
                                      Value first, Value value) {
  Type storage = streams[stream].storage;
  Type elem = memoryType(storage);
  Value group = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, tileStart, first), constI64(size));
  LLVM::StoreOp::create(b, loc, toMemory(value, storage),
                        gep(streamPtrs[stream], elem, group),
                        elem.getIntOrFloatBitWidth() / 8);
}

Value HostKernelEmitter::emitLoadState(int index) {
  Attribute scheme = states[index].getScheme();
  if (isa<PlainSchemeAttr>(scheme))
    return widenToF32(math,
                      loadElements(streamIndex(StreamRole::State, index)));
  Value codes = loadElements(streamIndex(StreamRole::StateCodes, index));
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    Value scale = loadPerGroup(streamIndex(StreamRole::StateScales, index),
                               group.getGroupSize());
    return dequantizeGroup(math, group, codes, broadcast(scale));
  }
  auto codebook = cast<CodebookSchemeAttr>(scheme);
  Value absmax = loadPerGroup(streamIndex(StreamRole::StateAbsmax, index),
                              codebook.getBlock());
  // x = qmap[code] * absmax (seed 000).
  Value idx = arith::ExtUIOp::create(b, loc, lanesOf(i32()), codes);
  return math.mul(gather(qmaps.lookup(index), idx), broadcast(absmax));
}

void HostKernelEmitter::emitStoreState(int index, Value value) {
  if (auto plain = dyn_cast<PlainSchemeAttr>(states[index].getScheme())) {
    storeElements(streamIndex(StreamRole::State, index),
                  narrowFromF32(math, value, plain.getStorage()));
    return;
  }
  // Requantized in phase 2, once the whole group or block is known.
  LLVM::StoreOp::create(b, loc, value,
                        gep(buffers.lookup(index), f32(), off),
                        vectorAlign(f32()));
}

void HostKernelEmitter::emitStoreParam(Value value) {
  Value x16 = narrowFromF32(math, value, optimizer.getParamType());
  storeElements(streamIndex(StreamRole::Param), x16);
  if (optimizer.getMaster() != MasterFormat::none)
    storeElements(streamIndex(StreamRole::ErrorBits),
                  splitMaster(math, value, x16, optimizer.getMaster()));
}

/// Vectorizes one arith/math operation of the update (as the GPU kernel).
FailureOr<Value> HostKernelEmitter::emitArith(Operation *op, IRMapping &mapping) {
  return vectorizeUpdateOp(math, op, mapping, lanes);
}

LogicalResult HostKernelEmitter::emitChunk() {
  IRMapping mapping;
  SmallVector<std::pair<Operation *, Value>> stores;
  auto stateIndex = [&](FlatSymbolRefAttr ref) -> int {
    auto state = SymbolTable::lookupNearestSymbolFrom<StateOp>(optimizer, ref);
    return llvm::find(states, state) - states.begin();
  };
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    loc = op.getLoc();
    if (auto loadGrad = dyn_cast<LoadGradOp>(op)) {
      Value g =
          widenToF32(math, loadElements(streamIndex(StreamRole::Grad)));
      if (Value inv = loadGrad.getInvScale())
        g = unscaleGrad(math, g, mapping.lookup(inv), optimizer.getGradType());
      mapping.map(op.getResult(0), g);
    } else if (isa<SkipIfOp>(op)) {
      // Tested once per call (emit).
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
      mapping.map(op.getResult(0),
                  emitLoadState(stateIndex(loadState.getStateAttr())));
    } else if (auto uniform = dyn_cast<UniformOp>(op)) {
      uint64_t index = uniform.getIndex();
      if (index >= uniformValues.size())
        return uniform.emitOpError("reads uniform ")
               << index << " but the optimizer yields only "
               << uniformValues.size();
      mapping.map(op.getResult(0), broadcast(uniformValues[index]));
    } else if (isa<StoreStateOp, StoreParamOp>(op)) {
      // Every store follows every load of the element (qopt.update).
      stores.push_back(
          {&op, mapping.lookup(op.getOperand(op.getNumOperands() - 1))});
    } else if (isa<HyperValueOp, StepCountOp>(op)) {
      return op.emitOpError(
          "must be outlined first: run qopt-outline-uniforms");
    } else {
      FailureOr<Value> value = emitArith(&op, mapping);
      if (failed(value))
        return failure();
      mapping.map(op.getResult(0), *value);
    }
  }
  for (auto [op, value] : stores) {
    loc = op->getLoc();
    if (auto store = dyn_cast<StoreStateOp>(op))
      emitStoreState(stateIndex(store.getStateAttr()), value);
    else
      emitStoreParam(value);
  }
  loc = optimizer.getLoc();
  return success();
}

void HostKernelEmitter::emitRequantize(int index) {
  StateOp state = states[index];
  int64_t size = getReductionSize(state);
  auto group = dyn_cast<GroupSchemeAttr>(state.getScheme());
  Value buffer = buffers.lookup(index);
  Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(lanesOf(f32())));
  auto loadBuffered = [&](Value offset) {
    return load(lanesOf(f32()), gep(buffer, f32(), offset), vectorAlign(f32()));
  };

  auto groups = scf::ForOp::create(b, loc, constI64(0), count, constI64(size));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(groups.getBody()->getTerminator());
  Value first = groups.getInductionVar();
  Value last = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, first, constI64(size)), count);

  // The absmax from +0 over the valid elements, as the reference's; a NaN
  // anywhere gives the reference's NaN (0x7fc00000) whatever its payload.
  auto reduce = scf::ForOp::create(b, loc, first, last, constI64(lanes),
                                   ValueRange{zeros});
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(reduce.getBody());
    setChunk(reduce.getInductionVar());
    Value x = loadBuffered(off);
    Value magnitude = group ? groupMagnitude(math, group, x) : math.abs(x);
    magnitude = math.select(laneMask, magnitude, zeros);
    scf::YieldOp::create(
        b, loc, math.maximum(reduce.getRegionIterArgs()[0], magnitude));
  }
  Value absmax = reduceLanesMax(reduce.getResult(0));
  Value qnan = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(f32(), llvm::APFloat::getQNaN(
                                        llvm::APFloat::IEEEsingle())));
  absmax = math.select(math.cmp(arith::CmpFPredicate::UNO, absmax, absmax),
                       qnan, absmax);

  Value stored, absmaxLanes, storedLanes, divisorLanes;
  if (group) {
    stored = groupStoredScale(math, group, absmax);
    absmaxLanes = broadcast(absmax);
    storedLanes = broadcast(widenToF32(math, stored));
  } else {
    // Seed 000: c = x / max(absmax, 1e-30), the max keeping a NaN.
    stored = absmax;
    divisorLanes =
        broadcast(math.maxKeepNaN(absmax, math.constF(absmax, 1e-30)));
  }

  auto quantize = scf::ForOp::create(b, loc, first, last, constI64(lanes));
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPoint(quantize.getBody()->getTerminator());
    setChunk(quantize.getInductionVar());
    Value x = loadBuffered(off);
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
        Value mid = gather(mids.lookup(index), midIndex);
        Value below = math.cmp(arith::CmpFPredicate::ULT, mid, c);
        pos = arith::SelectOp::create(b, loc, below, candidate, pos);
      }
      codes = arith::TruncIOp::create(b, loc, lanesOf(b.getI8Type()), pos);
    }
    storeElements(streamIndex(StreamRole::StateCodes, index), codes);
  }
  storePerGroup(streamIndex(group ? StreamRole::StateScales
                                  : StreamRole::StateAbsmax,
                            index),
                size, first, stored);
}

LogicalResult HostKernelEmitter::emit(ModuleOp module) {
  streams = getStreams(optimizer);
  states = getStates(optimizer);
  unsigned numUniforms = 0;
  if (UniformsOp uniforms = optimizer.getUniforms())
    numUniforms = uniforms.getBody().front().getTerminator()->getNumOperands();

  // qopt_host_kernel_fn: descriptors, tile map, tile count, uniforms, tables,
  // tile_begin, tile_end.
  b.setInsertionPointToEnd(module.getBody());
  auto fnType = LLVM::LLVMFunctionType::get(
      LLVM::LLVMVoidType::get(b.getContext()),
      {ptr(), ptr(), i64(), ptr(), ptr(), i64(), i64()});
  auto func = LLVM::LLVMFuncOp::create(
      b, loc, (optimizer.getSymName() + "_host").str(), fnType);
  func.setPassthroughAttr(b.getArrayAttr({b.getStringAttr("nounwind")}));
  Block *entry = func.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  Value descs = entry->getArgument(0), tileMap = entry->getArgument(1);
  Value uniformsPtr = entry->getArgument(3), tables = entry->getArgument(4);
  Value tileBegin = entry->getArgument(5), tileEnd = entry->getArgument(6);

  // Stack buffers first, in the entry block: one tile of new values per
  // quantized state, the midpoints of each codebook's table.
  for (auto [i, state] : llvm::enumerate(states)) {
    if (!getReductionSize(state))
      continue;
    buffers[i] = LLVM::AllocaOp::create(b, loc, ptr(), f32(), constI64(tile),
                                        /*alignment=*/64);
    if (isa<CodebookSchemeAttr>(state.getScheme()))
      mids[i] = LLVM::AllocaOp::create(b, loc, ptr(), f32(), constI64(255),
                                       /*alignment=*/16);
  }
  for (unsigned i = 0; i < numUniforms; ++i)
    uniformValues.push_back(
        load(f32(), gep(uniformsPtr, f32(), constI64(i)), 4));
  // A skipped step walks no tile.
  FailureOr<Value> skip = getSkipFlag(optimizer, uniformValues, math);
  if (failed(skip))
    return failure();
  if (*skip)
    tileEnd = arith::SelectOp::create(b, loc, *skip, tileBegin, tileEnd);
  unsigned table = 0;
  for (auto [i, state] : llvm::enumerate(states)) {
    if (!isa<CodebookSchemeAttr>(state.getScheme()))
      continue;
    Value qmap = load(ptr(), gep(tables, ptr(), constI64(table++)), 8);
    qmaps[i] = qmap;
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
        gep(mids[i], f32(), k), 4);
  }
  SmallVector<int64_t> indices;
  for (int64_t i = 0; i < lanes; ++i)
    indices.push_back(i);
  iota = arith::ConstantOp::create(b, loc, b.getI64VectorAttr(indices));

  // for (t = tile_begin; t < tile_end; ++t)
  auto tiles = scf::ForOp::create(b, loc, tileBegin, tileEnd, constI64(1));
  b.setInsertionPoint(tiles.getBody()->getTerminator());
  Value t = tiles.getInductionVar();
  Value tensor = arith::ExtSIOp::create(
      b, loc, i64(), load(i32(), gep(tileMap, i32(), t), 4));
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(streams.size());
  Value desc = gep(descs, b.getI8Type(),
                   arith::MulIOp::create(b, loc, tensor, constI64(descBytes)));
  Value numel = load(i64(), desc, 8);
  Value firstTile = load(i64(), gep(desc, b.getI8Type(), constI64(8)), 8);
  tileStart = arith::MulIOp::create(
      b, loc, arith::SubIOp::create(b, loc, t, firstTile), constI64(tile));
  count = arith::MinSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, numel, tileStart), constI64(tile));
  for (unsigned i = 0; i < streams.size(); ++i)
    streamPtrs.push_back(load(
        ptr(), gep(desc, b.getI8Type(), constI64(16 + 8 * int64_t(i))), 8));

  // Phase 1: the update, `lanes` elements at a time.
  auto chunks = scf::ForOp::create(b, loc, constI64(0), count, constI64(lanes));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(chunks.getBody()->getTerminator());
    setChunk(chunks.getInductionVar());
    if (failed(emitChunk()))
      return failure();
  }
  // Phase 2: each group or codebook state, group by group.
  for (auto [i, state] : llvm::enumerate(states))
    if (getReductionSize(state))
      emitRequantize(i);

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

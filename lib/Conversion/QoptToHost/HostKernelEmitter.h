//===- HostKernelEmitter.h - The emitter of a host function (private) -----===//
//
// QoptToHost.cpp emits the host function's entry, tiles and chunks;
// TensorReductions.cpp a tensor's per-tensor reductions before its first
// tile. The contexts below carry the values one tile or chunk reads; the
// emitter keeps only the function's fixed facts and the builder.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_LIB_CONVERSION_QOPTTOHOST_HOSTKERNELEMITTER_H
#define QOPT_LIB_CONVERSION_QOPTTOHOST_HOSTKERNELEMITTER_H

#include "qopt/Codegen/LaneAccess.h"
#include "qopt/Codegen/StreamCodecs.h"
#include "qopt/Codegen/UpdateLowering.h"
#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::qopt::host {

/// The entries of a reduction's stack of subtrees over the chunk partials:
/// after c partials it holds one subtree per bit set in c (< 2^64).
constexpr int64_t kReductionStackDepth = 64;

/// The host function's values that every tile reads, built at its entry.
struct FunctionContext {
  SmallVector<Value> uniformValues;       ///< f32 scalars
  llvm::DenseMap<int, Value> buffers;     ///< per quantized state: a tile of f32
  llvm::DenseMap<int, Value> qmaps, mids; ///< per codebook state
  Value iota;                             ///< vector<lanes x i64>: 0, 1, ...
  Value numericsCounters;                 ///< null where no state saturates
  /// Per reduction: a chunk of f64 terms, and the stack of the tree over the
  /// chunks' partials (kReductionStackDepth f64); the tensor's values (f32).
  SmallVector<Value> reductionTerms, reductionStacks;
  Value reductionValues;
};

/// One tile: its first element in its tensor and its element count (i64),
/// and its tensor's stream pointers.
struct TileContext {
  Value start, count;
  Value index; ///< i64: the tile's index in the launch
  SmallVector<Value> streamPtrs;
  Value numel, firstTile; ///< its tensor's (i64)
  Value tensor;           ///< i64: its tensor's index in the launch
};

/// One chunk of a tile: the `lanes` elements from `offset` (i64) in the
/// tile, from `base` in the tensor; `full` (i1) where all lie inside the
/// tile, else `laneMask` says which do.
struct ChunkContext {
  const FunctionContext &function;
  const TileContext &tile;
  Value offset, base, full, laneMask;
};

/// Builds the body of one host function.
class HostKernelEmitter {
public:
  HostKernelEmitter(OptimizerOp optimizer, OpBuilder &b, bool fast,
                    int64_t lanes, int64_t tile)
      : optimizer(optimizer), b(b), loc(optimizer.getLoc()),
        math(b, loc, fast, LaneMath::Target::Host), lanes(lanes), tile(tile),
        streams(getStreams(optimizer)), states(getStates(optimizer)) {}

  LogicalResult emit(ModuleOp module);

private:
  class ChunkUpdate;

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
  unsigned streamIndex(StreamRole role, int state = -1) {
    return findStream(streams, role, state);
  }

  /// The parameters every function over a tile range starts with
  /// (qopt_host_kernel_fn's): descriptors, tile map, tile count, uniforms,
  /// tables, tile_begin, tile_end.
  SmallVector<Type> tileFunctionParams();
  /// A new exported function `<kernel><suffix>` of `params` returning
  /// nothing; the builder is left at the start of its entry block.
  Block *createFunction(ModuleOp module, StringRef suffix,
                        ArrayRef<Type> params);
  /// The entry of a function over a tile range (tileFunctionParams()
  /// first): the stack buffers, uniforms, skip flag (which moves `tileEnd`
  /// to tile_begin) and codebook midpoints. Fails where the skip flag is
  /// not launch-uniform.
  LogicalResult emitEntry(FunctionContext &function, Block *entry,
                          Value &tileEnd);
  /// Tile `t` (i64) of the tile map: its tensor's descriptor read.
  TileContext emitTileStart(Value descs, Value tileMap, Value t);
  /// The chunk of `lanes` elements from `offset` in `tile`.
  ChunkContext makeChunk(const FunctionContext &function,
                         const TileContext &tile, Value offset);
  Value loadElements(const ChunkContext &chunk, unsigned stream);
  void storeElements(const ChunkContext &chunk, unsigned stream, Value value);
  /// A packed 4-bit code stream's bytes of the chunk (lanes / 2 i8), and
  /// their store, masked as the chunk's lanes are (docs/abi.md).
  Value loadPackedBytes(const ChunkContext &chunk, unsigned stream);
  void storePackedBytes(const ChunkContext &chunk, unsigned stream,
                        Value bytes);
  Value loadPerGroup(const ChunkContext &chunk, unsigned stream, int64_t size);
  void storePerGroup(const TileContext &tile, unsigned stream, int64_t size,
                     Value first, Value value);

  // Phase 1: the update of one chunk.
  LogicalResult emitChunk(const ChunkContext &chunk);
  Value emitLoadState(const ChunkContext &chunk, int index);
  void emitStoreState(const ChunkContext &chunk, int index, Value value);

  // Before a tensor's first tile in the range: its per-tensor reductions,
  // into function.reductionValues, or (`global`) its whole-step
  // reductions' f64 accumulations, into row tile.tensor of
  // `stepPartials`. Fails, with an error emitted, where an op of the
  // reductions' operands does not lower.
  LogicalResult emitTensorReductions(const FunctionContext &function,
                                     const TileContext &tile, bool global,
                                     Value stepPartials = Value());
  // The host functions of whole-step reductions (docs/abi.md):
  // `<kernel>_partials`, each tensor's accumulations, and `<kernel>_combine`,
  // the tree over the step's tensors into the uniform slots.
  LogicalResult emitPartials(ModuleOp module);
  void emitCombine(ModuleOp module);
  void emitReductionTree(Value terms, ReductionKind kind);

  // Phase 2: requantize one state over the tile.
  void emitRequantize(const FunctionContext &function, const TileContext &tile,
                      int index);

  OptimizerOp optimizer;
  OpBuilder &b;
  /// Where the IR being built is located (in a chunk, the update op's).
  Location loc;
  LaneMath math;
  int64_t lanes, tile;
  SmallVector<StreamInfo> streams;
  SmallVector<StateOp> states;
};

/// The update of one chunk (lowerUpdate's target): element accesses masked
/// past the tile's end; a quantized state's new values into its tile buffer,
/// requantized in phase 2.
class HostKernelEmitter::ChunkUpdate : public UpdateTarget {
public:
  ChunkUpdate(HostKernelEmitter &emitter, const ChunkContext &chunk)
      : UpdateTarget(emitter.optimizer, emitter.streams, emitter.states),
        e(emitter), chunk(chunk) {}

  LaneMath &codecMath() override { return e.math; }
  void setLocation(Location loc) override { e.loc = loc; }
  Value loadElements(unsigned stream) override {
    return e.loadElements(chunk, stream);
  }
  void storeElements(unsigned stream, Value value) override {
    e.storeElements(chunk, stream, value);
  }
  unsigned getNumUniforms() override {
    return chunk.function.uniformValues.size();
  }
  Value uniform(unsigned index) override {
    return e.broadcast(chunk.function.uniformValues[index]);
  }
  FailureOr<Value> loadState(int state) override {
    return e.emitLoadState(chunk, state);
  }
  /// A per-tensor value (the function computed it before the tensor's
  /// first tile), or a whole-step value, a uniform slot (the combine
  /// function wrote it).
  FailureOr<Value> reduction(unsigned, ReduceOp op) override {
    unsigned scoped = getScopedReductionIndex(op);
    if (op.getGlobal())
      return e.broadcast(
          chunk.function
              .uniformValues[getNumHostUniforms(e.optimizer) + scoped]);
    return e.broadcast(e.load(e.f32(),
                              e.gep(chunk.function.reductionValues, e.f32(),
                                    e.constI64(scoped)),
                              4));
  }
  LogicalResult storeState(int state, Value value) override {
    e.emitStoreState(chunk, state, value);
    return success();
  }
  Value globalIndex() override {
    return arith::AddIOp::create(
        e.b, e.loc,
        arith::MulIOp::create(e.b, e.loc, chunk.tile.index,
                              e.constI64(e.tile)),
        chunk.offset);
  }

private:
  HostKernelEmitter &e;
  const ChunkContext &chunk;
};

} // namespace mlir::qopt::host

#endif // QOPT_LIB_CONVERSION_QOPTTOHOST_HOSTKERNELEMITTER_H

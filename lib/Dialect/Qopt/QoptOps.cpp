//===- QoptOps.cpp - qopt operations --------------------------------------===//
//
// Verifiers for the structure of an optimizer step: every state and the
// parameter are stored exactly once, symbols resolve to the right kind of
// declaration, and the master-weight format fits the parameter type.
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallBitVector.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::qopt;

//===----------------------------------------------------------------------===//
// OptimizerOp
//===----------------------------------------------------------------------===//

UpdateOp OptimizerOp::getUpdate() {
  for (Operation &op : getBody().front())
    if (auto update = dyn_cast<UpdateOp>(op))
      return update;
  return {};
}

UniformsOp OptimizerOp::getUniforms() {
  for (Operation &op : getBody().front())
    if (auto uniforms = dyn_cast<UniformsOp>(op))
      return uniforms;
  return {};
}

SmallVector<StateOp> mlir::qopt::getStates(OptimizerOp optimizer) {
  SmallVector<StateOp> states;
  for (Operation &op : optimizer.getBody().front())
    if (auto state = dyn_cast<StateOp>(op))
      states.push_back(state);
  return states;
}

SmallVector<HyperOp> mlir::qopt::getHypers(OptimizerOp optimizer) {
  SmallVector<HyperOp> hypers;
  for (Operation &op : optimizer.getBody().front())
    if (auto hyper = dyn_cast<HyperOp>(op))
      hypers.push_back(hyper);
  return hypers;
}

SmallVector<StreamInfo> mlir::qopt::getStreams(OptimizerOp optimizer) {
  MLIRContext *ctx = optimizer.getContext();
  SmallVector<StreamInfo> streams;
  std::string param = optimizer.getParamName().str();
  streams.push_back({param, StreamRole::Param, optimizer.getParamType(), 1,
                     true, -1});
  if (optimizer.getMaster() != MasterFormat::none) {
    unsigned width = optimizer.getMaster() == MasterFormat::ecc_i8 ? 8 : 16;
    streams.push_back({param + ".ecc", StreamRole::ErrorBits,
                       IntegerType::get(ctx, width, IntegerType::Signed), 1,
                       true, -1});
  }
  streams.push_back({optimizer.getGradName().str(), StreamRole::Grad,
                     optimizer.getGradType(), 1, false, -1});
  int index = 0;
  for (StateOp state : getStates(optimizer)) {
    std::string name = state.getSymName().str();
    Attribute scheme = state.getScheme();
    if (auto plain = dyn_cast<PlainSchemeAttr>(scheme)) {
      streams.push_back({name, StreamRole::State, plain.getStorage(), 1, true,
                         index});
    } else if (auto codebook = dyn_cast<CodebookSchemeAttr>(scheme)) {
      streams.push_back({name + ".codes", StreamRole::StateCodes,
                         IntegerType::get(ctx, 8, IntegerType::Unsigned), 1,
                         true, index});
      streams.push_back({name + ".absmax", StreamRole::StateAbsmax,
                         Float32Type::get(ctx), codebook.getBlock(), true,
                         index});
    } else if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
      streams.push_back({name + ".codes", StreamRole::StateCodes,
                         group.getStorage(), 1, true, index});
      streams.push_back({name + ".scales", StreamRole::StateScales,
                         group.getScale(), group.getGroupSize(), true, index});
    }
    ++index;
  }
  return streams;
}

SmallVector<unsigned> mlir::qopt::getReadStreams(OptimizerOp optimizer) {
  SmallVector<StreamInfo> streams = getStreams(optimizer);
  SmallVector<StateOp> states = getStates(optimizer);
  SmallVector<unsigned> reads;
  auto markRead = [&](StreamRole role, int state = -1) {
    for (auto [i, s] : llvm::enumerate(streams))
      if (s.role == role && (state < 0 || s.stateIndex == state) &&
          !llvm::is_contained(reads, i))
        reads.push_back(i);
  };
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    if (isa<LoadGradOp>(op))
      markRead(StreamRole::Grad);
    if (isa<LoadParamOp>(op)) {
      markRead(StreamRole::Param);
      markRead(StreamRole::ErrorBits);
    }
    if (auto load = dyn_cast<LoadStateOp>(op)) {
      auto state = SymbolTable::lookupNearestSymbolFrom<StateOp>(
          optimizer, load.getStateAttr());
      int index = llvm::find(states, state) - states.begin();
      for (StreamRole role : {StreamRole::State, StreamRole::StateCodes,
                              StreamRole::StateScales, StreamRole::StateAbsmax})
        markRead(role, index);
    }
  }
  return reads;
}

StringRef mlir::qopt::stringifyStreamRole(StreamRole role) {
  switch (role) {
  case StreamRole::Param: return "param";
  case StreamRole::ErrorBits: return "error_bits";
  case StreamRole::Grad: return "grad";
  case StreamRole::State: return "state";
  case StreamRole::StateCodes: return "state_codes";
  case StreamRole::StateScales: return "state_scales";
  case StreamRole::StateAbsmax: return "state_absmax";
  }
  llvm_unreachable("unknown stream role");
}

int64_t mlir::qopt::getReductionSize(StateOp state) {
  if (auto group = dyn_cast<GroupSchemeAttr>(state.getScheme()))
    return group.getGroupSize();
  if (auto codebook = dyn_cast<CodebookSchemeAttr>(state.getScheme()))
    return codebook.getBlock();
  return 0;
}

LogicalResult mlir::qopt::verifyTileShape(OptimizerOp optimizer,
                                          int64_t threads, int64_t lanes) {
  int64_t tile = threads * lanes;
  for (StateOp state : getStates(optimizer)) {
    int64_t size = getReductionSize(state);
    if (size && (tile % size != 0 || size % lanes != 0))
      return state.emitError("group or block of ")
             << size << " elements does not divide the tile of " << tile
             << " elements into vectors of " << lanes;
  }
  return success();
}

FailureOr<TileShape> mlir::qopt::resolveTileShape(OptimizerOp optimizer,
                                                  int64_t requestedThreads,
                                                  int64_t requestedLanes) {
  int64_t threads = getThreadsPerBlock(optimizer, requestedThreads);
  int64_t lanes = getElementsPerThread(optimizer, threads, requestedLanes);
  if (threads % 32 != 0 || threads < 32 || threads > 1024)
    return optimizer.emitError("threads-per-block must be a multiple of 32 in "
                               "[32, 1024], got ")
           << threads;
  if (failed(verifyTileShape(optimizer, threads, lanes)))
    return failure();
  return TileShape{threads, lanes};
}

int64_t mlir::qopt::getMinGroupSize(OptimizerOp optimizer) {
  int64_t result = 4096;
  for (StateOp state : getStates(optimizer))
    if (int64_t size = getReductionSize(state))
      result = std::min(result, size);
  return result;
}

/// Whether the measured best for `optimizer` is 512 threads of 8 lanes with
/// async copies (H200, bench/NOTES.md): group states, no codebook state, and
/// a 16-bit parameter. Those steps are bound by their instruction issue, and
/// the staging frees the registers that loads in flight would hold. With an
/// f32 parameter (the .f32 variants: no error bits, 9 to 16 B/param of
/// mostly memory traffic) the direct loads keep more bytes in flight than one
/// staged tile: FlashLion.f32 3659 -> 2435 GB/s and FlashAdamW.f32 2918 ->
/// 2566 with the staging.
template <typename Scheme> static bool hasStateOf(OptimizerOp optimizer) {
  return llvm::any_of(getStates(optimizer), [](StateOp state) {
    return isa<Scheme>(state.getScheme());
  });
}

static bool prefersStagedTiles(OptimizerOp optimizer) {
  return hasStateOf<GroupSchemeAttr>(optimizer) &&
         !hasStateOf<CodebookSchemeAttr>(optimizer) &&
         optimizer.getParamType().getIntOrFloatBitWidth() == 16;
}

bool mlir::qopt::hasSmallCodebookBlocks(OptimizerOp optimizer) {
  SmallVector<StateOp> states = getStates(optimizer);
  return states.size() >= 2 && hasStateOf<CodebookSchemeAttr>(optimizer) &&
         llvm::all_of(states, [](StateOp state) {
           return !isa<CodebookSchemeAttr>(state.getScheme()) ||
                  getReductionSize(state) <= 256;
         });
}

/// Codebook steps of small blocks (hasSmallCodebookBlocks) and a 16-bit
/// parameter are staged at 256 threads: two blocks of up to 128 registers
/// per SM. H200, 64 Mi (bench/NOTES.md, thirteenth session): block256 on
/// realistic gradients 0.284 -> 0.264 ms, the GPT-2 list 0.509 -> 0.473 ms
/// (then only the staged kernels took the zero-row shortcut); on
/// the bench's gradients within 1% (three stages; four, over the 99 KiB that
/// getTileStaging keeps, +2%). block2048, whose blocks span the tile's
/// warps, lost 16%, and the f32 variants (128 registers) 23%.
static bool prefersStagedCodebookTiles(OptimizerOp optimizer) {
  return hasSmallCodebookBlocks(optimizer) &&
         optimizer.getParamType().getIntOrFloatBitWidth() == 16;
}

int64_t mlir::qopt::getThreadsPerBlock(OptimizerOp optimizer,
                                       int64_t requested) {
  if (requested > 0)
    return requested;
  // Measured on the H200 (bench/NOTES.md): the staged steps
  // (prefersStagedTiles) and, without staging, two or more states without a
  // codebook run faster with 512 threads; the rest with 256. The codebook
  // steps of a 16-bit parameter at 512 (two blocks of 64 registers per SM):
  // block256 at 64 Mi 2316 -> 2438 GB/s, block2048 the same, but the main
  // job's GPT-2 list with realistic gradients 0.533 -> 0.572 ms (seventh
  // session); block2048 -6% and block256 -5% in the thirteenth. Small
  // blocks (hasSmallCodebookBlocks) with an f32 parameter gain at 512:
  // block256.f32 3050 -> 3165 GB/s at 64 Mi, 0.3607 -> 0.3577 ms on
  // realistic gradients; block2048.f32 gained 6% on the bench's gradients
  // but lost 5% on realistic ones (thirteenth session).
  if (prefersStagedTiles(optimizer))
    return 512;
  if (hasStateOf<CodebookSchemeAttr>(optimizer))
    return hasSmallCodebookBlocks(optimizer) && optimizer.getParamType().isF32()
               ? 512
               : 256;
  return getStates(optimizer).size() >= 2 ? 512 : 256;
}

int64_t mlir::qopt::getElementsPerThread(OptimizerOp optimizer,
                                         int64_t threads, int64_t requested) {
  int64_t minGroup = getMinGroupSize(optimizer);
  if (requested > 0)
    return std::min(requested, minGroup);
  int64_t maxGroup = 1;
  SmallVector<StateOp> states = getStates(optimizer);
  for (StateOp state : states)
    maxGroup = std::max(maxGroup, getReductionSize(state));
  // Measured on the H200 (bench/NOTES.md): the staged steps take 8 lanes
  // (their loads in flight need no registers: SGD and Lion 2971 -> 3217 GB/s
  // against 16 lanes and 256 threads unstaged; the guarded IEEE division's
  // range check once per thread pays more with more lanes: FlashAdamW 2162
  // against 2035 with 4); unstaged, an update with one state 16 (more loads in
  // flight per thread), with more or codebook states 8.
  int64_t preferred =
      !prefersStagedTiles(optimizer) && states.size() <= 1 ? 16 : 8;
  int64_t lanes = std::min<int64_t>(preferred, minGroup);
  while (threads > 0 && (threads * lanes) % maxGroup != 0 && lanes < 16 &&
         lanes * 2 <= minGroup)
    lanes *= 2;
  return lanes;
}

const StagedStream *TileStaging::lookup(unsigned stream) const {
  for (const StagedStream &s : streams)
    if (s.stream == stream)
      return &s;
  return nullptr;
}

int64_t mlir::qopt::getCodebookStaticSharedBytes(OptimizerOp optimizer,
                                                 int64_t threads) {
  int64_t codebookStates = 0;
  for (StateOp state : getStates(optimizer))
    codebookStates += isa<CodebookSchemeAttr>(state.getScheme());
  if (codebookStates == 0)
    return 0;
  return codebookStates * (1024 + 1052 + 16 + 2 * 4 * (threads / 32)) + 1052 + 16;
}

int64_t mlir::qopt::getStagingSharedLimit(OptimizerOp optimizer,
                                          int64_t threads) {
  // A codebook kernel's bucket tables lie beside the stages, and its static
  // tables beside both: the stages keep the whole within what every GPU
  // since sm_80 grants a block, so that a staged codebook kernel loads
  // wherever an unstaged one does.
  int64_t tables = getCodebookStaticSharedBytes(optimizer, threads);
  if (tables == 0)
    return TileStaging::kMaxSharedBytes;
  for (StateOp state : getStates(optimizer))
    if (isa<CodebookSchemeAttr>(state.getScheme()))
      tables += CodebookBuckets::kBytesPerState;
  return std::min<int64_t>(TileStaging::kMaxSharedBytes,
                           TileStaging::kPortableSharedBytes - tables);
}

TileStaging mlir::qopt::getTileStaging(OptimizerOp optimizer,
                                       TileShape shape) {
  SmallVector<StreamInfo> streams = getStreams(optimizer);
  // The regions follow ABI order.
  llvm::SmallBitVector read(streams.size());
  for (unsigned i : getReadStreams(optimizer))
    read.set(i);
  TileStaging staging;
  for (auto [i, s] : llvm::enumerate(streams)) {
    if (!read.test(i))
      continue;
    int64_t elementBytes = s.storage.getIntOrFloatBitWidth() / 8;
    int64_t bytes = s.perElements == 1 ? shape.lanes * elementBytes
                                       : elementBytes;
    int64_t perCopy = 1;
    if (s.perElements != 1 && bytes < 4) {
      // The word of a pair of scalars lies in the tile if its groups do.
      perCopy = 4 / bytes;
      if ((shape.tile() / s.perElements) % perCopy != 0)
        continue;
      bytes = 4;
    }
    // Whole 16-byte chunks, a power of two of them (the shared loads are
    // joined pairwise), or one 4- or 8-byte copy.
    if (bytes != 4 && bytes != 8 &&
        (bytes % 16 != 0 || !llvm::isPowerOf2_64(bytes / 16)))
      continue;
    int64_t chunk = std::min<int64_t>(bytes, 16);
    staging.streams.push_back(
        {static_cast<unsigned>(i), bytes, chunk, staging.stageBytes, perCopy});
    // Regions stay 16-byte aligned: threads is a multiple of 32.
    staging.stageBytes += shape.threads * bytes;
  }
  // The most stages that fit: more tiles in flight per block.
  int64_t limit = getStagingSharedLimit(optimizer, shape.threads);
  for (staging.stages = TileStaging::kMaxStages;
       staging.stages > 2 && staging.sharedBytes() > limit; --staging.stages) {
  }
  if (staging.sharedBytes() > limit)
    return TileStaging();
  return staging;
}

int64_t mlir::qopt::getDynamicSharedBytes(OptimizerOp optimizer,
                                          const TileStaging &staging,
                                          bool codebookBuckets) {
  int64_t bytes = staging.streams.empty() ? 0 : staging.sharedBytes();
  if (codebookBuckets)
    for (StateOp state : getStates(optimizer))
      if (isa<CodebookSchemeAttr>(state.getScheme()))
        bytes += CodebookBuckets::kBytesPerState;
  return bytes;
}

int64_t mlir::qopt::getL2PrefetchTiles(OptimizerOp optimizer, bool staged) {
  if (staged || !hasStateOf<CodebookSchemeAttr>(optimizer) ||
      optimizer.getParamType().getIntOrFloatBitWidth() != 16)
    return 0;
  return 2;
}

int64_t mlir::qopt::getGridWaves(OptimizerOp optimizer) {
  return !hasStateOf<CodebookSchemeAttr>(optimizer) &&
                 optimizer.getParamType().getIntOrFloatBitWidth() == 16
             ? 4
             : 1;
}

int64_t mlir::qopt::getGridMinTilesPerBlock(OptimizerOp optimizer) {
  return getStates(optimizer).size() <= 1 ? 24 : 128;
}

TileClaims mlir::qopt::getTileClaims(OptimizerOp optimizer, bool staged,
                                     int64_t requested, int64_t staticEighths) {
  // A staged kernel's copy pipeline (and a bulk-copy kernel's stage phases)
  // runs within one claim: never claims, even when asked.
  if (requested == 0 || staged)
    return {};
  auto share = [&](int64_t chosen) {
    return staticEighths > 0 ? std::clamp<int64_t>(staticEighths, 1, 8) : chosen;
  };
  if (requested > 0)
    return {requested, share(5)};
  if (!hasStateOf<CodebookSchemeAttr>(optimizer))
    return {};
  // The block size stands for "its absmax crosses warps" (block / lanes >
  // 32) at the codebook kernels' default 8 lanes, which this choice precedes.
  int64_t largestBlock = 0;
  for (StateOp state : getStates(optimizer))
    if (auto codebook = dyn_cast<CodebookSchemeAttr>(state.getScheme()))
      largestBlock = std::max(largestBlock, codebook.getBlock());
  return largestBlock >= 1024 ? TileClaims{2, share(5)} : TileClaims{1, share(6)};
}

bool mlir::qopt::useAsyncCopy(OptimizerOp optimizer, AsyncCopy requested) {
  if (requested != AsyncCopy::Auto)
    return requested == AsyncCopy::On;
  return prefersStagedTiles(optimizer) || prefersStagedCodebookTiles(optimizer);
}

static bool isStreamFloat(Type type) {
  return type.isF32() || type.isBF16() || type.isF16();
}

LogicalResult OptimizerOp::verify() {
  if (!isStreamFloat(getParamType()))
    return emitOpError("parameter type must be f32, bf16 or f16, got ")
           << getParamType();
  if (!isStreamFloat(getGradType()))
    return emitOpError("gradient type must be f32, bf16 or f16, got ")
           << getGradType();
  if (getMaster() != MasterFormat::none && getParamType().isF32())
    return emitOpError("error-correction bits need a bf16 or f16 parameter, "
                       "got ")
           << getParamType();

  unsigned numUpdates = 0, numUniforms = 0;
  for (Operation &op : getBody().front()) {
    if (isa<UpdateOp>(op))
      ++numUpdates;
    else if (isa<UniformsOp>(op))
      ++numUniforms;
    else if (!isa<HyperOp, StateOp>(op))
      return op.emitOpError("is not allowed directly in a qopt.optimizer");
  }
  if (numUpdates != 1)
    return emitOpError("needs exactly one qopt.update, found ") << numUpdates;
  if (numUniforms > 1)
    return emitOpError("has more than one qopt.uniforms region");

  // Every state is requantized exactly once and the parameter is stored once.
  llvm::DenseMap<StringAttr, unsigned> stores;
  unsigned paramStores = 0;
  getUpdate().walk([&](Operation *op) {
    if (auto store = dyn_cast<StoreStateOp>(op))
      ++stores[store.getStateAttr().getAttr()];
    else if (isa<StoreParamOp>(op))
      ++paramStores;
  });
  for (StateOp state : getStates(*this)) {
    unsigned count = stores.lookup(state.getSymNameAttr());
    if (count != 1)
      return state.emitOpError("must be stored exactly once in the update, "
                               "found ")
             << count << " stores";
  }
  if (paramStores != 1)
    return emitOpError("the parameter must be stored exactly once in the "
                       "update, found ")
           << paramStores << " stores";
  return success();
}

//===----------------------------------------------------------------------===//
// HyperOp
//===----------------------------------------------------------------------===//

LogicalResult HyperOp::verify() {
  Type type = cast<TypedAttr>(getValue()).getType();
  if (!type.isF64() && !type.isInteger(1))
    return emitOpError("value must be an f64 number or a boolean, got ")
           << type;
  return success();
}

//===----------------------------------------------------------------------===//
// UpdateOp
//===----------------------------------------------------------------------===//

LogicalResult UpdateOp::verify() {
  for (Operation &op : getBody().front()) {
    if (op.getNumRegions() != 0)
      return op.emitOpError("with regions is not allowed in a qopt.update");
    if (isa<UniformOp>(op) || isa<HyperValueOp, StepCountOp>(op))
      continue;
    Dialect *dialect = op.getDialect();
    StringRef ns = dialect ? dialect->getNamespace() : StringRef();
    if (ns != "qopt" && ns != "arith" && ns != "math")
      return op.emitOpError("is not allowed in a qopt.update; use qopt, arith "
                            "and math operations");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Symbol uses
//===----------------------------------------------------------------------===//

template <typename DeclOp>
static FailureOr<DeclOp> lookupDecl(Operation *user, FlatSymbolRefAttr ref,
                                    StringRef what,
                                    SymbolTableCollection &symbolTable) {
  auto optimizer = user->getParentOfType<OptimizerOp>();
  if (!optimizer)
    return user->emitOpError("must be inside a qopt.optimizer");
  auto decl = symbolTable.lookupSymbolIn<DeclOp>(optimizer, ref.getAttr());
  if (!decl)
    return user->emitOpError("'") << ref.getValue() << "' is not a " << what
                                  << " of @" << optimizer.getSymName();
  return decl;
}

LogicalResult
HyperValueOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto hyper = lookupDecl<HyperOp>(*this, getHyperAttr(), "hyperparameter",
                                   symbolTable);
  if (failed(hyper))
    return failure();
  Type declared = cast<TypedAttr>(hyper->getValue()).getType();
  if (declared != getType())
    return emitOpError("type ") << getType() << " does not match @"
                                << getHyper() << " of type " << declared;
  return success();
}

LogicalResult
LoadStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookupDecl<StateOp>(*this, getStateAttr(), "state", symbolTable);
}

LogicalResult
StoreStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookupDecl<StateOp>(*this, getStateAttr(), "state", symbolTable);
}


//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

/// The value that `qopt.uniform index` reads, or null.
static Value getYieldedUniform(UniformOp op) {
  auto optimizer = op->getParentOfType<OptimizerOp>();
  if (!optimizer || !optimizer.getUniforms())
    return {};
  Operation *yield = optimizer.getUniforms().getBody().front().getTerminator();
  uint64_t index = op.getIndex();
  if (index >= yield->getNumOperands())
    return {};
  return yield->getOperand(index);
}

OpFoldResult UniformOp::fold(FoldAdaptor) {
  Value yielded = getYieldedUniform(*this);
  if (!yielded)
    return {};
  FloatAttr f;
  if (matchPattern(yielded, m_Constant(&f))) {
    // (float)double: the one rounding the runtime applies.
    return FloatAttr::get(getType(), static_cast<float>(f.getValueAsDouble()));
  }
  BoolAttr flag;
  if (matchPattern(yielded, m_Constant(&flag)))
    return FloatAttr::get(getType(), flag.getValue() ? 1.0f : 0.0f);
  return {};
}

namespace {
/// Removes yielded uniforms that no qopt.uniform reads, renumbering the rest,
/// so that the launch evaluates and uploads only what the kernel uses.
struct DropUnusedUniforms : public OpRewritePattern<OptimizerOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(OptimizerOp optimizer,
                                PatternRewriter &rewriter) const override {
    UniformsOp uniforms = optimizer.getUniforms();
    if (!uniforms)
      return rewriter.notifyMatchFailure(optimizer, "no qopt.uniforms");
    Operation *yield = uniforms.getBody().front().getTerminator();
    SmallVector<UniformOp> reads;
    optimizer.getUpdate().walk([&](UniformOp op) { reads.push_back(op); });
    llvm::SmallBitVector used(yield->getNumOperands());
    for (UniformOp op : reads)
      if (op.getIndex() < yield->getNumOperands())
        used.set(op.getIndex());
    if (used.all())
      return rewriter.notifyMatchFailure(optimizer, "every uniform is read");
    SmallVector<int64_t> newIndex(yield->getNumOperands(), -1);
    SmallVector<Value> kept;
    for (unsigned i = 0, e = yield->getNumOperands(); i < e; ++i)
      if (used.test(i)) {
        newIndex[i] = kept.size();
        kept.push_back(yield->getOperand(i));
      }
    rewriter.setInsertionPoint(yield);
    rewriter.replaceOpWithNewOp<YieldOp>(yield, kept);
    for (UniformOp op : reads)
      rewriter.modifyOpInPlace(op, [&] {
        op.setIndex(static_cast<uint64_t>(newIndex[op.getIndex()]));
      });
    return success();
  }
};
} // namespace

void OptimizerOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<DropUnusedUniforms>(context);
}

#define GET_OP_CLASSES
#include "qopt/Dialect/Qopt/QoptOps.cpp.inc"

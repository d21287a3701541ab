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
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

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
  if (hasErrorBits(optimizer.getMaster())) {
    unsigned width = optimizer.getMaster() == MasterFormat::ecc_i8 ? 8 : 16;
    streams.push_back({param + ".ecc", StreamRole::ErrorBits,
                       IntegerType::get(ctx, width, IntegerType::Signed), 1,
                       true, -1});
  }
  if (hasCompensation(optimizer.getMaster()))
    streams.push_back({param + ".kahan", StreamRole::ErrorBits,
                       BFloat16Type::get(ctx), 1, true, -1});
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
      if (isPacked(group))
        streams.push_back({name + ".codes", StreamRole::StateCodes,
                           IntegerType::get(ctx, 8, IntegerType::Unsigned), 2,
                           true, index, /*packed=*/true});
      else
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

std::optional<Overflow> mlir::qopt::getOverflow(StateOp state) {
  if (auto group = dyn_cast<GroupSchemeAttr>(state.getScheme()))
    return group.getOverflow();
  if (auto codebook = dyn_cast<CodebookSchemeAttr>(state.getScheme()))
    return codebook.getOverflow();
  return std::nullopt;
}

bool mlir::qopt::countsNumerics(OptimizerOp optimizer) {
  return llvm::any_of(getStates(optimizer), [](StateOp state) {
    return getOverflow(state) == Overflow::saturate;
  });
}

/// The first state whose groups or blocks a tile of `threads` x `lanes`
/// does not hold whole, in whole `lanes`-element vectors and whole bytes of
/// packed codes; null where every state fits.
static StateOp findMisfitState(OptimizerOp optimizer, int64_t threads,
                               int64_t lanes) {
  int64_t tile = threads * lanes;
  for (StateOp state : getStates(optimizer)) {
    int64_t size = getReductionSize(state);
    if (size && (tile % size != 0 || size % lanes != 0))
      return state;
    auto group = dyn_cast<GroupSchemeAttr>(state.getScheme());
    if (group && isPacked(group) && lanes % 2 != 0)
      return state;
  }
  return nullptr;
}

bool mlir::qopt::fitsTileShape(OptimizerOp optimizer, int64_t threads,
                               int64_t lanes) {
  return lanes > 0 && !findMisfitState(optimizer, threads, lanes);
}

LogicalResult mlir::qopt::verifyTileShape(OptimizerOp optimizer,
                                          int64_t threads, int64_t lanes) {
  StateOp state = findMisfitState(optimizer, threads, lanes);
  if (!state)
    return success();
  int64_t tile = threads * lanes;
  int64_t size = getReductionSize(state);
  if (size && size % lanes != 0)
    return state.emitError("group or block of ")
           << size << " elements is not a whole number of " << lanes
           << "-element vectors (a thread's lanes lie in one group)";
  if (size && tile % size != 0)
    return state.emitError("group or block of ")
           << size << " elements does not divide the tile of " << tile
           << " elements (" << threads << " threads of " << lanes << ")";
  // A thread's lanes are whole bytes of packed codes.
  return state.emitError("4-bit codes need an even number of lanes, found ")
         << lanes;
}

bool mlir::qopt::fitsReductionChunks(OptimizerOp optimizer, int64_t threads,
                                     int64_t lanes) {
  if (getReductions(optimizer).empty())
    return true;
  int64_t warpElements = 32 * lanes;
  return threads % 32 == 0 && (threads * lanes) % kReductionChunk == 0 &&
         kReductionChunk % warpElements == 0;
}

int64_t mlir::qopt::getMinGroupSize(OptimizerOp optimizer) {
  int64_t result = 4096;
  for (StateOp state : getStates(optimizer))
    if (int64_t size = getReductionSize(state))
      result = std::min(result, size);
  return result;
}

KernelPlanAttr mlir::qopt::getKernelPlan(OptimizerOp optimizer) {
  return optimizer->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
}

static bool isStreamFloat(Type type) {
  return type.isF32() || type.isBF16() || type.isF16();
}

/// How a diagnostic names a stream: its role, and the state it belongs to.
static std::string describeStream(const StreamInfo &stream,
                                  MutableArrayRef<StateOp> states) {
  switch (stream.role) {
  case StreamRole::Param: return "the parameter";
  case StreamRole::ErrorBits: return "the parameter's error bits";
  case StreamRole::Grad: return "the gradient";
  default:
    break;
  }
  std::string what = stream.role == StreamRole::State ? "state" : "the " +
      stringifyStreamRole(stream.role).str() + " of state";
  return what + " @" + states[stream.stateIndex].getSymName().str();
}

/// Every stream the manifest lists has a name, and no two share one (the
/// runtime binds tensors by these names and refuses a manifest otherwise).
static LogicalResult verifyStreamNames(OptimizerOp optimizer) {
  SmallVector<StateOp> states = getStates(optimizer);
  SmallVector<StreamInfo> streams = getStreams(optimizer);
  llvm::StringMap<unsigned> seen;
  for (auto [i, stream] : llvm::enumerate(streams)) {
    if (stream.name.empty())
      return optimizer.emitOpError("the name of ")
             << describeStream(stream, states) << " must not be empty";
    auto [it, inserted] = seen.try_emplace(stream.name, i);
    if (!inserted)
      return optimizer.emitOpError("stream name \"")
             << stream.name << "\" is given to both "
             << describeStream(streams[it->second], states) << " and "
             << describeStream(stream, states);
  }
  return success();
}

LogicalResult OptimizerOp::verify() {
  if (getSymName().empty())
    return emitOpError("symbol name must not be empty");
  if (failed(verifyStreamNames(*this)))
    return failure();
  if (!isStreamFloat(getParamType()))
    return emitOpError("parameter type must be f32, bf16 or f16, got ")
           << getParamType();
  if (!isStreamFloat(getGradType()))
    return emitOpError("gradient type must be f32, bf16 or f16, got ")
           << getGradType();
  if (hasErrorBits(getMaster()) && getParamType().isF32())
    return emitOpError("error-correction bits need a bf16 or f16 parameter, "
                       "got ")
           << getParamType();
  if (getMaster() == MasterFormat::stochastic && !getParamType().isBF16())
    return emitOpError("stochastic rounding needs a bf16 parameter, got ")
           << getParamType();
  if (hasCompensation(getMaster()) && !getParamType().isBF16())
    return emitOpError("a Kahan compensation needs a bf16 parameter, got ")
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
  LogicalResult keyError = success();
  getUpdate().walk([&](Operation *op) {
    if (auto store = dyn_cast<StoreStateOp>(op))
      ++stores[store.getStateAttr().getAttr()];
    else if (auto store = dyn_cast<StoreParamOp>(op)) {
      ++paramStores;
      size_t want = getMaster() == MasterFormat::stochastic ? 2 : 0;
      if (store.getKey().size() != want)
        keyError = store.emitOpError("takes ")
                   << want << " key values (seed, step) with master "
                   << stringifyMasterFormat(getMaster()) << ", found "
                   << store.getKey().size();
    }
  });
  if (failed(keyError))
    return failure();
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
  if (getSymName().empty())
    return emitOpError("symbol name must not be empty");
  // The default is written into the manifest as a JSON number.
  if (auto number = dyn_cast<FloatAttr>(getValue());
      number && !number.getValue().isFinite())
    return emitOpError("default value must be a finite number, got ")
           << (number.getValue().isNaN() ? "NaN"
               : number.getValue().isNegative() ? "-inf"
                                                : "inf");
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

SmallVector<ReduceOp> mlir::qopt::getReductions(OptimizerOp optimizer) {
  return llvm::to_vector(optimizer.getUpdate().getBody().getOps<ReduceOp>());
}

SmallVector<ReduceOp> mlir::qopt::getReductions(OptimizerOp optimizer,
                                                bool global) {
  SmallVector<ReduceOp> out;
  for (ReduceOp op : optimizer.getUpdate().getBody().getOps<ReduceOp>())
    if (op.getGlobal() == global)
      out.push_back(op);
  return out;
}

unsigned mlir::qopt::getScopedReductionIndex(ReduceOp op) {
  unsigned index = 0;
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    if (auto reduce = dyn_cast<ReduceOp>(prev))
      index += reduce.getGlobal() == op.getGlobal();
  return index;
}

unsigned mlir::qopt::getNumHostUniforms(OptimizerOp optimizer) {
  if (UniformsOp uniforms = optimizer.getUniforms())
    return uniforms.getBody().front().getTerminator()->getNumOperands();
  return 0;
}

LogicalResult ReduceOp::verify() {
  if (getGlobal() && getKind() != ReductionKind::sum &&
      getKind() != ReductionKind::max && getKind() != ReductionKind::norm)
    return emitOpError("a whole-step reduction is sum, max or norm; found ")
           << stringifyReductionKind(getKind());
  // The operand's ops, within the update, must not read a reduction: a
  // tensor's reductions are computed together, before the update.
  SmallVector<Value> work = {getOperand()};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (isa<ReduceOp>(def))
      return emitOpError("reduces a value that depends on another "
                         "qopt.reduce; a reduction of a reduction is not "
                         "supported");
    llvm::append_range(work, def->getOperands());
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

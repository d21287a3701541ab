//===- UpdateLowering.cpp - A qopt.update on lanes, for any target --------===//
//
// The walk of the update's ops and the hooks every target shares: the
// gradient's and the parameter's loads and the parameter's store, which
// differ between targets only in how elements reach memory.
//
//===----------------------------------------------------------------------===//

#include "qopt/Codegen/UpdateLowering.h"

#include "qopt/Codegen/StreamCodecs.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::qopt;

unsigned mlir::qopt::findStream(ArrayRef<StreamInfo> streams, StreamRole role,
                                int state) {
  for (auto [i, s] : llvm::enumerate(streams))
    if (s.role == role && (state < 0 || s.stateIndex == state))
      return i;
  llvm_unreachable("stream not in the ABI");
}

UpdateTarget::~UpdateTarget() = default;

/// The index in `target`'s states of the state `ref` names.
static int stateIndex(UpdateTarget &target, FlatSymbolRefAttr ref) {
  auto state = SymbolTable::lookupNearestSymbolFrom<StateOp>(
      target.getOptimizer(), ref);
  return llvm::find(target.getStates(), state) - target.getStates().begin();
}

Value UpdateTarget::loadGrad(Value invScale) {
  LaneMath &m = codecMath();
  Value g = widenToF32(m, loadElements(streamIndex(StreamRole::Grad)));
  if (invScale)
    g = unscaleGrad(m, g, invScale, optimizer.getGradType());
  return g;
}

Value UpdateTarget::loadParam() {
  LaneMath &m = codecMath();
  Value x16 = loadElements(streamIndex(StreamRole::Param));
  if (!hasErrorBits(optimizer.getMaster()))
    return widenToF32(m, x16);
  Value rho = loadElements(streamIndex(StreamRole::ErrorBits));
  return reconstructMaster(m, x16, rho, optimizer.getMaster());
}

void UpdateTarget::storeParam(Value value, ArrayRef<Value> key) {
  LaneMath &m = codecMath();
  if (optimizer.getMaster() == MasterFormat::stochastic) {
    storeElements(streamIndex(StreamRole::Param),
                  stochasticRoundBF16(m, value, key[0], key[1],
                                      globalIndex()));
    return;
  }
  if (hasCompensation(optimizer.getMaster())) {
    // numerics.md, "Kahan summation": the update's change joins the
    // compensation, the sum is rounded to the parameter, and what the
    // rounding lost is the new compensation.
    unsigned paramStream = streamIndex(StreamRole::Param);
    unsigned compStream = streamIndex(StreamRole::ErrorBits);
    Value old = widenToF32(m, loadElements(paramStream));
    Value comp = widenToF32(m, loadElements(compStream));
    Value sum = m.add(comp, m.sub(value, old));
    Value x16 = narrowFromF32(m, m.add(old, sum), optimizer.getParamType());
    Value lost = m.sub(sum, m.sub(widenToF32(m, x16), old));
    storeElements(paramStream, x16);
    storeElements(compStream,
                  narrowFromF32(m, lost, BFloat16Type::get(m.builder().getContext())));
    return;
  }
  Value x16 = narrowFromF32(m, value, optimizer.getParamType());
  storeElements(streamIndex(StreamRole::Param), x16);
  if (hasErrorBits(optimizer.getMaster()))
    storeElements(streamIndex(StreamRole::ErrorBits),
                  splitMaster(m, value, x16, optimizer.getMaster()));
}

FailureOr<Value> UpdateTarget::reduction(unsigned, ReduceOp op) {
  return op.emitOpError("is not lowered by this target: it has no "
                        "per-tensor reductions");
}

/// The position of reduction `op` among the update's reductions.
static unsigned reductionIndex(ReduceOp op) {
  unsigned index = 0;
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    index += isa<ReduceOp>(prev);
  return index;
}

llvm::DenseMap<Value, UpdateScope>
mlir::qopt::getInvariantValues(OptimizerOp optimizer) {
  llvm::DenseMap<Value, UpdateScope> scopes, invariants;
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    if (op.getNumResults() != 1)
      continue;
    Value result = op.getResult(0);
    if (isa<arith::ConstantOp, UniformOp>(op)) {
      scopes[result] = UpdateScope::Launch;
      continue;
    }
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      scopes[result] =
          reduce.getGlobal() ? UpdateScope::Launch : UpdateScope::Tensor;
      continue;
    }
    if (!isVectorizableUpdateOp(&op) || op.getNumRegions() != 0 ||
        !isPure(&op))
      continue;
    UpdateScope scope = UpdateScope::Launch;
    for (Value operand : op.getOperands()) {
      auto it = scopes.find(operand);
      scope = it == scopes.end() ? UpdateScope::Element
                                 : std::max(scope, it->second);
    }
    if (scope == UpdateScope::Element)
      continue;
    scopes[result] = scope;
    invariants[result] = scope;
  }
  return invariants;
}

void mlir::qopt::lowerInvariants(
    LaneMath &m, OptimizerOp optimizer,
    const llvm::DenseMap<Value, UpdateScope> &invariants, UpdateScope scope,
    llvm::DenseMap<Value, Value> &values) {
  OpBuilder &b = m.builder();
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    if (op.getNumResults() != 1)
      continue;
    auto it = invariants.find(op.getResult(0));
    if (it == invariants.end() || it->second != scope)
      continue;
    IRMapping mapping;
    bool known = true;
    for (Value operand : op.getOperands()) {
      Value scalar = values.lookup(operand);
      if (auto constant = operand.getDefiningOp<arith::ConstantOp>())
        scalar = arith::ConstantOp::create(b, op.getLoc(), constant.getValue());
      if (!scalar) {
        known = false;
        break;
      }
      mapping.map(operand, vector::BroadcastOp::create(
                               b, op.getLoc(),
                               VectorType::get({1}, scalar.getType()), scalar)
                               .getResult());
    }
    if (!known)
      continue;
    FailureOr<Value> lanes = vectorizeUpdateOp(m, &op, mapping, 1);
    if (failed(lanes))
      continue;
    values[op.getResult(0)] =
        vector::ExtractOp::create(b, op.getLoc(), *lanes, ArrayRef<int64_t>{0});
  }
}

/// The op's lanes: a load, a uniform, a reduction or the update's
/// arithmetic.
static FailureOr<Value> lowerValueOp(UpdateTarget &target, Operation &op,
                                     IRMapping &mapping, int64_t lanes) {
  if (op.getNumResults() == 1)
    if (Value lanesOnce = target.invariant(op.getResult(0)))
      return lanesOnce;
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return target.reduction(reductionIndex(reduce), reduce);
  if (auto loadGrad = dyn_cast<LoadGradOp>(op)) {
    Value inv = loadGrad.getInvScale();
    return target.loadGrad(inv ? mapping.lookup(inv) : Value());
  }
  if (isa<LoadParamOp>(op))
    return target.loadParam();
  if (auto loadState = dyn_cast<LoadStateOp>(op))
    return target.loadState(stateIndex(target, loadState.getStateAttr()));
  if (auto uniform = dyn_cast<UniformOp>(op)) {
    uint64_t index = uniform.getIndex();
    if (index >= target.getNumUniforms())
      return uniform.emitOpError("reads uniform ")
             << index << " but the optimizer yields only "
             << target.getNumUniforms();
    return target.uniform(index);
  }
  if (isa<HyperValueOp, StepCountOp>(op))
    return op.emitOpError("must be outlined first: run qopt-outline-uniforms");
  return vectorizeUpdateOp(target.updateMath(), &op, mapping, lanes);
}

LogicalResult mlir::qopt::lowerUpdate(UpdateTarget &target, int64_t lanes) {
  IRMapping mapping;
  SmallVector<UpdateStore> stores;
  for (Operation &op : target.getOptimizer().getUpdate().getBody().front()) {
    target.setLocation(op.getLoc());
    if (isa<SkipIfOp>(op)) {
      // The skip flag is tested once per launch (getSkipFlag).
    } else if (auto store = dyn_cast<StoreStateOp>(op)) {
      stores.push_back({&op, mapping.lookup(store.getValue()),
                        stateIndex(target, store.getStateAttr()), {}});
    } else if (auto store = dyn_cast<StoreParamOp>(op)) {
      UpdateStore pending{&op, mapping.lookup(store.getValue()), -1, {}};
      for (Value k : store.getKey())
        pending.key.push_back(mapping.lookup(k));
      stores.push_back(std::move(pending));
    } else {
      FailureOr<Value> value = lowerValueOp(target, op, mapping, lanes);
      if (failed(value))
        return failure();
      mapping.map(op.getResult(0), *value);
    }
    target.noteLowered(op, mapping);
  }
  if (failed(target.beginStores(stores)))
    return failure();
  for (const UpdateStore &store : stores) {
    target.setLocation(store.op->getLoc());
    if (store.state < 0)
      target.storeParam(store.value, store.key);
    else if (failed(target.storeState(store.state, store.value)))
      return failure();
  }
  return success();
}

LogicalResult mlir::qopt::lowerReductionOperands(
    UpdateTarget &target, int64_t lanes,
    llvm::function_ref<void(unsigned, ReduceOp, Value)> onOperand,
    llvm::function_ref<bool(ReduceOp)> include) {
  Block &body = target.getOptimizer().getUpdate().getBody().front();
  // The backward slice of the reductions' operands (the verifier keeps
  // every reduction out of it).
  llvm::SmallPtrSet<Operation *, 32> slice;
  SmallVector<Value> work;
  for (ReduceOp reduce : body.getOps<ReduceOp>())
    if (!include || include(reduce))
      work.push_back(reduce.getOperand());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && slice.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  IRMapping mapping;
  unsigned index = 0;
  for (Operation &op : body) {
    target.setLocation(op.getLoc());
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      if (!include || include(reduce))
        onOperand(index, reduce, mapping.lookup(reduce.getOperand()));
      ++index;
      continue;
    }
    if (!slice.contains(&op))
      continue;
    FailureOr<Value> value = lowerValueOp(target, op, mapping, lanes);
    if (failed(value))
      return failure();
    mapping.map(op.getResult(0), *value);
  }
  return success();
}

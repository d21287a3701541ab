//===- UpdateLowering.h - A qopt.update on lanes, for any target -*- C++ -*-===//
//
// The one walk of an optimizer's qopt.update that every lowering shares.
// Each op of the update, in order, becomes arithmetic on f32 lanes
// (vectorizeUpdateOp) or a call of the target's hook: its element loads and
// stores, uniforms, quantized states. The stores wait until every op is
// lowered, so that each store follows every load of its element. A lowering
// implements UpdateTarget for the lanes it computes at once (the GPU
// kernel's thread of a tile, the host function's chunk), as Triton's
// TargetInfo does for its lowerings.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CODEGEN_UPDATELOWERING_H
#define QOPT_CODEGEN_UPDATELOWERING_H

#include "qopt/Codegen/LaneMath.h"

namespace mlir::qopt {

/// The index in `streams` (getStreams' ABI order) of the stream of `role`,
/// of state `state` (an index into getStates) for a state's stream. The
/// stream must exist.
unsigned findStream(ArrayRef<StreamInfo> streams, StreamRole role,
                    int state = -1);

/// One store of the update, held back until every op is lowered.
struct UpdateStore {
  Operation *op; ///< its qopt.store_state or qopt.store_param
  Value value;   ///< the stored value's f32 lanes
  int state;     ///< index into getStates(); -1 for the parameter
  /// The parameter's store under master = stochastic: the seed's and the
  /// step's lanes (f32); else empty.
  SmallVector<Value, 2> key;
};

/// What a lowering provides for the update of one vector of lanes. The
/// hooks build IR at the builder's insertion point, in the order the walk
/// calls them; values are f32 lanes (vector<lanes x f32>) unless said.
class UpdateTarget {
public:
  /// `streams` and `states` are getStreams(optimizer) and
  /// getStates(optimizer), owned by the caller for the target's lifetime.
  UpdateTarget(OptimizerOp optimizer, ArrayRef<StreamInfo> streams,
               ArrayRef<StateOp> states)
      : optimizer(optimizer), streams(streams), states(states) {}
  virtual ~UpdateTarget();

  OptimizerOp getOptimizer() const { return optimizer; }
  ArrayRef<StateOp> getStates() const { return states; }

  /// The arithmetic of the stream codecs (widening, rounding, master
  /// weights, dequantization).
  virtual LaneMath &codecMath() = 0;
  /// The arithmetic of the update's own arith/math ops.
  virtual LaneMath &updateMath() { return codecMath(); }
  /// Where the IR of the op being lowered is located.
  virtual void setLocation(Location loc) = 0;

  /// Per-element stream `stream` (an index into `streams`): its lanes in
  /// their storage type, and the store of such lanes.
  virtual Value loadElements(unsigned stream) = 0;
  virtual void storeElements(unsigned stream, Value value) = 0;
  /// The number of launch-uniform values, and value `index` on every lane.
  virtual unsigned getNumUniforms() = 0;
  virtual Value uniform(unsigned index) = 0;
  /// The decoded lanes of state `state` (index into getStates()), and their
  /// encoding and store. Fail with an error emitted.
  virtual FailureOr<Value> loadState(int state) = 0;
  virtual LogicalResult storeState(int state, Value value) = 0;

  /// The gradient widened to f32, times `invScale` (f32 lanes) rounded
  /// through the gradient's type where the update unscales it.
  virtual Value loadGrad(Value invScale);
  /// The parameter as f32 (the master weight from its error bits where the
  /// optimizer keeps one).
  virtual Value loadParam();
  /// The parameter rounded to its type, and its error bits; under master =
  /// stochastic rounded stochastically with `key` (the seed's and the step's
  /// f32 lanes) and globalIndex().
  virtual void storeParam(Value value, ArrayRef<Value> key);
  /// The launch's global index (i64 scalar) of lane 0's element: the tile's
  /// index in the launch times the tile's elements, plus the element's
  /// offset in its tile. The lanes are consecutive elements. Only targets of
  /// optimizers with master = stochastic need it.
  virtual Value globalIndex() { llvm_unreachable("no global index"); }

  /// The value of reduction `index` (getReductions' order) for the
  /// tensor of these lanes, on every lane. By default an error: the target
  /// does not lower per-tensor reductions (the GPU reduce pre-pass, whose
  /// operands read none).
  virtual FailureOr<Value> reduction(unsigned index, ReduceOp op);

  /// The lanes of update value `result` where the target computed it once
  /// for all of them (lowerInvariants: a value of the launch or of the
  /// tensor), else null, and the walk lowers its op on the lanes.
  virtual Value invariant(Value result) { return {}; }

  /// Called after each op of the update is lowered, `mapping` holding its
  /// results' lanes.
  virtual void noteLowered(Operation &op, IRMapping &mapping) {}
  /// Called once before the held-back stores are emitted, in their order.
  virtual LogicalResult beginStores(ArrayRef<UpdateStore> stores) {
    return success();
  }

protected:
  unsigned streamIndex(StreamRole role, int state = -1) const {
    return findStream(streams, role, state);
  }

  OptimizerOp optimizer;
  ArrayRef<StreamInfo> streams;
  ArrayRef<StateOp> states;
};

/// How widely a value of the update is the same: on every lane of a launch
/// (constants, uniforms, whole-step reductions and the arithmetic of them),
/// on every lane of one tensor (its per-tensor reductions too), or per
/// element.
enum class UpdateScope { Launch, Tensor, Element };

/// The update's arithmetic whose result is the same on every lane of a
/// launch or of a tensor: each op that vectorizeUpdateOp lowers (constants
/// aside) whose operands are constants, qopt.uniform and qopt.reduce results
/// or such results, with the widest scope it holds in (Launch where no
/// operand is per tensor). FlashAdamWClip's clip coefficient min(1, max_norm
/// / (norm + eps)) is one of the launch, LAMB's trust ratio one of a tensor.
llvm::DenseMap<Value, UpdateScope> getInvariantValues(OptimizerOp optimizer);

/// Builds, at the builder's insertion point, the values of `invariants`
/// whose scope is `scope`, each once as a scalar (f32 or i1), in the
/// update's order, with `m`'s arithmetic on 1-lane vectors (the same
/// operations, so the same bits, as the lanes would compute). Operands come
/// from `values` (update value -> scalar): the caller puts the leaves there
/// (qopt.uniform, qopt.reduce) and, for the tensor's scope, the launch's
/// values. The results are added to `values`; a value whose operand has no
/// scalar is left to the lanes.
void lowerInvariants(LaneMath &m, OptimizerOp optimizer,
                     const llvm::DenseMap<Value, UpdateScope> &invariants,
                     UpdateScope scope, llvm::DenseMap<Value, Value> &values);

/// Lowers `target`'s optimizer's qopt.update onto `target`: loads, uniforms
/// and arithmetic in the update's order, then beginStores and the stores in
/// theirs. Fails, with a located error, on an op the lanes cannot run or a
/// scalar that qopt-outline-uniforms has not outlined (qopt.hyper,
/// qopt.step_count); a target's failure propagates.
LogicalResult lowerUpdate(UpdateTarget &target, int64_t lanes);

/// Lowers only what the operands of the update's reductions need (their
/// ops' backward slice: loads, uniforms, arithmetic; no store) onto
/// `target`, and calls `onOperand(index, op, lanes)` for each reduction in
/// order with its operand's f32 lanes (`index` among all the update's
/// reductions). With `include`, only the reductions it accepts and their
/// slice.
LogicalResult lowerReductionOperands(
    UpdateTarget &target, int64_t lanes,
    llvm::function_ref<void(unsigned, ReduceOp, Value)> onOperand,
    llvm::function_ref<bool(ReduceOp)> include = nullptr);

} // namespace mlir::qopt

#endif // QOPT_CODEGEN_UPDATELOWERING_H

//===- OutlineUniforms.cpp - Hoist launch-uniform scalars -----------------===//
//
// Moves the float64/boolean computations of an update that depend only on
// hyperparameters, the step and literals into a qopt.uniforms region, so that
// the runtime evaluates them once per launch on the host (PyTorch's rule for a
// Python scalar in a float32 expression: float64, then one rounding).
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_OUTLINEUNIFORMS
#include "qopt/Transforms/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

/// A value is uniform when it is an f64 or i1 computed only from
/// hyperparameters, the step and constants.
static bool isUniformType(Type type) { return type.isF64() || type.isInteger(1); }

static bool isUniformOp(Operation *op, const llvm::DenseSet<Value> &uniform) {
  if (isa<HyperValueOp, StepCountOp>(op))
    return true;
  if (op->getNumResults() != 1 || !isUniformType(op->getResult(0).getType()))
    return false;
  if (op->getNumRegions() != 0 || !isPure(op))
    return false;
  return llvm::all_of(op->getOperands(),
                      [&](Value v) { return uniform.contains(v); });
}

/// A condition under which a value of the update is needed: a uniform i1 and
/// the branch of a select that it picks (true: the select's true value).
using Guard = std::pair<Value, bool>;
using Guards = SmallVector<Guard, 2>;

/// The guards common to `a` and `b`: a value needed under either is needed
/// under those only.
static Guards intersect(const Guards &a, const Guards &b) {
  Guards common;
  for (const Guard &g : a)
    if (llvm::is_contained(b, g))
      common.push_back(g);
  return common;
}

/// For each value of `body`, the guards under which it is needed: every use
/// of it lies in the branch of a select whose uniform condition picks that
/// branch, through pure operations only. The operands of an operation with
/// effects (a store) or without results are needed always: no guard.
static llvm::DenseMap<Value, Guards>
neededUnder(Block &body, const llvm::DenseSet<Value> &uniform) {
  llvm::DenseMap<Value, Guards> needed;
  auto meet = [&](Value v, const Guards &g) {
    auto [it, inserted] = needed.try_emplace(v, g);
    if (!inserted)
      it->second = intersect(it->second, g);
  };
  // Users follow their operands in the block: walk it backwards.
  for (Operation &op : llvm::reverse(body)) {
    Guards own;
    bool known = false;
    if (op.getNumResults() != 0 && isPure(&op)) {
      for (Value r : op.getResults()) {
        auto it = needed.find(r);
        if (it == needed.end())
          continue; // unused
        own = known ? intersect(own, it->second) : it->second;
        known = true;
      }
    }
    auto select = dyn_cast<arith::SelectOp>(op);
    bool branches = select && uniform.contains(select.getCondition());
    for (OpOperand &use : op.getOpOperands()) {
      Guards g = known ? own : Guards();
      if (branches && use.getOperandNumber() != 0) {
        Guard taken{select.getCondition(), use.getOperandNumber() == 1};
        if (!llvm::is_contained(g, taken))
          g.push_back(taken);
      }
      meet(use.get(), g);
    }
  }
  return needed;
}

namespace {
struct OutlineUniformsPass
    : public qopt::impl::OutlineUniformsBase<OutlineUniformsPass> {
  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](OptimizerOp optimizer) {
      if (failed(outline(optimizer)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult outline(OptimizerOp optimizer) {
    if (optimizer.getUniforms())
      return optimizer.emitOpError("already has a qopt.uniforms region");
    UpdateOp update = optimizer.getUpdate();
    Block &body = update.getBody().front();

    // Classify in program order: SSA dominance means operands come first.
    llvm::DenseSet<Value> uniform;
    llvm::SetVector<Operation *> uniformOps;
    for (Operation &op : body)
      if (isUniformOp(&op, uniform)) {
        uniform.insert(op.getResult(0));
        uniformOps.insert(&op);
      }

    // A uniform needed only in one branch of selects with uniform conditions
    // is yielded as 0 where its branch is not taken, so that a value the
    // step does not use (RAdam's rectification, NaN while rho_t <= 4) is not
    // refused as a NaN uniform (docs/dsl.md, "Uniform values in a branch").
    llvm::DenseMap<Value, Guards> needed = neededUnder(body, uniform);
    llvm::DenseMap<Value, Guards> slotGuards;
    auto guardSlot = [&](Value v, const Guards &g) {
      auto [it, inserted] = slotGuards.try_emplace(v, g);
      if (!inserted)
        it->second = intersect(it->second, g);
    };

    // The boundary: uniform values used by per-element operations. An
    // `arith.truncf` from a uniform f64 to f32 is the boundary itself.
    llvm::MapVector<Value, unsigned> yielded;
    SmallVector<std::pair<Operation *, Value>> truncs;
    SmallVector<OpOperand *> boolUses;
    for (Operation &op : body) {
      if (uniformOps.contains(&op))
        continue;
      if (auto trunc = dyn_cast<arith::TruncFOp>(op)) {
        if (uniform.contains(trunc.getIn())) {
          yielded.insert({trunc.getIn(), yielded.size()});
          truncs.push_back({&op, trunc.getIn()});
          auto it = needed.find(trunc.getResult());
          guardSlot(trunc.getIn(), it == needed.end() ? Guards() : it->second);
          continue;
        }
      }
      for (OpOperand &use : op.getOpOperands()) {
        Value v = use.get();
        if (!uniform.contains(v))
          continue;
        if (!v.getType().isInteger(1))
          return op.emitOpError("uses the float64 uniform value ")
                 << v << " without rounding it to float32 first";
        yielded.insert({v, yielded.size()});
        boolUses.push_back(&use);
        guardSlot(v, Guards());
      }
    }

    // Build the uniforms region before the update and clone the uniform
    // computation into it.
    OpBuilder builder(update);
    auto uniforms = UniformsOp::create(builder, update.getLoc());
    Block *uniformsBlock = new Block();
    uniforms.getBody().push_back(uniformsBlock);
    builder.setInsertionPointToStart(uniformsBlock);
    IRMapping mapping;
    for (Operation *op : uniformOps)
      builder.clone(*op, mapping);
    SmallVector<Value> values;
    for (auto &entry : yielded) {
      Value value = mapping.lookup(entry.first);
      const Guards &guards = slotGuards.lookup(entry.first);
      if (!guards.empty() && value.getType().isF64()) {
        Location loc = value.getLoc();
        Value zero = arith::ConstantOp::create(builder, loc,
                                               builder.getF64FloatAttr(0.0));
        for (auto [condition, branch] : guards) {
          Value c = mapping.lookup(condition);
          value = branch ? arith::SelectOp::create(builder, loc, c, value, zero)
                         : arith::SelectOp::create(builder, loc, c, zero, value);
        }
      }
      values.push_back(value);
    }
    YieldOp::create(builder, update.getLoc(), values);

    // Replace the boundary with reads of the uniforms table.
    for (auto [op, value] : truncs) {
      builder.setInsertionPoint(op);
      auto read = UniformOp::create(builder, op->getLoc(), builder.getF32Type(),
                                    builder.getI64IntegerAttr(yielded[value]));
      op->getResult(0).replaceAllUsesWith(read.getResult());
      op->erase();
    }
    for (OpOperand *use : boolUses) {
      Operation *user = use->getOwner();
      builder.setInsertionPoint(user);
      Location loc = user->getLoc();
      auto read = UniformOp::create(builder, loc, builder.getF32Type(),
                                    builder.getI64IntegerAttr(yielded[use->get()]));
      Value zero = arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(0.0f));
      Value flag = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::UNE,
                                         read, zero);
      use->set(flag);
    }

    // The uniform ops left in the update are dead now.
    for (Operation *op : llvm::reverse(uniformOps)) {
      if (!op->use_empty())
        return op->emitOpError("is still used in the update after outlining");
      op->erase();
    }
    return success();
  }
};
} // namespace

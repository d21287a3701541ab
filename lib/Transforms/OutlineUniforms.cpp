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
    for (auto &entry : yielded)
      values.push_back(mapping.lookup(entry.first));
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

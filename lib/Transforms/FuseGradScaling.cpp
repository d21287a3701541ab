//===- FuseGradScaling.cpp - GradScaler's unscale and skip in the step ----===//
//
// Adds the hyperparameters grad_scale and found_inf, multiplies every
// gradient read by f32(1 / grad_scale) (rounded back to the gradient's type,
// as GradScaler.unscale_ stores it) and makes the step a no-op when found_inf
// is nonzero. Both values are launch-uniform, so the runtime (or a trainer's
// device tensors) supplies them through the uniforms table.
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Transforms/Passes.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_FUSEGRADSCALING
#include "qopt/Transforms/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

/// The hyperparameters the pass adds.
static constexpr llvm::StringLiteral kGradScale = "grad_scale";
static constexpr llvm::StringLiteral kFoundInf = "found_inf";

namespace {
struct FuseGradScalingPass
    : public qopt::impl::FuseGradScalingBase<FuseGradScalingPass> {
  void runOnOperation() override {
    for (OptimizerOp optimizer : getOperation().getOps<OptimizerOp>())
      if (failed(fuse(optimizer)))
        return signalPassFailure();
  }

  LogicalResult fuse(OptimizerOp optimizer) {
    if (optimizer.getUniforms())
      return optimizer.emitOpError("already has its uniforms outlined; "
                                   "qopt-fuse-grad-scaling must run before "
                                   "qopt-outline-uniforms");
    for (HyperOp hyper : getHypers(optimizer))
      if (hyper.getSymName() == kGradScale || hyper.getSymName() == kFoundInf)
        return hyper.emitError("hyperparameter '")
               << hyper.getSymName()
               << "' is reserved for grad scaling (qopt-opt --grad-scaling); "
                  "rename it";
    Block &body = optimizer.getUpdate().getBody().front();
    for (Operation &op : body)
      if (isa<SkipIfOp>(op))
        return op.emitOpError("is already in the update; grad scaling is "
                              "fused once");

    // The hyperparameters, after the spec's own.
    Location loc = optimizer.getLoc();
    OpBuilder b(optimizer.getContext());
    SmallVector<HyperOp> hypers = getHypers(optimizer);
    if (hypers.empty())
      b.setInsertionPointToStart(&optimizer.getBody().front());
    else
      b.setInsertionPointAfter(hypers.back());
    HyperOp::create(b, loc, kGradScale, b.getF64FloatAttr(1.0));
    HyperOp::create(b, loc, kFoundInf, b.getF64FloatAttr(0.0));

    // inv = f32(1 / grad_scale): float64, then one rounding, as
    // GradScaler's `scale.double().reciprocal().float()`.
    b.setInsertionPointToStart(&body);
    Type f32 = b.getF32Type(), f64 = b.getF64Type();
    Value scale = HyperValueOp::create(b, loc, f64, kGradScale);
    Value one = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1.0));
    Value inv = arith::TruncFOp::create(
        b, loc, f32, arith::DivFOp::create(b, loc, one, scale));
    Value found = arith::TruncFOp::create(
        b, loc, f32, HyperValueOp::create(b, loc, f64, kFoundInf));
    SkipIfOp::create(b, loc, found);

    SmallVector<LoadGradOp> loads;
    for (Operation &op : body)
      if (auto load = dyn_cast<LoadGradOp>(op))
        if (!load.getInvScale())
          loads.push_back(load);
    for (LoadGradOp load : loads) {
      b.setInsertionPoint(load);
      auto scaled = LoadGradOp::create(b, load.getLoc(), f32, inv);
      load.getResult().replaceAllUsesWith(scaled.getResult());
      load.erase();
    }
    return success();
  }
};
} // namespace

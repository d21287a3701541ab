//===- PlanKernel.cpp - Attach each optimizer's launch plan ---------------===//
//
// qopt-plan-kernel: the tuning policy's plan for each optimizer, written into
// the IR as #qopt.kernel_plan.
//
//===----------------------------------------------------------------------===//

#include "qopt/Schedule/Passes.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_PLANKERNEL
#include "qopt/Schedule/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {
struct PlanKernelPass : public qopt::impl::PlanKernelBase<PlanKernelPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *context) override {
    int64_t blocks = minBlocksPerSM;
    if (blocks < -1 || blocks > PlanRequest::kMaxMinBlocksPerSM)
      return emitError(UnknownLoc::get(context),
                       "qopt-plan-kernel: min-blocks-per-sm takes -1 (chosen), "
                       "0 (no bound) or up to ")
             << PlanRequest::kMaxMinBlocksPerSM << " blocks, got " << blocks;
    int64_t aheadTiles = l2PrefetchTiles;
    if (aheadTiles >= -1 && aheadTiles <= PlanRequest::kMaxL2PrefetchTiles)
      return success();
    return emitError(UnknownLoc::get(context),
                     "qopt-plan-kernel: l2-prefetch-tiles takes -1 (chosen), "
                     "0 (none) or up to ")
           << PlanRequest::kMaxL2PrefetchTiles << " tiles, got " << aheadTiles;
  }

  void runOnOperation() override {
    PlanRequest request;
    request.target = target;
    request.threadsPerBlock = threadsPerBlock;
    request.elementsPerThread = elementsPerThread;
    request.asyncCopy = asyncCopy;
    request.tileClaims = tileClaims;
    request.tileClaimsStaticEighths = tileClaimsStaticEighths;
    request.codebookBuckets = codebookBuckets;
    request.bulkCopy = bulkCopy;
    request.producerWarp = producerWarp;
    request.l2Prefetch = l2Prefetch;
    request.l2PrefetchTiles = l2PrefetchTiles;
    request.l2PrefetchKind = l2PrefetchKind;
    request.splitAbsmaxBarrier = splitAbsmaxBarrier;
    request.registerPrefetch = registerPrefetch;
    request.minBlocksPerSM = minBlocksPerSM;
    for (OptimizerOp optimizer : getOperation().getOps<OptimizerOp>()) {
      FailureOr<KernelPlanAttr> plan = chooseKernelPlan(optimizer, request);
      if (failed(plan))
        return signalPassFailure();
      optimizer->setAttr(kKernelPlanAttrName, *plan);
    }
  }
};
} // namespace

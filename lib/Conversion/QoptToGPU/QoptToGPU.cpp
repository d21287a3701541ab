//===- QoptToGPU.cpp - qopt.optimizer to a multi-tensor GPU kernel --------===//
//
// Emits one gpu.func per qopt.optimizer with the calling convention of
// docs/abi.md. The kernel is a persistent grid-stride loop over tiles; each
// thread owns `elements-per-thread` consecutive elements of a tile as one
// vector of f32 lanes, so every per-element operation of the update becomes
// one vector operation and every stream access one (or a few) 16-byte
// accesses. A partial last tile uses masked accesses. Group absmax is reduced
// with warp shuffles, a codebook block's absmax by redux.sync within a warp and
// through shared memory across warps (one barrier per tile for all states);
// codebook codes come from a bucket table in dynamic shared memory, and
// where the plan says so a later tile is prefetched into L2 (thread 0's bulk
// prefetch or each thread's lines). With
// async copies each thread copies its part of the full tile stages - 1 ahead
// into shared memory (cp.async) before it computes the current one, so the
// tiles' loads are in flight without holding registers; a full tile then
// addresses its streams from thread pointers set up once per run.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "qopt/Schedule/TuningPolicy.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_CONVERTQOPTTOGPU
#include "qopt/Conversion/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {
struct ConvertQoptToGPUPass
    : public qopt::impl::ConvertQoptToGPUBase<ConvertQoptToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<OptimizerOp> optimizers(module.getOps<OptimizerOp>());
    for (OptimizerOp optimizer : optimizers) {
      KernelPlanAttr plan = getKernelPlan(optimizer);
      if (!plan) {
        optimizer.emitOpError("needs a launch plan (qopt-plan-kernel) before "
                              "convert-qopt-to-gpu");
        return signalPassFailure();
      }
      // A staged kernel's copies take their sources from the run's thread
      // pointers.
      if (plan.getStages() > 0 && !plan.getRunPointers()) {
        optimizer.emitOpError("has a launch plan that stages tiles without "
                              "run_pointers");
        return signalPassFailure();
      }
      // The loop adds the prefetch's distance to its 32-bit tile counter;
      // a staged kernel's stages are filled per thread, so its prefetch is
      // each thread's lines.
      int64_t ahead = plan.getL2PrefetchTiles();
      if (ahead < 0 || ahead > PlanRequest::kMaxL2PrefetchTiles) {
        optimizer.emitOpError("has a launch plan with l2_prefetch_tiles = ")
            << ahead << ", outside 0 to " << PlanRequest::kMaxL2PrefetchTiles;
        return signalPassFailure();
      }
      if (ahead > 0 && plan.getStages() > 0 && !plan.getL2PrefetchLines()) {
        optimizer.emitOpError("has a launch plan that stages tiles and "
                              "prefetches them in bulk (l2_prefetch_lines = "
                              "false)");
        return signalPassFailure();
      }
      // Bulk copies fill stages; the register bound is a count of blocks
      // that fit a multiprocessor's threads.
      if (plan.getBulkCopy() && plan.getStages() == 0) {
        optimizer.emitOpError("has a launch plan with bulk_copy and no "
                              "stages");
        return signalPassFailure();
      }
      // A producer warp issues bulk copies, and the other warps meet at no
      // block barrier after its branch (canUseProducerWarp).
      if (plan.getProducerWarp() &&
          (!plan.getBulkCopy() ||
           !canUseProducerWarp(optimizer, plan.getThreads(),
                               plan.getLanes()))) {
        optimizer.emitOpError("has a launch plan with producer_warp that ")
            << (plan.getBulkCopy()
                    ? "its update does not allow (a codebook state, a "
                      "reduction, a group across warps, or over 992 threads)"
                    : "has no bulk_copy");
        return signalPassFailure();
      }
      int64_t minBlocks = plan.getMinBlocksPerSm();
      int64_t threads = std::max<int64_t>(
          plan.getThreads() + (plan.getProducerWarp() ? 32 : 0), 1);
      if (minBlocks < 0 || minBlocks > PlanRequest::kMaxThreadsPerSM / threads) {
        optimizer.emitOpError("has a launch plan with min_blocks_per_sm = ")
            << minBlocks << ", outside 0 to "
            << PlanRequest::kMaxThreadsPerSM / threads << " blocks of "
            << threads << " threads";
        return signalPassFailure();
      }
      // The register prefetch loads from global memory; a staged kernel's
      // tiles come from its stages.
      if (plan.getRegisterPrefetch() && plan.getStages() > 0) {
        optimizer.emitOpError("has a launch plan that stages tiles and "
                              "prefetches them into registers "
                              "(register_prefetch = true)");
        return signalPassFailure();
      }
      OpBuilder b(module.getContext());
      b.setInsertionPointToEnd(module.getBody());
      auto gpuModule = gpu::GPUModuleOp::create(
          b, optimizer.getLoc(), (optimizer.getSymName() + "_kernels").str());
      KernelEmitter emitter(optimizer, plan, b, mode == ArithMode::Fast, checkedRounding,
                            guardedIeee);
      if (failed(emitter.emit(gpuModule)))
        return signalPassFailure();
      // Per-tensor reductions: the reduce pre-pass and the finish beside the
      // step (docs/abi.md, "Reductions").
      if (!getReductions(optimizer).empty()) {
        if (failed(KernelEmitter::checkReductionShape(optimizer, plan)))
          return signalPassFailure();
        KernelEmitter reduce(optimizer, chooseReducePassPlan(optimizer, plan),
                             b, mode == ArithMode::Fast, checkedRounding,
                             guardedIeee, KernelPhase::Reduce);
        if (failed(reduce.emit(gpuModule)) ||
            failed(emitter.emitFinish(gpuModule)))
          return signalPassFailure();
        if (!getReductions(optimizer, /*global=*/true).empty() &&
            failed(emitter.emitCombine(gpuModule)))
          return signalPassFailure();
      }
      optimizer.erase();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
  }
};
} // namespace

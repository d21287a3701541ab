//===- Passes.td - qopt launch planning --------------------*- tablegen -*-===//
#ifndef QOPT_SCHEDULE_PASSES_TD
#define QOPT_SCHEDULE_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanKernel : Pass<"qopt-plan-kernel", "::mlir::ModuleOp"> {
  let summary = "Choose each optimizer's launch plan and attach it to the IR";
  let description = [{
    Chooses, for each `qopt.optimizer`, the launch plan of its kernel (threads,
    lanes, tile stages, dynamic shared memory, run thread pointers and
    descriptor loads, tile claims, L2 prefetch, register bound, the guards'
    register costs, waves) through the tuning policy (lib/Schedule) and
    attaches it as `qopt.kernel_plan`. The GPU and host lowerings and the
    manifest writer read the attribute; an existing plan is replaced.

    Before:
    ```mlir
    qopt.optimizer @SGD param "p" : bf16 master none grad "g" : bf16 { ... }
    ```
    After (`target=gpu`):
    ```mlir
    qopt.optimizer @SGD param "p" : bf16 master none grad "g" : bf16
        attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256,
        lanes = 16, stages = 0, ...>} { ... }
    ```
  }];
  let options = [
    Option<"target", "target", "::mlir::qopt::PlanTarget",
           /*default=*/"::mlir::qopt::PlanTarget::GPU",
           "The lowering the plan is for",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::PlanTarget::GPU, "gpu",
                        "convert-qopt-to-gpu"),
             clEnumValN(::mlir::qopt::PlanTarget::Host, "host",
                        "convert-qopt-to-host: the GPU kernel's tiles, "
                        "stepped statically from registers"))}]>,
    Option<"threadsPerBlock", "threads-per-block", "int64_t", /*default=*/"0",
           "Threads per block (0: chosen, see chooseThreadsPerBlock)">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t",
           /*default=*/"0",
           "Consecutive elements each thread owns per tile (0: chosen, see "
           "chooseElementsPerThread; at most the smallest group)">,
    Option<"asyncCopy", "async-copy", "::mlir::qopt::AsyncCopy",
           /*default=*/"::mlir::qopt::AsyncCopy::Auto",
           "Copy each full tile's read streams into dynamic shared memory one "
           "or more tiles ahead with cp.async (2 to 4 stages, "
           "chooseTileStaging; the manifest's launch.shared_bytes), so that "
           "its loads are in flight while the tile before it computes",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::AsyncCopy::Auto, "auto",
                        "the measured best for the update (chooseAsyncCopy)"),
             clEnumValN(::mlir::qopt::AsyncCopy::On, "on", "always"),
             clEnumValN(::mlir::qopt::AsyncCopy::Off, "off", "never"))}]>,
    Option<"tileClaims", "tile-claims", "int64_t", /*default=*/"-1",
           "Tiles past each block's static range claimed this many at a time "
           "from the launch's work counters (an extra kernel argument, "
           "docs/abi.md): -1 for chooseTileClaims' choice, 0 for none; never "
           "for staged kernels">,
    Option<"tileClaimsStaticEighths", "tile-claims-static-eighths", "int64_t",
           /*default=*/"0",
           "Where the kernel claims: the eighths of the tiles each block "
           "steps in its static range (1 to 8; 0 for chooseTileClaims' "
           "choice, 5 with tile-claims > 0)">,
    Option<"codebookBuckets", "codebook-buckets", "bool", /*default=*/"true",
           "Codebook codes from one u32 entry of a table of 2 x 3073 buckets "
           "of normalized values in dynamic shared memory (exact; the 8-step "
           "search where a bucket holds more than one midpoint)">,
    Option<"bulkCopy", "bulk-copy", "bool", /*default=*/"false",
           "Staged kernels (sm_90 and newer): fill the stages with bulk "
           "copies (cp.async.bulk) of each stream's whole tile, completing a "
           "barrier per stage, instead of each thread's cp.async of its own "
           "bytes (same results, the same shared memory; "
           "docs/tuning.md#bulk-copy)">,
    Option<"producerWarp", "bulk-copy-producer", "bool", /*default=*/"false",
           "Staged kernels (sm_90 and newer) that the policy gives one "
           "(chooseProducerWarp: two or more group states) and "
           "canUseProducerWarp allows (no codebook state, no reduction, no "
           "group across warps): bulk "
           "copies issued by one warp more per block, the other warps "
           "counting themselves done with a stage on its mbarrier (same "
           "results; with bulk-copy elsewhere the last warp done with a "
           "stage refills it; off by default, docs/tuning.md#producer-warp)">,
    Option<"splitAbsmaxBarrier", "split-absmax-barrier", "bool",
           /*default=*/"true",
           "Codebook blocks that span warps (sm_90 and newer): each warp "
           "posts its maxima and every thread arrives at an mbarrier once "
           "the tile's stored states are computed, and waits before their "
           "codes (chooseSplitAbsmaxBarrier; docs/tuning.md#split-absmax)">,
    Option<"l2Prefetch", "l2-prefetch", "bool", /*default=*/"true",
           "sm_90 and newer: a later full tile's read streams prefetched "
           "into L2 (chooseL2PrefetchTiles says how far, 0 for none, staged "
           "kernels only where l2-prefetch-tiles asks; chooseL2PrefetchLines "
           "by whom)">,
    Option<"l2PrefetchTiles", "l2-prefetch-tiles", "int64_t",
           /*default=*/"-1",
           "With l2-prefetch, how many tiles ahead every unstaged kernel "
           "prefetches (a staged one only past the tiles its copies run "
           "ahead, by lines): -1 for chooseL2PrefetchTiles' choice, 0 for "
           "none, at most 1024">,
    Option<"l2PrefetchKind", "l2-prefetch-kind",
           "::mlir::qopt::L2PrefetchKind",
           /*default=*/"::mlir::qopt::L2PrefetchKind::Auto",
           "Who issues the L2 prefetch of an unstaged kernel's later tiles, "
           "where the plan prefetches (l2-prefetch-tiles or the policy)",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::L2PrefetchKind::Auto, "auto",
                        "the measured best for the update "
                        "(chooseL2PrefetchLines)"),
             clEnumValN(::mlir::qopt::L2PrefetchKind::Bulk, "bulk",
                        "thread 0, one cp.async.bulk.prefetch.L2 per stream"),
             clEnumValN(::mlir::qopt::L2PrefetchKind::Lines, "lines",
                        "every thread, prefetch.global.L2 of its own lanes"))}]>,
    Option<"registerPrefetch", "register-prefetch",
           "::mlir::qopt::RegisterPrefetch",
           /*default=*/"::mlir::qopt::RegisterPrefetch::Auto",
           "Unstaged kernels: load the next full tile's read streams (not "
           "packed 4-bit codes) into "
           "registers before the current tile's work, the loop carrying "
           "them (a software pipeline of one tile)",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::RegisterPrefetch::Auto, "auto",
                        "the measured best for the update "
                        "(chooseRegisterPrefetch)"),
             clEnumValN(::mlir::qopt::RegisterPrefetch::On, "on",
                        "every unstaged kernel's step (not the reduce pre-pass)"),
             clEnumValN(::mlir::qopt::RegisterPrefetch::Off, "off",
                        "never"))}]>,
    Option<"minBlocksPerSM", "min-blocks-per-sm", "int64_t",
           /*default=*/"-1",
           "The blocks per multiprocessor a kernel's registers are bounded "
           "for (nvvm.minctasm): -1 for chooseMinBlocksPerSM's choice, 0 for "
           "no bound, at most 2048 threads in all">,
  ];
}

#endif // QOPT_SCHEDULE_PASSES_TD

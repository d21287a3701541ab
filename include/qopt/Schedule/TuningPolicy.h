//===- TuningPolicy.h - The measured launch choices -------------*- C++ -*-===//
//
// The one place that holds measured policy: threads, lanes, stages, tile
// claims, waves, L2 prefetch and register bounds of a GPU kernel. Each
// `choose…` function states its rule; the measurements behind it are in
// docs/tuning.md under the anchor it cites. qopt-plan-kernel writes the
// result into the IR as #qopt.kernel_plan (chooseKernelPlan); nothing after
// it chooses again.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_SCHEDULE_TUNINGPOLICY_H
#define QOPT_SCHEDULE_TUNINGPOLICY_H

#include "qopt/Schedule/KernelLayout.h"

namespace mlir::qopt {

/// Whether a GPU kernel copies its tiles ahead with cp.async.
enum class AsyncCopy { Auto, On, Off };

/// How an unstaged GPU kernel prefetches its later tiles into L2: Auto for
/// the policy's choice (chooseL2PrefetchLines), Bulk by thread 0's
/// cp.async.bulk.prefetch of each stream's tile, Lines by each thread's
/// prefetch.global.L2 of its own lanes.
enum class L2PrefetchKind { Auto, Bulk, Lines };

/// Whether an unstaged GPU kernel loads its next full tile's read streams
/// into registers before it computes the current one (the loop carries
/// them): Auto for the policy's choice (chooseRegisterPrefetch).
enum class RegisterPrefetch { Auto, On, Off };

/// Which lowering a plan is for.
enum class PlanTarget { GPU, Host };

/// What the driver asks of a plan: each field <= 0 (or Auto) for the
/// policy's choice. Mirrors qopt-plan-kernel's options.
struct PlanRequest {
  PlanTarget target = PlanTarget::GPU;
  int64_t threadsPerBlock = 0;
  int64_t elementsPerThread = 0;
  AsyncCopy asyncCopy = AsyncCopy::Auto;
  int64_t tileClaims = -1;
  int64_t tileClaimsStaticEighths = 0;
  bool codebookBuckets = true;
  bool bulkCopy = false;   ///< asked for, and the chip has cp.async.bulk
  /// Bulk copies issued by one warp more per block, asked for (off by
  /// default: docs/tuning.md#producer-warp), where the policy takes it
  /// (chooseProducerWarp) and canUseProducerWarp allows (and the chip has
  /// cp.async.bulk), with bulkCopy or without.
  bool producerWarp = false;
  /// L2 prefetch of either kind: asked for, and the chip is sm_90 or newer,
  /// where the policy holds (docs/tuning.md#l2-prefetch).
  bool l2Prefetch = true;
  /// Tiles ahead for every unstaged kernel (-1: chooseL2PrefetchTiles), at
  /// most kMaxL2PrefetchTiles (the loop's 32-bit tile counter adds it).
  int64_t l2PrefetchTiles = -1;
  static constexpr int64_t kMaxL2PrefetchTiles = 1024;
  L2PrefetchKind l2PrefetchKind = L2PrefetchKind::Auto;
  /// asked for, and the chip has mbarrier.try_wait (sm_90)
  bool splitAbsmaxBarrier = true;
  RegisterPrefetch registerPrefetch = RegisterPrefetch::Auto;
  /// The blocks per multiprocessor the registers are bounded for (-1:
  /// chooseMinBlocksPerSM; 0: no bound), at most kMaxMinBlocksPerSM and
  /// kMaxThreadsPerSM threads in all (ptxas ignores a larger bound).
  int64_t minBlocksPerSM = -1;
  static constexpr int64_t kMaxMinBlocksPerSM = 32;
  /// The threads a multiprocessor holds (sm_80 to sm_90).
  static constexpr int64_t kMaxThreadsPerSM = 2048;
};

/// Limits on the tile stages.
struct StagingLimits {
  /// At most this many stages, fewer (at least 2) where they would exceed
  /// the shared-memory limit. docs/tuning.md#stages
  static constexpr int64_t kMaxStages = 4;
  /// No staging beyond this: past 227 KiB a block does not fit an H200
  /// multiprocessor, and the staged kernels run one block of 512 threads per
  /// multiprocessor, so the stages cost no block up to it.
  static constexpr int64_t kMaxSharedBytes = 160 * 1024;
  /// The dynamic shared memory every GPU since sm_80 grants a block (99 KiB
  /// on sm_86 and sm_89). A codebook kernel keeps its stages, bucket tables
  /// and static tables within it, so that it loads wherever an unstaged one
  /// does.
  static constexpr int64_t kPortableSharedBytes = 99 * 1024;
  /// A block's static shared memory on every GPU (ptxas refuses more): the
  /// codebook states' static tables must fit it.
  static constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;
};

/// Threads per GPU block: `requested`, or with `requested <= 0` 512 for
/// staged group steps, for two or more states without a codebook and for
/// two or more states with small codebook blocks and an f32 parameter; else
/// 256. docs/tuning.md#threads
int64_t chooseThreadsPerBlock(OptimizerOp optimizer, int64_t requested);

/// Consecutive elements per GPU thread (the lanes of a host chunk):
/// `requested`, or with `requested <= 0` 8, but 16 for one group state whose
/// tiles are not staged, raised until `threads` such threads
/// cover the largest block; never more than the smallest group, so that a
/// thread's lanes lie in one group. docs/tuning.md#lanes
int64_t chooseElementsPerThread(OptimizerOp optimizer, int64_t threads,
                                int64_t requested);

/// The launch shape for the requested threads and lanes (chosen where
/// <= 0), checked: threads a multiple of 32 in [32, 1024], and
/// verifyTileShape. Where the chosen shape does not hold whole groups and
/// blocks (fitsTileShape) or, for reductions, whole chunks
/// (fitsReductionChunks), the nearest shape that does, varying only the
/// dimensions not requested (docs/tuning.md#fallback-shape). Emits an error
/// where none does; a shape that fails only the reductions' rule is
/// returned, for the host lowering, which takes it.
FailureOr<TileShape> chooseTileShape(OptimizerOp optimizer,
                                     int64_t requestedThreads,
                                     int64_t requestedLanes);

/// Whether the optimizer has two or more states, one or more of them codebook
/// states and every codebook block of at most 256 elements (within one
/// warp's lanes at 8 a thread, so that no block-wide barrier joins a tile's
/// warps for its absmax).
bool hasSmallCodebookBlocks(OptimizerOp optimizer);

/// `requested`, or for Auto: on for updates with group states, no codebook
/// state and a 16-bit parameter, and for codebook updates with small blocks
/// (hasSmallCodebookBlocks) and a 16-bit parameter; off for the rest.
/// docs/tuning.md#async-copy
bool chooseAsyncCopy(OptimizerOp optimizer, AsyncCopy requested);

/// The most bytes of stages a kernel of `threads` threads takes:
/// kMaxSharedBytes, and for an optimizer with codebook states no more than
/// kPortableSharedBytes less its bucket tables and static tables.
int64_t chooseStagingSharedLimit(OptimizerOp optimizer, int64_t threads);

/// The staging of `optimizer`'s tiles of `shape`: getStageLayout with the
/// most stages (kMaxStages down to 2) within chooseStagingSharedLimit; empty
/// where two stages exceed it or no stream can be staged.
TileStaging chooseTileStaging(OptimizerOp optimizer, TileShape shape);

/// How many tiles ahead an unstaged GPU kernel prefetches a later full
/// tile's read streams into L2: 2 for codebook updates of a 16-bit parameter
/// whose codebook blocks span warps; 0 for three or more states with a
/// codebook and an f32 parameter; else 1 for updates with a codebook state,
/// and for two or more states one of which is a group state; 0 elsewhere
/// and for staged kernels.
/// docs/tuning.md#l2-prefetch
int64_t chooseL2PrefetchTiles(OptimizerOp optimizer, bool staged);

/// Whether an unstaged kernel's L2 prefetch is each thread's prefetch of its
/// own lanes (prefetch.global.L2) rather than thread 0's bulk prefetch of
/// the whole tile: `requested`, or for Auto lines but where codebook blocks
/// span warps and the parameter is 16-bit. docs/tuning.md#l2-prefetch
bool chooseL2PrefetchLines(OptimizerOp optimizer, L2PrefetchKind requested);

/// The registers a thread of `lanes` lanes holds for one tile's read
/// streams (a vector of its lanes per element stream, one per group or
/// block stream, packed 4-bit codes not carried): the register prefetch's
/// cost across the tile loop.
int64_t getRegisterPrefetchRegisters(OptimizerOp optimizer, int64_t lanes);

/// The most registers the register prefetch carries where the policy
/// chooses it. docs/tuning.md#register-prefetch
constexpr int64_t kMaxRegisterPrefetchRegisters = 24;

/// Whether an unstaged kernel's loop carries its next full tile's element
/// streams, loaded into registers before the current tile's work:
/// `requested` (On only where the kernel is unstaged), or for Auto on where
/// every state is plain (no codebook or group state) and the loads of a
/// tile of `lanes` lanes take at most kMaxRegisterPrefetchRegisters.
/// docs/tuning.md#register-prefetch
bool chooseRegisterPrefetch(OptimizerOp optimizer, bool staged, int64_t lanes,
                            RegisterPrefetch requested);

/// The lanes of the GPU reduce pre-pass for the step plan `step`: twice the
/// step's 8 for a 16-bit gradient where the reductions' operands read no
/// state (the gradient alone) or the update has two or more reductions;
/// the step's elsewhere. At most 64 (a warp's elements within one
/// 2048-element chunk), a warp per block and the smallest group or
/// codebook block. docs/tuning.md#prepass
int64_t chooseReducePassLanes(OptimizerOp optimizer, KernelPlanAttr step);

/// The GPU reduce pre-pass's plan (docs/abi.md, "Reductions") for the step
/// plan `step`: the step's tile as tile / lanes threads of
/// chooseReducePassLanes, no stages, claims, L2 prefetch or bucket tables,
/// one wave. The pre-pass's chunk partials do not depend on it
/// (docs/numerics.md §7). docs/tuning.md#prepass
KernelPlanAttr chooseReducePassPlan(OptimizerOp optimizer, KernelPlanAttr step);

/// How many waves of resident blocks a launch asks for at most: 4 for
/// updates of a 16-bit parameter without a codebook state, 1 elsewhere.
/// docs/tuning.md#waves
int64_t chooseGridWaves(OptimizerOp optimizer);

/// The fewest tiles per block that a launch of more than one wave keeps: 24
/// for updates of at most one state, 128 for more. docs/tuning.md#waves
int64_t chooseGridMinTilesPerBlock(OptimizerOp optimizer);

/// Never for a staged kernel (a claim restarts its copy pipeline). With
/// `requested` < 0: for kernels with a codebook state, claims of two tiles
/// past 5/8 static where a codebook block holds 1024 elements or more, else
/// of one tile past 6/8; none without. `requested` 0: none; n > 0: claims of
/// n tiles past 5/8. `staticEighths` > 0 replaces the static share (clamped
/// to 1..8). docs/tuning.md#tile-claims
TileClaims chooseTileClaims(OptimizerOp optimizer, bool staged,
                            int64_t requested, int64_t staticEighths);

/// Whether a GPU kernel's full tiles address their streams from thread
/// pointers set up per run and carried by the run's tile loop, which then
/// counts the run's tiles from 0 in 32 bits: for staged kernels (whose
/// copies take their sources from them), which have registers to spare;
/// not for unstaged ones. docs/tuning.md#run-pointers
bool chooseRunThreadPointers(OptimizerOp optimizer, bool staged);

/// Whether a GPU kernel without run thread pointers marks its loads of
/// stream pointers from the run's descriptor invariant (pairs of them one
/// 16-byte load where the streams are even), so that LLVM reuses a pointer
/// across the tile's stores: for two or more states, but not for the
/// codebook kernels of an f32 parameter. docs/tuning.md#descriptor-loads
bool chooseInvariantDescriptorLoads(OptimizerOp optimizer, bool runPointers);

/// Whether guarded IEEE division by lane divisors tries the all-zero
/// shortcut in its fallback, as square roots and divisions by a uniform
/// always do: in every kernel but the codebook kernels of a 16-bit
/// parameter without run thread pointers. docs/tuning.md#zero-shortcut
bool chooseZeroShortcutLaneDivisors(OptimizerOp optimizer, bool runPointers);

/// Whether a guarded division checks a scaled numerator's range through its
/// base, which holds registers: in kernels with run thread pointers (the
/// staged ones, with registers to spare). docs/tuning.md#zero-shortcut
bool chooseScaledRangeChecks(OptimizerOp optimizer, bool runPointers);

/// Whether saturating codebook blocks are counted where their absmax is
/// reduced, and the code search takes the saturated absmax as finite: in
/// unstaged kernels with a codebook state, whose 64 registers the raw
/// absmax held to the store spilled. docs/tuning.md#counters
bool chooseEarlySaturationCounts(OptimizerOp optimizer, bool staged);
/// The registers a thread of a codebook kernel is held to, which sizes its
/// blocks per SM: 80 with an f32 parameter, two or more states and no small
/// codebook blocks, else 64. docs/tuning.md#registers
int64_t getCodebookRegisterBound(OptimizerOp optimizer);
/// Whether the absmax of codebook blocks that span warps (more than 32
/// threads' `lanes`) goes through a split arrive / wait: where `requested`,
/// such a block exists and the kernel is held to more than 64 registers.
/// docs/tuning.md#split-absmax
/// Whether a bulk-copy kernel of `threads` threads of `lanes` lanes may
/// take a producer warp: the block is then threads + 32 threads, and its
/// other warps synchronize only through the stages' barriers and warp
/// shuffles after the producer's branch, so the update may hold no
/// codebook state (tables and block absmax), no reduction (the pre-pass's
/// values and block trees), and no group that spans warps.
bool canUseProducerWarp(OptimizerOp optimizer, int64_t threads,
                        int64_t lanes);

/// Whether the policy gives a kernel that may take a producer warp one:
/// two or more group states (docs/tuning.md#producer-warp).
bool chooseProducerWarp(OptimizerOp optimizer);

bool chooseSplitAbsmaxBarrier(OptimizerOp optimizer, int64_t lanes,
                              bool requested);

/// The blocks per multiprocessor a kernel's registers are bounded for
/// (nvvm.minctasm), 0 for no bound: codebook kernels as many as fit the
/// shared memory and 64 (80 for an f32 parameter with large codebook blocks
/// and two or more states) registers a thread; unstaged updates of at most
/// one state and no codebook at 256 threads or fewer, 2.
/// docs/tuning.md#registers
int64_t chooseMinBlocksPerSM(OptimizerOp optimizer, int64_t threads,
                             int64_t dynamicSharedBytes);

/// The blocks per multiprocessor a launch suggests where the runtime cannot
/// ask the driver: 4, or as many as `sharedBytes` lets fit in the 228 KiB of
/// an H100/H200 multiprocessor (1 KiB of it reserved per block), and no more
/// blocks of `threads` than a multiprocessor's 2048 threads hold.
int64_t chooseSuggestedBlocksPerSM(int64_t sharedBytes, int64_t threads);

/// The whole plan for `request`: the one call qopt-plan-kernel makes.
/// Emits an error (or, for async copies asked for that cannot be, a
/// warning) on `optimizer`.
FailureOr<KernelPlanAttr> chooseKernelPlan(OptimizerOp optimizer,
                                           const PlanRequest &request);

} // namespace mlir::qopt

#endif // QOPT_SCHEDULE_TUNINGPOLICY_H

//===- QoptOps.h - qopt operations ------------------------------*- C++ -*-===//
//
// Declares the operations of the qopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTOPS_H
#define QOPT_DIALECT_QOPT_QOPTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include <string>
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"

namespace mlir::qopt {
class UpdateOp;
class UniformsOp;
class StateOp;
class HyperOp;
} // namespace mlir::qopt

#define GET_OP_CLASSES
#include "qopt/Dialect/Qopt/QoptOps.h.inc"

namespace mlir::qopt {
/// States of `optimizer` in declaration order: their order in the kernel ABI.
llvm::SmallVector<StateOp> getStates(OptimizerOp optimizer);
/// Hyperparameters of `optimizer` in declaration order.
llvm::SmallVector<HyperOp> getHypers(OptimizerOp optimizer);

/// What one stream of a tensor holds (docs/abi.md).
enum class StreamRole { Param, ErrorBits, Grad, State, StateCodes, StateScales,
                        StateAbsmax };

/// One buffer per tensor in the kernel ABI, in ABI order.
struct StreamInfo {
  std::string name;   ///< `p`, `p.ecc`, `g`, `m.codes`, `m.scales`, ...
  StreamRole role;
  Type storage;       ///< bf16, f16, f32, si8, ui8 or si16.
  int64_t perElements;///< 1 for per-element streams, else the group/block size.
  bool written;       ///< read-write (param, error bits, states) or read-only.
  int stateIndex;     ///< index into getStates(), or -1.
};

/// The streams of `optimizer` in ABI order.
llvm::SmallVector<StreamInfo> getStreams(OptimizerOp optimizer);

/// The streams the update reads (indices into getStreams), in the order of
/// their first load: a load_param reads the parameter and its error bits, a
/// load_state the state's values or codes and then its scales or absmax.
llvm::SmallVector<unsigned> getReadStreams(OptimizerOp optimizer);

/// The name of a stream role in manifests (`param`, `error_bits`, ...).
llvm::StringRef stringifyStreamRole(StreamRole role);

/// The group or block size of a quantized state (the span of its absmax); 0
/// for a plain state.
int64_t getReductionSize(StateOp state);

/// Checks that `threads` threads of `lanes` elements make a tile that holds
/// whole groups and blocks, each of whole `lanes`-element vectors; emits an
/// error on the offending state otherwise.
LogicalResult verifyTileShape(OptimizerOp optimizer, int64_t threads,
                              int64_t lanes);

/// A kernel's launch shape: `threads` per block of `lanes` elements each.
struct TileShape {
  int64_t threads, lanes;
  int64_t tile() const { return threads * lanes; }
};

/// The launch shape for the requested threads and lanes (<= 0: chosen, see
/// getThreadsPerBlock and getElementsPerThread), checked: threads a multiple
/// of 32 in [32, 1024], and verifyTileShape. The GPU kernel, the host library
/// (which walks the same tiles) and the manifest all take it from here.
FailureOr<TileShape> resolveTileShape(OptimizerOp optimizer,
                                      int64_t requestedThreads,
                                      int64_t requestedLanes);

/// The smallest group or block size of the optimizer's states (4096 if none).
int64_t getMinGroupSize(OptimizerOp optimizer);

/// Threads per GPU block: `requested`, or with `requested <= 0` the measured
/// best on the H200 (bench/NOTES.md: 512 where useAsyncCopy's Auto stages the
/// tiles of group states, for two or more states without a codebook, and
/// for two or more states with codebook blocks of at most 256 elements and
/// an f32 parameter; else 256).
int64_t getThreadsPerBlock(OptimizerOp optimizer, int64_t requested);

/// Whether the optimizer has two or more states, one or more of them codebook
/// states and every codebook block of at most 256 elements (bitsandbytes'
/// block: within one warp's lanes at 8 a thread, so that no block-wide
/// barrier joins a tile's warps for its absmax). The codebook kernels'
/// shapes (getThreadsPerBlock, useAsyncCopy, the registers a thread) were
/// measured for such steps (the AdamW8bit block256 kernels) and for block
/// 2048; steps of one state were not.
bool hasSmallCodebookBlocks(OptimizerOp optimizer);

/// Consecutive elements per GPU thread (the lanes of a host chunk): the
/// `requested` number, or with `requested <= 0` the measured best on the H200
/// (bench/NOTES.md: 8 where the tiles are staged, else 16 for one state and 8
/// for more) raised
/// until `threads` such threads cover the largest block; never more than the smallest group, so that a thread's lanes lie in
/// one group. The tile is `threads` times this.
int64_t getElementsPerThread(OptimizerOp optimizer, int64_t threads,
                             int64_t requested);

/// One stream that a GPU kernel with async copies (convert-qopt-to-gpu
/// `async-copy`) copies into shared memory one or more tiles ahead of its
/// use. Each
/// thread's `bytesPerThread` bytes travel as chunks of `chunkBytes` (4, 8 or
/// 16, the sizes of cp.async); chunk j of thread i lies at
/// `offset + (j * threads + i) * chunkBytes` from the start of a stage, so
/// that a warp's shared loads of one chunk touch consecutive bytes. A group
/// stream of 2-byte scales is copied as the aligned 4-byte word that holds
/// the thread's scale (`elementsPerCopy` 2: the word's other scale is its
/// neighbour group's, inside the same full tile).
struct StagedStream {
  unsigned stream;        ///< index into getStreams()
  int64_t bytesPerThread; ///< lanes x element bytes; a group stream's scalar
  int64_t chunkBytes;
  int64_t offset;         ///< bytes from the start of a stage
  int64_t elementsPerCopy = 1; ///< group streams: scalars per 4-byte copy
};

/// The streams a full tile reads, staged in shared memory: `stages` stages
/// (the tile being computed and the next stages - 1, in flight), each
/// `stageBytes`.
struct TileStaging {
  /// At most this many stages, fewer (at least 2) where they would exceed
  /// kMaxSharedBytes. Measured on the H200 (bench/NOTES.md): FlashAdamW at
  /// 64 Mi 3312 / 3440 / 3478 GB/s with 2 / 3 / 4 stages; with one tile in
  /// flight a block kept too few bytes in flight for the memory's latency.
  static constexpr int64_t kMaxStages = 4;
  int64_t stages = 2;
  /// No staging beyond this (past 227 KiB a block does not fit the H200's
  /// multiprocessor). The staged kernels run one block of 512 threads per
  /// multiprocessor anyway (109 to 128 registers a thread), so the stages
  /// cost no block up to it.
  static constexpr int64_t kMaxSharedBytes = 160 * 1024;
  /// The dynamic shared memory every GPU since sm_80 grants a block: 99 KiB
  /// on sm_86 and sm_89 (consumer Ampere and Ada), more on sm_80 and sm_90.
  /// A codebook kernel keeps its stages, bucket tables and static tables
  /// within it (getStagingSharedLimit), so that it loads wherever an
  /// unstaged one does.
  static constexpr int64_t kPortableSharedBytes = 99 * 1024;
  llvm::SmallVector<StagedStream> streams;
  int64_t stageBytes = 0;
  /// Dynamic shared memory per block: the manifest's `launch.shared_bytes`.
  int64_t sharedBytes() const { return stages * stageBytes; }
  const StagedStream *lookup(unsigned stream) const;
};

/// The staging of `optimizer`'s tiles of `shape`: every per-element stream
/// the update reads, and each read quantized state's scales or absmax (one
/// scalar per thread, 2-byte scales as their 4-byte word), whose bytes per
/// thread are 4, 8 or a power of two times 16.
/// Empty where two stages would exceed getStagingSharedLimit.
TileStaging getTileStaging(OptimizerOp optimizer, TileShape shape);

/// An upper estimate of the static shared memory of a GPU kernel of
/// `threads` threads with codebook states (0 without): per codebook state its
/// qmap (1 KiB), midpoints with their padding (1052 bytes), fits flag and two
/// tiles' warp maxima; once the fill's midpoint buckets (1052 bytes) and the
/// claims' slots (16).
int64_t getCodebookStaticSharedBytes(OptimizerOp optimizer, int64_t threads);

/// The most bytes of stages a kernel of `threads` threads takes:
/// TileStaging::kMaxSharedBytes, and for an optimizer with codebook states
/// no more than TileStaging::kPortableSharedBytes less its bucket tables
/// and getCodebookStaticSharedBytes.
int64_t getStagingSharedLimit(OptimizerOp optimizer, int64_t threads);

/// The bucket tables of the GPU kernels' codebook codes
/// (convert-qopt-to-gpu's codebook-buckets), in dynamic shared memory after
/// the tile stages. For each normalized value c in [-1, 1] a bucket of its
/// sign and 2^16 consecutive patterns of |c| (the exponent and the top 7
/// mantissa bits: a 128th of a binade), |c| clamped below to 2^-24, holds
/// one u32 entry: the midpoints below the bucket times 2^16, plus where its
/// midpoint (at most one) lies in the bucket's low 16 bits, so that the code
/// is bits 16..23 of entry + (the low 16 bits of |c|, complemented for a
/// negative c). bitsandbytes' dynamic maps put at most one midpoint in each
/// bucket and none below 2^-23 (the smallest, the unsigned map's, is
/// 1.625e-7 = 2^-22.55; bench/codebook_buckets_model.py); a
/// qmap that does either takes the search of all 255 midpoints.
struct CodebookBuckets {
  static constexpr int64_t kMagLo = 0x33800000; ///< 2^-24
  static constexpr int64_t kMagHi = 0x3F800000; ///< 1.0, alone in the last
  static constexpr int64_t kBucketsPerSign = ((kMagHi - kMagLo) >> 16) + 1;
  static constexpr int64_t kBuckets = 2 * kBucketsPerSign;
  static constexpr int64_t kBytesPerState = kBuckets * 4;
};

/// The bytes of dynamic shared memory a GPU kernel of `optimizer` asks for
/// (the manifest's `launch.shared_bytes`): the tile stages (`staging`, empty
/// without async copies), then with `codebookBuckets` one bucket table per
/// codebook state.
int64_t getDynamicSharedBytes(OptimizerOp optimizer, const TileStaging &staging,
                              bool codebookBuckets);

/// How many tiles ahead of the one it computes a GPU kernel that does not
/// stage its tiles has thread 0 of each block prefetch the next full tile's
/// per-element read streams into L2 (cp.async.bulk.prefetch.L2, one per
/// stream and tile), 0 for none. Measured on the H200 (bench/NOTES.md,
/// seventh session): 2 for codebook updates with a 16-bit parameter
/// (block2048 2356 -> 2438 GB/s at 64 Mi, block256 2313 -> 2424, the main
/// job's list 0.533 -> 0.519 ms); none elsewhere (the f32 variants -16% to
/// +4%, FlashAdamW.f32 and FlashLion.f32 -7% and -15%).
int64_t getL2PrefetchTiles(OptimizerOp optimizer, bool staged);

/// How many waves of resident blocks a launch of a GPU kernel of `optimizer`
/// asks for at most (the manifest's `launch.waves`): the kernels are
/// persistent, and with more than one wave each block steps a shorter
/// contiguous range of tiles (qopt_launch_grid keeps at least
/// getGridMinTilesPerBlock per block). 4 for updates of a 16-bit parameter
/// without a codebook state, 1 elsewhere. Measured on the H200
/// (bench/NOTES.md, eighth and ninth sessions): FlashSGD, FlashSGDW and
/// FlashLion +9% at 64 Mi, +5 to 7% at 256 Mi and on the GPT-2 list;
/// FlashAdamW and FlashAdam +6 to 8% at 256 Mi with 3 waves; their f32
/// variants +2% at 64 Mi but -0.2 to -1.5% at 256 Mi, the codebook kernels
/// within 1%.
int64_t getGridWaves(OptimizerOp optimizer);

/// The fewest tiles per block that a launch of more than one wave keeps
/// (the manifest's `launch.min_tiles_per_block`, qopt_launch_grid): 24 for
/// updates of at most one state (FlashLion 4 waves of 31 tiles at 64 Mi,
/// one of 31 at 16 Mi), 128 for more (FlashAdamW: one wave of 124 tiles
/// per block at 64 Mi and of 230 on the GPT-2 list, 2 to 4 waves there
/// slower by up to 3%; 3 waves of 165 at 256 Mi, 0.938 -> 0.868 ms).
int64_t getGridMinTilesPerBlock(OptimizerOp optimizer);

/// How a GPU kernel hands out the tiles past each block's static range: each
/// block first steps `staticEighths` / 8 of the launch's tiles divided by the
/// grid, in one contiguous range; the rest it claims `tiles` at a time from
/// the launch's work counters (docs/abi.md), so that blocks that run faster
/// step more of them. `tiles` 0: every tile static, no work counters.
struct TileClaims {
  int64_t tiles = 0;
  int64_t staticEighths = 0;
  bool enabled() const { return tiles > 0; }
};

/// The measured best on the H200 (bench/NOTES.md, eleventh and twelfth
/// sessions): for the unstaged kernels with a codebook state (block2048
/// and block256 2 to 4% faster at 64 and 256 Mi and
/// on the GPT-2 list, their f32 variants 2 to 8%), claims of two tiles past
/// 5/8 static where a codebook block holds 1024 elements or more (at the
/// codebook kernels' 8 elements a thread its absmax then crosses warps, as
/// block2048's does: every tile ends in a block-wide barrier, the
/// block's warps keep in step, and a claim's barrier and run set-up are
/// what is left to amortize; block2048 +2% over one tile), else of one tile
/// past 6/8 (warps that drift apart wait at each claim's barrier; block256
/// +1.3%, and -5% with two tiles); none for the
/// staged kernels (a claim restarts their copy pipeline: FlashAdamW 6 to 47%
/// slower), the one-state f32 variants (FlashLion.f32 and FlashSGDW.f32 -1 to
/// +1%, FlashSGD.f32 +4 to 7%) nor the two-state ones (-1 to +2%).
/// `requested` (qopt-opt --tile-claims): negative for that choice, 0 for
/// none, n for claims of n tiles. `staticEighths` (qopt-opt
/// --tile-claims-static-eighths), where positive, replaces the static share
/// of whichever claims are made (clamped to 1..8: with none static the
/// static range would be empty and nothing claimed); 0 keeps the choice's
/// (5 for n tiles). Never claims for a staged kernel.
TileClaims getTileClaims(OptimizerOp optimizer, bool staged, int64_t requested,
                         int64_t staticEighths);

/// Whether a GPU kernel copies its tiles ahead with cp.async (getTileStaging).
enum class AsyncCopy { Auto, On, Off };

/// `requested`, or for Auto the measured best on the H200 (bench/NOTES.md):
/// on for updates with group states, no codebook state and a 16-bit parameter
/// (the Adam family: +11 to 26% at 64 Mi elements; SGD and Lion at 8 lanes x
/// 512 threads: +8%) and for codebook updates of two or more states, a
/// 16-bit parameter and codebook blocks of at most 256 elements (block256
/// at 64 Mi: -7% time on realistic gradients, within 1% on the bench's),
/// off for the rest: the other codebook updates (block2048 -16%: its blocks
/// span the tile's warps), f32 parameters (-12 to
/// -33%: mostly memory traffic, where direct loads keep more bytes in
/// flight) and plain states (not measured).
bool useAsyncCopy(OptimizerOp optimizer, AsyncCopy requested);
} // namespace mlir::qopt

#endif // QOPT_DIALECT_QOPT_QOPTOPS_H

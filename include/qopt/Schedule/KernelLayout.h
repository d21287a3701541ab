//===- KernelLayout.h - Facts of a kernel's memory layout -------*- C++ -*-===//
//
// What a kernel of a given plan lays out, derived from the IR and the plan
// (no measured choice here): the regions of the tile stages in dynamic shared
// memory, the codebook bucket tables after them and the static tables beside
// them. The tuning policy (TuningPolicy.h) sizes its choices with them and
// the GPU lowering builds them.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_SCHEDULE_KERNELLAYOUT_H
#define QOPT_SCHEDULE_KERNELLAYOUT_H

#include "qopt/Dialect/Qopt/QoptOps.h"

namespace mlir::qopt {

/// A kernel's launch shape: `threads` per block of `lanes` elements each.
struct TileShape {
  int64_t threads, lanes;
  int64_t tile() const { return threads * lanes; }
};

/// One stream that a GPU kernel with async copies copies into shared memory
/// one or more tiles ahead of its use. Each thread's `bytesPerThread` bytes
/// travel as chunks of `chunkBytes` (4, 8 or 16, the sizes of cp.async);
/// chunk j of thread i lies at `offset + (j * threads + i) * chunkBytes` from
/// the start of a stage, so that a warp's shared loads of one chunk touch
/// consecutive bytes. A group stream of 2-byte scales is copied as the
/// aligned 4-byte word that holds the thread's scale (`elementsPerCopy` 2:
/// the word's other scale is its neighbour group's, inside the same full
/// tile).
struct StagedStream {
  unsigned stream;        ///< index into getStreams()
  int64_t bytesPerThread; ///< lanes x element bytes; a group stream's scalar
  int64_t chunkBytes;
  int64_t offset;         ///< bytes from the start of a stage
  int64_t elementsPerCopy = 1; ///< group streams: scalars per 4-byte copy
};

/// The streams a full tile reads, staged in shared memory: `stages` stages
/// (the tile being computed and the next stages - 1, in flight), each
/// `stageBytes`. Empty `streams`: the tiles are not staged.
struct TileStaging {
  llvm::SmallVector<StagedStream> streams;
  int64_t stages = 0;
  int64_t stageBytes = 0;
  /// The bytes of all stages: the start of the bucket tables.
  int64_t sharedBytes() const { return stages * stageBytes; }
  const StagedStream *lookup(unsigned stream) const;
};

/// The regions of one stage of `optimizer`'s tiles of `shape` (`stages`
/// unset): every per-element stream the update reads, and each read quantized
/// state's scales or absmax (one scalar per thread, 2-byte scales as their
/// 4-byte word), whose bytes per thread are 4, 8 or a power of two times 16.
/// Regions follow ABI order and stay 16-byte aligned.
TileStaging getStageLayout(OptimizerOp optimizer, TileShape shape);

/// The staging of a kernel planned as `plan`: getStageLayout with the plan's
/// stages, or empty where the plan stages nothing.
TileStaging getTileStaging(OptimizerOp optimizer, KernelPlanAttr plan);

/// Whether every stream of `staging` can be a bulk copy into its region:
/// 16-byte multiples per tile at 16-byte aligned offsets, and each thread's
/// elements one shared load of its region as the copy leaves it.
bool isBulkStageable(OptimizerOp optimizer, const TileStaging &staging,
                     TileShape shape);

/// How a GPU kernel hands out the tiles past each block's static range: each
/// block first steps `staticEighths` / 8 of the launch's tiles divided by the
/// grid, in one contiguous range; the rest it claims `tiles` at a time from
/// the launch's work counters (docs/abi.md), so that blocks that run faster
/// step more of them.
struct TileClaims {
  int64_t tiles = 0;         ///< 0: every tile static, no work counters
  int64_t staticEighths = 0;
  bool enabled() const { return tiles > 0; }
};

/// The bucket tables of the GPU kernels' codebook codes, in dynamic shared
/// memory after the tile stages. For each normalized value c in [-1, 1] a
/// bucket of its sign and 2^16 consecutive patterns of |c| (the exponent and
/// the top 7 mantissa bits: a 128th of a binade), |c| clamped below to
/// 2^-24, holds one u32 entry: the midpoints below the bucket times 2^16,
/// plus where its midpoint (at most one) lies in the bucket's low 16 bits,
/// so that the code is bits 16..23 of entry + (the low 16 bits of |c|,
/// complemented for a negative c). bitsandbytes' dynamic maps put at most
/// one midpoint in each bucket and none below 2^-23 (the smallest, the
/// unsigned map's, is 1.625e-7 = 2^-22.55; bench/codebook_buckets_model.py);
/// a qmap that does either takes the search of all 255 midpoints.
struct CodebookBuckets {
  static constexpr int64_t kMagLo = 0x33800000; ///< 2^-24
  static constexpr int64_t kMagHi = 0x3F800000; ///< 1.0, alone in the last
  static constexpr int64_t kBucketsPerSign = ((kMagHi - kMagLo) >> 16) + 1;
  static constexpr int64_t kBuckets = 2 * kBucketsPerSign;
  static constexpr int64_t kBytesPerState = kBuckets * 4;
};

/// The number of codebook states of `optimizer`.
int64_t getNumCodebookStates(OptimizerOp optimizer);

/// An upper estimate of the static shared memory of a GPU kernel of
/// `threads` threads with codebook states (0 without): per codebook state its
/// qmap (1 KiB), midpoints with their padding (1052 bytes), fits flag and two
/// tiles' warp maxima; once the fill's midpoint buckets (1052 bytes) and the
/// claims' slots (16).
int64_t getCodebookStaticSharedBytes(OptimizerOp optimizer, int64_t threads);

/// The bytes of dynamic shared memory of a kernel of `optimizer`: the tile
/// stages (`staging`, empty without async copies), then with
/// `codebookBuckets` one bucket table per codebook state.
int64_t getDynamicSharedBytes(OptimizerOp optimizer, const TileStaging &staging,
                              bool codebookBuckets);

} // namespace mlir::qopt

#endif // QOPT_SCHEDULE_KERNELLAYOUT_H

//===- KernelLayout.cpp - Facts of a kernel's memory layout ---------------===//
//
// The stage regions, bucket tables and static tables of a kernel, derived
// from the optimizer's streams and the launch plan.
//
//===----------------------------------------------------------------------===//

#include "qopt/Schedule/KernelLayout.h"

#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::qopt;

const StagedStream *TileStaging::lookup(unsigned stream) const {
  for (const StagedStream &s : streams)
    if (s.stream == stream)
      return &s;
  return nullptr;
}

TileStaging mlir::qopt::getStageLayout(OptimizerOp optimizer,
                                       TileShape shape) {
  SmallVector<StreamInfo> streams = getStreams(optimizer);
  llvm::SmallBitVector read(streams.size());
  for (unsigned i : getReadStreams(optimizer))
    read.set(i);
  TileStaging staging;
  for (auto [i, s] : llvm::enumerate(streams)) {
    if (!read.test(i))
      continue;
    int64_t elementBytes = s.storage.getIntOrFloatBitWidth() / 8;
    // Packed 4-bit codes: a thread's lanes / 2 bytes (docs/tuning.md#async-copy).
    int64_t bytes = s.packed               ? shape.lanes / 2
                    : s.perElements == 1 ? shape.lanes * elementBytes
                                         : elementBytes;
    int64_t perCopy = 1;
    if (!s.packed && s.perElements != 1 && bytes < 4) {
      // The word of a pair of scalars lies in the tile if its groups do.
      perCopy = 4 / bytes;
      if ((shape.tile() / s.perElements) % perCopy != 0)
        continue;
      bytes = 4;
    }
    // Whole 16-byte chunks, a power of two of them (the shared loads are
    // joined pairwise), or one 4- or 8-byte copy.
    if (bytes != 4 && bytes != 8 &&
        (bytes % 16 != 0 || !llvm::isPowerOf2_64(bytes / 16)))
      continue;
    int64_t chunk = std::min<int64_t>(bytes, 16);
    staging.streams.push_back(
        {static_cast<unsigned>(i), bytes, chunk, staging.stageBytes, perCopy});
    // Regions stay 16-byte aligned: threads is a multiple of 32.
    staging.stageBytes += shape.threads * bytes;
  }
  return staging;
}

TileStaging mlir::qopt::getTileStaging(OptimizerOp optimizer,
                                       KernelPlanAttr plan) {
  if (plan.getStages() == 0)
    return TileStaging();
  TileStaging staging = getStageLayout(
      optimizer, TileShape{plan.getThreads(), plan.getLanes()});
  staging.stages = plan.getStages();
  return staging;
}

bool mlir::qopt::isBulkStageable(OptimizerOp optimizer,
                                 const TileStaging &staging, TileShape shape) {
  SmallVector<StreamInfo> streams = getStreams(optimizer);
  for (const StagedStream &staged : staging.streams) {
    const StreamInfo &info = streams[staged.stream];
    int64_t tileBytes = shape.tile() / info.perElements *
                        info.storage.getIntOrFloatBitWidth() / 8;
    if (tileBytes % 16 != 0 || staged.offset % 16 != 0)
      return false;
    // A group stream's scalars are read where the copy leaves them; an
    // element stream's thread reads one chunk, which lies where the tile's
    // bytes do.
    if (info.perElements == 1 && staged.bytesPerThread != staged.chunkBytes)
      return false;
  }
  return true;
}

int64_t mlir::qopt::getNumCodebookStates(OptimizerOp optimizer) {
  return llvm::count_if(getStates(optimizer), [](StateOp state) {
    return isa<CodebookSchemeAttr>(state.getScheme());
  });
}

int64_t mlir::qopt::getCodebookStaticSharedBytes(OptimizerOp optimizer,
                                                 int64_t threads) {
  int64_t codebookStates = getNumCodebookStates(optimizer);
  if (codebookStates == 0)
    return 0;
  return codebookStates * (1024 + 1052 + 16 + 2 * 4 * (threads / 32)) + 1052 +
         16;
}

int64_t mlir::qopt::getDynamicSharedBytes(OptimizerOp optimizer,
                                          const TileStaging &staging,
                                          bool codebookBuckets) {
  int64_t bytes = staging.streams.empty() ? 0 : staging.sharedBytes();
  if (codebookBuckets)
    bytes += getNumCodebookStates(optimizer) * CodebookBuckets::kBytesPerState;
  return bytes;
}

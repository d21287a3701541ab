//===- TileMap.cpp - Tiles of a tensor list -------------------------------===//
#include "TileMap.h"

#include "Error.h"

namespace qopt::rt {

void checkTensorCount(size_t numTensors) {
  if (numTensors > static_cast<size_t>(INT32_MAX))
    fail(QOPT_ERROR_INVALID_ARGUMENT, numTensors,
         " tensors in one launch: at most 2^31 - 1 (tile map entries are "
         "int32)");
}

int64_t computeFirstTiles(const int64_t *numels, size_t numTensors,
                          int64_t tileElements, int64_t *firstTile) {
  if (tileElements <= 0)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "tile_elements must be positive, got ",
         tileElements);
  checkTensorCount(numTensors);
  int64_t total = 0;
  for (size_t k = 0; k < numTensors; ++k) {
    if (numels[k] < 0)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "tensor ", k, ": numel ", numels[k],
           " is negative");
    int64_t t = tilesOf(numels[k], tileElements);
    if (firstTile)
      firstTile[k] = total;
    if (t > INT64_MAX - total)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "tensor ", k,
           ": the tile count of the list overflows int64");
    total += t;
  }
  return total;
}

void fillTileMap(const int64_t *numels, const int64_t *firstTile,
                 size_t numTensors, int64_t tileElements, int32_t *tileMap) {
  for (size_t k = 0; k < numTensors; ++k) {
    int64_t t = tilesOf(numels[k], tileElements);
    int32_t* out = tileMap + firstTile[k];
    for (int64_t i = 0; i < t; ++i)
      out[i] = static_cast<int32_t>(k);
  }
}

} // namespace qopt::rt

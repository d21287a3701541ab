//===- TileMap.h - Tiles of a tensor list (docs/abi.md) ------------------===//
#ifndef QOPT_RUNTIME_SRC_TILEMAP_H
#define QOPT_RUNTIME_SRC_TILEMAP_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qopt::rt {

/// ceil(numel / tile) without overflow; numel >= 0, tile > 0.
inline int64_t tilesOf(int64_t numel, int64_t tile) {
  return numel / tile + (numel % tile != 0 ? 1 : 0);
}

/// Throws Error(QOPT_ERROR_INVALID_ARGUMENT) for more than INT32_MAX tensors
/// in one launch (tile map entries are int32). Checked before any array of
/// the list is sized or indexed, so no count times the streams wraps.
void checkTensorCount(size_t numTensors);

/// first_tile of each tensor and the total tile count. Throws
/// Error(QOPT_ERROR_INVALID_ARGUMENT) for a negative numel, a total past
/// INT64_MAX or more than INT32_MAX tensors (tile map entries are int32).
int64_t computeFirstTiles(const int64_t *numels, size_t numTensors,
                          int64_t tileElements, int64_t *firstTile);

/// Writes tile_map[t] = k for the tiles of every tensor k.
void fillTileMap(const int64_t *numels, const int64_t *firstTile,
                 size_t numTensors, int64_t tileElements, int32_t *tileMap);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_TILEMAP_H

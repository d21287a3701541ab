//===- ManifestLaunch.cpp - A manifest's launch shape and tile claims -----===//
#include "ManifestLaunch.h"

#include "Error.h"

#include <climits>

namespace qopt::rt {

namespace {

/// launch.tile_claims: the claim granularity and the static share (docs/abi.md,
/// "Tile claims"). The runtime launches no differently for them; they are
/// read to be compared with a GPU module's own manifest.
void parseTileClaims(const Reader &r, const json &launch, Manifest &m) {
  const json *j = r.member(launch, "launch", "tile_claims", false);
  if (!j)
    return;
  r.expectObject(*j, "launch.tile_claims");
  m.tileClaims.tiles =
      r.integer(*j, "launch.tile_claims", "tiles", true, 0, 1, INT32_MAX);
  m.tileClaims.staticEighths =
      r.integer(*j, "launch.tile_claims", "static_eighths", true, 0, 1, 8);
}

/// launch.producer_warps: the warps after the threads_per_block that issue
/// the tile's bulk copies (docs/abi.md, "Kernel arguments"). The block of
/// threads_per_block + 32 * producer_warps threads fits the device's 1024,
/// and a manifest with producer warps is version 2: a runtime that reads
/// only version 1 refuses it instead of launching the block without them.
void parseProducerWarps(const Reader &r, const json &launch, Manifest &m) {
  qopt_launch_info &l = m.launch;
  int64_t warps =
      r.integer(launch, "launch", "producer_warps", false, 0, 0, INT32_MAX);
  int64_t threads = int64_t(l.threads_per_block) + 32 * warps;
  if (threads > 1024)
    r.error("launch.producer_warps",
            cat("threads_per_block + 32 * producer_warps = ",
                l.threads_per_block, " + 32 * ", warps, " = ", threads,
                " threads, more than a block's 1024 (at most ",
                (1024 - l.threads_per_block) / 32, " producer warps with ",
                l.threads_per_block, " threads_per_block)"));
  if (warps > 0 && m.version < 2)
    r.error(
        "launch.producer_warps",
        cat(warps, warps == 1 ? " producer warp needs" : " producer warps need",
            " manifest version 2 (this manifest is version ", m.version, ")"));
  l.producer_warps = static_cast<int32_t>(warps);
}

} // namespace

void parseLaunch(const Reader &r, const json &root, Manifest &m) {
  const json *j = r.member(root, "", "launch", true);
  r.expectObject(*j, "launch");
  qopt_launch_info &l = m.launch;
  l.threads_per_block = static_cast<int32_t>(
      r.integer(*j, "launch", "threads_per_block", true, 0, 1, 1024));
  l.elements_per_thread = static_cast<int32_t>(
      r.integer(*j, "launch", "elements_per_thread", true, 0, 1, 1 << 16));
  int64_t tile = int64_t(l.threads_per_block) * l.elements_per_thread;
  l.tile_elements =
      r.integer(*j, "launch", "tile_elements", false, tile, 1, INT64_MAX);
  if (l.tile_elements != tile)
    r.error("launch.tile_elements",
            cat(l.tile_elements, " != threads_per_block * elements_per_thread = ",
                l.threads_per_block, " * ", l.elements_per_thread, " = ", tile));
  int64_t descBytes = 16 + 8 * static_cast<int64_t>(m.streams.size());
  l.descriptor_bytes =
      r.integer(*j, "launch", "descriptor_bytes", false, descBytes, 1, INT64_MAX);
  if (l.descriptor_bytes != descBytes)
    r.error("launch.descriptor_bytes",
            cat(l.descriptor_bytes, " != 16 + 8 * num_streams = ", descBytes,
                " (", m.streams.size(), " streams)"));
  l.shared_bytes = r.integer(*j, "launch", "shared_bytes", false, 0, 0,
                             int64_t(1) << 31);
  l.suggested_blocks_per_sm = static_cast<int32_t>(r.integer(
      *j, "launch", "suggested_blocks_per_sm", false, 1, 1, 1024));
  l.waves = static_cast<int32_t>(r.integer(*j, "launch", "waves", false, 1, 1, 1024));
  l.min_tiles_per_block = static_cast<int32_t>(
      r.integer(*j, "launch", "min_tiles_per_block", false,
                QOPT_MIN_TILES_PER_BLOCK, 1, int64_t(1) << 30));
  parseProducerWarps(r, *j, m);
  parseTileClaims(r, *j, m);
}

} // namespace qopt::rt

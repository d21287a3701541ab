//===- ManifestLaunch.h - A manifest's launch shape and tile claims -------===//
//
// The "launch" object (docs/abi.md, "Manifest"): the block (with its
// producer warps) and tile shape, the descriptor and shared memory bytes,
// the grid's scheduling and the tile claims, for Manifest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_MANIFESTLAUNCH_H
#define QOPT_RUNTIME_SRC_MANIFESTLAUNCH_H

#include "Manifest.h"
#include "ManifestReader.h"

namespace qopt::rt {

/// "launch" into m.launch and m.tileClaims; tile_elements and
/// descriptor_bytes checked against the shape and the streams, producer_warps
/// against the block's 1024 threads and the manifest's version. Needs the
/// streams and m.version.
void parseLaunch(const Reader &r, const json &root, Manifest &m);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_MANIFESTLAUNCH_H

//===- ManifestCompare.h - A binary's own manifest against the given ------===//
//
// qopt-opt embeds in every binary it writes (host library, PTX, cubin,
// fatbin) the manifest it writes beside it (docs/abi.md, "The host
// library's manifest", "The GPU module's manifest"). Both backends compare
// it with the manifest the runtime was given, field by field, before any
// step: a stale or edited manifest is refused instead of stepping the code
// with another layout (a wrong group size or stream dtype is out-of-bounds
// memory access in the kernel).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_MANIFESTCOMPARE_H
#define QOPT_RUNTIME_SRC_MANIFESTCOMPARE_H

#include "Manifest.h"

#include <optional>
#include <string>
#include <string_view>

namespace qopt::rt {

/// Whose code a manifest describes, which decides the launch fields and the
/// symbol compared: the host backend's library (host.symbol; launch's
/// threads_per_block, elements_per_thread, tile_elements, descriptor_bytes)
/// or a GPU module (entry; those and shared_bytes, producer_warps and
/// tile_claims).
enum class AbiBackend { Host, Gpu };

/// The first ABI field where `given` and `embedded` differ: its dotted path
/// (as the manifest reader names fields) and both values; none when they
/// agree. Compared for both backends: kernel, optimizer, mode, param, grad,
/// the hyperparameters' names and bool, states, streams, uniforms, tables,
/// args, phases, reductions, reduction_workspace and the launch fields of
/// AbiBackend. Not compared, because they may differ legitimately: where
/// the files are (source, host.library, binaries), arch, hyperparameter
/// defaults (read by the runtime only, never by the code) and the grid's
/// size (launch.suggested_blocks_per_sm, waves, min_tiles_per_block).
struct ManifestDifference {
  std::string field, given, embedded;
};
std::optional<ManifestDifference> firstAbiDifference(const Manifest &given,
                                                     const Manifest &embedded,
                                                     AbiBackend backend);

/// A binary's own manifest, as read from it.
struct EmbeddedManifest {
  AbiBackend backend;
  std::string kind;   ///< the binary in messages: "host library", "PTX", ...
  std::string noun;   ///< "library" or "module"
  std::string path;   ///< where the binary came from
  std::string symbol; ///< the manifest's symbol in it
  std::string_view text; ///< the JSON, without its NUL
};

/// Parses `embedded.text` and compares it with `given` (firstAbiDifference).
/// Throws Error(QOPT_ERROR_MANIFEST) naming both files, the first differing
/// field and both values, or why the embedded text cannot be read.
void checkEmbeddedManifest(const Manifest &given,
                           const EmbeddedManifest &embedded);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_MANIFESTCOMPARE_H

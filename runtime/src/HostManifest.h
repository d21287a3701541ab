//===- HostManifest.h - A host library's own manifest against the given ---===//
//
// qopt-opt embeds in every host library the manifest it writes beside it, as
// the exported NUL-terminated constant `<host.symbol>_manifest` (docs/abi.md,
// "The host library's manifest"). The runtime compares it with the manifest
// it was given before any step, so that a stale or edited manifest is refused
// instead of stepping the library with another ABI (a wrong group size or
// stream dtype is out-of-bounds memory access in the kernel). The
// comparison is ManifestCompare.h's, shared with the GPU modules.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_HOSTMANIFEST_H
#define QOPT_RUNTIME_SRC_HOSTMANIFEST_H

#include "Manifest.h"
#include "ManifestCompare.h"

#include <string>

namespace qopt::rt {

/// The symbol of the host library's own manifest: `<entry>_manifest`.
std::string hostManifestSymbol(const std::string &entry);

/// Checks the manifest `m` of the host library opened as `handle` (with
/// dlopen) against the library's own manifest, if the library has one (a
/// library built before qopt-opt embedded it is accepted unchecked). Throws
/// Error(QOPT_ERROR_MANIFEST) naming the first differing field and both
/// values, or the embedded manifest's own defect.
void checkHostManifest(const Manifest &m, void *handle);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_HOSTMANIFEST_H

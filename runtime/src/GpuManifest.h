//===- GpuManifest.h - A GPU module's own manifest against the given ------===//
//
// qopt-opt embeds in the PTX it emits (and so in the cubin and fatbin made
// from it) the manifest it writes beside it, as the read-only global
// `<entry>_manifest` (docs/abi.md, "The GPU module's manifest"). After
// loading a module the runtime reads it with cuModuleGetGlobal and compares
// it with the manifest it was given (ManifestCompare.h), before any launch:
// a stale or edited manifest beside a rebuilt binary would step the kernel
// with another layout (memory corruption on the GPU).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_GPUMANIFEST_H
#define QOPT_RUNTIME_SRC_GPUMANIFEST_H

#include "CudaDriver.h"
#include "Manifest.h"

#include <string>

namespace qopt::rt {

/// The global of a GPU module's own manifest: `<entry>_manifest`.
std::string gpuManifestSymbol(const std::string &entry);

/// Checks the manifest `m` of `module` (loaded from the `format` binary
/// `origin`, in the current context) against the module's own manifest, if
/// it has one (a module built before qopt-opt embedded it is accepted
/// unchecked). Throws Error(QOPT_ERROR_MANIFEST) naming both, the first
/// differing field and both values, or the global's own defect (no NUL,
/// not a manifest); Error(QOPT_ERROR_CUDA) where the driver cannot look the
/// global up or copy it.
void checkGpuManifest(const Manifest &m, cu::CUmodule module,
                      qopt_binary_format format, const std::string &origin);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_GPUMANIFEST_H

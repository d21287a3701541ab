//===- ShippedKernels.cpp - The kernels embedded in libqopt_kernels -------===//
//
// The binaries and manifests come from ShippedKernels.S (generated at build
// time, one .incbin per file); this file lists them and registers them.
//
//===----------------------------------------------------------------------===//

#include "qopt/kernels.h"

#include <cstddef>
#include <string>

namespace {
struct ShippedKernel {
  const char *spec;
  const unsigned char *manifest, *manifestEnd;
  const unsigned char *binary, *binaryEnd;
  qopt_binary_format format;
};
} // namespace

#include "ShippedKernelsTable.inc"

extern "C" size_t qopt_shipped_kernel_count(void) {
  return sizeof(kShipped) / sizeof(kShipped[0]);
}

extern "C" const char *qopt_shipped_kernel_spec(size_t index) {
  return index < qopt_shipped_kernel_count() ? kShipped[index].spec : nullptr;
}

/// A manifest whose registration failed. Destroying it at once would clear
/// qopt_last_error() before the caller reads it, so it lives until the next
/// call on this thread.
static thread_local qopt_manifest *failedManifest = nullptr;

extern "C" qopt_status qopt_registry_add_shipped(qopt_registry *registry,
                                                 size_t *num_added) {
  if (failedManifest) {
    qopt_manifest_destroy(failedManifest);
    failedManifest = nullptr;
  }
  if (num_added)
    *num_added = 0;
  for (const ShippedKernel &k : kShipped) {
    qopt_manifest *manifest = nullptr;
    std::string source = std::string("<shipped>/") + k.spec + ".manifest.json";
    qopt_status status = qopt_manifest_parse(
        reinterpret_cast<const char *>(k.manifest),
        static_cast<size_t>(k.manifestEnd - k.manifest), source.c_str(),
        &manifest);
    if (status != QOPT_SUCCESS)
      return status;
    status = qopt_registry_add_manifest(
        registry, manifest, k.format, k.binary,
        static_cast<size_t>(k.binaryEnd - k.binary));
    if (status != QOPT_SUCCESS) {
      failedManifest = manifest;
      return status;
    }
    qopt_manifest_destroy(manifest);
    if (num_added)
      ++*num_added;
  }
  return QOPT_SUCCESS;
}

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
  const char *kernel; // the manifest's kernel name, from the spec (CMake)
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

extern "C" qopt_status qopt_registry_add_shipped(qopt_registry *registry,
                                                 size_t *num_added) {
  // Registered as embedded kernels: each manifest is parsed, and its binary
  // copied, when its kernel is first used (parsing all 60 at once and
  // copying their 10 MB of binaries took 7 to 20 ms, most of the first
  // step's own time; now 0.1 ms).
  if (num_added)
    *num_added = 0;
  for (const ShippedKernel &k : kShipped) {
    std::string source = std::string("<shipped>/") + k.spec + ".manifest.json";
    qopt_status status = qopt_registry_add_embedded(
        registry, k.kernel, reinterpret_cast<const char *>(k.manifest),
        static_cast<size_t>(k.manifestEnd - k.manifest), source.c_str(),
        k.format, k.binary, static_cast<size_t>(k.binaryEnd - k.binary));
    if (status != QOPT_SUCCESS)
      return status;
    if (num_added)
      ++*num_added;
  }
  return QOPT_SUCCESS;
}

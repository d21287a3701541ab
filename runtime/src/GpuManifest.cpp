//===- GpuManifest.cpp - A GPU module's own manifest against the given ----===//
#include "GpuManifest.h"

#include "Error.h"
#include "ManifestCompare.h"
#include "Registry.h"

#include <cstring>

namespace qopt::rt {

std::string gpuManifestSymbol(const std::string &entry) {
  return entry + "_manifest";
}

void checkGpuManifest(const Manifest &m, cu::CUmodule module,
                      qopt_binary_format format, const std::string &origin) {
  const cu::Driver &d = cu::driver();
  std::string symbol = gpuManifestSymbol(m.entry);
  std::string kind = format == QOPT_BINARY_PTX      ? "PTX"
                     : format == QOPT_BINARY_CUBIN  ? "cubin"
                     : format == QOPT_BINARY_FATBIN ? "fatbin"
                                                    : formatName(format);
  cu::CUdeviceptr global = 0;
  size_t bytes = 0;
  cu::CUresult r = d.cuModuleGetGlobal(&global, &bytes, module, symbol.c_str());
  if (r == cu::CUDA_ERROR_NOT_FOUND)
    return; // built before qopt-opt embedded its manifest: not checked
  cu::check(r, "cuModuleGetGlobal",
            cat("for the manifest '", symbol, "' of ", kind, " ", origin));
  std::string text(bytes, '\0');
  if (bytes > 0) {
    // The runtime's own read, never part of a stream capture.
    cu::RelaxedCaptureScope relaxed;
    cu::check(cu::require(d.cuMemcpyDtoH, "cuMemcpyDtoH")(text.data(), global,
                                                          bytes),
              "cuMemcpyDtoH",
              cat("reading the manifest '", symbol, "' of ", kind, " ",
                  origin));
  }
  // The global's size bounds the text, so that one without its NUL is
  // refused rather than read past.
  size_t length = text.find('\0');
  if (length == std::string::npos)
    fail(QOPT_ERROR_MANIFEST, kind, " ", origin, " of kernel '", m.kernel,
         "': its manifest global '", symbol, "' (", bytes,
         " bytes) is not NUL-terminated; rebuild the binary with qopt-opt");
  checkEmbeddedManifest(m, {AbiBackend::Gpu, kind, "module", origin, symbol,
                            std::string_view(text.data(), length)});
}

} // namespace qopt::rt

//===- HostManifest.cpp - A host library's own manifest against the given -===//
#include "HostManifest.h"

#include "Error.h"

#include <cstring>
#include <dlfcn.h>
#include <link.h>

namespace qopt::rt {

std::string hostManifestSymbol(const std::string &entry) {
  return entry + "_manifest";
}

void checkHostManifest(const Manifest &m, void *handle) {
  if (!m.host)
    return;
  const std::string &library = m.host->library;
  std::string symbol = hostManifestSymbol(m.host->symbol);
  ::dlerror();
  const char *text = static_cast<const char *>(::dlsym(handle, symbol.c_str()));
  if (!text)
    return; // built before qopt-opt embedded its manifest: not checked
  // The constant's size from its ELF symbol, so that a text without its NUL
  // is refused rather than read past.
  size_t length = 0;
  Dl_info info{};
  ElfW(Sym) *elf = nullptr;
  if (::dladdr1(text, &info, reinterpret_cast<void **>(&elf),
                RTLD_DL_SYMENT) != 0 &&
      elf && elf->st_size > 0) {
    const void *nul = std::memchr(text, '\0', elf->st_size);
    if (!nul)
      fail(QOPT_ERROR_MANIFEST, "host library ", library, " of kernel '",
           m.kernel, "': its manifest constant '", symbol, "' (", elf->st_size,
           " bytes) is not NUL-terminated; rebuild the library with qopt-opt");
    length = static_cast<size_t>(static_cast<const char *>(nul) - text);
  } else {
    length = std::strlen(text);
  }
  checkEmbeddedManifest(m, {AbiBackend::Host, "host library", "library",
                            library, symbol, std::string_view(text, length)});
}

} // namespace qopt::rt

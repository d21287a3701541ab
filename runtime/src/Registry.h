//===- Registry.h - Kernels by name, from manifests and their binaries ----===//
#ifndef QOPT_RUNTIME_SRC_REGISTRY_H
#define QOPT_RUNTIME_SRC_REGISTRY_H

#include "Manifest.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace qopt::rt {

/// One binary a kernel can be loaded from: a file or an in-memory copy.
struct ImageSource {
  qopt_binary_format format = QOPT_BINARY_PTX;
  std::string arch;                        ///< "" when unknown
  std::string path;                        ///< file, when data is null
  std::shared_ptr<const std::string> data; ///< in-memory image
  std::string origin() const { return data ? "<memory>" : path; }
};

struct RegistryEntry {
  /// Null for an embedded kernel until it is first asked for.
  ManifestPtr manifest;
  std::vector<ImageSource> images;
  /// An embedded kernel until first asked for: its manifest text, its image
  /// (both borrowed), the image's format and the name in messages.
  std::string_view manifestText, imageBytes;
  qopt_binary_format imageFormat = QOPT_BINARY_AUTO;
  std::string source;
};

/// The format of an in-memory image: ELF = cubin, fatbin magic, else PTX.
qopt_binary_format detectFormat(const void *data, size_t size);
const char *formatName(qopt_binary_format f);

class Registry {
public:
  void addManifestFile(const std::string &path);
  /// Every `*.manifest.json` of `dir`, all or none: an error (an unreadable
  /// manifest, a name defined twice) adds nothing.
  size_t addDirectory(const std::string &dir);
  void add(ManifestPtr manifest, qopt_binary_format format, const void *image,
           size_t size);
  /// An embedded kernel: its manifest is parsed, and its image copied, when
  /// it is first asked for (get); until then both are only referred to.
  void addEmbedded(const std::string &kernel, std::string_view manifestJson,
                   const std::string &source, qopt_binary_format format,
                   std::string_view image);
  size_t count() const;
  /// The name of kernel `index` in sorted order; lives as long as this.
  const std::string &name(size_t index) const;
  /// Throws NOT_FOUND listing the known kernels.
  RegistryEntry get(const std::string &kernel) const;

private:
  /// The entry of a manifest file and its binaries; adds nothing.
  static RegistryEntry manifestFileEntry(const std::string &path);
  void insert(const std::string &name, RegistryEntry entry);
  mutable std::mutex mu_;
  // Mutable: get() parses an embedded kernel's manifest once.
  mutable std::map<std::string, RegistryEntry> entries_;
};

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_REGISTRY_H

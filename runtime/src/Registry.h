//===- Registry.h - Kernels by name, from manifests and their binaries ----===//
#ifndef QOPT_RUNTIME_SRC_REGISTRY_H
#define QOPT_RUNTIME_SRC_REGISTRY_H

#include "Manifest.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
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
  ManifestPtr manifest;
  std::vector<ImageSource> images;
};

/// The format of an in-memory image: ELF = cubin, fatbin magic, else PTX.
qopt_binary_format detectFormat(const void *data, size_t size);
const char *formatName(qopt_binary_format f);

class Registry {
public:
  void addManifestFile(const std::string &path);
  size_t addDirectory(const std::string &dir);
  void add(ManifestPtr manifest, qopt_binary_format format, const void *image,
           size_t size);
  size_t count() const;
  /// The name of kernel `index` in sorted order; lives as long as this.
  const std::string &name(size_t index) const;
  /// Throws NOT_FOUND listing the known kernels.
  RegistryEntry get(const std::string &kernel) const;

private:
  void insert(RegistryEntry entry);
  mutable std::mutex mu_;
  std::map<std::string, RegistryEntry> entries_;
};

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_REGISTRY_H

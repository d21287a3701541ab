//===- Registry.cpp - Kernels by name, from manifests and their binaries --===//
#include "Registry.h"

#include "Error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <dirent.h>
#include <sys/stat.h>

namespace qopt::rt {

namespace {

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

qopt_binary_format detectFormat(const void *data, size_t size) {
  const auto *b = static_cast<const unsigned char *>(data);
  if (size >= 4 && b[0] == 0x7F && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')
    return QOPT_BINARY_CUBIN;
  if (size >= 4 && b[0] == 0x50 && b[1] == 0xED && b[2] == 0x55 && b[3] == 0xBA)
    return QOPT_BINARY_FATBIN;
  return QOPT_BINARY_PTX;
}

const char *formatName(qopt_binary_format f) {
  switch (f) {
  case QOPT_BINARY_AUTO:
    return "auto";
  case QOPT_BINARY_PTX:
    return "ptx";
  case QOPT_BINARY_CUBIN:
    return "cubin";
  case QOPT_BINARY_FATBIN:
    return "fatbin";
  case QOPT_BINARY_HOST:
    return "host";
  }
  return "invalid";
}

namespace {
const std::string &sourceOf(const RegistryEntry &e) {
  return e.manifest ? e.manifest->source : e.source;
}

/// An in-memory image of `format` (detected from its bytes for AUTO), copied.
ImageSource inMemoryImage(qopt_binary_format format, const std::string &arch,
                          std::string_view bytes) {
  ImageSource s;
  s.format = format == QOPT_BINARY_AUTO
                 ? detectFormat(bytes.data(), bytes.size())
                 : format;
  s.arch = arch;
  s.data = std::make_shared<const std::string>(bytes);
  return s;
}
} // namespace

void Registry::insert(const std::string &name, RegistryEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end())
    fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel '", name, "' is defined twice: ",
         sourceOf(it->second), " and ", sourceOf(entry));
  entries_.emplace(name, std::move(entry));
}

void Registry::addEmbedded(const std::string &kernel,
                           std::string_view manifestJson,
                           const std::string &source,
                           qopt_binary_format format, std::string_view image) {
  if (kernel.empty())
    fail(QOPT_ERROR_INVALID_ARGUMENT, source, ": an embedded kernel needs a name");
  RegistryEntry e;
  e.manifestText = manifestJson;
  e.imageBytes = image;
  e.imageFormat = format;
  e.source = source;
  insert(kernel, std::move(e));
}

RegistryEntry Registry::manifestFileEntry(const std::string &path) {
  RegistryEntry e;
  e.manifest = loadManifest(path);
  const Manifest &m = *e.manifest;
  if (m.binariesListed) {
    for (const BinaryDesc &b : m.binaries) {
      if (!isFile(b.path))
        fail(QOPT_ERROR_IO, m.source, ": binary ", b.path,
             " listed in 'binaries' does not exist");
      e.images.push_back({b.format, b.arch, b.path, nullptr});
    }
  } else {
    std::string stem =
        (m.baseDir.empty() ? std::string() : m.baseDir + "/") + m.kernel;
    for (auto [format, ext] :
         {std::pair{QOPT_BINARY_CUBIN, ".cubin"},
          std::pair{QOPT_BINARY_FATBIN, ".fatbin"},
          std::pair{QOPT_BINARY_PTX, ".ptx"}}) {
      if (isFile(stem + ext))
        e.images.push_back({format, m.arch, stem + ext, nullptr});
    }
  }
  return e;
}

void Registry::addManifestFile(const std::string &path) {
  RegistryEntry e = manifestFileEntry(path);
  std::string name = e.manifest->kernel;
  insert(name, std::move(e));
}

size_t Registry::addDirectory(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    fail(QOPT_ERROR_IO, "cannot open directory ", dir, ": ",
         std::strerror(errno));
  std::vector<std::string> files;
  while (dirent *ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (endsWith(name, ".manifest.json"))
      files.push_back(name);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  // Every file is read and every name checked before the first is added:
  // a refused directory leaves the registry as it was.
  std::vector<RegistryEntry> entries;
  entries.reserve(files.size());
  for (const std::string &f : files)
    entries.push_back(manifestFileEntry(dir + "/" + f));
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, const RegistryEntry *> batch;
  for (const RegistryEntry &e : entries) {
    const std::string &name = e.manifest->kernel;
    auto it = entries_.find(name);
    const RegistryEntry *other = it != entries_.end() ? &it->second : nullptr;
    auto [b, fresh] = batch.emplace(name, &e);
    if (!fresh)
      other = b->second;
    if (other)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel '", name,
           "' is defined twice: ", sourceOf(*other), " and ", sourceOf(e));
  }
  for (RegistryEntry &e : entries) {
    std::string name = e.manifest->kernel;
    entries_.emplace(std::move(name), std::move(e));
  }
  return files.size();
}

void Registry::add(ManifestPtr manifest, qopt_binary_format format,
                   const void *image, size_t size) {
  RegistryEntry e;
  e.manifest = std::move(manifest);
  if (image && size)
    e.images.push_back(inMemoryImage(
        format, e.manifest->arch,
        std::string_view(static_cast<const char *>(image), size)));
  std::string name = e.manifest->kernel;
  insert(name, std::move(e));
}

size_t Registry::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

const std::string &Registry::name(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= entries_.size())
    fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel index ", index,
         " out of range (", entries_.size(), " kernels)");
  return std::next(entries_.begin(), static_cast<long>(index))->first;
}

RegistryEntry Registry::get(const std::string &kernel) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(kernel);
  if (it == entries_.end()) {
    std::string known;
    for (const auto &[name, e] : entries_)
      known += (known.empty() ? "" : ", ") + name;
    fail(QOPT_ERROR_NOT_FOUND, "no kernel '", kernel, "' in the registry (",
         known.empty() ? "it is empty" : "it has: " + known, ")");
  }
  RegistryEntry &e = it->second;
  if (!e.manifest) {
    ManifestPtr m = parseManifest(e.manifestText, e.source);
    if (m->kernel != kernel)
      fail(QOPT_ERROR_MANIFEST, e.source, ": the manifest's kernel is '",
           m->kernel, "', but it was registered as '", kernel, "'");
    if (!e.imageBytes.empty())
      e.images.push_back(inMemoryImage(e.imageFormat, m->arch, e.imageBytes));
    e.manifest = std::move(m);
  }
  return e;
}

} // namespace qopt::rt

//===- Kernels.cpp - The kernel qopt-step runs ----------------------------===//
#include "Kernels.h"

#include "Support.h"

#include "FileCheck.h" // the runtime's check of a shared object before dlopen

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace qopt::step {

namespace {

std::string exeDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return ".";
  std::string p(buf, static_cast<size_t>(n));
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

bool hasManifests(const std::string &dir) {
  // A directory holds kernels when some *.manifest.json is in it.
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return false;
  bool found = false;
  while (struct dirent *e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 14 && n.compare(n.size() - 14, 14, ".manifest.json") == 0) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

/// The kernel directory for `backend` under `dir`: dir/host (host) or
/// dir/fatbin, dir/ptx (cuda) when they hold manifests, else dir itself when
/// it does; "" if none does.
std::string kernelDirFor(const std::string &dir, qopt_backend backend) {
  std::vector<std::string> subs = backend == QOPT_BACKEND_HOST
                                      ? std::vector<std::string>{"host"}
                                      : std::vector<std::string>{"fatbin", "ptx"};
  for (const std::string &s : subs)
    if (hasManifests(dir + "/" + s))
      return dir + "/" + s;
  return hasManifests(dir) ? dir : "";
}

} // namespace

/// "<shipped>/flash_adamw.manifest.json" or "dir/flash_adamw.manifest.json"
/// -> "flash_adamw".
std::string specStem(const std::string &source) {
  std::string base = source.substr(source.find_last_of('/') + 1);
  const std::string suffix = ".manifest.json";
  if (base.size() > suffix.size() &&
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
    return base.substr(0, base.size() - suffix.size());
  return base;
}


namespace {

/// Adds the shipped kernels of libqopt_kernels.so (dlopen'd beside the build
/// tree's runtime, then by the loader's search). False when it is not found.
bool addShipped(qopt::Registry &registry, std::string *why) {
  using AddFn = qopt_status (*)(qopt_registry *, size_t *);
  std::vector<std::string> candidates = {exeDir() + "/../lib/libqopt_kernels.so",
                                         "libqopt_kernels.so"};
  std::vector<std::string> errors;
  for (const std::string &c : candidates) {
    try {
      qopt::rt::checkLoadableFile(c); // a truncated .so is SIGBUS in dlopen
    } catch (const std::exception &e) {
      if (::access(c.c_str(), F_OK) == 0) {
        errors.push_back(e.what());
        continue;
      }
    }
    void *h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      errors.push_back(::dlerror());
      continue;
    }
    auto add = reinterpret_cast<AddFn>(::dlsym(h, "qopt_registry_add_shipped"));
    if (!add) {
      errors.push_back(c + " has no qopt_registry_add_shipped");
      continue;
    }
    // Kept loaded: the registry holds copies of the images, but the library
    // is small and the process short.
    qopt::check(add(registry.get(), nullptr));
    return true;
  }
  *why = join(errors, "; ");
  return false;
}

/// The registry key of kernel `k` (a kernel name or a spec stem) in
/// `registry`, or "" where it has none. Kernel names and spec stems are two
/// namespaces: where `k` is one kernel's name and another's stem, it names
/// neither, and the error lists each kernel's manifest to give instead.
std::string findKernel(const qopt::Registry &registry, const std::string &k) {
  std::vector<std::string> hits;
  for (const std::string &n : registry.kernelNames())
    if (n == k || specStem(registry.manifest(n).info().source) == k)
      hits.push_back(n);
  if (hits.size() > 1) {
    std::vector<std::string> which;
    for (const std::string &n : hits) {
      const std::string &src = registry.manifest(n).info().source;
      which.push_back(cat("kernel ", n, " (", src, ", ",
                          n == k ? "its kernel name" : "its spec stem", ")"));
    }
    fail("--kernel '", k, "' names ", hits.size(), " kernels: ", join(which),
         "; give the manifest's path instead");
  }
  return hits.empty() ? "" : hits.front();
}

} // namespace

ResolvedKernel resolveKernel(const Options &o) {
  ResolvedKernel r;
  const std::string &k = o.kernel;
  bool isPath = k.find('/') != std::string::npos ||
                (k.size() > 5 && k.compare(k.size() - 5, 5, ".json") == 0);
  if (isPath) {
    try {
      r.registry.addManifestFile(k);
    } catch (const qopt::Error &e) {
      fail("--kernel ", k, ": ", e.what());
    }
    r.name = r.registry.kernelNames().at(0);
    r.where = k;
    return r;
  }

  std::string dir = o.kernelsDir;
  const char *env = std::getenv("QOPT_KERNEL_DIR");
  std::string origin = "--kernels";
  bool fromEnv = dir.empty() && env && *env;
  if (fromEnv) {
    dir = env;
    origin = "$QOPT_KERNEL_DIR";
  }
  bool loaded = false;
  if (dir.empty() && o.backend == QOPT_BACKEND_CUDA) {
    std::string why;
    if (addShipped(r.registry, &why)) {
      loaded = true;
      r.where = "the shipped kernels (libqopt_kernels.so)";
    } else {
      std::string fallback = kernelDirFor(exeDir() + "/../kernels", o.backend);
      if (fallback.empty())
        fail("no kernels for the CUDA backend: libqopt_kernels.so could not be "
             "loaded (", why, ") and ", exeDir(), "/../kernels has no fatbin/ or "
             "ptx/ kernels; give --kernels DIR");
      dir = fallback;
      origin = "the build tree";
    }
  }
  if (!loaded) {
    if (dir.empty()) {
      dir = exeDir() + "/../kernels";
      origin = "the build tree";
    }
    // $QOPT_KERNEL_DIR may list several directories, ':'-separated (as the
    // Python package reads it): the first that holds the kernel serves.
    std::vector<std::string> dirs;
    if (fromEnv) {
      std::stringstream list(dir);
      for (std::string d; std::getline(list, d, ':');)
        if (!d.empty())
          dirs.push_back(d);
      if (dirs.empty())
        fail("$QOPT_KERNEL_DIR ('", dir, "') names no directory");
    } else {
      dirs.push_back(dir);
    }
    std::vector<std::string> kdirs;
    for (const std::string &d : dirs) {
      struct stat st;
      if (::stat(d.c_str(), &st) != 0)
        fail("kernel directory '", d, "' (", origin, ") does not exist");
      if (!S_ISDIR(st.st_mode))
        fail("kernel directory '", d, "' (", origin, ") is not a directory");
      std::string kdir = kernelDirFor(d, o.backend);
      if (kdir.empty())
        fail("kernel directory '", d, "' (", origin, "): no *.manifest.json in it or in ",
             d, o.backend == QOPT_BACKEND_HOST ? "/host" : "/fatbin or " + d + "/ptx");
      kdirs.push_back(kdir);
    }
    // Each directory's kernels in turn; where none holds the kernel the
    // first's stay loaded, and the lookup below names every directory.
    for (size_t i = 0; i < kdirs.size(); ++i) {
      qopt::Registry candidate;
      try {
        candidate.addDirectory(kdirs[i]);
      } catch (const qopt::Error &e) {
        fail("kernel directory '", kdirs[i], "': ", e.what());
      }
      bool holds = kdirs.size() == 1 || !findKernel(candidate, k).empty();
      if (i == 0 || holds)
        r.registry = std::move(candidate);
      if (holds) {
        r.where = kdirs[i];
        break;
      }
      r.where = join(kdirs);
    }
  }

  r.name = findKernel(r.registry, k);
  if (!r.name.empty())
    return r;
  std::vector<std::string> known;
  for (const std::string &n : r.registry.kernelNames()) {
    std::string stem = specStem(r.registry.manifest(n).info().source);
    known.push_back(stem == n ? n : n + " (" + stem + ")");
  }
  fail("unknown kernel '", k, "' in ", r.where, "; known kernels: ",
       known.empty() ? std::string("none") : join(known));
}

//===--- dtypes -----------------------------------------------------------===//

/// The safetensors dtype of an ABI dtype.
const char *stDtype(qopt_dtype d) {
  switch (d) {
  case QOPT_DTYPE_F32:
    return "F32";
  case QOPT_DTYPE_BF16:
    return "BF16";
  case QOPT_DTYPE_F16:
    return "F16";
  case QOPT_DTYPE_INT8:
    return "I8";
  case QOPT_DTYPE_UINT8:
    return "U8";
  case QOPT_DTYPE_INT16:
    return "I16";
  default:
    return "?";
  }
}

size_t dtypeBytes(qopt_dtype d) {
  size_t n = 0;
  qopt::check(qopt_dtype_size(d, &n));
  return n;
}

const char *abiName(qopt_dtype d) {
  const char *n = "?";
  (void)qopt_dtype_name(d, &n);
  return n;
}

std::string perText(const qopt_stream_info &s) {
  if (s.per == QOPT_PER_ELEMENT)
    return "one per element";
  return cat("one per ", s.per == QOPT_PER_GROUP ? "group" : "block", " of ",
             s.per_size);
}

} // namespace qopt::step

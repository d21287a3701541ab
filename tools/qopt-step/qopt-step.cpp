//===- qopt-step.cpp - N optimizer steps on tensors from safetensors files ===//
//
// Reads the tensors of a kernel's streams from safetensors files, named
// `<tensor>/<stream>` (`wte/p`, `wte/p.ecc`, `wte/g`, `wte/m.codes`, ...), steps
// every tensor N times in one launch per step through the runtime (host
// backend or CUDA), and writes the state streams (every read-write stream) and
// the codebook tables to one safetensors file. See docs/qopt-step.md.
//
// Every problem with the inputs is found before anything runs, and the output
// is written to a temporary file in the same directory and renamed over the
// output only when everything succeeded: on any error the output file is left
// as it was and the exit status is 1 (2 for a command-line mistake).
//
// No LLVM/MLIR: the runtime's C API (through runtime.hpp) and qopt_safetensors.
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/SafeTensors.h"
#include "qopt/runtime.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace st = qopt::st;

namespace {

//===--- Errors -----------------------------------------------------------===//

/// A problem with the inputs, the kernel or the environment (exit status 1).
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A mistake on the command line (exit status 2, with a hint to --help).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args> std::string cat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
template <typename... Args> [[noreturn]] void fail(Args &&...args) {
  throw Failure(cat(std::forward<Args>(args)...));
}
template <typename... Args> [[noreturn]] void usage(Args &&...args) {
  throw UsageError(cat(std::forward<Args>(args)...));
}

std::string join(const std::vector<std::string> &items, const char *sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? sep : "") + items[i];
  return out;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape)
    dims.push_back(std::to_string(d));
  return "[" + join(dims) + "]";
}

//===--- Options ----------------------------------------------------------===//

const char *kUsage = R"(usage: qopt-step --kernel K --in FILE [--in FILE...] --out FILE [options]
       qopt-step --kernel K --describe [--backend B] [--kernels DIR]
       qopt-step --kernel K --make-example FILE --tensor NAME=SHAPE... [--seed S] [--no-state]

Steps every tensor of the inputs N times with one kernel (one launch per step)
and writes the new state to FILE. Tensors are named <tensor>/<stream> after the
kernel's streams (`qopt-step --kernel K --describe` lists them): e.g. wte/p,
wte/p.ecc, wte/g, wte/m.codes, wte/m.scales. The gradient <tensor>/g is used at
every step unless <tensor>/g@<step> gives that step's own. Codebook tables are
tensors named after them (m.qmap) or --table. The output holds every read-write
stream (parameter, error bits, states) and the tables, not the gradients.

kernel:
  --kernel K            a spec name (flash_adamw), a kernel name (FlashAdamW),
                        or a <kernel>.manifest.json file
  --backend B           host (default) or cuda
  --device N            CUDA device ordinal (default 0)
  --kernels DIR         directory of kernels and their manifests: DIR/host
                        (host) or DIR/fatbin, DIR/ptx (cuda) when those hold
                        manifests, else DIR itself.
                        Default: $QOPT_KERNEL_DIR (one directory, or several
                        ':'-separated: the first that holds the kernel), else,
                        for cuda, the shipped kernels of libqopt_kernels.so,
                        else <bin>/../kernels
step:
  --steps N             number of steps (default 1; 0 only writes the state)
  --step-start K        the step count of the first step, as the spec's `step`
                        sees it (default 1): steps K .. K+N-1 run
  --hyper NAME=VALUE    a hyperparameter (repeatable; a decimal number, true/false for flags);
                        those not given take the manifest's default
  --table NAME=SRC      codebook table NAME (e.g. m.qmap) from SRC:
                        dynamic-signed, dynamic-unsigned (bitsandbytes'
                        create_dynamic_map), or FILE[:TENSOR] (256 F32 values)
  --init-missing-state  start state streams (and error bits) missing from the
                        inputs at their initial value (zero state)
files:
  --in FILE             a safetensors input (repeatable; a name may be in one
                        file only)
  --out FILE            the safetensors output (may be an input); written only
                        when everything succeeded
other:
  --describe            print the kernel's streams, hyperparameters and tables
  --make-example FILE   write an example input for the kernel: a random master
                        weight 0.5*N(0,1) split into its streams, a gradient
                        0.01*N(0,1) and the initial state of each --tensor
  --tensor NAME=SHAPE   a tensor of --make-example, e.g. wte=64x32 or b=100
  --seed S              random seed of --make-example (default 1)
  --no-state            --make-example writes no state streams
  -q, --quiet           no summary line
  -h, --help            this text
)";

struct Options {
  std::string kernel;
  qopt_backend backend = QOPT_BACKEND_HOST;
  int32_t device = 0;
  std::string kernelsDir; ///< --kernels (empty: not given)
  int64_t steps = 1;
  int64_t stepStart = 1;
  std::vector<std::pair<std::string, std::string>> hypers; ///< as given
  std::vector<std::pair<std::string, std::string>> tables; ///< NAME, SRC
  bool initMissingState = false;
  std::vector<std::string> inputs;
  std::string output;
  bool describe = false;
  std::string makeExample;
  std::vector<std::pair<std::string, std::vector<int64_t>>> exampleTensors;
  uint64_t seed = 1;
  bool noState = false;
  bool quiet = false;
};

int64_t parseInt(const std::string &option, const std::string &text, int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE)
    usage(option, ": '", text, "' is not an integer");
  if (v < min)
    usage(option, ": ", v, " is below ", min);
  return v;
}

std::pair<std::string, std::string> splitAssign(const std::string &option,
                                                const std::string &text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    usage(option, " ", text, ": expected NAME=VALUE");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string name = arg, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        hasValue = true;
      }
    }
    auto takeValue = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= argc)
        usage(name, " needs a value");
      return argv[++i];
    };
    auto noValue = [&] {
      if (hasValue)
        usage(name, " takes no value");
    };
    if (name == "-h" || name == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (name == "-q" || name == "--quiet") {
      noValue();
      o.quiet = true;
    } else if (name == "--kernel") {
      o.kernel = takeValue();
    } else if (name == "--backend") {
      std::string b = takeValue();
      if (b == "host")
        o.backend = QOPT_BACKEND_HOST;
      else if (b == "cuda")
        o.backend = QOPT_BACKEND_CUDA;
      else
        usage("--backend: unknown backend '", b, "' (host or cuda)");
    } else if (name == "--device") {
      o.device = static_cast<int32_t>(parseInt(name, takeValue(), 0));
    } else if (name == "--kernels") {
      o.kernelsDir = takeValue();
      if (o.kernelsDir.empty())
        usage("--kernels: empty directory name");
    } else if (name == "--steps") {
      o.steps = parseInt(name, takeValue(), 0);
    } else if (name == "--step-start") {
      o.stepStart = parseInt(name, takeValue(), 1);
    } else if (name == "--hyper") {
      o.hypers.push_back(splitAssign(name, takeValue()));
    } else if (name == "--table") {
      o.tables.push_back(splitAssign(name, takeValue()));
    } else if (name == "--init-missing-state") {
      noValue();
      o.initMissingState = true;
    } else if (name == "--in") {
      o.inputs.push_back(takeValue());
    } else if (name == "--out") {
      if (!o.output.empty())
        usage("--out given twice");
      o.output = takeValue();
    } else if (name == "--describe") {
      noValue();
      o.describe = true;
    } else if (name == "--make-example") {
      o.makeExample = takeValue();
    } else if (name == "--tensor") {
      auto [tname, shapeText] = splitAssign(name, takeValue());
      // Dimensions separated by 'x', each one written: `3x` and `x3` are
      // mistakes, not [3].
      std::vector<int64_t> shape;
      if (shapeText.empty())
        usage("--tensor ", tname, ": empty shape");
      for (size_t begin = 0;;) {
        size_t x = shapeText.find('x', begin);
        std::string dim = shapeText.substr(begin, x == std::string::npos ? x : x - begin);
        if (dim.empty())
          usage("--tensor ", tname, "=", shapeText,
                ": a dimension is missing (write the shape as 4x8)");
        shape.push_back(parseInt("--tensor " + tname, dim, 0));
        if (x == std::string::npos)
          break;
        begin = x + 1;
      }
      for (const auto &[given, givenShape] : o.exampleTensors)
        if (given == tname)
          usage("--tensor ", tname, " given twice");
      o.exampleTensors.emplace_back(tname, shape);
    } else if (name == "--seed") {
      o.seed = static_cast<uint64_t>(parseInt(name, takeValue(), 0));
    } else if (name == "--no-state") {
      noValue();
      o.noState = true;
    } else {
      usage("unknown option '", arg, "'");
    }
  }
  if (o.kernel.empty())
    usage("--kernel is required");
  if (o.describe)
    return o;
  if (!o.makeExample.empty()) {
    if (o.exampleTensors.empty())
      usage("--make-example needs at least one --tensor NAME=SHAPE");
    return o;
  }
  if (o.inputs.empty())
    usage("at least one --in FILE is required");
  if (o.output.empty())
    usage("--out FILE is required");
  if (o.stepStart > INT64_MAX - o.steps)
    usage("--step-start + --steps overflows");
  return o;
}

//===--- Kernels ----------------------------------------------------------===//

std::string exeDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return ".";
  std::string p(buf, static_cast<size_t>(n));
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

bool isDirectory(const std::string &path) {
  struct stat s;
  return ::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
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

struct ResolvedKernel {
  qopt::Registry registry;
  std::string name;  ///< the registry key
  std::string where; ///< where it came from, for messages
};

/// Adds the shipped kernels of libqopt_kernels.so (dlopen'd beside the build
/// tree's runtime, then by the loader's search). False when it is not found.
bool addShipped(qopt::Registry &registry, std::string *why) {
  using AddFn = qopt_status (*)(qopt_registry *, size_t *);
  std::vector<std::string> candidates = {exeDir() + "/../lib/libqopt_kernels.so",
                                         "libqopt_kernels.so"};
  std::vector<std::string> errors;
  for (const std::string &c : candidates) {
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
/// `registry`, or "" where it has none.
std::string findKernel(const qopt::Registry &registry, const std::string &k) {
  for (const std::string &n : registry.kernelNames())
    if (n == k || specStem(registry.manifest(n).info().source) == k)
      return n;
  return "";
}

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
      if (!isDirectory(d))
        fail("kernel directory '", d, "' (", origin, ") does not exist");
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

//===--- Codebook tables --------------------------------------------------===//

/// bitsandbytes' create_dynamic_map(signed, 7, 8) in float32, exactly as the
/// C++ reference computes it (test/reference, createDynamicMap with its
/// default LinspaceModel: every torch.linspace element by the fused scalar
/// formula); the tool's test compares the two bit for bit.
std::vector<float> dynamicMap(bool isSigned) {
  const int maxExponentBits = 7, totalBits = 8;
  const int fractionBits = totalBits - 1;
  std::vector<double> data;
  auto linspace = [](float start, float end, int64_t steps) {
    std::vector<float> out(static_cast<size_t>(steps));
    if (steps == 1) {
      out[0] = start;
      return out;
    }
    const float step = (end - start) / static_cast<float>(steps - 1);
    const int64_t halfway = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      out[static_cast<size_t>(i)] =
          i < halfway ? std::fma(step, static_cast<float>(i), start)
                      : std::fma(-step, static_cast<float>(steps - 1 - i), end);
    return out;
  };
  auto addLevel = [&](int64_t items, int level) {
    const std::vector<float> edges = linspace(0.1f, 1.0f, items + 1);
    const int e10 = level - (maxExponentBits - 1);
    const float scale = static_cast<float>(std::pow(10.0, static_cast<double>(e10)));
    for (int64_t k = 0; k < items; ++k) {
      const float mean = (edges[static_cast<size_t>(k)] + edges[static_cast<size_t>(k + 1)]) / 2.0f;
      data.push_back(static_cast<double>(scale * mean));
      if (isSigned)
        data.push_back(static_cast<double>((-scale) * mean));
    }
  };
  for (int level = 0; level < maxExponentBits; ++level)
    addLevel(int64_t{1} << (level + fractionBits - maxExponentBits + (isSigned ? 0 : 1)), level);
  // extra = 2^(F - E) - 1 = 0 for 7 exponent bits of 8.
  data.push_back(0.0);
  data.push_back(1.0);
  data.resize(256, 0.0);
  std::sort(data.begin(), data.end());
  return std::vector<float>(data.begin(), data.end());
}

struct Table {
  std::string name;
  std::string from; ///< for messages
  std::vector<float> values;
};

std::vector<float> tableFromTensor(const st::Tensor &t, const std::string &what) {
  if (t.dtype != "F32")
    fail(what, ": dtype ", t.dtype, ", a codebook table is 256 F32 values");
  if (t.numel() != 256)
    fail(what, ": ", t.numel(), " elements (shape ", shapeString(t.shape),
         "), a codebook table is 256 F32 values");
  std::vector<float> v(256);
  std::memcpy(v.data(), t.data.data(), 256 * sizeof(float));
  return v;
}

/// --table NAME=SRC.
std::vector<float> loadTableSource(const std::string &name, const std::string &src) {
  if (src == "dynamic-signed")
    return dynamicMap(true);
  if (src == "dynamic-unsigned")
    return dynamicMap(false);
  std::string file = src, tensor;
  struct stat s;
  if (::stat(src.c_str(), &s) != 0) {
    size_t colon = src.find_last_of(':');
    if (colon != std::string::npos && colon > 0) {
      file = src.substr(0, colon);
      tensor = src.substr(colon + 1);
    }
  }
  st::File f;
  try {
    f = st::File::load(file);
  } catch (const st::Error &e) {
    fail("--table ", name, "=", src, ": ", e.what());
  }
  if (tensor.empty()) {
    std::vector<std::string> names = f.names();
    if (f.has(name))
      tensor = name;
    else if (names.size() == 1)
      tensor = names[0];
    else
      fail("--table ", name, "=", src, ": '", file, "' has ", names.size(),
           " tensors and none named '", name, "'; say which with ", file,
           ":TENSOR");
  }
  if (!f.has(tensor))
    fail("--table ", name, "=", src, ": '", file, "' has no tensor '", tensor,
         "'");
  return tableFromTensor(f.get(tensor),
                         cat("--table ", name, "=", src, ": tensor '", tensor, "'"));
}

//===--- Inputs -----------------------------------------------------------===//

/// A tensor of an input file.
struct Source {
  const st::Tensor *tensor = nullptr;
  std::string file; ///< the --in file it is in
  std::string name; ///< its name there
  std::string where() const { return file + ": tensor '" + name + "'"; }
};

/// One parameter tensor and its streams, as found in the inputs.
struct Group {
  std::string name;
  std::vector<std::optional<Source>> streams; ///< by ABI stream index
  std::map<int64_t, Source> gradAt;           ///< <name>/g@<step>
  /// Any tensor of the group, for messages about a missing parameter.
  std::optional<Source> any;
};

/// A stream's data for the step: from a file or made here.
struct Stream {
  std::vector<int64_t> shape;
  const st::Tensor *src = nullptr; ///< the input tensor, or null: `owned`
  std::vector<uint8_t> owned;      ///< made by --init-missing-state
  bool initialized = false;
  const std::vector<uint8_t> &bytes() const { return src ? src->data : owned; }
};

/// A tensor ready to step.
struct Tensor {
  std::string name;
  int64_t numel = 0;
  std::vector<int64_t> shape;
  std::vector<Stream> streams;               ///< by ABI stream index
  std::map<int64_t, const Source *> gradFor; ///< step -> gradient
};

struct KernelInfo {
  qopt::Manifest manifest;
  qopt_manifest_info info;
  std::vector<qopt_stream_info> streams;
  std::vector<qopt_hyper_info> hypers;
  std::vector<qopt_table_info> tables;
  size_t paramIndex = 0, gradIndex = 0;
  std::string paramName, gradName;

  explicit KernelInfo(qopt::Manifest m) : manifest(std::move(m)) {
    info = manifest.info();
    for (size_t i = 0; i < info.num_streams; ++i) {
      streams.push_back(manifest.stream(i));
      if (streams.back().role == QOPT_ROLE_PARAM)
        paramIndex = i;
      if (streams.back().role == QOPT_ROLE_GRAD)
        gradIndex = i;
    }
    for (size_t i = 0; i < info.num_hypers; ++i)
      hypers.push_back(manifest.hyper(i));
    for (size_t i = 0; i < info.num_tables; ++i)
      tables.push_back(manifest.table(i));
    paramName = streams[paramIndex].name;
    gradName = streams[gradIndex].name;
  }
  std::vector<std::string> streamNames() const {
    std::vector<std::string> n;
    for (const qopt_stream_info &s : streams)
      n.push_back(s.name);
    return n;
  }
  std::vector<std::string> tableNames() const {
    std::vector<std::string> n;
    for (const qopt_table_info &t : tables)
      n.push_back(t.name);
    return n;
  }
  /// What a stream belongs to, for messages and for initializing a state
  /// as a whole: "state m", "the error bits".
  std::string unitOf(size_t j) const {
    const qopt_stream_info &s = streams[j];
    if (s.role == QOPT_ROLE_ERROR_BITS)
      return "the error bits";
    return std::string("state ") + s.state;
  }
};

std::string perText(const qopt_stream_info &s) {
  if (s.per == QOPT_PER_ELEMENT)
    return "one per element";
  return cat("one per ", s.per == QOPT_PER_GROUP ? "group" : "block", " of ",
             s.per_size);
}

/// Throws unless `src` has the stream's dtype and `count` elements.
void checkStream(const KernelInfo &k, size_t j, const Source &src, int64_t count,
                 const Tensor &t) {
  const qopt_stream_info &s = k.streams[j];
  const std::string want = stDtype(s.dtype);
  if (src.tensor->dtype != want)
    fail(src.where(), ": dtype ", src.tensor->dtype, ", but stream '", s.name,
         "' of kernel ", k.info.kernel, " is ", abiName(s.dtype), " (safetensors ",
         want, ")");
  if (src.tensor->numel() != count)
    fail(src.where(), ": ", src.tensor->numel(), " elements (shape ",
         shapeString(src.tensor->shape), "), but stream '", s.name, "' has ",
         perText(s), " of the parameter '", t.name, "/", k.paramName, "' (",
         t.numel, " elements, shape ", shapeString(t.shape), "), so ", count);
}

/// Loads every input and sorts its tensors into parameter groups and tables.
struct Inputs {
  std::vector<st::File> files;
  std::map<std::string, Group> groups;
  std::map<std::string, Source> tables;
};

Inputs readInputs(const Options &o, const KernelInfo &k) {
  Inputs in;
  in.files.reserve(o.inputs.size());
  for (const std::string &path : o.inputs) {
    try {
      in.files.push_back(st::File::load(path));
    } catch (const st::Error &e) {
      fail(e.what());
    }
  }
  std::map<std::string, std::string> seen; // name -> file
  std::vector<std::string> streamNames = k.streamNames();
  for (size_t f = 0; f < in.files.size(); ++f) {
    const st::File &file = in.files[f];
    for (const std::string &name : file.names()) {
      Source src{&file.get(name), o.inputs[f], name};
      auto [it, fresh] = seen.emplace(name, o.inputs[f]);
      if (!fresh)
        fail("tensor '", name, "' is in two inputs: ", it->second, " and ",
             o.inputs[f]);
      size_t slash = name.find_last_of('/');
      if (slash == std::string::npos) {
        bool isTable = false;
        for (const qopt_table_info &ti : k.tables)
          isTable = isTable || name == ti.name;
        if (!isTable)
          fail(src.where(), ": not named <tensor>/<stream>",
               k.tables.empty()
                   ? " (and kernel " + std::string(k.info.kernel) +
                         " takes no codebook tables)"
                   : " nor a table of kernel " + std::string(k.info.kernel) + " (" +
                         join(k.tableNames()) + ")");
        in.tables.emplace(name, src);
        continue;
      }
      std::string group = name.substr(0, slash), stream = name.substr(slash + 1);
      if (group.empty())
        fail(src.where(), ": empty tensor name before '/'");
      Group &g = in.groups[group];
      g.name = group;
      if (g.streams.empty())
        g.streams.resize(k.streams.size());
      if (!g.any)
        g.any = src;
      auto it2 = std::find(streamNames.begin(), streamNames.end(), stream);
      if (it2 != streamNames.end()) {
        g.streams[static_cast<size_t>(it2 - streamNames.begin())] = src;
        continue;
      }
      const std::string gradPrefix = k.gradName + "@";
      if (stream.rfind(gradPrefix, 0) == 0) {
        std::string stepText = stream.substr(gradPrefix.size());
        char *end = nullptr;
        errno = 0;
        long long step = std::strtoll(stepText.c_str(), &end, 10);
        if (stepText.empty() || *end || errno == ERANGE || step < 1 ||
            !std::isdigit(static_cast<unsigned char>(stepText[0])))
          fail(src.where(), ": '", stream, "' is not ", gradPrefix,
               "<step> with a step >= 1");
        g.gradAt[step] = src;
        continue;
      }
      fail(src.where(), ": kernel ", k.info.kernel, " has no stream '", stream,
           "' (its streams: ", join(streamNames), "; a gradient of one step: ",
           gradPrefix, "<step>)");
    }
  }
  if (in.groups.empty())
    fail("the inputs (", join(o.inputs), ") have no tensor named <tensor>/",
         k.paramName);
  return in;
}

/// Every table the kernel takes, from --table or the inputs.
std::vector<Table> resolveTables(const Options &o, const KernelInfo &k,
                                 const Inputs &in) {
  std::map<std::string, std::string> given;
  for (const auto &[name, src] : o.tables) {
    bool known = false;
    for (const qopt_table_info &t : k.tables)
      known = known || name == t.name;
    if (!known)
      fail("--table ", name, "=", src, ": kernel ", k.info.kernel,
           k.tables.empty() ? std::string(" takes no tables")
                            : " has no table '" + name + "' (its tables: " +
                                  join(k.tableNames()) + ")");
    if (!given.emplace(name, src).second)
      fail("--table ", name, " given twice");
  }
  std::vector<Table> tables;
  for (const qopt_table_info &t : k.tables) {
    Table table;
    table.name = t.name;
    auto g = given.find(t.name);
    if (g != given.end()) {
      table.values = loadTableSource(t.name, g->second);
      table.from = "--table " + table.name + "=" + g->second;
    } else if (auto it = in.tables.find(t.name); it != in.tables.end()) {
      table.values = tableFromTensor(*it->second.tensor, it->second.where());
      table.from = it->second.where();
    } else {
      fail("kernel ", k.info.kernel, " needs the codebook table '", t.name,
           "' (256 F32 values): give --table ", t.name,
           "=dynamic-signed|dynamic-unsigned|FILE[:TENSOR], or a tensor '",
           t.name, "' in an --in file");
    }
    uint8_t zero = 0;
    if (qopt_codebook_zero_code(table.values.data(), &zero) != QOPT_SUCCESS)
      fail(table.from, ": not a usable codebook table: ", qopt_last_error());
    tables.push_back(std::move(table));
  }
  return tables;
}

/// Fills `out` with `count` elements of `bits` (little-endian, `size` bytes).
std::vector<uint8_t> fillBytes(int64_t count, size_t size, uint64_t bits) {
  std::vector<uint8_t> out(static_cast<size_t>(count) * size);
  for (size_t i = 0; i < out.size(); i += size)
    for (size_t b = 0; b < size; ++b)
      out[i + b] = static_cast<uint8_t>((bits >> (8 * b)) & 0xff);
  return out;
}

/// The initial bytes of stream `j` (a state or the error bits) per the
/// runtime's state layout. Error bits start at 0: the master is the 16-bit
/// parameter as given.
std::vector<uint8_t> initialBytes(const qopt_buffer_layout &l) {
  size_t size = dtypeBytes(l.dtype);
  switch (l.init) {
  case QOPT_INIT_FILL:
    return fillBytes(l.count, size, l.fill_bits);
  case QOPT_INIT_FROM_MASTER:
    return std::vector<uint8_t>(static_cast<size_t>(l.count) * size, 0);
  default:
    fail("internal error: stream '", l.name, "' has no initial value (init kind ",
         static_cast<int>(l.init), ")");
  }
}

std::vector<Tensor> buildTensors(const Options &o, const KernelInfo &k,
                                 const Inputs &in, const std::vector<Table> &tables) {
  std::vector<const float *> hostTables;
  for (const Table &t : tables)
    hostTables.push_back(t.values.data());
  const int64_t lastStep = o.stepStart + o.steps - 1;
  std::vector<Tensor> out;
  for (const auto &[name, g] : in.groups) {
    const std::optional<Source> &param = g.streams[k.paramIndex];
    if (!param)
      fail(g.any->where(), ": belongs to tensor '", name, "', which has no parameter '",
           name, "/", k.paramName, "' in the inputs");
    Tensor t;
    t.name = name;
    t.shape = param->tensor->shape;
    t.numel = param->tensor->numel();
    std::vector<qopt_buffer_layout> layout = k.manifest.stateLayout(t.numel, hostTables);
    t.streams.resize(k.streams.size());

    // Which state units (a state's streams, or the error bits) are missing.
    std::map<std::string, std::vector<size_t>> present, missing;
    for (size_t j = 0; j < k.streams.size(); ++j) {
      const qopt_stream_info &s = k.streams[j];
      Stream &stream = t.streams[j];
      if (s.role == QOPT_ROLE_GRAD)
        continue;
      if (const std::optional<Source> &src = g.streams[j]) {
        checkStream(k, j, *src, layout[j].count, t);
        stream.shape = src->tensor->shape;
        stream.src = src->tensor;
        if (s.role != QOPT_ROLE_PARAM)
          present[k.unitOf(j)].push_back(j);
      } else {
        missing[k.unitOf(j)].push_back(j);
      }
    }
    for (const auto &[unit, streams] : missing) {
      const qopt_stream_info &first = k.streams[streams[0]];
      if (!o.initMissingState)
        fail("missing tensor '", name, "/", first.name, "' (stream ", first.name,
             ", ", unit, " of kernel ", k.info.kernel, "): give it in an --in "
             "file, or pass --init-missing-state to start ", unit,
             " at the initial value");
      if (present.count(unit)) {
        const qopt_stream_info &have = k.streams[present[unit][0]];
        fail("tensor '", name, "': ", unit, " is partly given (",
             g.streams[present[unit][0]]->where(), ") and partly missing ('",
             name, "/", first.name, "'); give all of its streams or none (",
             have.name, " and ", first.name, " belong together)");
      }
      for (size_t j : streams) {
        Stream &stream = t.streams[j];
        stream.owned = initialBytes(layout[j]);
        stream.initialized = true;
        stream.shape = k.streams[j].per == QOPT_PER_ELEMENT
                           ? t.shape
                           : std::vector<int64_t>{layout[j].count};
      }
    }

    // Gradients: every one given is checked; each step needs one.
    const size_t gj = k.gradIndex;
    if (g.streams[gj])
      checkStream(k, gj, *g.streams[gj], layout[gj].count, t);
    for (const auto &[step, src] : g.gradAt)
      checkStream(k, gj, src, layout[gj].count, t);
    for (int64_t step = o.stepStart; step <= lastStep; ++step) {
      auto it = g.gradAt.find(step);
      if (it != g.gradAt.end())
        t.gradFor[step] = &it->second;
      else if (g.streams[gj])
        t.gradFor[step] = &*g.streams[gj];
      else
        fail("missing tensor '", name, "/", k.gradName, "' (the gradient of kernel ",
             k.info.kernel, ") for step ", step, ": give '", name, "/", k.gradName,
             "' (used at every step) or '", name, "/", k.gradName, "@", step, "'");
    }
    out.push_back(std::move(t));
  }
  return out;
}

/// The hyperparameters, checked against the manifest.
std::vector<qopt_hyper> resolveHypers(const Options &o, const KernelInfo &k,
                                      std::vector<std::string> &storage) {
  std::vector<std::string> names;
  for (const qopt_hyper_info &h : k.hypers)
    names.push_back(h.name);
  std::vector<qopt_hyper> out;
  std::set<std::string> given;
  storage.reserve(o.hypers.size());
  for (const auto &[name, text] : o.hypers) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      usage("--hyper ", name, "=", text, ": kernel ", k.info.kernel,
           " has no hyperparameter '", name, "'",
           names.empty() ? std::string(" (it has none)")
                         : " (it has " + join(names) + ")");
    if (!given.insert(name).second)
      usage("--hyper ", name, " given twice");
    const qopt_hyper_info &h = k.hypers[static_cast<size_t>(it - names.begin())];
    double v = 0;
    if (text == "true" || text == "false") {
      if (!h.is_bool)
        usage("--hyper ", name, "=", text, ": '", name,
              "' is a number, not a flag");
      v = text == "true";
    } else {
      // Decimal numbers (and inf, nan): strtod alone would also take
      // hexadecimal (0x10 = 16).
      char *end = nullptr;
      bool hex = text.find("0x") != std::string::npos ||
                 text.find("0X") != std::string::npos;
      errno = 0;
      v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || hex)
        usage("--hyper ", name, "=", text, ": '", text,
              "' is not a decimal number");
      // As the DSL refuses such literals: a number that overflows float64
      // is not inf (write inf for that), one that underflows is not 0.
      if (errno == ERANGE && std::isinf(v))
        usage("--hyper ", name, "=", text, ": '", text,
              "' is too large for float64");
      if (errno == ERANGE && v == 0)
        usage("--hyper ", name, "=", text, ": '", text,
              "' is too small for float64: it rounds to 0");
    }
    if (h.is_bool && v != 0 && v != 1)
      usage("--hyper ", name, "=", text, ": '", name,
            "' is a flag: true, false, 1 or 0");
    storage.push_back(name);
    out.push_back({storage.back().c_str(), v});
  }
  for (const qopt_hyper_info &h : k.hypers)
    if (!h.has_default && !given.count(h.name))
      usage("kernel ", k.info.kernel, " needs --hyper ", h.name,
            "=VALUE (its manifest gives no default)");
  return out;
}

/// Every step's uniforms, so that a NaN (e.g. lr=nan) stops the run before
/// anything is stepped. After the inputs are read and checked: with many
/// steps this takes a while, and a bad file is reported first.
void checkUniforms(const Options &o, const KernelInfo &k,
                   const std::vector<qopt_hyper> &hypers) {
  for (int64_t step = o.stepStart; step < o.stepStart + o.steps; ++step) {
    try {
      (void)k.manifest.evaluateUniforms(hypers, step);
    } catch (const qopt::Error &e) {
      fail("the hyperparameters at step ", step, ": ", e.what());
    }
  }
}

//===--- Output -----------------------------------------------------------===//

/// Writes `file` to `path` through a temporary file in the same directory and
/// a rename: `path` is either replaced whole or left as it was.
void writeAtomically(const st::File &file, const std::string &given) {
  // A symbolic link is written through: its target is replaced, the link
  // stays (the rename below would replace the link itself).
  std::string path = given;
  struct stat link;
  if (::lstat(given.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    if (char *resolved = ::realpath(given.c_str(), nullptr)) {
      path = resolved;
      std::free(resolved);
    } else {
      // A link to a file not made yet: its target as the link says it,
      // relative to the link's directory.
      std::string target(4096, '\0');
      ssize_t n = ::readlink(given.c_str(), target.data(), target.size());
      if (n <= 0 || size_t(n) >= target.size())
        fail("--out ", given, ": a symbolic link that cannot be read");
      target.resize(size_t(n));
      size_t slash = given.find_last_of('/');
      path = target[0] == '/' || slash == std::string::npos
                 ? target
                 : given.substr(0, slash + 1) + target;
    }
  }
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty())
    dir = "/";
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty())
    fail("--out ", path, ": not a file name");
  struct stat existing;
  bool exists = ::stat(path.c_str(), &existing) == 0;
  if (exists && S_ISDIR(existing.st_mode))
    fail("--out ", path, ": is a directory");
  mode_t mode;
  if (exists) {
    mode = existing.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  std::string tmp = dir + "/." + base + ".qopt-step-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    fail("cannot write '", path, "': cannot create a temporary file in '", dir,
         "': ", std::strerror(errno));
  ::close(fd);
  try {
    file.save(tmp);
  } catch (const st::Error &e) {
    ::unlink(tmp.c_str());
    fail("cannot write '", path, "': ", e.what());
  }
  fd = ::open(tmp.c_str(), O_RDONLY);
  bool ok = fd >= 0 && ::fchmod(fd, mode) == 0 && ::fsync(fd) == 0;
  int err = errno;
  if (fd >= 0)
    ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = ok ? errno : err;
    ::unlink(tmp.c_str());
    fail("cannot write '", path, "': ", std::strerror(err));
  }
}

void putTables(st::File &out, const std::vector<Table> &tables) {
  for (const Table &t : tables)
    out.put(t.name, st::Tensor::make<float>("F32", {256}, t.values));
}

//===--- The step ---------------------------------------------------------===//

int runSteps(const Options &o) {
  ResolvedKernel rk = resolveKernel(o);
  KernelInfo k(rk.registry.manifest(rk.name));
  std::vector<std::string> hyperNames;
  std::vector<qopt_hyper> hypers = resolveHypers(o, k, hyperNames);
  Inputs in = readInputs(o, k);
  std::vector<Table> tables = resolveTables(o, k, in);
  std::vector<Tensor> tensors = buildTensors(o, k, in, tables);
  checkUniforms(o, k, hypers);

  // The device side: a context, the kernel, a buffer per stream and gradient.
  std::optional<qopt::Context> ctx;
  std::optional<qopt::Kernel> kernel;
  try {
    ctx.emplace(o.backend, o.device);
    kernel.emplace(*ctx, rk.registry, rk.name);
  } catch (const qopt::Error &e) {
    fail("kernel ", rk.name, " (", rk.where, ") on the ",
         o.backend == QOPT_BACKEND_HOST ? "host" : "cuda", " backend: ", e.what());
  }
  std::vector<qopt::Buffer> buffers; // owns every allocation
  auto upload = [&](const std::vector<uint8_t> &bytes) -> void * {
    buffers.emplace_back(*ctx, bytes.size());
    buffers.back().upload(bytes.data(), bytes.size());
    return buffers.back().get();
  };
  int64_t totalElements = 0;
  std::vector<std::vector<void *>> pointers(tensors.size());
  std::vector<std::map<const Source *, void *>> gradPointers(tensors.size());
  try {
    buffers.reserve(tensors.size() * (k.streams.size() + 2));
    for (size_t i = 0; i < tensors.size(); ++i) {
      Tensor &t = tensors[i];
      totalElements += t.numel;
      pointers[i].resize(k.streams.size(), nullptr);
      for (size_t j = 0; j < k.streams.size(); ++j)
        if (j != k.gradIndex)
          pointers[i][j] = upload(t.streams[j].bytes());
      for (const auto &[step, src] : t.gradFor)
        if (!gradPointers[i].count(src))
          gradPointers[i][src] = upload(src->tensor->data);
    }
  } catch (const qopt::Error &e) {
    fail("copying the inputs to the ", o.backend == QOPT_BACKEND_HOST ? "host" : "cuda",
         " backend: ", e.what());
  }
  std::vector<const void *> tablePtrs;
  try {
    for (const Table &t : tables) {
      std::vector<uint8_t> bytes(256 * sizeof(float));
      std::memcpy(bytes.data(), t.values.data(), bytes.size());
      tablePtrs.push_back(upload(bytes));
    }
  } catch (const qopt::Error &e) {
    fail("copying the tables: ", e.what());
  }

  for (int64_t step = o.stepStart; step < o.stepStart + o.steps; ++step) {
    qopt::TensorList list(k.streams.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor &t = tensors[i];
      std::vector<void *> data = pointers[i];
      data[k.gradIndex] = gradPointers[i].at(t.gradFor.at(step));
      std::vector<uint64_t> bytes;
      std::vector<qopt_dtype> dtypes;
      for (size_t j = 0; j < k.streams.size(); ++j) {
        bytes.push_back(static_cast<uint64_t>(
            j == k.gradIndex ? t.gradFor.at(step)->tensor->data.size()
                             : t.streams[j].bytes().size()));
        dtypes.push_back(k.streams[j].dtype);
      }
      list.add(t.name, t.numel, data, bytes, dtypes);
    }
    try {
      kernel->step(list, hypers, step, tablePtrs, nullptr);
    } catch (const qopt::Error &e) {
      fail("step ", step, ": ", e.what());
    }
  }

  // Read back every read-write stream.
  st::File out;
  try {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor &t = tensors[i];
      for (size_t j = 0; j < k.streams.size(); ++j) {
        if (k.streams[j].access != QOPT_ACCESS_READ_WRITE)
          continue;
        st::Tensor result;
        result.dtype = stDtype(k.streams[j].dtype);
        result.shape = t.streams[j].shape;
        result.data.resize(t.streams[j].bytes().size());
        qopt::check(qopt_buffer_download(ctx->get(), result.data.data(), pointers[i][j],
                                         result.data.size()));
        out.put(t.name + "/" + k.streams[j].name, std::move(result));
      }
    }
  } catch (const qopt::Error &e) {
    fail("copying the results back: ", e.what());
  }
  putTables(out, tables);
  out.metadata()["qopt.kernel"] = rk.name;
  // A .scaled kernel's steps with found_inf nonzero (NaN too) were skipped:
  // nothing was written, and a skipped step does not advance the step count
  // (docs/abi.md, "Grad scaling"), so the last step is the one before them.
  bool skipped = std::any_of(hypers.begin(), hypers.end(), [](const qopt_hyper &h) {
    return std::string(h.name) == "found_inf" && h.value != 0;
  });
  out.metadata()["qopt.last_step"] =
      std::to_string(skipped ? o.stepStart - 1 : o.stepStart + o.steps - 1);
  writeAtomically(out, o.output);

  if (!o.quiet) {
    size_t initialized = 0;
    for (const Tensor &t : tensors)
      for (const Stream &s : t.streams)
        initialized += s.initialized;
    std::cout << "qopt-step: " << rk.name << " on "
              << (o.backend == QOPT_BACKEND_HOST ? "host" : "cuda") << ": "
              << tensors.size() << " tensor" << (tensors.size() == 1 ? "" : "s") << " ("
              << totalElements << " elements), ";
    if (o.steps == 0)
      std::cout << "no steps";
    else if (o.steps == 1)
      std::cout << "step " << o.stepStart;
    else
      std::cout << "steps " << o.stepStart << ".." << o.stepStart + o.steps - 1;
    if (initialized)
      std::cout << ", " << initialized << " state stream" << (initialized == 1 ? "" : "s")
                << " initialized";
    std::cout << " -> " << o.output << "\n";
  }
  return 0;
}

//===--- --describe and --make-example ------------------------------------===//

int describe(const Options &o) {
  ResolvedKernel rk = resolveKernel(o);
  KernelInfo k(rk.registry.manifest(rk.name));
  const qopt_manifest_info &i = k.info;
  std::cout << "kernel " << i.kernel << " (" << specStem(i.source) << ", "
            << rk.where << ")\n"
            << "  optimizer " << i.optimizer << ", mode " << i.mode << ", tile "
            << i.launch.tile_elements << " elements\n"
            << "streams (name each tensor <tensor>/<stream>):\n";
  for (const qopt_stream_info &s : k.streams)
    std::cout << "  " << s.name << "  " << stDtype(s.dtype) << "  " << perText(s) << "  "
              << (s.access == QOPT_ACCESS_READ ? "read" : "read-write")
              << (s.role == QOPT_ROLE_GRAD ? "  (or " + std::string(s.name) + "@<step>)" : "")
              << "\n";
  std::cout << "hyperparameters:\n";
  for (const qopt_hyper_info &h : k.hypers) {
    std::cout << "  " << h.name;
    if (h.has_default)
      std::cout << " = " << h.default_value;
    else
      std::cout << " (required)";
    std::cout << (h.is_bool ? "  (flag)" : "") << "\n";
  }
  if (!k.tables.empty()) {
    std::cout << "tables:\n";
    for (const qopt_table_info &t : k.tables)
      std::cout << "  " << t.name << "  F32 [" << t.count << "]\n";
  }
  return 0;
}

/// A small deterministic normal generator (splitmix64 + Box-Muller), the
/// same on every platform.
struct Normal {
  uint64_t state;
  explicit Normal(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  double uniform() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) / 9007199254740992.0; // (0, 1)
  }
  float operator()() {
    double u1 = uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }
};

/// float32 values as `dtype` bytes (bf16/f16: round to nearest even, through
/// the runtime's split of a master into a 16-bit value and error bits).
std::vector<uint8_t> floatsAs(qopt_dtype dtype, const std::vector<float> &x) {
  std::vector<uint8_t> out(x.size() * dtypeBytes(dtype));
  if (dtype == QOPT_DTYPE_F32) {
    if (!x.empty())
      std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  std::vector<int8_t> scratch(x.size());
  qopt::check(qopt_error_bits_init(dtype, QOPT_DTYPE_INT8, x.data(),
                                   static_cast<int64_t>(x.size()), out.data(),
                                   scratch.data()));
  return out;
}

int makeExample(const Options &o) {
  ResolvedKernel rk = resolveKernel(o);
  KernelInfo k(rk.registry.manifest(rk.name));
  std::vector<Table> tables;
  for (const auto &[name, src] : o.tables) {
    bool known = false;
    for (const qopt_table_info &t : k.tables)
      known = known || name == t.name;
    if (!known)
      fail("--table ", name, "=", src, ": kernel ", k.info.kernel, " has no table '",
           name, "'");
    tables.push_back({name, src, loadTableSource(name, src)});
  }
  std::vector<const float *> hostTables;
  if (!o.noState) {
    for (const qopt_table_info &t : k.tables) {
      auto it = std::find_if(tables.begin(), tables.end(),
                             [&](const Table &x) { return x.name == t.name; });
      if (it == tables.end())
        fail("--make-example: kernel ", k.info.kernel, " needs --table ", t.name,
             "=... to initialize its codebook state (or pass --no-state)");
      hostTables.push_back(it->values.data());
    }
  }
  st::File out;
  Normal normal(o.seed);
  const qopt_stream_info &ps = k.streams[k.paramIndex];
  for (const auto &[name, shape] : o.exampleTensors) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<float> master(static_cast<size_t>(n)), grad(static_cast<size_t>(n));
    for (float &v : master)
      v = 0.5f * normal();
    for (float &v : grad)
      v = 0.01f * normal();
    auto put = [&](const std::string &stream, qopt_dtype dtype, std::vector<int64_t> s,
                   std::vector<uint8_t> bytes) {
      st::Tensor t;
      t.dtype = stDtype(dtype);
      t.shape = std::move(s);
      t.data = std::move(bytes);
      out.put(name + "/" + stream, std::move(t));
    };
    if (k.info.error_bits_dtype != QOPT_DTYPE_INVALID) {
      std::vector<uint8_t> p(static_cast<size_t>(n) * dtypeBytes(ps.dtype));
      std::vector<uint8_t> ecc(static_cast<size_t>(n) * dtypeBytes(k.info.error_bits_dtype));
      qopt::check(qopt_error_bits_init(ps.dtype, k.info.error_bits_dtype, master.data(), n,
                                       p.data(), ecc.data()));
      put(ps.name, ps.dtype, shape, std::move(p));
      for (const qopt_stream_info &s : k.streams)
        if (s.role == QOPT_ROLE_ERROR_BITS)
          put(s.name, s.dtype, shape, std::move(ecc));
    } else {
      put(ps.name, ps.dtype, shape, floatsAs(ps.dtype, master));
    }
    const qopt_stream_info &gs = k.streams[k.gradIndex];
    put(gs.name, gs.dtype, shape, floatsAs(gs.dtype, grad));
    if (o.noState)
      continue;
    std::vector<qopt_buffer_layout> layout = k.manifest.stateLayout(n, hostTables);
    for (size_t j = 0; j < k.streams.size(); ++j) {
      qopt_stream_role role = k.streams[j].role;
      if (role == QOPT_ROLE_PARAM || role == QOPT_ROLE_GRAD || role == QOPT_ROLE_ERROR_BITS)
        continue;
      put(k.streams[j].name, k.streams[j].dtype,
          k.streams[j].per == QOPT_PER_ELEMENT ? shape : std::vector<int64_t>{layout[j].count},
          initialBytes(layout[j]));
    }
  }
  putTables(out, tables);
  out.metadata()["qopt.kernel"] = rk.name;
  writeAtomically(out, o.makeExample);
  if (!o.quiet)
    std::cout << "qopt-step: example input for " << rk.name << ": "
              << o.exampleTensors.size() << " tensor"
              << (o.exampleTensors.size() == 1 ? "" : "s") << " -> " << o.makeExample
              << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options o = parseArgs(argc, argv);
    if (o.describe)
      return describe(o);
    if (!o.makeExample.empty())
      return makeExample(o);
    return runSteps(o);
  } catch (const UsageError &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n"
              << "(qopt-step --help for the options)\n";
    return 2;
  } catch (const Failure &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n";
    return 1;
  } catch (const qopt::Error &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n";
    return 1;
  } catch (const st::Error &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "qopt-step: error: out of host memory\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "qopt-step: error: internal error: " << e.what() << "\n";
    return 1;
  }
}

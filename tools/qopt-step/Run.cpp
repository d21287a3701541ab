//===- Run.cpp - What qopt-step does --------------------------------------===//
#include "Run.h"

#include "Inputs.h"
#include "Kernels.h"
#include "Support.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>

namespace qopt::step {

namespace {

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
  // The rename below replaces what is at `path`: a device, a FIFO or a
  // socket would become a regular file (as root, --out /dev/null would
  // destroy /dev/null). Only a regular file is replaced.
  if (exists && !S_ISREG(existing.st_mode))
    fail("--out ", path, ": not a regular file (a device, FIFO or socket "
         "would be replaced by one)");
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

} // namespace

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
  // The numerics counters of a kernel that saturates (docs/abi.md), zero at
  // the first step, added to by every step.
  int64_t *counters = nullptr;
  if (k.info.num_numerics_counters > 0) {
    try {
      counters = static_cast<int64_t *>(
          upload(std::vector<uint8_t>(QOPT_NUMERICS_COUNTERS * sizeof(int64_t), 0)));
    } catch (const qopt::Error &e) {
      fail("allocating the numerics counters: ", e.what());
    }
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
      kernel->step(list, hypers, step, tablePtrs, nullptr, counters);
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
  int64_t counts[QOPT_NUMERICS_COUNTERS] = {};
  if (counters) {
    try {
      qopt::check(qopt_buffer_download(ctx->get(), counts, counters, sizeof counts));
    } catch (const qopt::Error &e) {
      fail("copying the numerics counters back: ", e.what());
    }
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
  // Saturated groups are a warning about the run, not part of the summary:
  // printed under --quiet too.
  int64_t saturated = counts[QOPT_COUNTER_SATURATED_GROUPS];
  int64_t nonfinite = counts[QOPT_COUNTER_NONFINITE_GROUPS];
  if (saturated || nonfinite)
    std::cerr << "qopt-step: warning: " << saturated << " group"
              << (saturated == 1 ? "" : "s")
              << " saturated (a scale too large for its type) and " << nonfinite
              << " group" << (nonfinite == 1 ? "" : "s")
              << " held NaN or infinity; their states were stored finite "
                 "(docs/numerics.md, \"Overflow\")\n";
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

namespace {

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

} // namespace

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
    if (k.info.error_bits_dtype == QOPT_DTYPE_BF16) {
      // A Kahan compensation (master kahan_bf16) starts at zero.
      put(ps.name, ps.dtype, shape, floatsAs(ps.dtype, master));
      for (const qopt_stream_info &s : k.streams)
        if (s.role == QOPT_ROLE_ERROR_BITS)
          put(s.name, s.dtype, shape, std::vector<uint8_t>(static_cast<size_t>(n) * 2, 0));
    } else if (k.info.error_bits_dtype != QOPT_DTYPE_INVALID) {
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

} // namespace qopt::step

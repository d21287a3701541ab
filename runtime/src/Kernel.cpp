//===- Kernel.cpp - A loaded kernel: validation, tables, launch -----------===//
#include "Kernel.h"

#include "DType.h"
#include "Error.h"
#include "FileCheck.h"
#include "GpuManifest.h"
#include "HostManifest.h"
#include "StateLayout.h"
#include "TileMap.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <thread>
#include <dlfcn.h>
#include <iomanip>
#include <sstream>

namespace qopt::rt {

namespace {

constexpr size_t kJitLogBytes = 32 * 1024;

/// "sm_90a" -> {90, 'a'}; {-1, 0} when not an sm name.
std::pair<int, char> parseArch(const std::string &arch) {
  if (arch.size() < 4 || arch.compare(0, 3, "sm_") != 0)
    return {-1, 0};
  int n = 0;
  size_t i = 3;
  for (; i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])); ++i)
    n = n * 10 + (arch[i] - '0');
  char suffix = i < arch.size() ? arch[i] : 0;
  return {n, suffix};
}

} // namespace

void buildDescriptors(const Manifest &m, const qopt_tensor_list *t,
                      const CheckedList &c, unsigned char *out) {
  size_t streams = m.streams.size();
  size_t stride = static_cast<size_t>(m.launch.descriptor_bytes);
  for (size_t k = 0; k < t->num_tensors; ++k) {
    unsigned char *d = out + k * stride;
    int64_t numel = t->numels[k];
    std::memcpy(d, &numel, 8);
    std::memcpy(d + 8, &c.firstTile[k], 8);
    for (size_t j = 0; j < streams; ++j) {
      uint64_t p = reinterpret_cast<uintptr_t>(t->data[k * streams + j]);
      std::memcpy(d + 16 + 8 * j, &p, 8);
    }
  }
}


//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

void Kernel::loadImage(const ImageSource &src, std::string *jitLog) {
  std::string fileData;
  const std::string *data = src.data.get();
  if (!data) {
    fileData = readFile(src.path);
    data = &fileData;
  }
  qopt_binary_format format = src.format == QOPT_BINARY_AUTO
                                  ? detectFormat(data->data(), data->size())
                                  : src.format;
  // PTX must be NUL-terminated; std::string::c_str() is.
  const void *image = data->c_str();

  std::vector<char> infoLog(kJitLogBytes, 0), errorLog(kJitLogBytes, 0);
  int options[] = {cu::CU_JIT_INFO_LOG_BUFFER,
                   cu::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                   cu::CU_JIT_ERROR_LOG_BUFFER,
                   cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                   cu::CU_JIT_LOG_VERBOSE};
  void *values[] = {infoLog.data(),
                    reinterpret_cast<void *>(uintptr_t(kJitLogBytes - 1)),
                    errorLog.data(),
                    reinterpret_cast<void *>(uintptr_t(kJitLogBytes - 1)),
                    reinterpret_cast<void *>(uintptr_t(1))};
  cu::CUmodule module = nullptr;
  cu::CUresult r = cu::driver().cuModuleLoadDataEx(&module, image, 5, options,
                                                   values);
  std::string info(infoLog.data());
  std::string err(errorLog.data());
  if (r != cu::CUDA_SUCCESS) {
    std::string msg = cat("cuModuleLoadDataEx failed for ", formatName(format),
                          " ", src.origin(),
                          src.arch.empty() ? "" : " (" + src.arch + ")",
                          " on ", ctx_->arch(), ": ", cu::describe(r));
    if (!err.empty())
      msg += "\nJIT error log:\n" + err;
    if (!info.empty())
      msg += "\nJIT info log:\n" + info;
    fail(QOPT_ERROR_MODULE_LOAD, msg);
  }
  cu::CUfunction fn = nullptr;
  cu::CUresult g = cu::driver().cuModuleGetFunction(&fn, module,
                                                    manifest_->entry.c_str());
  if (g != cu::CUDA_SUCCESS) {
    // The module is useless; unloading it cannot fix the error being reported.
    (void)cu::driver().cuModuleUnload(module);
    fail(QOPT_ERROR_NOT_FOUND, "entry point '", manifest_->entry,
         "' of kernel '", manifest_->kernel, "' not found in ", src.origin(),
         ": cuModuleGetFunction: ", cu::describe(g));
  }
  module_ = module;
  function_ = fn;
  format_ = format;
  arch_ = src.arch;
  origin_ = src.origin();
  if (format == QOPT_BINARY_PTX && jitLog)
    *jitLog = info;
  // The module's own manifest, when it has one, against the one given: a
  // stale or edited manifest is refused here, before any launch (the caller
  // unloads module_).
  checkGpuManifest(*manifest_, module_, format_, origin_);
}

void Kernel::finishCudaLoad() {
  const qopt_launch_info &l = manifest_->launch;
  // Opted in for any dynamic shared memory: with the kernel's static shared
  // memory (codebook tables) the block can pass the default 48 KiB although
  // the dynamic part alone does not (the launch then fails). The device's
  // limit holds for the two together: a kernel past it is refused here,
  // naming both, rather than by the driver at the attribute or the launch.
  if (l.shared_bytes > 0) {
    int staticBytes = 0;
    if (auto get = cu::driver().cuFuncGetAttribute)
      if (get(&staticBytes, cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function_) !=
          cu::CUDA_SUCCESS)
        staticBytes = 0;
    if (l.shared_bytes + staticBytes > ctx_->maxSharedOptin())
      fail(QOPT_ERROR_UNSUPPORTED, "kernel '", manifest_->kernel, "' needs ",
           l.shared_bytes, " bytes of dynamic shared memory per block and ",
           staticBytes, " static (", l.shared_bytes + staticBytes, " in all); ",
           ctx_->name(), " allows ", ctx_->maxSharedOptin());
    QOPT_CU(cuFuncSetAttribute, function_,
            cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(l.shared_bytes));
  }
  // The kernels are persistent and give each block one contiguous range of
  // tiles: whole waves of exactly the blocks that fit (the driver's
  // occupancy) keep every multiprocessor busy to the end; a grid of 4 per SM
  // where 3 fit would run a second wave at a third of the machine. The
  // manifest's suggestion stands in where the driver cannot say. The block
  // is the one launchStep launches, producer warps included.
  int64_t perSM = l.suggested_blocks_per_sm;
  if (auto occupancy = cu::driver().cuOccupancyMaxActiveBlocksPerMultiprocessor) {
    int resident = 0;
    if (occupancy(&resident, function_, static_cast<int>(blockThreads(l)),
                  static_cast<size_t>(l.shared_bytes)) == cu::CUDA_SUCCESS &&
        resident > 0)
      perSM = resident;
  }
  // One wave of them; a step launches up to launch.waves waves
  // (qopt_launch_grid).
  int64_t blocks = int64_t(ctx_->multiprocessors()) * perSM;
  maxBlocks_ = static_cast<int>(std::clamp<int64_t>(blocks, 1, INT32_MAX));
  loadPhases();
}

std::shared_ptr<Kernel> Kernel::create(ContextPtr ctx, const RegistryEntry &e) {
  const Manifest &m = *e.manifest;
  std::shared_ptr<Kernel> k(new Kernel(ctx, e.manifest));
  if (ctx->backend() == QOPT_BACKEND_HOST) {
    if (!m.host)
      fail(QOPT_ERROR_UNSUPPORTED, "kernel '", m.kernel,
           "' has no host implementation (", m.source,
           " has no 'host' field): the host backend runs kernels from "
           "qopt-opt's host lowering, or functions given to "
           "qopt_kernel_create_host");
    checkLoadableFile(m.host->library); // a truncated .so is SIGBUS in dlopen
    void *h = ::dlopen(m.host->library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *why = ::dlerror();
      fail(QOPT_ERROR_IO, "cannot load host library ", m.host->library,
           " of kernel '", m.kernel, "': ", why ? why : "dlopen failed");
    }
    k->dlHandle_ = h;
    void *sym = ::dlsym(h, m.host->symbol.c_str());
    if (!sym)
      fail(QOPT_ERROR_NOT_FOUND, "host library ", m.host->library,
           " has no symbol '", m.host->symbol, "' (kernel '", m.kernel, "')");
    // The library's own manifest, when it has one, against the one given:
    // a stale or edited manifest is refused here, before any step.
    checkHostManifest(m, h);
    k->hostFn_ = reinterpret_cast<qopt_host_kernel_fn>(sym);
    // A host kernel with step reductions: its phase functions, by the
    // manifest's "phases".
    for (const PhaseDesc &p : m.hostPhases) {
      void *fn = ::dlsym(h, p.entry.c_str());
      if (!fn)
        fail(QOPT_ERROR_NOT_FOUND, "host library ", m.host->library,
             " has no symbol '", p.entry, "' (phase '", p.name,
             "' of kernel '", m.kernel, "')");
      if (p.name == "partials")
        k->hostPartials_ = reinterpret_cast<qopt_host_partials_fn>(fn);
      else
        k->hostCombine_ = reinterpret_cast<qopt_host_combine_fn>(fn);
    }
    k->format_ = QOPT_BINARY_HOST;
    k->origin_ = m.host->library;
    k->maxBlocks_ = 1;
    return k;
  }

  // CUDA: rank the images the device can run, try them in order.
  auto [dev, devSuffix] = std::pair<int, char>{ctx->ccNumber(), 0};
  (void)devSuffix;
  struct Candidate {
    int rank;
    int arch;
    const ImageSource *src;
  };
  std::vector<Candidate> cands;
  std::string skipped;
  for (const ImageSource &s : e.images) {
    auto [n, suffix] = parseArch(s.arch);
    int rank = -1;
    std::string why;
    if (s.format == QOPT_BINARY_FATBIN || s.format == QOPT_BINARY_AUTO) {
      rank = 2; // the driver picks inside it
    } else if (n < 0) {
      rank = s.format == QOPT_BINARY_CUBIN ? 1 : 3; // arch unknown: try
    } else if (s.format == QOPT_BINARY_CUBIN) {
      bool sameMajor = n / 10 == dev / 10;
      if (n == dev)
        rank = 0;
      else if (suffix != 'a' && sameMajor && n % 10 <= dev % 10)
        rank = 1;
      else
        why = cat("a cubin for ", s.arch, " does not run on ", ctx->arch());
    } else if (s.format == QOPT_BINARY_PTX) {
      if (suffix == 'a' ? n == dev : n <= dev)
        rank = 3;
      else
        why = cat("PTX for ", s.arch, " needs a newer device than ",
                  ctx->arch());
    }
    if (rank >= 0)
      cands.push_back({rank, n, &s});
    else
      skipped += cat("\n  ", s.origin(), ": ", why);
  }
  if (cands.empty())
    fail(QOPT_ERROR_NOT_FOUND, "kernel '", m.kernel, "' (", m.source,
         ") has no binary for ", ctx->arch(),
         e.images.empty() ? ": no cubin, fatbin or ptx beside the manifest "
                            "and no 'binaries' listed"
                          : ":",
         skipped);
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate &a, const Candidate &b) {
                     return a.rank != b.rank ? a.rank < b.rank
                                             : a.arch > b.arch;
                   });
  cu::ScopedContext scope(ctx->cuContext());
  std::string attempts;
  qopt_status lastStatus = QOPT_ERROR_MODULE_LOAD;
  for (const Candidate &c : cands) {
    try {
      k->loadImage(*c.src, &k->jitLog_);
      k->finishCudaLoad();
      scope.pop();
      return k;
    } catch (const Error &err) {
      if (k->module_) {
        (void)cu::driver().cuModuleUnload(k->module_);
        k->module_ = nullptr;
        k->function_ = nullptr;
      }
      // A binary compiled with another manifest refuses the manifest, not
      // just itself: no other binary beside it is tried in its place.
      if (err.status() == QOPT_ERROR_NO_DRIVER ||
          err.status() == QOPT_ERROR_MANIFEST)
        throw;
      lastStatus = err.status();
      attempts += cat("\n- ", err.what());
    }
  }
  fail(cands.size() == 1 ? lastStatus : QOPT_ERROR_MODULE_LOAD,
       "could not load kernel '", m.kernel, "' on ", ctx->arch(), " (",
       ctx->name(), "); tried:", attempts, skipped.empty() ? "" : "\nskipped:",
       skipped);
}

std::shared_ptr<Kernel> Kernel::createFromImage(ContextPtr ctx, ManifestPtr m,
                                                qopt_binary_format format,
                                                const void *image,
                                                size_t size) {
  if (!image || size == 0)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "empty image for kernel '", m->kernel,
         "'");
  if (ctx->backend() != QOPT_BACKEND_CUDA)
    fail(QOPT_ERROR_UNSUPPORTED, "a PTX/cubin/fatbin image needs a CUDA "
         "context; host kernels come from qopt_kernel_create_host or a "
         "manifest's 'host' library");
  if (format == QOPT_BINARY_HOST)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "QOPT_BINARY_HOST is not an image "
         "format; use qopt_kernel_create_host");
  std::shared_ptr<Kernel> k(new Kernel(ctx, m));
  ImageSource src;
  src.format = format;
  src.arch = m->arch;
  src.data = std::make_shared<const std::string>(
      static_cast<const char *>(image), size);
  cu::ScopedContext scope(ctx->cuContext());
  k->loadImage(src, &k->jitLog_);
  k->finishCudaLoad();
  scope.pop();
  return k;
}

std::shared_ptr<Kernel> Kernel::createHost(ContextPtr ctx, ManifestPtr m,
                                           qopt_host_kernel_fn fn) {
  if (!fn)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "host kernel function is NULL");
  if (ctx->backend() != QOPT_BACKEND_HOST)
    fail(QOPT_ERROR_UNSUPPORTED, "a host kernel needs a host context");
  std::shared_ptr<Kernel> k(new Kernel(ctx, m));
  k->hostFn_ = fn;
  k->format_ = QOPT_BINARY_HOST;
  k->origin_ = "<function>";
  return k;
}

Kernel::~Kernel() {
  // Destructors cannot report; every release below is attempted.
  if (ctx_->backend() == QOPT_BACKEND_CUDA) {
    try {
      cu::ScopedContext scope(ctx_->cuContext());
      // A copy still reading a pinned buffer must finish before it is freed.
      for (Slot &s : slots_)
        if (s.pending && !s.captured)
          (void)cu::driver().cuEventSynchronize(s.done);
      for (Slot &s : slots_)
        freeSlot(s);
      if (module_)
        (void)cu::driver().cuModuleUnload(module_);
    } catch (...) {
    }
  }
  if (dlHandle_)
    ::dlclose(dlHandle_);
}

qopt_kernel_info Kernel::info() const {
  qopt_kernel_info i{};
  i.backend = ctx_->backend();
  i.format = format_;
  i.arch = arch_.c_str();
  i.origin = origin_.c_str();
  i.jit_log = jitLog_.c_str();
  i.max_blocks = maxBlocks_;
  return i;
}

// Validation: Validation.cpp.

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

void Kernel::requireUniforms(const std::vector<float> *hostUniforms,
                             const float *deviceUniforms) const {
  if (!hostUniforms && !deviceUniforms && manifest_->numUniforms() > 0)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "device_uniforms is NULL but kernel '",
         manifest_->kernel, "' reads ", manifest_->numUniforms(),
         " uniform(s)");
}

void Kernel::step(const qopt_tensor_list *t,
                  const std::vector<float> *hostUniforms,
                  const StepBuffers &extra, const void *const *tables,
                  size_t numTables, void *stream) {
  requireUniforms(hostUniforms, extra.deviceUniforms);
  CheckedListPtr c = validate(t, tables, numTables, extra);
  launch(t, *c, hostUniforms, extra, tables, stream);
}

bool Kernel::takesCounters() const {
  for (const ArgDesc &a : manifest_->args)
    if (a.kind == ArgDesc::Kind::NumericsCounters)
      return true;
  return false;
}

void Kernel::launch(const qopt_tensor_list *t, const CheckedList &c,
                    const std::vector<float> *hostUniforms,
                    const StepBuffers &extra, const void *const *tables,
                    void *stream) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t *counters = takesCounters() ? extra.counters : nullptr;
  if (ctx_->backend() == QOPT_BACKEND_HOST)
    stepHost(t, c,
             hostUniforms ? hostUniforms->data() : extra.deviceUniforms,
             counters, tables);
  else
    stepCuda(t, c, hostUniforms, {extra.deviceUniforms, counters}, tables,
             stream);
}

// The CUDA steps: CudaStep.cpp; the host steps: HostStep.cpp.

} // namespace qopt::rt

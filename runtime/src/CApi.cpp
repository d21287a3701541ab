//===- CApi.cpp - The extern "C" entry points of libqopt_runtime ----------===//
//
// Each entry point checks its pointers, runs the C++ implementation inside
// guard(), and turns any exception into a qopt_status plus the thread's
// last-error message. Nothing throws across this boundary.
//
//===----------------------------------------------------------------------===//
#include "qopt/runtime.h"

#include "Buffer.h"
#include "Context.h"
#include "CudaDriver.h"
#include "DType.h"
#include "Error.h"
#include "ErrorBits.h"
#include "Handles.h"
#include "Kernel.h"
#include "Manifest.h"
#include "Registry.h"
#include "StateLayout.h"
#include "StepPhases.h"
#include "TileMap.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>

using namespace qopt::rt;

// The layout of qopt_launch_info that callers compiled against 0.3 to 0.6
// allocate: producer_warps (0.7) fills the trailing padding, so every other
// field keeps its offset and the struct its size (qopt._capi.LaunchInfo
// mirrors it).
static_assert(offsetof(qopt_launch_info, threads_per_block) == 0 &&
                  offsetof(qopt_launch_info, elements_per_thread) == 4 &&
                  offsetof(qopt_launch_info, tile_elements) == 8 &&
                  offsetof(qopt_launch_info, descriptor_bytes) == 16 &&
                  offsetof(qopt_launch_info, shared_bytes) == 24 &&
                  offsetof(qopt_launch_info, suggested_blocks_per_sm) == 32 &&
                  offsetof(qopt_launch_info, waves) == 36 &&
                  offsetof(qopt_launch_info, min_tiles_per_block) == 40 &&
                  offsetof(qopt_launch_info, producer_warps) == 44,
              "qopt_launch_info's fields keep their offsets");
static_assert(sizeof(qopt_launch_info) == 48,
              "qopt_launch_info keeps its size of 0.3 to 0.6");

namespace {

template <typename Fn> qopt_status guard(Fn &&fn) {
  try {
    fn();
    setLastError({});
    return QOPT_SUCCESS;
  } catch (const Error &e) {
    setLastError(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    setLastError("out of host memory");
    return QOPT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    setLastError(cat("internal error: ", e.what()));
    return QOPT_ERROR_INTERNAL;
  } catch (...) {
    setLastError("internal error: unknown exception");
    return QOPT_ERROR_INTERNAL;
  }
}

/// An enumeration argument as the caller's integer: callers through an FFI
/// (ctypes) pass any int, and a C++ load of a value outside the enumerators'
/// range is undefined. So an enum argument is never copied as the enum: its
/// bytes are read through a reference to the parameter itself and
/// range-checked before it is used as the enum.
template <typename E> int rawEnum(const E &e) {
  static_assert(sizeof(E) == sizeof(int), "a C enum of the ABI is an int");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// `e` when it lies in [lo, hi]; else INVALID_ARGUMENT naming `what`.
template <typename E> E checkedEnum(const E &e, int lo, int hi, const char *what) {
  int v = rawEnum(e);
  if (v < lo || v > hi)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "unknown ", what, " ", v);
  return static_cast<E>(v);
}

qopt_binary_format checkedFormat(const qopt_binary_format &f) {
  return checkedEnum(f, QOPT_BINARY_AUTO, QOPT_BINARY_HOST, "binary format");
}

qopt_dtype checkedDtype(const qopt_dtype &d) {
  return checkedEnum(d, QOPT_DTYPE_F32, QOPT_DTYPE_INT16, "dtype");
}

/// Throws INVALID_ARGUMENT naming `what` when `p` is null.
template <typename T> T *need(T *p, const char *what) {
  if (!p)
    fail(QOPT_ERROR_INVALID_ARGUMENT, what, " is NULL");
  return p;
}

void checkParamDtypes(const qopt_dtype &paramArg, const qopt_dtype &eccArg,
                      HalfFormat *f, int32_t *nmax) {
  const qopt_dtype param = checkedDtype(paramArg);
  const qopt_dtype ecc = checkedDtype(eccArg);
  if (param == QOPT_DTYPE_BF16)
    *f = kBf16;
  else if (param == QOPT_DTYPE_F16)
    *f = kF16;
  else
    fail(QOPT_ERROR_INVALID_ARGUMENT, "error bits need a bf16 or f16 "
         "parameter, got ", dtypeName(param));
  if (ecc == QOPT_DTYPE_INT8)
    *nmax = 127;
  else if (ecc == QOPT_DTYPE_INT16)
    *nmax = 32767;
  else
    fail(QOPT_ERROR_INVALID_ARGUMENT, "error bits are int8 or int16, got ",
         dtypeName(ecc));
}

} // namespace

extern "C" {

const char *qopt_last_error(void) { return lastError(); }

const char *qopt_status_string(qopt_status status) {
  switch (status) {
  case QOPT_SUCCESS:
    return "QOPT_SUCCESS";
  case QOPT_ERROR_INVALID_ARGUMENT:
    return "QOPT_ERROR_INVALID_ARGUMENT";
  case QOPT_ERROR_OUT_OF_MEMORY:
    return "QOPT_ERROR_OUT_OF_MEMORY";
  case QOPT_ERROR_IO:
    return "QOPT_ERROR_IO";
  case QOPT_ERROR_MANIFEST:
    return "QOPT_ERROR_MANIFEST";
  case QOPT_ERROR_NOT_FOUND:
    return "QOPT_ERROR_NOT_FOUND";
  case QOPT_ERROR_NO_DRIVER:
    return "QOPT_ERROR_NO_DRIVER";
  case QOPT_ERROR_NO_DEVICE:
    return "QOPT_ERROR_NO_DEVICE";
  case QOPT_ERROR_CUDA:
    return "QOPT_ERROR_CUDA";
  case QOPT_ERROR_MODULE_LOAD:
    return "QOPT_ERROR_MODULE_LOAD";
  case QOPT_ERROR_UNSUPPORTED:
    return "QOPT_ERROR_UNSUPPORTED";
  case QOPT_ERROR_VALIDATION:
    return "QOPT_ERROR_VALIDATION";
  case QOPT_ERROR_CAPTURE:
    return "QOPT_ERROR_CAPTURE";
  case QOPT_ERROR_INTERNAL:
    return "QOPT_ERROR_INTERNAL";
  }
  return "QOPT_ERROR_UNKNOWN_STATUS";
}

qopt_status qopt_get_version(int32_t *runtime_version,
                             int32_t *manifest_version) {
  return guard([&] {
    if (runtime_version)
      *runtime_version = QOPT_RUNTIME_VERSION;
    if (manifest_version)
      *manifest_version = QOPT_MANIFEST_VERSION;
  });
}

qopt_status qopt_dtype_size(qopt_dtype dtype, size_t *bytes) {
  return guard([&] {
    need(bytes, "bytes");
    *bytes = dtypeSize(checkedDtype(dtype));
  });
}

qopt_status qopt_dtype_name(qopt_dtype dtype, const char **name) {
  return guard([&] {
    need(name, "name");
    *name = dtypeName(checkedDtype(dtype));
  });
}

//===--- CUDA driver ------------------------------------------------------===//

qopt_status qopt_cuda_driver_load(void) {
  return guard([&] { (void)cu::driver(); });
}

qopt_status qopt_cuda_driver_version(int32_t *version) {
  return guard([&] { *need(version, "version") = cu::driver().version; });
}

qopt_status qopt_cuda_device_count(int32_t *count) {
  return guard([&] {
    need(count, "count");
    const cu::Driver &d = cu::driver();
    int n = 0;
    if (d.hasDevice)
      QOPT_CU(cuDeviceGetCount, &n);
    *count = n;
  });
}

//===--- Context ----------------------------------------------------------===//

qopt_status qopt_context_create(qopt_backend backend, int32_t device,
                                qopt_context **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    auto c = std::make_unique<qopt_context>();
    c->impl = Context::create(
        checkedEnum(backend, QOPT_BACKEND_HOST, QOPT_BACKEND_CUDA, "backend"),
        device);
    c->buffers = std::make_unique<Buffers>(c->impl);
    *out = c.release();
  });
}

qopt_status qopt_context_destroy(qopt_context *context) {
  return guard([&] { delete context; });
}

qopt_status qopt_context_get_device_info(const qopt_context *context,
                                         qopt_device_info *info) {
  return guard([&] {
    need(context, "context");
    *need(info, "info") = context->impl->info();
  });
}

qopt_status qopt_context_forget_allocations(qopt_context *context) {
  return guard([&] { need(context, "context")->impl->allocations().clear(); });
}

//===--- Buffers ----------------------------------------------------------===//

qopt_status qopt_buffer_alloc(qopt_context *context, uint64_t bytes,
                              void **out) {
  return guard([&] {
    need(context, "context");
    need(out, "out");
    *out = nullptr;
    *out = context->buffers->alloc(bytes);
  });
}

qopt_status qopt_buffer_free(qopt_context *context, void *pointer) {
  return guard([&] { need(context, "context")->buffers->free(pointer); });
}

qopt_status qopt_buffer_upload(qopt_context *context, void *dst,
                               const void *src, uint64_t bytes) {
  return guard(
      [&] { need(context, "context")->buffers->upload(dst, src, bytes); });
}

qopt_status qopt_buffer_download(qopt_context *context, void *dst,
                                 const void *src, uint64_t bytes) {
  return guard(
      [&] { need(context, "context")->buffers->download(dst, src, bytes); });
}

//===--- Manifest ---------------------------------------------------------===//

qopt_status qopt_manifest_parse(const char *json, size_t length,
                                const char *source_name, qopt_manifest **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    need(json, "json");
    auto m = std::make_unique<qopt_manifest>();
    m->impl = parseManifest(std::string_view(json, length),
                            source_name ? source_name : "<memory>");
    *out = m.release();
  });
}

qopt_status qopt_manifest_load(const char *path, qopt_manifest **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    need(path, "path");
    auto m = std::make_unique<qopt_manifest>();
    m->impl = loadManifest(path);
    *out = m.release();
  });
}

qopt_status qopt_manifest_destroy(qopt_manifest *manifest) {
  return guard([&] { delete manifest; });
}

qopt_status qopt_manifest_get_info(const qopt_manifest *manifest,
                                   qopt_manifest_info *info) {
  return guard([&] {
    need(manifest, "manifest");
    need(info, "info");
    const Manifest &m = *manifest->impl;
    qopt_manifest_info i{};
    i.kernel = m.kernel.c_str();
    i.entry = m.entry.c_str();
    i.optimizer = m.optimizer.c_str();
    i.mode = m.mode.c_str();
    i.arch = m.arch.c_str();
    i.source = m.source.c_str();
    i.num_streams = m.streams.size();
    i.num_hypers = m.hypers.size();
    i.num_uniforms = m.numUniforms();
    i.num_tables = m.tables.size();
    i.num_args = m.args.size();
    i.param_dtype = m.paramDtype;
    i.grad_dtype = m.gradDtype;
    i.error_bits_dtype = m.eccDtype;
    i.launch = m.launch;
    for (const ArgDesc &a : m.args)
      if (a.kind == ArgDesc::Kind::NumericsCounters)
        i.num_numerics_counters = QOPT_NUMERICS_COUNTERS;
    i.num_reductions = m.reductionList.size();
    i.num_step_reductions = m.numStepReductions;
    *info = i;
  });
}

qopt_status qopt_manifest_get_stream(const qopt_manifest *manifest,
                                     size_t index, qopt_stream_info *info) {
  return guard([&] {
    need(manifest, "manifest");
    need(info, "info");
    const Manifest &m = *manifest->impl;
    if (index >= m.streams.size())
      fail(QOPT_ERROR_INVALID_ARGUMENT, "stream index ", index,
           " out of range (", m.streams.size(), " streams)");
    const StreamDesc &s = m.streams[index];
    *info = {s.name.c_str(), s.state.c_str(), s.role,    s.dtype,
             s.per,          s.perSize,       s.access};
  });
}

qopt_status qopt_manifest_get_hyper(const qopt_manifest *manifest,
                                    size_t index, qopt_hyper_info *info) {
  return guard([&] {
    need(manifest, "manifest");
    need(info, "info");
    const Manifest &m = *manifest->impl;
    if (index >= m.hypers.size())
      fail(QOPT_ERROR_INVALID_ARGUMENT, "hyperparameter index ", index,
           " out of range (", m.hypers.size(), " hyperparameters)");
    const HyperDesc &h = m.hypers[index];
    *info = {h.name.c_str(), h.defaultValue, h.hasDefault ? 1 : 0,
             h.isBool ? 1 : 0};
  });
}

qopt_status qopt_manifest_get_table(const qopt_manifest *manifest,
                                    size_t index, qopt_table_info *info) {
  return guard([&] {
    need(manifest, "manifest");
    need(info, "info");
    const Manifest &m = *manifest->impl;
    if (index >= m.tables.size())
      fail(QOPT_ERROR_INVALID_ARGUMENT, "table index ", index,
           " out of range (", m.tables.size(), " tables)");
    const TableDesc &t = m.tables[index];
    *info = {t.name.c_str(), t.state.c_str(), t.dtype, t.count};
  });
}

qopt_status qopt_manifest_get_reduction(const qopt_manifest *manifest,
                                        size_t index,
                                        qopt_reduction_info *info) {
  return guard([&] {
    need(manifest, "manifest");
    need(info, "info");
    const Manifest &m = *manifest->impl;
    if (index >= m.reductionList.size())
      fail(QOPT_ERROR_INVALID_ARGUMENT, "reduction index ", index,
           " out of range (", m.reductionList.size(), " reductions)");
    const ReductionDesc &d = m.reductionList[index];
    *info = {d.kind, d.scope, static_cast<int64_t>(d.index), d.uniform};
  });
}

qopt_status qopt_manifest_evaluate_uniforms(const qopt_manifest *manifest,
                                            const qopt_hyper *hypers,
                                            size_t num_hypers, int64_t step,
                                            float *out, size_t capacity) {
  return guard([&] {
    need(manifest, "manifest");
    const Manifest &m = *manifest->impl;
    if (capacity < m.numUniforms())
      fail(QOPT_ERROR_INVALID_ARGUMENT, "capacity ", capacity, " < ",
           m.numUniforms(), " uniforms");
    if (m.numUniforms() > 0)
      need(out, "out");
    std::vector<float> v = evaluateUniforms(m, hypers, num_hypers, step);
    std::copy(v.begin(), v.end(), out);
  });
}

qopt_status qopt_manifest_state_layout(const qopt_manifest *manifest,
                                       int64_t numel,
                                       const float *const *host_tables,
                                       size_t num_tables,
                                       qopt_buffer_layout *out,
                                       size_t capacity) {
  return guard([&] {
    need(manifest, "manifest");
    const Manifest &m = *manifest->impl;
    if (capacity < m.streams.size())
      fail(QOPT_ERROR_INVALID_ARGUMENT, "capacity ", capacity, " < ",
           m.streams.size(), " streams");
    need(out, "out");
    std::vector<qopt_buffer_layout> v =
        stateLayout(m, numel, host_tables, num_tables);
    std::copy(v.begin(), v.end(), out);
  });
}

qopt_status qopt_codebook_zero_code(const float *qmap, uint8_t *code) {
  return guard([&] {
    need(qmap, "qmap");
    *need(code, "code") = codebookZeroCode(qmap);
  });
}

//===--- Error bits -------------------------------------------------------===//

qopt_status qopt_error_bits_init(qopt_dtype param_dtype, qopt_dtype ecc_dtype,
                                 const float *master, int64_t numel,
                                 void *param_out, void *ecc_out) {
  return guard([&] {
    HalfFormat f;
    int32_t nmax;
    checkParamDtypes(param_dtype, ecc_dtype, &f, &nmax);
    if (numel < 0)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "numel ", numel, " is negative");
    if (numel == 0)
      return;
    need(master, "master");
    need(ecc_out, "ecc_out");
    auto *p16 = static_cast<uint16_t *>(param_out);
    for (int64_t i = 0; i < numel; ++i) {
      uint16_t x16;
      int32_t rho = encodeErrorBits(f, nmax, master[i], &x16);
      if (p16)
        p16[i] = x16;
      if (nmax == 127)
        static_cast<int8_t *>(ecc_out)[i] = static_cast<int8_t>(rho);
      else
        static_cast<int16_t *>(ecc_out)[i] = static_cast<int16_t>(rho);
    }
  });
}

qopt_status qopt_error_bits_decode(qopt_dtype param_dtype,
                                   qopt_dtype ecc_dtype, const void *param,
                                   const void *ecc, int64_t numel,
                                   float *master_out) {
  return guard([&] {
    HalfFormat f;
    int32_t nmax;
    checkParamDtypes(param_dtype, ecc_dtype, &f, &nmax);
    if (numel < 0)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "numel ", numel, " is negative");
    if (numel == 0)
      return;
    auto *p16 = static_cast<const uint16_t *>(need(param, "param"));
    need(ecc, "ecc");
    need(master_out, "master_out");
    for (int64_t i = 0; i < numel; ++i) {
      int32_t rho = nmax == 127 ? static_cast<const int8_t *>(ecc)[i]
                                : static_cast<const int16_t *>(ecc)[i];
      master_out[i] = decodeErrorBits(f, nmax, p16[i], rho);
    }
  });
}

//===--- Tile map ---------------------------------------------------------===//

qopt_status qopt_tile_map_build(const int64_t *numels, size_t num_tensors,
                                int64_t tile_elements, int64_t *first_tile,
                                int32_t *tile_map, size_t tile_map_capacity,
                                int64_t *num_tiles) {
  return guard([&] {
    need(num_tiles, "num_tiles");
    if (num_tensors)
      need(numels, "numels");
    checkTensorCount(num_tensors);
    std::vector<int64_t> first(num_tensors);
    int64_t total =
        computeFirstTiles(numels, num_tensors, tile_elements, first.data());
    *num_tiles = total;
    if (first_tile)
      std::copy(first.begin(), first.end(), first_tile);
    if (tile_map) {
      if (tile_map_capacity < static_cast<uint64_t>(total))
        fail(QOPT_ERROR_INVALID_ARGUMENT, "tile_map_capacity ",
             tile_map_capacity, " < ", total, " tiles");
      fillTileMap(numels, first.data(), num_tensors, tile_elements, tile_map);
    }
  });
}

//===--- Registry ---------------------------------------------------------===//

qopt_status qopt_registry_create(qopt_registry **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    auto r = std::make_unique<qopt_registry>();
    r->impl = std::make_shared<Registry>();
    *out = r.release();
  });
}

qopt_status qopt_registry_destroy(qopt_registry *registry) {
  return guard([&] { delete registry; });
}

qopt_status qopt_registry_add_manifest_file(qopt_registry *registry,
                                            const char *path) {
  return guard([&] {
    need(registry, "registry")->impl->addManifestFile(need(path, "path"));
  });
}

qopt_status qopt_registry_add_directory(qopt_registry *registry,
                                        const char *directory,
                                        size_t *num_added) {
  return guard([&] {
    size_t n = need(registry, "registry")
                   ->impl->addDirectory(need(directory, "directory"));
    if (num_added)
      *num_added = n;
  });
}

qopt_status qopt_registry_add_manifest(qopt_registry *registry,
                                       const qopt_manifest *manifest,
                                       qopt_binary_format format,
                                       const void *image, size_t image_size) {
  return guard([&] {
    need(registry, "registry")
        ->impl->add(need(manifest, "manifest")->impl, checkedFormat(format),
                    image, image_size);
  });
}

qopt_status qopt_registry_add_embedded(qopt_registry *registry,
                                       const char *kernel,
                                       const char *manifest_json,
                                       size_t manifest_size, const char *source,
                                       qopt_binary_format format,
                                       const void *image, size_t image_size) {
  return guard([&] {
    need(manifest_json, "manifest_json");
    if (image_size && !image)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "image is NULL but image_size is ",
           image_size);
    need(registry, "registry")
        ->impl->addEmbedded(need(kernel, "kernel"),
                            std::string_view(manifest_json, manifest_size),
                            source ? source : "<embedded>",
                            checkedFormat(format),
                            std::string_view(static_cast<const char *>(image),
                                             image ? image_size : 0));
  });
}

qopt_status qopt_registry_count(const qopt_registry *registry, size_t *count) {
  return guard([&] {
    *need(count, "count") = need(registry, "registry")->impl->count();
  });
}

qopt_status qopt_registry_kernel_name(const qopt_registry *registry,
                                      size_t index, const char **name) {
  return guard([&] {
    *need(name, "name") =
        need(registry, "registry")->impl->name(index).c_str();
  });
}

qopt_status qopt_registry_get_manifest(const qopt_registry *registry,
                                       const char *kernel,
                                       qopt_manifest **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    RegistryEntry e =
        need(registry, "registry")->impl->get(need(kernel, "kernel"));
    auto m = std::make_unique<qopt_manifest>();
    m->impl = e.manifest;
    *out = m.release();
  });
}

//===--- Kernels ----------------------------------------------------------===//

qopt_status qopt_kernel_create(qopt_context *context,
                               const qopt_registry *registry,
                               const char *kernel, qopt_kernel **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    need(context, "context");
    RegistryEntry e =
        need(registry, "registry")->impl->get(need(kernel, "kernel"));
    auto k = std::make_unique<qopt_kernel>();
    k->impl = Kernel::create(context->impl, e);
    *out = k.release();
  });
}

qopt_status qopt_kernel_create_from_image(qopt_context *context,
                                          const qopt_manifest *manifest,
                                          qopt_binary_format format,
                                          const void *image, size_t image_size,
                                          qopt_kernel **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    need(context, "context");
    need(manifest, "manifest");
    auto k = std::make_unique<qopt_kernel>();
    k->impl = Kernel::createFromImage(context->impl, manifest->impl,
                                      checkedFormat(format), image, image_size);
    *out = k.release();
  });
}

qopt_status qopt_kernel_create_host(qopt_context *context,
                                    const qopt_manifest *manifest,
                                    qopt_host_kernel_fn function,
                                    qopt_kernel **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    need(context, "context");
    need(manifest, "manifest");
    auto k = std::make_unique<qopt_kernel>();
    k->impl = Kernel::createHost(context->impl, manifest->impl, function);
    *out = k.release();
  });
}

qopt_status qopt_kernel_set_host_phase(qopt_kernel *kernel, const char *phase,
                                       qopt_host_phase_fn function) {
  return guard([&] {
    need(kernel, "kernel")->impl->setHostPhase(need(phase, "phase"),
                                               need(function, "function"));
  });
}

qopt_status qopt_kernel_destroy(qopt_kernel *kernel) {
  return guard([&] { delete kernel; });
}

qopt_status qopt_kernel_get_manifest(const qopt_kernel *kernel,
                                     qopt_manifest **out) {
  return guard([&] {
    need(out, "out");
    *out = nullptr;
    auto m = std::make_unique<qopt_manifest>();
    m->impl = need(kernel, "kernel")->impl->manifest();
    *out = m.release();
  });
}

qopt_status qopt_kernel_get_info(const qopt_kernel *kernel,
                                 qopt_kernel_info *info) {
  return guard([&] {
    *need(info, "info") = need(kernel, "kernel")->impl->info();
  });
}

int64_t qopt_launch_grid(const qopt_launch_info *launch, int64_t wave_blocks,
                         int64_t num_tiles) {
  if (!launch || wave_blocks <= 0 || num_tiles <= 0)
    return 0;
  // cuLaunchKernel's gridDim.x is at most 2^31 - 1; so are the products.
  wave_blocks = std::min<int64_t>(wave_blocks, INT32_MAX);
  int64_t minTiles = launch->min_tiles_per_block > 0
                         ? launch->min_tiles_per_block
                         : QOPT_MIN_TILES_PER_BLOCK;
  int64_t waves = std::clamp<int64_t>(num_tiles / (wave_blocks * minTiles), 1,
                                      std::max<int32_t>(launch->waves, 1));
  return std::min({num_tiles, wave_blocks * waves, int64_t(INT32_MAX)});
}

//===--- Steps ------------------------------------------------------------===//

qopt_status qopt_validate(qopt_kernel *kernel, const qopt_tensor_list *tensors,
                          const void *const *tables, size_t num_tables) {
  return guard([&] {
    (void)need(kernel, "kernel")
        ->impl->validate(tensors, tables, num_tables, StepBuffers{});
  });
}

qopt_status qopt_step(qopt_kernel *kernel, const qopt_tensor_list *tensors,
                      const qopt_hyper *hypers, size_t num_hypers,
                      int64_t step, const void *const *tables,
                      size_t num_tables, void *stream) {
  return guard([&] {
    Kernel &k = *need(kernel, "kernel")->impl;
    if (k.manifest()->numStepReductions > 0) {
      qopt_launch l{kernel, tensors, hypers, num_hypers, step,
                    nullptr, tables, num_tables, nullptr};
      return stepMany(&l, 1, stream, StepMode::Whole, nullptr);
    }
    std::vector<float> uniforms =
        evaluateUniforms(*k.manifest(), hypers, num_hypers, step);
    k.step(tensors, &uniforms, StepBuffers{}, tables, num_tables, stream);
  });
}

qopt_status qopt_step_many(const qopt_launch *launches, size_t num_launches,
                           void *stream) {
  return guard([&] {
    stepMany(launches, num_launches, stream, StepMode::Whole, nullptr);
  });
}

qopt_status qopt_step_partials_shape(const qopt_launch *launches,
                                     size_t num_launches,
                                     int64_t *num_step_tensors,
                                     int64_t *num_step_reductions) {
  return guard([&] {
    stepPartialsShape(launches, num_launches,
                      need(num_step_tensors, "num_step_tensors"),
                      need(num_step_reductions, "num_step_reductions"));
  });
}

qopt_status qopt_step_many_partials(const qopt_launch *launches,
                                    size_t num_launches, double *step_partials,
                                    void *stream) {
  return guard([&] {
    stepMany(launches, num_launches, stream, StepMode::Partials,
             step_partials);
  });
}

qopt_status qopt_step_many_from_partials(const qopt_launch *launches,
                                         size_t num_launches,
                                         const double *step_partials,
                                         void *stream) {
  return guard([&] {
    // Read only: phase B's combines read the rows, nothing writes them.
    stepMany(launches, num_launches, stream, StepMode::FromPartials,
             const_cast<double *>(step_partials));
  });
}

qopt_status qopt_step_device_uniforms(qopt_kernel *kernel,
                                      const qopt_tensor_list *tensors,
                                      const float *device_uniforms,
                                      const void *const *tables,
                                      size_t num_tables, void *stream) {
  return guard([&] {
    Kernel &k = *need(kernel, "kernel")->impl;
    if (k.manifest()->numStepReductions > 0) {
      qopt_launch l{kernel, tensors, nullptr, 0, 0,
                    device_uniforms, tables, num_tables, nullptr};
      // A NULL device_uniforms of a kernel that reads uniforms is refused
      // as qopt_step_device_uniforms refuses it, not evaluated.
      k.requireUniforms(nullptr, device_uniforms);
      return stepMany(&l, 1, stream, StepMode::Whole, nullptr);
    }
    k.step(tensors, nullptr, StepBuffers{device_uniforms, nullptr}, tables,
           num_tables, stream);
  });
}

} // extern "C"

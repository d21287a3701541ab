//===- qopt/runtime.hpp - Thin C++ wrapper of the qopt runtime C API -----===//
//
// Header-only RAII over qopt/runtime.h: move-only owners for every handle,
// std::string and std::vector at the edges, and qopt::Error (status + message)
// thrown where the C API returns an error. No state of its own; everything it
// does is one C call.
//
//   qopt::Context ctx(QOPT_BACKEND_CUDA, 0);
//   qopt::Registry reg;
//   reg.addDirectory("kernels/");
//   qopt::Kernel k(ctx, reg, "FlashAdamW");
//   qopt::TensorList list(k.manifest().numStreams());
//   list.add("w", numel, {p, ecc, g, m_codes, m_scales, v_codes, v_scales});
//   k.step(list, {{"lr", 1e-3}}, step, {}, stream);
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_HPP
#define QOPT_RUNTIME_HPP

#include "qopt/runtime.h"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace qopt {

/// A failed C API call: its status and qopt_last_error() at the time.
class Error : public std::runtime_error {
public:
  Error(qopt_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  qopt_status status() const noexcept { return status_; }

private:
  qopt_status status_;
};

/// Throws qopt::Error unless `status` is QOPT_SUCCESS.
inline void check(qopt_status status) {
  if (status != QOPT_SUCCESS)
    throw Error(status, qopt_last_error());
}

namespace detail {
/// A move-only owner of a C handle with a destroy function.
template <typename T, qopt_status (*Destroy)(T *)> class Handle {
public:
  Handle() = default;
  explicit Handle(T *h) : h_(h) {}
  Handle(Handle &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle &operator=(Handle &&o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() { reset(); }
  T *get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  void reset() noexcept {
    if (h_)
      (void)Destroy(h_); // destroy functions only fail on NULL
    h_ = nullptr;
  }

protected:
  T *h_ = nullptr;
};
} // namespace detail

/// One backend on one device (see qopt_context_create).
class Context : public detail::Handle<qopt_context, qopt_context_destroy> {
public:
  Context(qopt_backend backend, int32_t device) {
    check(qopt_context_create(backend, device, &h_));
  }
  qopt_device_info deviceInfo() const {
    qopt_device_info info;
    check(qopt_context_get_device_info(h_, &info));
    return info;
  }
};

/// Memory of a context's backend (see qopt_buffer_alloc): device memory for
/// CUDA, host memory for host. Move-only; freed by the destructor. The
/// context must outlive it.
class Buffer {
public:
  Buffer() = default;
  Buffer(Context &ctx, uint64_t bytes) : ctx_(ctx.get()), bytes_(bytes) {
    check(qopt_buffer_alloc(ctx_, bytes, &p_));
  }
  Buffer(Buffer &&o) noexcept
      : ctx_(o.ctx_), p_(std::exchange(o.p_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer &operator=(Buffer &&o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = o.ctx_;
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() { reset(); }
  void *get() const noexcept { return p_; }
  uint64_t bytes() const noexcept { return bytes_; }
  /// Copies `n` bytes from host `src` to offset `offset` (synchronous).
  void upload(const void *src, uint64_t n, uint64_t offset = 0) {
    check(qopt_buffer_upload(ctx_, static_cast<char *>(p_) + offset, src, n));
  }
  /// Copies `n` bytes at offset `offset` to host `dst` (synchronous).
  void download(void *dst, uint64_t n, uint64_t offset = 0) const {
    check(qopt_buffer_download(ctx_, dst, static_cast<const char *>(p_) + offset,
                               n));
  }
  void reset() noexcept {
    if (p_)
      (void)qopt_buffer_free(ctx_, p_); // only fails for a foreign pointer
    p_ = nullptr;
    bytes_ = 0;
  }

private:
  qopt_context *ctx_ = nullptr;
  void *p_ = nullptr;
  uint64_t bytes_ = 0;
};

/// A parsed manifest (see qopt_manifest_parse).
class Manifest : public detail::Handle<qopt_manifest, qopt_manifest_destroy> {
public:
  /// Adopts a handle the C API returned (a new reference).
  explicit Manifest(qopt_manifest *m) : Handle(m) {}
  static Manifest parse(const std::string &json,
                        const std::string &sourceName = "<memory>") {
    qopt_manifest *m = nullptr;
    check(qopt_manifest_parse(json.data(), json.size(), sourceName.c_str(), &m));
    return Manifest(m);
  }
  static Manifest load(const std::string &path) {
    qopt_manifest *m = nullptr;
    check(qopt_manifest_load(path.c_str(), &m));
    return Manifest(m);
  }
  qopt_manifest_info info() const {
    qopt_manifest_info i;
    check(qopt_manifest_get_info(h_, &i));
    return i;
  }
  size_t numStreams() const { return info().num_streams; }
  qopt_stream_info stream(size_t index) const {
    qopt_stream_info s;
    check(qopt_manifest_get_stream(h_, index, &s));
    return s;
  }
  qopt_hyper_info hyper(size_t index) const {
    qopt_hyper_info h;
    check(qopt_manifest_get_hyper(h_, index, &h));
    return h;
  }
  qopt_table_info table(size_t index) const {
    qopt_table_info t;
    check(qopt_manifest_get_table(h_, index, &t));
    return t;
  }
  /// Reduction `index` of "reductions" (kind, scope, uniform slot).
  qopt_reduction_info reduction(size_t index) const {
    qopt_reduction_info r;
    check(qopt_manifest_get_reduction(h_, index, &r));
    return r;
  }
  /// The float32 uniforms for these hyperparameters and step.
  std::vector<float> evaluateUniforms(const std::vector<qopt_hyper> &hypers,
                                      int64_t step) const {
    std::vector<float> out(info().num_uniforms);
    check(qopt_manifest_evaluate_uniforms(h_, hypers.data(), hypers.size(),
                                          step, out.data(), out.size()));
    return out;
  }
  /// Sizes and initial values of every stream for `numel` elements.
  std::vector<qopt_buffer_layout>
  stateLayout(int64_t numel,
              const std::vector<const float *> &hostTables = {}) const {
    std::vector<qopt_buffer_layout> out(numStreams());
    check(qopt_manifest_state_layout(
        h_, numel, hostTables.empty() ? nullptr : hostTables.data(),
        hostTables.size(), out.data(), out.size()));
    return out;
  }
};

/// Kernels by name (see qopt_registry_create).
class Registry : public detail::Handle<qopt_registry, qopt_registry_destroy> {
public:
  Registry() { check(qopt_registry_create(&h_)); }
  void addManifestFile(const std::string &path) {
    check(qopt_registry_add_manifest_file(h_, path.c_str()));
  }
  size_t addDirectory(const std::string &dir) {
    size_t n = 0;
    check(qopt_registry_add_directory(h_, dir.c_str(), &n));
    return n;
  }
  void add(const Manifest &m, qopt_binary_format format = QOPT_BINARY_AUTO,
           const void *image = nullptr, size_t size = 0) {
    check(qopt_registry_add_manifest(h_, m.get(), format, image, size));
  }
  std::vector<std::string> kernelNames() const {
    size_t n = 0;
    check(qopt_registry_count(h_, &n));
    std::vector<std::string> names;
    for (size_t i = 0; i < n; ++i) {
      const char *name = nullptr;
      check(qopt_registry_kernel_name(h_, i, &name));
      names.emplace_back(name);
    }
    return names;
  }
  Manifest manifest(const std::string &kernel) const {
    qopt_manifest *m = nullptr;
    check(qopt_registry_get_manifest(h_, kernel.c_str(), &m));
    return Manifest(m);
  }
};

/// The tensors of a step, owning the flat arrays of qopt_tensor_list.
class TensorList {
public:
  explicit TensorList(size_t numStreams) : numStreams_(numStreams) {}
  /// Adds a tensor: `data` holds its stream pointers in ABI order; `bytes`
  /// (each buffer's size) and `dtypes`, checked by validation, are either
  /// empty or one per stream, and given for every tensor of the list or for
  /// none (a list checked for some tensors only would check none). Throws
  /// Error(QOPT_ERROR_INVALID_ARGUMENT) otherwise, the list unchanged.
  TensorList &add(std::string name, int64_t numel, std::vector<void *> data,
                  std::vector<uint64_t> bytes = {},
                  std::vector<qopt_dtype> dtypes = {}) {
    auto refuse = [&](const std::string &what) {
      throw Error(QOPT_ERROR_INVALID_ARGUMENT, "tensor '" + name + "': " + what);
    };
    auto count = [&](size_t n, const char *what) {
      if (n != numStreams_)
        refuse(std::to_string(n) + " " + what + ", the kernel takes " +
               std::to_string(numStreams_) + " streams");
    };
    count(data.size(), "stream pointers");
    if (!bytes.empty())
      count(bytes.size(), "buffer sizes (bytes)");
    if (!dtypes.empty())
      count(dtypes.size(), "dtypes");
    const bool withBytes = !bytes.empty(), withDtypes = !dtypes.empty();
    if (!numels_.empty() && withBytes != allBytes_)
      refuse(withBytes ? "buffer sizes given, but not for the tensors before it"
                       : "no buffer sizes, but the tensors before it have them");
    if (!numels_.empty() && withDtypes != allDtypes_)
      refuse(withDtypes ? "dtypes given, but not for the tensors before it"
                        : "no dtypes, but the tensors before it have them");
    names_.push_back(std::move(name));
    numels_.push_back(numel);
    data_.insert(data_.end(), data.begin(), data.end());
    allBytes_ = withBytes;
    allDtypes_ = withDtypes;
    for (size_t j = 0; j < numStreams_; ++j) {
      bytes_.push_back(withBytes ? bytes[j] : 0);
      dtypes_.push_back(withDtypes ? static_cast<int32_t>(dtypes[j]) : 0);
    }
    return *this;
  }
  size_t size() const { return numels_.size(); }
  /// The C view; valid until the list changes.
  const qopt_tensor_list *view() {
    namePtrs_.clear();
    for (const std::string &n : names_)
      namePtrs_.push_back(n.c_str());
    list_.num_tensors = numels_.size();
    list_.num_streams = numStreams_;
    list_.numels = numels_.data();
    list_.data = data_.data();
    list_.bytes = allBytes_ && !numels_.empty() ? bytes_.data() : nullptr;
    list_.dtypes = allDtypes_ && !numels_.empty() ? dtypes_.data() : nullptr;
    list_.names = namePtrs_.data();
    return &list_;
  }

private:
  size_t numStreams_;
  std::vector<std::string> names_;
  std::vector<const char *> namePtrs_;
  std::vector<int64_t> numels_;
  std::vector<void *> data_;
  std::vector<uint64_t> bytes_;
  std::vector<int32_t> dtypes_;
  bool allBytes_ = true, allDtypes_ = true;
  qopt_tensor_list list_{};
};

/// A kernel loaded on a context (see qopt_kernel_create).
class Kernel : public detail::Handle<qopt_kernel, qopt_kernel_destroy> {
public:
  Kernel(Context &ctx, const Registry &reg, const std::string &name) {
    check(qopt_kernel_create(ctx.get(), reg.get(), name.c_str(), &h_));
  }
  Kernel(Context &ctx, const Manifest &m, qopt_binary_format format,
         const void *image, size_t size) {
    check(qopt_kernel_create_from_image(ctx.get(), m.get(), format, image,
                                        size, &h_));
  }
  Kernel(Context &ctx, const Manifest &m, qopt_host_kernel_fn fn) {
    check(qopt_kernel_create_host(ctx.get(), m.get(), fn, &h_));
  }
  Manifest manifest() const {
    qopt_manifest *m = nullptr;
    check(qopt_kernel_get_manifest(h_, &m));
    return Manifest(m);
  }
  /// A host kernel's phase functions of its step reductions.
  void setHostPhases(qopt_host_partials_fn partials, qopt_host_combine_fn combine) {
    check(qopt_kernel_set_host_phase(
        h_, "partials", reinterpret_cast<qopt_host_phase_fn>(partials)));
    check(qopt_kernel_set_host_phase(
        h_, "combine", reinterpret_cast<qopt_host_phase_fn>(combine)));
  }
  qopt_kernel_info info() const {
    qopt_kernel_info i;
    check(qopt_kernel_get_info(h_, &i));
    return i;
  }
  void validate(TensorList &list,
                const std::vector<const void *> &tables = {}) {
    check(qopt_validate(h_, list.view(), tables.data(), tables.size()));
  }
  /// One step of every tensor in `list` on `stream` (a CUstream or nullptr).
  /// `numericsCounters`: QOPT_NUMERICS_COUNTERS int64 values of the
  /// context's memory the kernel adds its saturated and non-finite groups to
  /// (qopt_launch.numerics_counters), or nullptr.
  void step(TensorList &list, const std::vector<qopt_hyper> &hypers,
            int64_t step, const std::vector<const void *> &tables = {},
            void *stream = nullptr, int64_t *numericsCounters = nullptr) {
    qopt_launch launch{};
    launch.kernel = h_;
    launch.tensors = list.view();
    launch.hypers = hypers.data();
    launch.num_hypers = hypers.size();
    launch.step = step;
    launch.tables = tables.data();
    launch.num_tables = tables.size();
    launch.numerics_counters = numericsCounters;
    check(qopt_step_many(&launch, 1, stream));
  }
  /// One step reading the uniforms from a caller-owned device buffer.
  void stepDeviceUniforms(TensorList &list, const float *deviceUniforms,
                          const std::vector<const void *> &tables = {},
                          void *stream = nullptr) {
    check(qopt_step_device_uniforms(h_, list.view(), deviceUniforms,
                                    tables.data(), tables.size(), stream));
  }
};

/// Splits float32 masters into 16-bit parameters and error bits (host).
inline void errorBitsInit(qopt_dtype paramDtype, qopt_dtype eccDtype,
                          const float *master, int64_t numel, void *paramOut,
                          void *eccOut) {
  check(qopt_error_bits_init(paramDtype, eccDtype, master, numel, paramOut,
                             eccOut));
}

} // namespace qopt

#endif // QOPT_RUNTIME_HPP

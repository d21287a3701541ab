//===- Kernel.h - A loaded kernel: validation, tables, launch -------------===//
//
// A kernel couples a manifest with code on one context: a CUDA module and
// function, or a host function. step() validates a tensor list completely,
// evaluates the uniforms, builds the descriptor table and the tile map, and
// only then launches; the CUDA path uploads the tables from pinned staging
// buffers that are reused once their step has finished (checked with events,
// never waited for in the normal case), so a step does not synchronize and can
// be captured in a CUDA graph.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_KERNEL_H
#define QOPT_RUNTIME_SRC_KERNEL_H

#include "Context.h"
#include "Manifest.h"
#include "Registry.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace qopt::rt {

/// What validation computed for a tensor list: the tiles.
struct CheckedList {
  std::vector<int64_t> firstTile;
  int64_t numTiles = 0;
};

class Kernel {
public:
  /// Loads the registry's kernel `name` on `ctx` (see qopt_kernel_create).
  static std::shared_ptr<Kernel> create(ContextPtr ctx, const RegistryEntry &e);
  /// Loads from one in-memory image.
  static std::shared_ptr<Kernel> createFromImage(ContextPtr ctx,
                                                 ManifestPtr m,
                                                 qopt_binary_format format,
                                                 const void *image,
                                                 size_t size);
  static std::shared_ptr<Kernel> createHost(ContextPtr ctx, ManifestPtr m,
                                            qopt_host_kernel_fn fn);
  ~Kernel();
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;

  const ManifestPtr &manifest() const { return manifest_; }
  qopt_kernel_info info() const;

  /// Checks everything a step checks; throws VALIDATION naming the tensor.
  CheckedList validate(const qopt_tensor_list *t, const void *const *tables,
                       size_t numTables, const float *deviceUniforms) const;

  /// One step; `hostUniforms` null means use `deviceUniforms`.
  void step(const qopt_tensor_list *t, const std::vector<float> *hostUniforms,
            const float *deviceUniforms, const void *const *tables,
            size_t numTables, void *stream);

private:
  /// A device buffer with its pinned host mirror; see Kernel.cpp.
  struct Slot {
    cu::CUdeviceptr dev = 0;
    void *host = nullptr;
    size_t capacity = 0;
    cu::CUevent done = nullptr;
    bool pending = false;   ///< an event was recorded and not seen complete
    bool captured = false;  ///< owned by a captured graph from now on
    bool tablesValid = false;
    size_t numTensors = 0;  ///< descriptors held when tablesValid
    uint64_t sequence = 0;  ///< order of its last uncaptured step
  };

  Kernel(ContextPtr ctx, ManifestPtr m) : ctx_(std::move(ctx)), manifest_(std::move(m)) {}
  void loadImage(const ImageSource &src, std::string *jitLog);
  void finishCudaLoad();
  void stepHost(const qopt_tensor_list *t, const CheckedList &c,
                const float *uniforms, const void *const *tables);
  void stepCuda(const qopt_tensor_list *t, const CheckedList &c,
                const std::vector<float> *hostUniforms,
                const float *deviceUniforms, const void *const *tables,
                void *stream);
  bool slotIdle(Slot &s);
  Slot makeSlot(size_t bytes);
  void freeSlot(Slot &s);

  ContextPtr ctx_;
  ManifestPtr manifest_;
  // CUDA.
  cu::CUmodule module_ = nullptr;
  cu::CUfunction function_ = nullptr;
  qopt_binary_format format_ = QOPT_BINARY_AUTO;
  std::string arch_, origin_, jitLog_;
  int maxBlocks_ = 1;
  // Host.
  qopt_host_kernel_fn hostFn_ = nullptr;
  void *dlHandle_ = nullptr;
  // Launch state, guarded by mu_.
  std::mutex mu_;
  /// The (address, bytes) of every buffer of the last list whose pointers the
  /// driver confirmed; an identical list skips the per-buffer driver queries,
  /// which cost about a microsecond each (a 500-buffer list: half a
  /// millisecond of host time per step).
  mutable std::mutex verifiedMu_;
  mutable std::vector<std::pair<uint64_t, uint64_t>> verified_;
  std::vector<Slot> slots_;
  uint64_t stepSequence_ = 0;
  std::vector<unsigned char> scratch_; ///< descriptors of the current step
};

using KernelPtr = std::shared_ptr<Kernel>;

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_KERNEL_H

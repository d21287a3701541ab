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

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace qopt::rt {

/// What validation computed for a tensor list: the tiles.
struct CheckedList {
  std::vector<int64_t> firstTile;
  int64_t numTiles = 0;
  /// Names the tile map of these numels: two lists of one kernel with the
  /// same generation have the same tile map (a staging buffer that holds it
  /// is not written again).
  uint64_t tileGeneration = 0;
};
using CheckedListPtr = std::shared_ptr<const CheckedList>;

/// A buffer of a step: [begin, end), its index (tensor * streams + stream,
/// then the tables, then the device uniforms) and whether the kernel writes
/// it. Ordered by address.
struct Span {
  uint64_t begin = 0, end = 0;
  uint32_t index = 0;
  bool written = false;
  bool operator<(const Span &o) const {
    return begin != o.begin ? begin < o.begin : index < o.index;
  }
};

/// A step's buffers beside its tensors and tables: the uniforms in device
/// memory (null: the runtime evaluates and uploads them) and the numerics
/// counters (docs/abi.md; null: not counted, and ignored by a kernel that
/// takes none).
struct StepBuffers {
  const float *deviceUniforms = nullptr;
  int64_t *counters = nullptr;
};

/// The arrays of the last tensor list a kernel validated, compared with the
/// next list's (Validation.cpp): an identical list is valid without a second
/// look, one whose buffers moved is checked only where they moved.
struct ListSignature {
  std::vector<int64_t> numels;
  std::vector<void *> data;
  std::vector<uint64_t> bytes;  ///< empty when the list gave none
  std::vector<int32_t> dtypes;  ///< empty when the list gave none
  std::vector<const void *> tables;
  const float *deviceUniforms = nullptr;
  const int64_t *counters = nullptr; ///< numerics counters (kernels that take them)
  size_t numStreams = 0;
  uint64_t allocationEpoch = 0; ///< AllocationCache::epoch() when checked
  bool valid = false;
  std::vector<uint64_t> need; ///< bytes the step touches, per buffer index
  std::vector<Span> spans;    ///< the buffers of nonzero size, by address

  /// Equal in every array but `data`.
  bool sameButPointers(const qopt_tensor_list *t, const void *const *tables,
                       size_t numTables, const StepBuffers &extra,
                       uint64_t epoch) const;
  bool matches(const qopt_tensor_list *t, const void *const *tables,
               size_t numTables, const StepBuffers &extra,
               uint64_t epoch) const;
  bool sameNumels(const qopt_tensor_list *t) const;
  void assign(const qopt_tensor_list *t, const void *const *tables,
              size_t numTables, const StepBuffers &extra, uint64_t epoch);
};

/// The device values of one launch's arguments (docs/abi.md), by kind.
struct LaunchArgs {
  cu::CUdeviceptr descs = 0, tileMap = 0, uniforms = 0, workCounters = 0,
                  numerics = 0, partials = 0, values = 0, stepPartials = 0;
  int64_t numTiles = 0, numTensors = 0, numStepTensors = 0;
  std::vector<cu::CUdeviceptr> tables;
  /// Pointers to the fields in `args`' order: cuLaunchKernel's params.
  std::vector<void *> params(const std::vector<ArgDesc> &args);
};

/// One launch of a step with step reductions between its phases
/// (StepPhases.cpp): what its begin() prepared, for its phase A, phase B
/// and end().
struct LaunchRun {
  const qopt_tensor_list *t = nullptr;
  CheckedListPtr checked;
  const void *const *tables = nullptr;
  void *stream = nullptr;
  int64_t *counters = nullptr; ///< null where the kernel takes none
  // CUDA: the staging slot held from begin() to end() and the arguments.
  long slot = -1;
  bool capturing = false, enqueued = false;
  LaunchArgs args;
  /// The step rows' region of this launch's staging buffer (0: none asked).
  cu::CUdeviceptr stepWorkspace = 0;
  // Host: the uniforms the combine completes and the step reads.
  std::vector<float> uniforms;
};

/// The descriptor table of a validated list (Kernel.cpp).
void buildDescriptors(const Manifest &m, const qopt_tensor_list *t,
                      const CheckedList &c, unsigned char *out);

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
  /// A list equal to the last one this kernel accepted (every array
  /// element-wise) is accepted again without a second look.
  CheckedListPtr validate(const qopt_tensor_list *t, const void *const *tables,
                          size_t numTables, const StepBuffers &extra,
                          uint64_t *versionOut = nullptr) const;
  /// validate(), and `version` receives the accepted list's version: equal
  /// for two calls only when the second accepted the first's list as it was
  /// (unique across kernels; a list that changed gets a new one).
  CheckedListPtr validate(const qopt_tensor_list *t, const void *const *tables,
                          size_t numTables, const StepBuffers &extra,
                          uint64_t &version) const;
  /// The buffers of nonzero size of a list validate() accepted (`version` its
  /// version; the same arguments), in address order, Span::index as
  /// bufferLabel() reads it.
  void spans(uint64_t version, const qopt_tensor_list *t,
             const void *const *tables, size_t numTables,
             const StepBuffers &extra, std::vector<Span> &out) const;
  /// How validate's messages name buffer `index` of `t` ("tensor 'w' (#3),
  /// stream 'p'", "table 'qmap_m'", "uniforms", "numerics counters").
  std::string bufferLabel(const qopt_tensor_list *t, uint32_t index) const;
  /// Whether buffer `index` of `t` is the numerics counters.
  bool isCounters(const qopt_tensor_list *t, uint32_t index) const;

  /// One step; `hostUniforms` null means use `extra.deviceUniforms`.
  void step(const qopt_tensor_list *t, const std::vector<float> *hostUniforms,
            const StepBuffers &extra, const void *const *tables,
            size_t numTables, void *stream);

  /// Whether the kernel takes numerics counters (the manifest's args).
  bool takesCounters() const;

  // A step with step reductions (StepPhases.cpp, docs/abi.md "Step
  // reductions"), launch by launch: begin (validated list; CUDA: a staging
  // slot with `stepWorkspaceBytes` more bytes for the step's rows, tables
  // and uniforms uploaded), phaseA (the rows of its tensors into `rows`: a
  // device pointer for CUDA, a host one for the host backend), phaseB (the
  // combine over the step's `numStepTensors` rows, then the step), end
  // (releases the slot; after a failure too).
  void begin(LaunchRun &r, const std::vector<float> *hostUniforms,
             const StepBuffers &extra, size_t stepWorkspaceBytes);
  void phaseA(LaunchRun &r, double *rows);
  void phaseB(LaunchRun &r, const double *rows, int64_t numStepTensors);
  void end(LaunchRun &r, bool failed);
  /// The host phase functions of a qopt_kernel_create_host kernel.
  void setHostPhase(const std::string &phase, void (*fn)());

  /// Throws INVALID_ARGUMENT when neither uniform source is given to a
  /// kernel that reads uniforms.
  void requireUniforms(const std::vector<float> *hostUniforms,
                       const float *deviceUniforms) const;

  /// The launch of a list validate() accepted (`c` is its result): step()
  /// without the validation, for callers that validate several launches
  /// before launching any.
  void launch(const qopt_tensor_list *t, const CheckedList &c,
              const std::vector<float> *hostUniforms,
              const StepBuffers &extra, const void *const *tables,
              void *stream);

private:
  /// A device buffer with its pinned host mirror; see Kernel.cpp.
  struct Slot {
    cu::CUdeviceptr dev = 0;
    void *host = nullptr;
    size_t capacity = 0;
    cu::CUevent done = nullptr;
    bool pending = false;   ///< an event was recorded and not seen complete
    bool captured = false;  ///< owned by a captured graph from now on
    bool descValid = false; ///< the device copy holds numTensors descriptors
    size_t numTensors = 0;
    uint64_t tileGeneration = 0; ///< of the tile map held (0: none)
    uint64_t sequence = 0;  ///< order of its last uncaptured step
    bool busy = false;      ///< held by a step between its phases
  };

  Kernel(ContextPtr ctx, ManifestPtr m) : ctx_(std::move(ctx)), manifest_(std::move(m)) {}
  void loadImage(const ImageSource &src, std::string *jitLog);
  void finishCudaLoad();
  void stepHost(const qopt_tensor_list *t, const CheckedList &c,
                const float *uniforms, int64_t *counters,
                const void *const *tables);
  /// HostStep.cpp: calls `fn(begin, end)` on contiguous tile ranges over
  /// the threads, ranges ending where tensors do for a kernel with
  /// reductions; `tileMap` the list's.
  void forEachTileRange(const qopt_tensor_list *t, const CheckedList &c,
                        const int32_t *tileMap,
                        const std::function<void(int64_t, int64_t)> &fn) const;
  /// Picks a staging slot of `bytes` for a step (Kernel.cpp); throws
  /// CAPTURE under capture without a reserved idle one.
  long pickSlot(size_t bytes, bool capturing,
                const std::function<int(const Slot &)> &holds);
  /// Uploads the step's tables and uniforms into slot `r.slot` and fills
  /// r.args (Kernel.cpp).
  void uploadCuda(LaunchRun &r, const std::vector<float> *hostUniforms,
                  const StepBuffers &extra, size_t stepWorkspaceBytes);
  /// Launches the step proper of a prepared run (Kernel.cpp).
  void launchStep(LaunchRun &r);
  /// Ends a CUDA run: fences its slot, or retires it after a failure
  /// (Kernel.cpp).
  void endCuda(LaunchRun &r, bool failed);
  void stepCuda(const qopt_tensor_list *t, const CheckedList &c,
                const std::vector<float> *hostUniforms,
                const StepBuffers &extra, const void *const *tables,
                void *stream);
  bool slotIdle(Slot &s);
  // Phases.cpp: the launches before the step (docs/abi.md, "Reductions").
  /// Each phase's function in module_ and its blocks per wave.
  void loadPhases();
  /// Launches the phases [from, to) in order on `stream`.
  void launchPhases(LaunchArgs &args, cu::CUstream stream, size_t from,
                    size_t to);
  /// The index of the combine phase (manifest_->phases.size() if none).
  size_t combinePhase() const;

  // Validation.cpp.
  struct ListView;
  void checkBuffers(const ListView &v, const void *const *tables,
                    const StepBuffers &extra, ListSignature &sig) const;
  void checkMoved(const ListView &v, ListSignature &sig) const;
  void checkPointer(const ListView &v, uint32_t index, const void *p,
                    uint64_t need) const;
  void checkOverlaps(const ListView &v, const std::vector<Span> &sorted) const;
  void checkDeviceMemory(const ListView &v,
                         const std::vector<Span> &sorted) const;
  Slot makeSlot(size_t bytes);
  void freeSlot(Slot &s);
  /// Waits for `s`'s step to finish (a wait: back-pressure only) and grows
  /// it to `bytes` where it is smaller.
  void reclaimSlot(Slot &s, size_t bytes);

  ContextPtr ctx_;
  ManifestPtr manifest_;
  // CUDA.
  cu::CUmodule module_ = nullptr;
  cu::CUfunction function_ = nullptr;
  qopt_binary_format format_ = QOPT_BINARY_AUTO;
  std::string arch_, origin_, jitLog_;
  int maxBlocks_ = 1;
  struct PhaseFunction {
    cu::CUfunction fn = nullptr;
    int maxBlocks = 1; ///< resident blocks of one wave
  };
  std::vector<PhaseFunction> phases_; ///< manifest_->phases' order
  // Host: the function, of qopt_host_counted_kernel_fn's type where the
  // kernel takes numerics counters.
  qopt_host_kernel_fn hostFn_ = nullptr;
  qopt_host_partials_fn hostPartials_ = nullptr;
  qopt_host_combine_fn hostCombine_ = nullptr;
  void *dlHandle_ = nullptr;
  // Launch state, guarded by mu_.
  std::mutex mu_;
  /// The last list validate() accepted and what it computed for it; held
  /// for a whole validation.
  mutable std::mutex listMu_;
  mutable ListSignature lastList_;
  mutable CheckedListPtr lastChecked_;
  mutable uint64_t listVersion_ = 0; ///< lastList_'s (nextListVersion)
  mutable uint64_t tileGenerations_ = 0;
  std::vector<Slot> slots_;
  uint64_t stepSequence_ = 0;
  std::vector<unsigned char> scratch_; ///< descriptors of the current step
};

using KernelPtr = std::shared_ptr<Kernel>;

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_KERNEL_H

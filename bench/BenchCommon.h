//===- BenchCommon.h - Shared pieces of qopt-bench and qopt-main ----------===//
//
// Device memory and timing through the runtime's dlopen'd driver shim
// (runtime/src/CudaDriver.h), plus the few driver entry points the shim does
// not resolve (event timing, device-to-device copies, 16-bit memset, function
// attributes, occupancy), resolved here with dlsym on the same libcuda.so.1.
// Manifests are read through the runtime's C API; only the launch-argument
// order and binary list come from the JSON directly (the C API has no getter
// for them). Nothing here needs CUDA headers or a CUDA toolkit.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_BENCH_BENCHCOMMON_H
#define QOPT_BENCH_BENCHCOMMON_H

#include "CudaDriver.h"
#include "qopt/runtime.h"

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace qopt::bench {

namespace cu = qopt::rt::cu;

/// Throws std::runtime_error naming the call unless it returned CUDA_SUCCESS.
void checkCu(cu::CUresult r, const char *what);
/// Throws std::runtime_error with qopt_last_error() unless QOPT_SUCCESS.
void checkQ(qopt_status s, const char *what);
#define BCU(call) ::qopt::bench::checkCu((call), #call)
#define BQ(call) ::qopt::bench::checkQ((call), #call)

// Driver constants not in CudaDriver.h (values from cuda.h).
constexpr int kAttrClockRate = 13;              // kHz
constexpr int kAttrMemoryClockRate = 36;        // kHz
constexpr int kAttrGlobalMemoryBusWidth = 37;   // bits
constexpr int kAttrL2CacheSize = 38;            // bytes
constexpr int kAttrMaxThreadsPerSM = 39;
constexpr int kAttrMaxRegistersPerSM = 82;
constexpr int kFuncMaxThreadsPerBlock = 0;
constexpr int kFuncSharedSizeBytes = 1;
constexpr int kFuncLocalSizeBytes = 3;
constexpr int kFuncNumRegs = 4;
constexpr int kFuncBinaryVersion = 6;

/// Entry points the runtime's shim does not resolve.
struct DriverExtra {
  cu::CUresult (*cuEventElapsedTime)(float *, cu::CUevent, cu::CUevent) = nullptr;
  cu::CUresult (*cuMemcpyDtoD)(cu::CUdeviceptr, cu::CUdeviceptr, size_t) = nullptr;
  cu::CUresult (*cuMemcpyDtoDAsync)(cu::CUdeviceptr, cu::CUdeviceptr, size_t,
                                    cu::CUstream) = nullptr;
  cu::CUresult (*cuMemsetD16)(cu::CUdeviceptr, unsigned short, size_t) = nullptr;
  cu::CUresult (*cuFuncGetAttribute)(int *, int, cu::CUfunction) = nullptr;
  cu::CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, cu::CUfunction, int,
                                                              size_t) = nullptr;
  cu::CUresult (*cuDeviceTotalMem)(size_t *, cu::CUdevice) = nullptr;
};
/// Resolves them once; throws std::runtime_error naming a missing one.
const DriverExtra &extra();

/// A cuMemAlloc'd buffer, freed on destruction; move-only.
struct DeviceMem {
  cu::CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceMem() = default;
  explicit DeviceMem(size_t n);
  DeviceMem(const DeviceMem &) = delete;
  DeviceMem &operator=(const DeviceMem &) = delete;
  DeviceMem(DeviceMem &&o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = 0; o.bytes = 0; }
  DeviceMem &operator=(DeviceMem &&o) noexcept;
  ~DeviceMem();
  void reset();
};

/// The device the primary context of ordinal 0 runs on; pushes that context
/// on the calling thread for the object's life (as the GPU tests do, so the
/// bench's own allocations and the runtime's pointer checks agree).
struct DeviceSession {
  cu::CUdevice dev = 0;
  cu::CUcontext primary = nullptr;
  std::string name;
  int ccMajor = 0, ccMinor = 0, sms = 0, l2Bytes = 0, smClockKHz = 0, memClockKHz = 0,
      busWidthBits = 0, maxThreadsPerSM = 0, maxRegsPerSM = 0, driverVersion = 0;
  size_t totalMem = 0;
  DeviceSession();
  ~DeviceSession();
  DeviceSession(const DeviceSession &) = delete;
  DeviceSession &operator=(const DeviceSession &) = delete;
  /// Datasheet-style peak from clock and bus width (2 transfers per clock), GB/s.
  double theoreticalGBps() const;
};

/// "" when a CUDA device is usable, else the reason (no driver, no device).
std::string gpuUnavailableReason();

/// Median, min, mean of a sample (the vector is copied).
struct Stats {
  double median = 0, min = 0, mean = 0, max = 0;
  size_t n = 0;
};
Stats stats(std::vector<double> v);

/// Device-to-device copy of `bytes` (default 1 GiB) timed with events: `iters`
/// copies after `warmup`, median. GB/s counts bytes read + bytes written.
struct CopyRoof {
  double ms = 0, gbps = 0;
  size_t bytes = 0;
  int iters = 0;
};
CopyRoof measureCopyRoof(cu::CUstream stream, size_t bytes = size_t(1) << 30, int iters = 20,
                         int warmup = 3);

/// Where the manifests live under --kernels: DIR/fatbin if it holds
/// <stem>.manifest.json, else DIR/ptx, else DIR itself. Empty when none.
std::string resolveKernelDir(const std::string &base, const std::string &stem);

/// The GPT-2 124M parameter list of ../shared/docs/anchors.md (148 tensors).
struct NamedShape {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const;
};
std::vector<NamedShape> gpt2Shapes();

/// One stream of a manifest, with what the bench needs to count bytes.
struct StreamDesc {
  std::string name;
  qopt_stream_role role;
  qopt_dtype dtype;
  size_t elementBytes = 0;
  qopt_stream_per per;
  int64_t perSize = 1;
  bool written = false;
  int64_t count(int64_t numel) const; ///< elements of this stream for a tensor of numel
};

/// A manifest and the facts the bench and the main job use.
struct Spec {
  std::string stem;      ///< file stem (flash_adamw)
  std::string dir;       ///< directory of the manifest
  std::string path;      ///< the manifest file
  qopt_manifest *manifest = nullptr;
  qopt_manifest_info info{};
  std::vector<StreamDesc> streams;
  std::vector<std::string> args;         ///< launch argument order (names)
  /// The launches before the step of a kernel with per-tensor reductions
  /// (docs/abi.md, "Reductions"), and its workspace's sizes.
  struct Phase {
    std::string name; ///< reduce, finish, combine
    std::string entry;
    bool overTensors = false; ///< grid "tensors" (else "tiles")
    bool one = false;         ///< grid "one": exactly one block (a combine)
    int threadsPerBlock = 0;
    std::vector<std::string> args;
  };
  std::vector<Phase> phases;
  int64_t partialBytesPerTile = 0, valueBytesPerTensor = 0;
  /// Whole-step reductions' rows (docs/abi.md, "Whole-step reductions"):
  /// the bench's step is one launch, so its tensors are the step's.
  int64_t stepPartialBytesPerTensor = 0;
  std::vector<qopt_table_info> tables;   ///< codebook tables, in order
  std::vector<std::string> tableStates;  ///< the state each table serves
  std::string binaryPath, binaryFormat;  ///< what the bench loads itself
  explicit Spec(const std::string &manifestPath);
  ~Spec();
  Spec(const Spec &) = delete;
  Spec &operator=(const Spec &) = delete;
  /// Bytes one step must move: every stream read once, each written stream
  /// written once (numerics.md §4's accounting, from the manifest's streams).
  uint64_t bytesMoved(const std::vector<int64_t> &numels) const;
  /// Bytes the streams occupy (allocation footprint).
  uint64_t footprint(const std::vector<int64_t> &numels) const;
  /// "p(bf16,rw) p.ecc(int8,rw) ..." for logs.
  std::string streamSummary() const;
};

/// bitsandbytes' dynamic maps (signed for a state named m-like, unsigned for
/// v-like), one per manifest table, as the GPU tests give them.
std::vector<std::vector<float>> codebookTables(const Spec &spec);

/// Runs fn(i) for i in [0, n) on up to `threads` threads (0: hardware).
void parallelFor(size_t n, const std::function<void(size_t)> &fn, unsigned threads = 0);

/// Deterministic fast RNG (splitmix64 seeding a xoshiro256**).
struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform(); ///< [0, 1)
  float normal();   ///< standard normal (Box-Muller, float64 inside)
};
uint64_t mix(uint64_t a, uint64_t b);

/// IEEE round-to-nearest-even float32 -> bf16 / f16 bits.
uint16_t toBF16(float x);
uint16_t toF16(float x);

/// Short ISO date (UTC) and time.
std::string utcDate();
std::string utcDateTime();

/// One allocation holding every stream of a tensor list, each stream at a
/// 256-byte-aligned offset (streams never overlap; each lies inside the
/// allocation, as the runtime's checks want).
struct Arena {
  DeviceMem mem;
  size_t numStreams = 0;
  std::vector<cu::CUdeviceptr> ptr; ///< [tensor * numStreams + stream]
  std::vector<uint64_t> bytes;      ///< bytes of each stream
  std::vector<void *> voidPtrs() const;
};
Arena allocateArena(const Spec &spec, const std::vector<int64_t> &numels);

/// The *.manifest.json files of a directory, sorted.
std::vector<std::string> listManifests(const std::string &dir);

} // namespace qopt::bench

#endif // QOPT_BENCH_BENCHCOMMON_H

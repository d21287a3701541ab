//===- CudaDriver.h - The CUDA driver API, loaded with dlopen -------------===//
//
// The few driver types, constants and functions the runtime uses, declared
// here so the library builds without CUDA headers. libcuda.so.1 is opened on
// first use (QOPT_CUDA_LIBRARY overrides the path) and every symbol is resolved
// once; a missing library or symbol becomes QOPT_ERROR_NO_DRIVER with the
// reason. Every call goes through check(), which turns a CUresult into an
// Error naming the call.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_CUDADRIVER_H
#define QOPT_RUNTIME_SRC_CUDADRIVER_H

#include <cstddef>
#include <string>

namespace qopt::rt::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;

// Values from cuda.h (stable across driver versions).
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;
constexpr unsigned CU_MEMORYTYPE_HOST = 1;
constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
constexpr unsigned CU_MEMORYTYPE_ARRAY = 3;
constexpr unsigned CU_MEMORYTYPE_UNIFIED = 4;
constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr int CU_JIT_LOG_VERBOSE = 12;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;
constexpr int CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;

/// The resolved entry points. Required ones are never null once driver()
/// returned; optional ones (used by tests and tools) may be.
struct Driver {
  std::string library;    ///< the path given to dlopen
  int version = 0;        ///< cuDriverGetVersion
  bool hasDevice = false; ///< cuInit succeeded (false: CUDA_ERROR_NO_DEVICE)
  std::string initError;  ///< why cuInit failed, when !hasDevice

  // Required.
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int *) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char **) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;
  CUresult (*cuDeviceGetCount)(int *) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext *) = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *,
                                 void **) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule,
                                  const char *) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  /// A module's global by name (its manifest, docs/abi.md); a name the
  /// module lacks is CUDA_ERROR_NOT_FOUND.
  CUresult (*cuModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule,
                                const char *) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned) = nullptr;
  CUresult (*cuMemFreeHost)(void *) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t,
                                CUstream) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **) = nullptr;
  CUresult (*cuEventCreate)(CUevent *, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuPointerGetAttributes)(unsigned, int *, void **,
                                     CUdeviceptr) = nullptr;
  CUresult (*cuStreamIsCapturing)(CUstream, int *) = nullptr;

  // Optional (missing ones are skipped or reported where needed).
  CUresult (*cuThreadExchangeStreamCaptureMode)(int *) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*cuMemGetInfo)(size_t *, size_t *) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  /// Optional: a function's static shared memory, checked with the
  /// manifest's dynamic bytes against the device's limit at load.
  CUresult (*cuFuncGetAttribute)(int *, int, CUfunction) = nullptr;
  /// Optional: resident blocks per multiprocessor, for the launch's grid.
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction,
                                                          int, size_t) = nullptr;
  CUresult (*cuStreamCreate)(CUstream *, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph,
                                          unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
};

/// Loads the driver on the first call (thread-safe) and returns it; throws
/// Error(QOPT_ERROR_NO_DRIVER) with the dlopen/dlsym/cuInit reason on this and
/// every later call when that failed.
const Driver &driver();

/// "CUDA_ERROR_INVALID_VALUE (1): invalid argument".
std::string describe(CUresult result);

/// Throws Error(QOPT_ERROR_CUDA, "<call> failed: <describe(result)>") unless
/// result is CUDA_SUCCESS. `what` may add context ("while loading ...").
void check(CUresult result, const char *call, const std::string &what = {});

/// Throws Error(QOPT_ERROR_UNSUPPORTED) naming an optional entry point the
/// loaded driver lacks.
[[noreturn]] void throwMissing(const char *name);

/// Returns `fn`, or throws when the optional entry point is missing.
template <typename Fn> Fn require(Fn fn, const char *name) {
  if (!fn)
    throwMissing(name);
  return fn;
}

/// Puts the calling thread in relaxed stream-capture mode for a scope, so the
/// runtime's own queries and allocations (pointer attributes, staging
/// buffers: never part of a captured sequence) are not refused, and do not
/// invalidate a capture, while this or another thread captures a stream. The
/// previous mode is restored on exit.
class RelaxedCaptureScope {
public:
  RelaxedCaptureScope();
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope &) = delete;
  RelaxedCaptureScope &operator=(const RelaxedCaptureScope &) = delete;

private:
  int previous_ = 0;
  bool exchanged_ = false;
};

/// Makes a context current for a scope: pushes in the constructor, pops in
/// pop() (checked) or, on an exception path, in the destructor.
class ScopedContext {
public:
  explicit ScopedContext(CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext &) = delete;
  ScopedContext &operator=(const ScopedContext &) = delete;
  void pop();

private:
  bool pushed_ = false;
};

} // namespace qopt::rt::cu

/// Calls driver().fn(args...) and checks the result, naming fn.
#define QOPT_CU(fn, ...)                                                       \
  ::qopt::rt::cu::check(::qopt::rt::cu::driver().fn(__VA_ARGS__), #fn)

#endif // QOPT_RUNTIME_SRC_CUDADRIVER_H

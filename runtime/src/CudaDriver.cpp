//===- CudaDriver.cpp - dlopen'd CUDA driver API --------------------------===//
#include "CudaDriver.h"

#include "Error.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace qopt::rt::cu {

std::string describe(CUresult result, const Driver *d);

namespace {

/// The outcome of the one load attempt of this process.
struct LoadResult {
  Driver driver;
  qopt_status status = QOPT_SUCCESS;
  std::string message;
};

/// Resolves `names` in order (versioned name first) into `slot`.
template <typename Fn>
bool resolve(void *handle, Fn &slot, std::initializer_list<const char *> names) {
  for (const char *name : names) {
    if (void *sym = dlsym(handle, name)) {
      slot = reinterpret_cast<Fn>(sym);
      return true;
    }
  }
  return false;
}

LoadResult load() {
  LoadResult r;
  Driver &d = r.driver;
  const char *env = std::getenv("QOPT_CUDA_LIBRARY");
  d.library = (env && *env) ? env : "libcuda.so.1";
  // The handle is kept for the life of the process: the driver cannot be
  // unloaded safely while modules or contexts may exist.
  void *handle = dlopen(d.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    r.status = QOPT_ERROR_NO_DRIVER;
    r.message = cat("CUDA driver not available: cannot load ", d.library, " (",
                    why ? why : "unknown dlopen error",
                    "); the CUDA backend needs an NVIDIA driver, the host "
                    "backend works without one");
    return r;
  }

  std::string missing;
  auto need = [&](auto &slot, std::initializer_list<const char *> names) {
    if (!resolve(handle, slot, names)) {
      if (!missing.empty())
        missing += ", ";
      missing += *names.begin();
    }
  };
  need(d.cuInit, {"cuInit"});
  need(d.cuDriverGetVersion, {"cuDriverGetVersion"});
  need(d.cuGetErrorName, {"cuGetErrorName"});
  need(d.cuGetErrorString, {"cuGetErrorString"});
  need(d.cuDeviceGetCount, {"cuDeviceGetCount"});
  need(d.cuDeviceGet, {"cuDeviceGet"});
  need(d.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  need(d.cuDeviceGetName, {"cuDeviceGetName"});
  need(d.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  need(d.cuDevicePrimaryCtxRelease,
       {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  need(d.cuCtxPushCurrent, {"cuCtxPushCurrent_v2"});
  need(d.cuCtxPopCurrent, {"cuCtxPopCurrent_v2"});
  need(d.cuModuleLoadDataEx, {"cuModuleLoadDataEx"});
  need(d.cuModuleGetFunction, {"cuModuleGetFunction"});
  need(d.cuModuleUnload, {"cuModuleUnload"});
  need(d.cuModuleGetGlobal, {"cuModuleGetGlobal_v2"});
  need(d.cuFuncSetAttribute, {"cuFuncSetAttribute"});
  need(d.cuMemAlloc, {"cuMemAlloc_v2"});
  need(d.cuMemFree, {"cuMemFree_v2"});
  need(d.cuMemHostAlloc, {"cuMemHostAlloc"});
  need(d.cuMemFreeHost, {"cuMemFreeHost"});
  need(d.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
  need(d.cuLaunchKernel, {"cuLaunchKernel"});
  need(d.cuEventCreate, {"cuEventCreate"});
  need(d.cuEventDestroy, {"cuEventDestroy_v2"});
  need(d.cuEventRecord, {"cuEventRecord"});
  need(d.cuEventQuery, {"cuEventQuery"});
  need(d.cuEventSynchronize, {"cuEventSynchronize"});
  need(d.cuPointerGetAttributes, {"cuPointerGetAttributes"});
  need(d.cuStreamIsCapturing, {"cuStreamIsCapturing"});
  if (!missing.empty()) {
    r.status = QOPT_ERROR_NO_DRIVER;
    r.message = cat("CUDA driver ", d.library,
                    " is too old or not a CUDA driver: missing symbol(s) ",
                    missing);
    return r;
  }

  resolve(handle, d.cuThreadExchangeStreamCaptureMode,
          {"cuThreadExchangeStreamCaptureMode"});
  resolve(handle, d.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
  resolve(handle, d.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
  resolve(handle, d.cuMemsetD32, {"cuMemsetD32_v2"});
  resolve(handle, d.cuMemsetD8, {"cuMemsetD8_v2"});
  resolve(handle, d.cuMemGetInfo, {"cuMemGetInfo_v2"});
  resolve(handle, d.cuCtxSynchronize, {"cuCtxSynchronize"});
  resolve(handle, d.cuFuncGetAttribute, {"cuFuncGetAttribute"});
  resolve(handle, d.cuOccupancyMaxActiveBlocksPerMultiprocessor,
          {"cuOccupancyMaxActiveBlocksPerMultiprocessor"});
  resolve(handle, d.cuStreamCreate, {"cuStreamCreate"});
  resolve(handle, d.cuStreamDestroy, {"cuStreamDestroy_v2"});
  resolve(handle, d.cuStreamSynchronize, {"cuStreamSynchronize"});
  resolve(handle, d.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"});
  resolve(handle, d.cuStreamEndCapture, {"cuStreamEndCapture"});
  resolve(handle, d.cuGraphInstantiateWithFlags,
          {"cuGraphInstantiateWithFlags"});
  resolve(handle, d.cuGraphLaunch, {"cuGraphLaunch"});
  resolve(handle, d.cuGraphExecDestroy, {"cuGraphExecDestroy"});
  resolve(handle, d.cuGraphDestroy, {"cuGraphDestroy"});

  CUresult init = d.cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    // A driver without devices: device counts are 0, contexts fail cleanly.
    d.hasDevice = false;
  } else if (init != CUDA_SUCCESS) {
    r.status = QOPT_ERROR_NO_DRIVER;
    r.message = cat("CUDA driver ", d.library,
                    " loaded but cuInit(0) failed: ", describe(init, &d));
    return r;
  } else {
    d.hasDevice = true;
  }
  if (init == CUDA_ERROR_NO_DEVICE)
    d.initError = cat("cuInit(0) failed: ", describe(init, &d));
  CUresult v = d.cuDriverGetVersion(&d.version);
  if (v != CUDA_SUCCESS) {
    r.status = QOPT_ERROR_NO_DRIVER;
    r.message = cat("cuDriverGetVersion failed: ", describe(v, &d));
  }
  return r;
}

const LoadResult &loaded() {
  static const LoadResult result = load();
  return result;
}

} // namespace

std::string describe(CUresult result, const Driver *d) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (d && d->cuGetErrorName && d->cuGetErrorName(result, &name) != 0)
    name = nullptr;
  if (d && d->cuGetErrorString && d->cuGetErrorString(result, &text) != 0)
    text = nullptr;
  return cat(name ? name : "CUresult", " (", result, ")",
             text ? ": " : "", text ? text : "");
}

std::string describe(CUresult result) {
  const LoadResult &r = loaded();
  return describe(result, r.status == QOPT_SUCCESS ? &r.driver : nullptr);
}

const Driver &driver() {
  const LoadResult &r = loaded();
  if (r.status != QOPT_SUCCESS)
    throw Error(r.status, r.message);
  return r.driver;
}

void check(CUresult result, const char *call, const std::string &what) {
  if (result == CUDA_SUCCESS)
    return;
  constexpr CUresult kOutOfMemory = 2; // CUDA_ERROR_OUT_OF_MEMORY
  qopt_status status =
      result == kOutOfMemory ? QOPT_ERROR_OUT_OF_MEMORY : QOPT_ERROR_CUDA;
  if (what.empty())
    fail(status, call, " failed: ", describe(result));
  fail(status, call, " failed ", what, ": ", describe(result));
}

void throwMissing(const char *name) {
  fail(QOPT_ERROR_UNSUPPORTED, "the CUDA driver ", loaded().driver.library,
       " has no ", name);
}

RelaxedCaptureScope::RelaxedCaptureScope() {
  const Driver &d = driver();
  if (!d.cuThreadExchangeStreamCaptureMode)
    return; // drivers before CUDA 10.1: no capture modes to exchange
  previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  check(d.cuThreadExchangeStreamCaptureMode(&previous_),
        "cuThreadExchangeStreamCaptureMode");
  exchanged_ = true;
}

RelaxedCaptureScope::~RelaxedCaptureScope() {
  if (exchanged_) {
    int mode = previous_;
    // Restoring a mode this thread had cannot meaningfully fail.
    (void)driver().cuThreadExchangeStreamCaptureMode(&mode);
  }
}

ScopedContext::ScopedContext(CUcontext context) {
  QOPT_CU(cuCtxPushCurrent, context);
  pushed_ = true;
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    // Exception path: the error being thrown is the one to report.
    (void)driver().cuCtxPopCurrent(&popped);
  }
}

void ScopedContext::pop() {
  if (!pushed_)
    return;
  pushed_ = false;
  CUcontext popped = nullptr;
  QOPT_CU(cuCtxPopCurrent, &popped);
}

} // namespace qopt::rt::cu

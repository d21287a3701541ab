//===- GpuTestUtil.h - Device memory and GPU checks for the GPU suites ----===//
//
// What the GPU suites share: whether a GPU is usable (with the reason when
// not), a checked driver call, and a device buffer that frees itself. Device
// memory comes from the runtime's dlopen'd driver shim, so the suites build
// without a CUDA toolkit.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_GPU_GPUTESTUTIL_H
#define QOPT_TEST_GPU_GPUTESTUTIL_H

#include "CudaDriver.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <string>

namespace qopt::test {

namespace cu = qopt::rt::cu;

/// True when a CUDA device is usable; otherwise `why` says what is missing.
inline bool haveGpu(std::string &why) {
  int32_t n = 0;
  if (qopt_cuda_device_count(&n) != QOPT_SUCCESS) {
    why = std::string("no CUDA driver: ") + qopt_last_error();
    return false;
  }
  if (n == 0) {
    why = "the CUDA driver reports no device";
    return false;
  }
  return true;
}

/// Device memory of one stream, freed with the object.
struct DeviceBuffer {
  cu::CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  // A vector that grows moves its buffers; the old copies must not free them.
  DeviceBuffer(DeviceBuffer &&o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = 0; }
  ~DeviceBuffer() {
    if (ptr)
      (void)cu::driver().cuMemFree(ptr);
  }
};

/// One kernel loaded through the runtime from its manifest file (a registry
/// of that one manifest), freed with the object.
struct LoadedKernel {
  qopt_manifest *manifest = nullptr;
  qopt_registry *registry = nullptr;
  qopt_kernel *kernel = nullptr;
  qopt_manifest_info info{};
  LoadedKernel() = default;
  LoadedKernel(const LoadedKernel &) = delete;
  LoadedKernel &operator=(const LoadedKernel &) = delete;
  ~LoadedKernel() {
    qopt_kernel_destroy(kernel);
    qopt_registry_destroy(registry);
    qopt_manifest_destroy(manifest);
  }
};

/// Loads the kernel of `manifestPath` on `ctx` into `out`; a fatal test
/// failure (check HasFatalFailure) when any step fails.
inline void loadKernel(qopt_context *ctx, const std::string &manifestPath,
                       LoadedKernel &out) {
  ASSERT_EQ(qopt_manifest_load(manifestPath.c_str(), &out.manifest), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_registry_create(&out.registry), QOPT_SUCCESS);
  ASSERT_EQ(qopt_registry_add_manifest_file(out.registry, manifestPath.c_str()),
            QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_manifest_get_info(out.manifest, &out.info), QOPT_SUCCESS);
  ASSERT_EQ(qopt_kernel_create(ctx, out.registry, out.info.kernel, &out.kernel),
            QOPT_SUCCESS)
      << qopt_last_error();
}

} // namespace qopt::test

/// Asserts that a driver call succeeded, naming the call and the error.
#define CU_CHECK(call)                                                         \
  do {                                                                         \
    ::qopt::rt::cu::CUresult r_ = (call);                                      \
    ASSERT_EQ(r_, ::qopt::rt::cu::CUDA_SUCCESS)                                \
        << #call << ": " << ::qopt::rt::cu::describe(r_);                      \
  } while (0)

#endif // QOPT_TEST_GPU_GPUTESTUTIL_H

//===- Context.h - One backend on one device ------------------------------===//
#ifndef QOPT_RUNTIME_SRC_CONTEXT_H
#define QOPT_RUNTIME_SRC_CONTEXT_H

#include "Allocations.h"
#include "CudaDriver.h"
#include "qopt/runtime.h"

#include <memory>
#include <string>

namespace qopt::rt {

/// A backend bound to a device. CUDA contexts hold a reference to the
/// device's primary context for their lifetime.
class Context {
public:
  /// Throws NO_DRIVER / NO_DEVICE / CUDA errors for CUDA, INVALID_ARGUMENT
  /// for a host context with a device other than 0.
  static std::shared_ptr<Context> create(qopt_backend backend, int ordinal);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  qopt_backend backend() const { return backend_; }
  int ordinal() const { return ordinal_; }
  cu::CUcontext cuContext() const { return ctx_; }
  int ccMajor() const { return ccMajor_; }
  int ccMinor() const { return ccMinor_; }
  /// Compute capability as one number, e.g. 90 for 9.0.
  int ccNumber() const { return ccMajor_ * 10 + ccMinor_; }
  int multiprocessors() const { return multiprocessors_; }
  int maxSharedOptin() const { return maxSharedOptin_; }
  const std::string &arch() const { return arch_; }
  const std::string &name() const { return name_; }
  qopt_device_info info() const;
  /// The allocations the driver described for pointers on this context
  /// (Allocations.h): validation asks the driver only outside them.
  AllocationCache &allocations() const { return allocations_; }

private:
  Context() = default;
  qopt_backend backend_ = QOPT_BACKEND_HOST;
  int ordinal_ = 0;
  cu::CUdevice device_ = 0;
  cu::CUcontext ctx_ = nullptr;
  int ccMajor_ = 0, ccMinor_ = 0, multiprocessors_ = 1, maxSharedOptin_ = 0;
  std::string arch_ = "host", name_ = "host";
  mutable AllocationCache allocations_;
};

using ContextPtr = std::shared_ptr<Context>;

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_CONTEXT_H

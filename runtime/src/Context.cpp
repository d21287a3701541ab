//===- Context.cpp - One backend on one device ----------------------------===//
#include "Context.h"

#include "Error.h"

#include <cstring>
#include <string>
#include <thread>

namespace qopt::rt {

std::shared_ptr<Context> Context::create(qopt_backend backend, int ordinal) {
  std::shared_ptr<Context> c(new Context());
  c->backend_ = backend;
  c->ordinal_ = ordinal;
  if (backend == QOPT_BACKEND_HOST) {
    if (ordinal != 0)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "the host backend has one device, 0; "
           "got ", ordinal);
    unsigned n = std::thread::hardware_concurrency();
    c->multiprocessors_ = n ? static_cast<int>(n) : 1;
    return c;
  }
  if (backend != QOPT_BACKEND_CUDA)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "unknown backend ",
         static_cast<int>(backend));

  const cu::Driver &d = cu::driver();
  if (!d.hasDevice)
    fail(QOPT_ERROR_NO_DEVICE, "no CUDA device: ", d.initError);
  int count = 0;
  QOPT_CU(cuDeviceGetCount, &count);
  if (ordinal < 0 || ordinal >= count)
    fail(QOPT_ERROR_NO_DEVICE, "CUDA device ", ordinal, " does not exist (",
         count, " device", count == 1 ? "" : "s", ")");
  QOPT_CU(cuDeviceGet, &c->device_, ordinal);
  auto attr = [&](int a) {
    int v = 0;
    QOPT_CU(cuDeviceGetAttribute, &v, a, c->device_);
    return v;
  };
  c->ccMajor_ = attr(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  c->ccMinor_ = attr(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  c->multiprocessors_ = attr(cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  c->maxSharedOptin_ =
      attr(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (!attr(cu::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING))
    fail(QOPT_ERROR_UNSUPPORTED, "CUDA device ", ordinal,
         " lacks unified addressing, which pointer validation needs");
  char name[256] = {0};
  QOPT_CU(cuDeviceGetName, name, static_cast<int>(sizeof name - 1), c->device_);
  c->name_ = name;
  c->arch_ = cat("sm_", c->ccMajor_, c->ccMinor_);
  QOPT_CU(cuDevicePrimaryCtxRetain, &c->ctx_, c->device_);
  return c;
}

Context::~Context() {
  if (ctx_) {
    // A destructor cannot report; the primary context is released either way.
    (void)cu::driver().cuDevicePrimaryCtxRelease(device_);
  }
}

qopt_device_info Context::info() const {
  qopt_device_info i{};
  i.backend = backend_;
  i.ordinal = ordinal_;
  i.cc_major = ccMajor_;
  i.cc_minor = ccMinor_;
  i.multiprocessors = multiprocessors_;
  i.driver_version = backend_ == QOPT_BACKEND_CUDA ? cu::driver().version : 0;
  std::strncpy(i.arch, arch_.c_str(), sizeof i.arch - 1);
  std::strncpy(i.name, name_.c_str(), sizeof i.name - 1);
  return i;
}

} // namespace qopt::rt

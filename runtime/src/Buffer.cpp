//===- Buffer.cpp - Memory for a context's backend (qopt_buffer_*) --------===//
#include "Buffer.h"

#include "CudaDriver.h"
#include "Error.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace qopt::rt {

namespace {
constexpr size_t kAlignment = 256; // what cuMemAlloc guarantees

std::string hexPointer(const void *p) {
  std::ostringstream os;
  os << "0x" << std::hex << reinterpret_cast<uintptr_t>(p);
  return os.str();
}
} // namespace

Buffers::~Buffers() {
  // A destructor cannot report: every buffer is released, failures ignored.
  std::lock_guard<std::mutex> lock(mu_);
  if (live_.empty())
    return;
  if (ctx_->backend() == QOPT_BACKEND_CUDA) {
    // Kernels outlive this context handle and share its allocation cache:
    // each freed range is forgotten first, so no later validation accepts a
    // pointer into it from the cache (as Buffers::release does).
    try {
      for (const auto &[start, bytes] : live_)
        ctx_->allocations().forget(start, start + std::max<uint64_t>(bytes, 1));
    } catch (...) {
      ctx_->allocations().clear();
    }
    try {
      cu::ScopedContext scope(ctx_->cuContext());
      for (const auto &[start, bytes] : live_)
        (void)cu::driver().cuMemFree(static_cast<cu::CUdeviceptr>(start));
    } catch (...) {
    }
  } else {
    for (const auto &[start, bytes] : live_)
      std::free(reinterpret_cast<void *>(start));
  }
  live_.clear();
}

void *Buffers::alloc(uint64_t bytes) {
  if (bytes == 0)
    return nullptr;
  if (bytes > std::numeric_limits<size_t>::max() - kAlignment)
    fail(QOPT_ERROR_OUT_OF_MEMORY, "cannot allocate ", bytes,
         " bytes: more than the address space");
  void *p = nullptr;
  if (ctx_->backend() == QOPT_BACKEND_CUDA) {
    cu::ScopedContext scope(ctx_->cuContext());
    cu::CUdeviceptr dev = 0;
    // check() makes CUDA_ERROR_OUT_OF_MEMORY QOPT_ERROR_OUT_OF_MEMORY.
    cu::check(cu::driver().cuMemAlloc(&dev, static_cast<size_t>(bytes)),
              "cuMemAlloc", cat("of ", bytes, " bytes on CUDA device ",
                                ctx_->ordinal()));
    scope.pop();
    p = reinterpret_cast<void *>(static_cast<uintptr_t>(dev));
  } else {
    if (::posix_memalign(&p, kAlignment, static_cast<size_t>(bytes)) != 0 || !p)
      fail(QOPT_ERROR_OUT_OF_MEMORY, "cannot allocate ", bytes,
           " bytes of host memory");
  }
  std::lock_guard<std::mutex> lock(mu_);
  try {
    live_.emplace(reinterpret_cast<uintptr_t>(p), bytes);
  } catch (...) {
    // No room to record it: give it back rather than leak it.
    if (ctx_->backend() == QOPT_BACKEND_CUDA)
      (void)cu::driver().cuMemFree(
          static_cast<cu::CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
    else
      std::free(p);
    throw;
  }
  return p;
}

void Buffers::release(uintptr_t start) {
  auto it = live_.find(start);
  if (it == live_.end())
    return;
  uint64_t bytes = it->second;
  live_.erase(it);
  if (ctx_->backend() == QOPT_BACKEND_CUDA) {
    ctx_->allocations().forget(start, start + std::max<uint64_t>(bytes, 1));
    cu::ScopedContext scope(ctx_->cuContext());
    QOPT_CU(cuMemFree, static_cast<cu::CUdeviceptr>(start));
    scope.pop();
  } else {
    std::free(reinterpret_cast<void *>(start));
  }
}

void Buffers::free(void *pointer) {
  if (!pointer)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  uintptr_t start = reinterpret_cast<uintptr_t>(pointer);
  if (!live_.count(start))
    fail(QOPT_ERROR_INVALID_ARGUMENT, "qopt_buffer_free: pointer ",
         hexPointer(pointer), " is not a buffer qopt_buffer_alloc returned on "
         "this context (or it was freed already)");
  release(start);
}

void Buffers::checkRange(const void *p, uint64_t bytes,
                         const char *what) const {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = live_.upper_bound(a);
  if (it == live_.begin())
    fail(QOPT_ERROR_INVALID_ARGUMENT, what, " ", hexPointer(p),
         " is not inside a buffer qopt_buffer_alloc returned on this context");
  --it;
  uint64_t offset = a - it->first;
  if (offset >= it->second)
    fail(QOPT_ERROR_INVALID_ARGUMENT, what, " ", hexPointer(p),
         " is not inside a buffer qopt_buffer_alloc returned on this context");
  if (bytes > it->second - offset)
    fail(QOPT_ERROR_INVALID_ARGUMENT, what, " ", hexPointer(p), " + ", bytes,
         " bytes runs past the end of its buffer (", it->second,
         " bytes at ", hexPointer(reinterpret_cast<const void *>(it->first)),
         ", offset ", offset, ")");
}

void Buffers::upload(void *dst, const void *src, uint64_t bytes) {
  if (bytes == 0)
    return;
  if (!src)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "qopt_buffer_upload: src is NULL");
  std::lock_guard<std::mutex> lock(mu_);
  checkRange(dst, bytes, "qopt_buffer_upload: dst");
  if (ctx_->backend() == QOPT_BACKEND_CUDA) {
    const cu::Driver &d = cu::driver();
    cu::ScopedContext scope(ctx_->cuContext());
    cu::check(cu::require(d.cuCtxSynchronize, "cuCtxSynchronize")(),
              "cuCtxSynchronize", "before qopt_buffer_upload");
    cu::check(cu::require(d.cuMemcpyHtoD, "cuMemcpyHtoD")(
                  static_cast<cu::CUdeviceptr>(reinterpret_cast<uintptr_t>(dst)),
                  src, static_cast<size_t>(bytes)),
              "cuMemcpyHtoD");
    scope.pop();
  } else {
    std::memmove(dst, src, static_cast<size_t>(bytes));
  }
}

void Buffers::download(void *dst, const void *src, uint64_t bytes) {
  if (bytes == 0)
    return;
  if (!dst)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "qopt_buffer_download: dst is NULL");
  std::lock_guard<std::mutex> lock(mu_);
  checkRange(src, bytes, "qopt_buffer_download: src");
  if (ctx_->backend() == QOPT_BACKEND_CUDA) {
    const cu::Driver &d = cu::driver();
    cu::ScopedContext scope(ctx_->cuContext());
    cu::check(cu::require(d.cuCtxSynchronize, "cuCtxSynchronize")(),
              "cuCtxSynchronize", "before qopt_buffer_download");
    cu::check(cu::require(d.cuMemcpyDtoH, "cuMemcpyDtoH")(
                  dst,
                  static_cast<cu::CUdeviceptr>(reinterpret_cast<uintptr_t>(src)),
                  static_cast<size_t>(bytes)),
              "cuMemcpyDtoH");
    scope.pop();
  } else {
    std::memmove(dst, src, static_cast<size_t>(bytes));
  }
}

} // namespace qopt::rt

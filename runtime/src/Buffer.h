//===- Buffer.h - Memory for a context's backend (qopt_buffer_*) ----------===//
//
// The buffers qopt_buffer_alloc hands out on one context: device memory
// (cuMemAlloc) for CUDA, 256-byte-aligned host memory for host. The context
// keeps a table of them so that a free or a copy of a pointer it did not make,
// or of a range past the end of its buffer, is an error instead of a crash;
// those still allocated are freed with the context.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_BUFFER_H
#define QOPT_RUNTIME_SRC_BUFFER_H

#include "Context.h"

#include <cstdint>
#include <map>
#include <mutex>

namespace qopt::rt {

class Buffers {
public:
  explicit Buffers(ContextPtr ctx) : ctx_(std::move(ctx)) {}
  /// Frees every buffer still allocated (errors are not reported).
  ~Buffers();
  Buffers(const Buffers &) = delete;
  Buffers &operator=(const Buffers &) = delete;

  /// `bytes` of uninitialized memory, 256-byte aligned; nullptr for 0 bytes.
  /// OUT_OF_MEMORY when the host or the device has not enough.
  void *alloc(uint64_t bytes);
  /// Frees a pointer alloc returned (nullptr: nothing); INVALID_ARGUMENT for
  /// any other pointer.
  void free(void *pointer);
  /// Host `src` to `dst` inside a buffer (CUDA: after cuCtxSynchronize).
  void upload(void *dst, const void *src, uint64_t bytes);
  /// `src` inside a buffer to host `dst` (CUDA: after cuCtxSynchronize).
  void download(void *dst, const void *src, uint64_t bytes);

private:
  /// Throws INVALID_ARGUMENT, naming `what`, unless [p, p + bytes) lies inside
  /// one live buffer. Call with mu_ held.
  void checkRange(const void *p, uint64_t bytes, const char *what) const;
  void release(uintptr_t start);

  ContextPtr ctx_;
  std::mutex mu_;
  std::map<uintptr_t, uint64_t> live_; ///< start address -> bytes
};

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_BUFFER_H

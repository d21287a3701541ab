//===- Allocations.h - Driver facts about device allocations, cached ------===//
//
// Validation must know, for every buffer of a step, that it is CUDA memory of
// the context's device and lies inside one allocation. The driver answers for
// one pointer at a time (cuPointerGetAttributes) and reports the whole
// allocation's base and size with it, so the answer holds for every other
// buffer in that allocation: a context remembers it by allocation, and a
// buffer inside a remembered allocation is not asked about again. PyTorch's
// caching allocator carves every tensor from a few large segments, so a
// training loop whose gradients move every step (zero_grad(set_to_none=True))
// asks the driver only about segments it has not seen.
//
// What a cache cannot see: an allocation freed behind the runtime's back and
// its address range reused by a smaller one. qopt_buffer_free forgets its own
// buffers; qopt_context_forget_allocations drops everything (call it after
// releasing memory to the driver, e.g. torch.cuda.empty_cache()).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_ALLOCATIONS_H
#define QOPT_RUNTIME_SRC_ALLOCATIONS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace qopt::rt {

/// What cuPointerGetAttributes reports for a pointer: its allocation's range,
/// memory type and device.
struct AllocationFacts {
  uint64_t start = 0; ///< CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
  uint64_t size = 0;  ///< CU_POINTER_ATTRIBUTE_RANGE_SIZE
  unsigned memType = 0;
  bool managed = false;
  int ordinal = -1;
};

/// Allocations by start address; thread-safe.
class AllocationCache {
public:
  /// The remembered allocation that holds all of [begin, begin + bytes).
  bool lookup(uint64_t begin, uint64_t bytes, AllocationFacts *out) const;
  /// Remembers `f` (a range of nonzero size), dropping the remembered
  /// allocations it overlaps: the driver's newest answer wins.
  void insert(const AllocationFacts &f);
  /// Forgets every remembered allocation that overlaps [begin, end).
  void forget(uint64_t begin, uint64_t end);
  void clear();
  size_t size() const;
  /// Counts the calls of forget() and clear(): a conclusion drawn from the
  /// cache at one epoch (a list found valid) is stale at another.
  uint64_t epoch() const;

private:
  void eraseOverlapping(uint64_t begin, uint64_t end); // mu_ held
  mutable std::mutex mu_;
  std::map<uint64_t, AllocationFacts> byStart_;
  uint64_t epoch_ = 0;
};

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_ALLOCATIONS_H

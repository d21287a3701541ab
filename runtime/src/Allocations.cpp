//===- Allocations.cpp - Driver facts about device allocations, cached ----===//
#include "Allocations.h"

namespace qopt::rt {

bool AllocationCache::lookup(uint64_t begin, uint64_t bytes,
                             AllocationFacts *out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = byStart_.upper_bound(begin);
  if (it == byStart_.begin())
    return false;
  const AllocationFacts &f = std::prev(it)->second;
  // begin >= f.start here; both ends checked without overflow.
  if (begin - f.start >= f.size || bytes > f.size - (begin - f.start))
    return false;
  *out = f;
  return true;
}

void AllocationCache::eraseOverlapping(uint64_t begin, uint64_t end) {
  auto it = byStart_.upper_bound(begin);
  if (it != byStart_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.start + prev->second.size > begin)
      it = prev;
  }
  while (it != byStart_.end() && it->first < end)
    it = byStart_.erase(it);
}

void AllocationCache::insert(const AllocationFacts &f) {
  if (f.size == 0 || f.start + f.size < f.start)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  eraseOverlapping(f.start, f.start + f.size);
  byStart_.emplace(f.start, f);
}

void AllocationCache::forget(uint64_t begin, uint64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  eraseOverlapping(begin, end);
  ++epoch_;
}

void AllocationCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  byStart_.clear();
  ++epoch_;
}

uint64_t AllocationCache::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

size_t AllocationCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return byStart_.size();
}

} // namespace qopt::rt

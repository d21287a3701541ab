//===- Validation.cpp - A kernel's checks of a tensor list ----------------===//
//
// Everything qopt_validate promises, each fact checked once. A list is
// compared with the last one the kernel accepted (ListSignature):
//   - equal in every array: accepted as it is;
//   - equal but for some buffer pointers (a trainer's gradients, new every
//     step under zero_grad(set_to_none=True)): only the moved buffers are
//     checked (null, alignment, device memory), and the overlap check merges
//     them into the last list's buffers in address order;
//   - otherwise: every check on every buffer.
// The driver is asked about a buffer only outside the allocations it
// described before (Allocations.h).
//
//===----------------------------------------------------------------------===//
#include "Kernel.h"

#include "DType.h"
#include "Error.h"
#include "StateLayout.h"
#include "TileMap.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <sstream>

namespace qopt::rt {

namespace {

std::string hexPtr(uint64_t p) {
  std::ostringstream os;
  os << "0x" << std::hex << p;
  return os.str();
}

/// "tensor 'w' (#3)" or "tensor #3".
std::string tensorLabel(const qopt_tensor_list *t, size_t k) {
  if (t->names && t->names[k])
    return cat("tensor '", t->names[k], "' (#", k, ")");
  return cat("tensor #", k);
}

template <typename T>
bool sameArray(const std::vector<T> &v, const T *a, size_t n) {
  return v.size() == n && (n == 0 || std::memcmp(v.data(), a, n * sizeof(T)) == 0);
}

uint64_t address(const void *p) { return reinterpret_cast<uintptr_t>(p); }

} // namespace

//===----------------------------------------------------------------------===//
// ListSignature
//===----------------------------------------------------------------------===//

bool ListSignature::sameNumels(const qopt_tensor_list *t) const {
  return valid && sameArray(numels, t->numels, t->num_tensors);
}

bool ListSignature::sameButPointers(const qopt_tensor_list *t,
                                    const void *const *tbls, size_t numTables,
                                    const StepBuffers &extra,
                                    uint64_t epoch) const {
  size_t n = t->num_tensors * t->num_streams;
  return valid && numStreams == t->num_streams &&
         deviceUniforms == extra.deviceUniforms && counters == extra.counters &&
         allocationEpoch == epoch && data.size() == n &&
         sameArray(numels, t->numels, t->num_tensors) &&
         (t->bytes ? sameArray(bytes, t->bytes, n) : bytes.empty()) &&
         (t->dtypes ? sameArray(dtypes, t->dtypes, n) : dtypes.empty()) &&
         sameArray(tables, const_cast<const void **>(tbls), numTables);
}

bool ListSignature::matches(const qopt_tensor_list *t, const void *const *tbls,
                            size_t numTables, const StepBuffers &extra,
                            uint64_t epoch) const {
  return sameButPointers(t, tbls, numTables, extra, epoch) &&
         sameArray(data, const_cast<void **>(t->data),
                   t->num_tensors * t->num_streams);
}

void ListSignature::assign(const qopt_tensor_list *t, const void *const *tbls,
                           size_t numTables, const StepBuffers &extra,
                           uint64_t epoch) {
  size_t n = t->num_tensors * t->num_streams;
  numStreams = t->num_streams;
  allocationEpoch = epoch;
  numels.assign(t->numels, t->numels + t->num_tensors);
  data.assign(t->data, t->data + n);
  if (t->bytes)
    bytes.assign(t->bytes, t->bytes + n);
  else
    bytes.clear();
  if (t->dtypes)
    dtypes.assign(t->dtypes, t->dtypes + n);
  else
    dtypes.clear();
  tables.assign(tbls, tbls + numTables);
  deviceUniforms = extra.deviceUniforms;
  counters = extra.counters;
  valid = true;
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

/// The buffers of one list and how to name them: index tensor * S + stream
/// for a stream, then the tables, the device uniforms and the numerics
/// counters.
struct Kernel::ListView {
  const Manifest &m;
  const qopt_tensor_list *t;
  size_t S, numStreamBuffers, numTables;

  std::string label(uint32_t index) const {
    if (index < numStreamBuffers)
      return cat(tensorLabel(t, index / S), ", stream '",
                 m.streams[index % S].name, "'");
    if (index < numStreamBuffers + numTables)
      return cat("table '", m.tables[index - numStreamBuffers].name, "'");
    if (index == numStreamBuffers + numTables)
      return "uniforms";
    return "numerics counters";
  }
};

void Kernel::checkBuffers(const ListView &v, const void *const *tables,
                          const StepBuffers &extra,
                          ListSignature &sig) const {
  const Manifest &m = v.m;
  const qopt_tensor_list *t = v.t;
  const float *deviceUniforms = extra.deviceUniforms;
  sig.need.assign(v.numStreamBuffers + v.numTables + 2, 0);
  std::vector<Span> &spans = sig.spans;
  spans.clear();
  spans.reserve(sig.need.size());
  for (size_t k = 0; k < t->num_tensors; ++k) {
    int64_t numel = t->numels[k];
    if (numel < 0)
      fail(QOPT_ERROR_VALIDATION, tensorLabel(t, k), ": numel ", numel,
           " is negative");
    for (size_t j = 0; j < v.S; ++j) {
      const StreamDesc &s = m.streams[j];
      size_t idx = k * v.S + j;
      const void *p = t->data[idx];
      auto where = [&] { return v.label(static_cast<uint32_t>(idx)); };
      if (t->dtypes && t->dtypes[idx] != s.dtype) {
        // The caller's int32 is named only where it is a dtype.
        int32_t given = t->dtypes[idx];
        std::string name = given >= QOPT_DTYPE_F32 && given <= QOPT_DTYPE_INT16
                               ? dtypeName(static_cast<qopt_dtype>(given))
                               : cat("(unknown dtype ", given, ")");
        fail(QOPT_ERROR_VALIDATION, where(), ": dtype ", name,
             " given, the kernel expects ", dtypeName(s.dtype));
      }
      uint64_t count = static_cast<uint64_t>(streamCount(s, numel));
      if (count != 0 && dtypeSize(s.dtype) > UINT64_MAX / count)
        fail(QOPT_ERROR_VALIDATION, where(), ": ", numel, " elements (",
             count, " of ", dtypeName(s.dtype),
             ") overflow a 64-bit byte count");
      uint64_t need = streamBytes(s, numel);
      if (t->bytes && t->bytes[idx] < need) {
        std::string what =
            s.per == QOPT_PER_ELEMENT
                ? cat(numel, " elements")
                : cat("ceil(", numel, " / ", s.perSize, ") = ",
                      streamCount(s, numel),
                      s.per == QOPT_PER_GROUP ? " groups" : " blocks");
        fail(QOPT_ERROR_VALIDATION, where(), ": the buffer holds ",
             t->bytes[idx], " bytes, the step needs ", need, " (", what,
             " of ", dtypeName(s.dtype), ")");
      }
      sig.need[idx] = need;
      if (need == 0)
        continue; // an empty stream may be null or anything
      checkPointer(v, static_cast<uint32_t>(idx), p, need);
      spans.push_back({address(p), address(p) + need, static_cast<uint32_t>(idx),
                       s.access == QOPT_ACCESS_READ_WRITE});
    }
  }
  for (size_t i = 0; i < v.numTables; ++i) {
    const TableDesc &d = m.tables[i];
    const void *p = tables[i];
    if (!p)
      fail(QOPT_ERROR_VALIDATION, "table '", d.name, "': null pointer");
    if (address(p) % 4 != 0)
      fail(QOPT_ERROR_VALIDATION, "table '", d.name, "': pointer ",
           hexPtr(address(p)), " is not 4-byte aligned");
    uint64_t bytes = uint64_t(d.count) * sizeof(float);
    spans.push_back({address(p), address(p) + bytes,
                     static_cast<uint32_t>(v.numStreamBuffers + i), false});
  }
  // The combine of a kernel with step reductions writes their slots.
  if (deviceUniforms && m.numUniforms() > 0) {
    if (address(deviceUniforms) % 4 != 0)
      fail(QOPT_ERROR_VALIDATION, "uniforms: pointer ",
           hexPtr(address(deviceUniforms)), " is not 4-byte aligned");
    spans.push_back({address(deviceUniforms),
                     address(deviceUniforms) + m.numUniforms() * sizeof(float),
                     static_cast<uint32_t>(v.numStreamBuffers + v.numTables),
                     m.numStepReductions > 0});
  }
  // The kernel adds to its counters: written, 8-byte aligned int64s.
  if (extra.counters && takesCounters()) {
    const uint32_t index =
        static_cast<uint32_t>(v.numStreamBuffers + v.numTables + 1);
    if (address(extra.counters) % 8 != 0)
      fail(QOPT_ERROR_VALIDATION, v.label(index), ": pointer ",
           hexPtr(address(extra.counters)), " is not 8-byte aligned");
    spans.push_back({address(extra.counters),
                     address(extra.counters) +
                         QOPT_NUMERICS_COUNTERS * sizeof(int64_t),
                     index, true});
  }
  std::sort(spans.begin(), spans.end());
  checkOverlaps(v, spans);
  checkDeviceMemory(v, spans);
}

void Kernel::checkPointer(const ListView &v, uint32_t index, const void *p,
                          uint64_t need) const {
  if (!p)
    fail(QOPT_ERROR_VALIDATION, v.label(index), ": null pointer for ", need,
         " bytes");
  if (address(p) % 16 != 0)
    fail(QOPT_ERROR_VALIDATION, v.label(index), ": pointer ",
         hexPtr(address(p)), " is not 16-byte aligned (address mod 16 = ",
         address(p) % 16, ")");
}

void Kernel::checkMoved(const ListView &v, ListSignature &sig) const {
  const qopt_tensor_list *t = v.t;
  std::vector<Span> moved;
  std::vector<char> isMoved(sig.need.size(), 0);
  for (size_t idx = 0; idx < v.numStreamBuffers; ++idx) {
    if (t->data[idx] == sig.data[idx] || sig.need[idx] == 0)
      continue;
    const void *p = t->data[idx];
    checkPointer(v, static_cast<uint32_t>(idx), p, sig.need[idx]);
    isMoved[idx] = 1;
    moved.push_back({address(p), address(p) + sig.need[idx],
                     static_cast<uint32_t>(idx),
                     v.m.streams[idx % v.S].access == QOPT_ACCESS_READ_WRITE});
  }
  std::sort(moved.begin(), moved.end());
  std::vector<Span> merged;
  merged.reserve(sig.spans.size());
  auto kept = [&](const Span &s) { return !isMoved[s.index]; };
  auto next = std::find_if(sig.spans.begin(), sig.spans.end(), kept);
  for (const Span &s : moved) {
    while (next != sig.spans.end() && *next < s) {
      merged.push_back(*next);
      next = std::find_if(next + 1, sig.spans.end(), kept);
    }
    merged.push_back(s);
  }
  for (; next != sig.spans.end(); next = std::find_if(next + 1, sig.spans.end(), kept))
    merged.push_back(*next);
  checkOverlaps(v, merged);
  checkDeviceMemory(v, moved);
  sig.spans = std::move(merged);
}

void Kernel::checkOverlaps(const ListView &v,
                           const std::vector<Span> &sorted) const {
  // Any pair where one side is written overlaps. In address order, the span
  // reaching furthest (and the written one reaching furthest) so far is
  // enough to find one such pair if any exists.
  const Span *far = nullptr, *farWritten = nullptr;
  for (const Span &e : sorted) {
    const Span *other = nullptr;
    if (farWritten && farWritten->end > e.begin)
      other = farWritten;
    else if (e.written && far && far->end > e.begin)
      other = far;
    if (other)
      fail(QOPT_ERROR_VALIDATION, "overlapping buffers: ", v.label(e.index),
           " [", hexPtr(e.begin), ", +", e.end - e.begin, " bytes) overlaps ",
           v.label(other->index), " [", hexPtr(other->begin), ", +",
           other->end - other->begin, " bytes)",
           e.written && other->written ? "; both are written"
                                       : "; one of them is written");
    if (!far || e.end > far->end)
      far = &e;
    if (e.written && (!farWritten || e.end > farWritten->end))
      farWritten = &e;
  }
}

void Kernel::checkDeviceMemory(const ListView &v,
                               const std::vector<Span> &sorted) const {
  // CUDA: every buffer must be device (or managed) memory of this device and
  // lie inside its allocation. In address order most buffers lie in the
  // allocation of the one before them.
  if (ctx_->backend() != QOPT_BACKEND_CUDA || sorted.empty())
    return;
  AllocationCache &known = ctx_->allocations();
  std::optional<cu::RelaxedCaptureScope> relaxed;
  std::optional<cu::ScopedContext> scope;
  AllocationFacts last;
  for (const Span &e : sorted) {
    uint64_t bytes = e.end - e.begin;
    AllocationFacts f;
    if (last.size && e.begin >= last.start && e.begin - last.start < last.size &&
        bytes <= last.size - (e.begin - last.start)) {
      f = last;
    } else if (!known.lookup(e.begin, bytes, &f)) {
      if (!scope) {
        relaxed.emplace();
        scope.emplace(ctx_->cuContext());
      }
      cu::CUdeviceptr start = 0;
      size_t size = 0;
      unsigned managed = 0;
      int attrs[] = {cu::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                     cu::CU_POINTER_ATTRIBUTE_IS_MANAGED,
                     cu::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                     cu::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                     cu::CU_POINTER_ATTRIBUTE_RANGE_SIZE};
      void *data[] = {&f.memType, &managed, &f.ordinal, &start, &size};
      cu::check(cu::driver().cuPointerGetAttributes(5, attrs, data, e.begin),
                "cuPointerGetAttributes", cat("for ", v.label(e.index)));
      f.managed = managed != 0;
      f.start = start;
      f.size = size;
      if (f.memType != 0 && (f.managed || f.memType != cu::CU_MEMORYTYPE_HOST))
        known.insert(f);
    }
    if (f.memType == 0)
      fail(QOPT_ERROR_VALIDATION, v.label(e.index), ": pointer ",
           hexPtr(e.begin), " is not CUDA memory (a host pointer, or freed?)");
    if (!f.managed && f.memType == cu::CU_MEMORYTYPE_HOST)
      fail(QOPT_ERROR_VALIDATION, v.label(e.index), ": pointer ",
           hexPtr(e.begin), " is host memory, not device memory");
    if (!f.managed && f.ordinal != ctx_->ordinal())
      fail(QOPT_ERROR_VALIDATION, v.label(e.index), ": pointer ",
           hexPtr(e.begin), " is on device ", f.ordinal,
           ", the kernel runs on device ", ctx_->ordinal());
    if (f.start != 0 && f.size != 0 && e.end > f.start + f.size)
      fail(QOPT_ERROR_VALIDATION, v.label(e.index), ": ", bytes,
           " bytes from ", hexPtr(e.begin),
           " run past the end of its allocation (", f.size, " bytes from ",
           hexPtr(f.start), ") by ", e.end - (f.start + f.size), " bytes");
    last = f;
  }
  if (scope)
    scope->pop();
}

std::string Kernel::bufferLabel(const qopt_tensor_list *t,
                                uint32_t index) const {
  const Manifest &m = *manifest_;
  const size_t S = m.streams.size();
  ListView v{m, t, S, t->num_tensors * S, m.tables.size()};
  return v.label(index);
}

bool Kernel::isCounters(const qopt_tensor_list *t, uint32_t index) const {
  const Manifest &m = *manifest_;
  return index == t->num_tensors * m.streams.size() + m.tables.size() + 1;
}

namespace {
/// Versions of accepted lists, unique across the kernels of the process.
std::atomic<uint64_t> gListVersions{0};
} // namespace

CheckedListPtr Kernel::validate(const qopt_tensor_list *t,
                                const void *const *tables, size_t numTables,
                                const StepBuffers &extra,
                                uint64_t &version) const {
  return validate(t, tables, numTables, extra, &version);
}

void Kernel::spans(uint64_t version, const qopt_tensor_list *t,
                   const void *const *tables, size_t numTables,
                   const StepBuffers &extra, std::vector<Span> &out) const {
  std::lock_guard<std::mutex> lock(listMu_);
  if (lastList_.valid && listVersion_ == version) {
    out = lastList_.spans;
    return;
  }
  // Another thread's list replaced this one since: the checks again, on a
  // signature of their own (they pass: validate accepted the list).
  StepBuffers e = extra;
  if (!takesCounters())
    e.counters = nullptr;
  ListSignature sig;
  const size_t S = manifest_->streams.size();
  checkBuffers(ListView{*manifest_, t, S, t->num_tensors * S, numTables},
               tables, e, sig);
  out = std::move(sig.spans);
}

CheckedListPtr Kernel::validate(const qopt_tensor_list *t,
                                const void *const *tables, size_t numTables,
                                const StepBuffers &given,
                                uint64_t *versionOut) const {
  const Manifest &m = *manifest_;
  if (!t)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "tensor list is NULL");
  const size_t S = m.streams.size();
  auto streamNames = [&] {
    std::string s;
    for (const StreamDesc &d : m.streams)
      s += (s.empty() ? "" : ", ") + d.name;
    return s;
  };
  if (t->num_streams != S)
    fail(QOPT_ERROR_VALIDATION, "wrong stream count: the tensor list has ",
         t->num_streams, " stream pointers per tensor, kernel '", m.kernel,
         "' takes ", S, " (", streamNames(), ")");
  checkTensorCount(t->num_tensors);
  if (t->num_tensors && (!t->numels || !t->data))
    fail(QOPT_ERROR_INVALID_ARGUMENT, "tensor list of ", t->num_tensors,
         " tensors has NULL ", !t->numels ? "numels" : "data");
  if (numTables != m.tables.size())
    fail(QOPT_ERROR_VALIDATION, "wrong table count: kernel '", m.kernel,
         "' takes ", m.tables.size(), " codebook table(s), got ", numTables);
  if (numTables && !tables)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "tables is NULL but num_tables is ",
         numTables);

  // The epoch is read before the checks: a forget() while they run makes the
  // next call check again. One list at a time per kernel: a second thread
  // validating for the same kernel waits.
  // A kernel without counters ignores the pointer.
  StepBuffers extra = given;
  if (!takesCounters())
    extra.counters = nullptr;
  const uint64_t epoch = ctx_->allocations().epoch();
  std::lock_guard<std::mutex> lock(listMu_);
  if (lastList_.matches(t, tables, numTables, extra, epoch)) {
    if (versionOut)
      *versionOut = listVersion_;
    return lastChecked_;
  }
  ListView v{m, t, S, t->num_tensors * S, numTables};
  try {
    if (lastList_.sameButPointers(t, tables, numTables, extra, epoch))
      checkMoved(v, lastList_);
    else
      checkBuffers(v, tables, extra, lastList_);
  } catch (...) {
    lastList_.valid = false; // its spans may be half rebuilt
    throw;
  }

  // The tiles depend on the numels only: a list that moved buffers keeps the
  // last list's tile map.
  if (!lastChecked_ || !lastList_.sameNumels(t)) {
    auto c = std::make_shared<CheckedList>();
    c->firstTile.resize(t->num_tensors);
    c->numTiles = computeFirstTiles(t->numels, t->num_tensors,
                                    m.launch.tile_elements, c->firstTile.data());
    c->tileGeneration = ++tileGenerations_;
    lastChecked_ = std::move(c);
  }
  lastList_.assign(t, tables, numTables, extra, epoch);
  listVersion_ = ++gListVersions;
  if (versionOut)
    *versionOut = listVersion_;
  return lastChecked_;
}

} // namespace qopt::rt

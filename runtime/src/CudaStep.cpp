//===- CudaStep.cpp - A kernel's steps on CUDA: staging buffers, launches -===//
//
// A CUDA step writes its descriptor table, tile map and uniforms into a
// pinned staging buffer, uploads them with one copy on the step's stream and
// launches the phases and the step; a buffer is reused once an event says its
// step finished (never waited for in the normal case), and a buffer a graph
// captured is the graph's for the kernel's life. A kernel with reductions'
// workspace lies in the same buffer (device only), and so do the rows of a
// step with step reductions, in the staging buffer of its first launch.
//
//===----------------------------------------------------------------------===//
#include "Kernel.h"

#include "Error.h"
#include "TileMap.h"

#include <algorithm>
#include <cstring>

namespace qopt::rt {

namespace {

/// Uncaptured staging slots per kernel before a step waits for the oldest.
constexpr size_t kMaxSlots = 16;

size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

/// The work counters of a kernel with tile claims (docs/abi.md): two int64.
constexpr size_t kWorkCounterBytes = 16;

/// The layout of one step's staging buffer: the work counters (every slot
/// has them, at offset 0 whatever the list, so that they stay zero when the
/// slot is reused for another list), uniforms, descriptors, tile map (what
/// is uploaded, up to `uploadEnd`), then a kernel with reductions' workspace
/// (device only): the chunk partials, the per-tensor values and, in the
/// first launch of a step with step reductions, the step's rows.
struct StagingLayout {
  size_t uniformOffset = kWorkCounterBytes;
  size_t uniformBytes = 0; ///< num_uniforms * 4
  size_t descOffset = 0;
  size_t descBytes = 0;
  size_t tileOffset = 0;
  size_t uploadEnd = 0;
  size_t partialsOffset = 0, valuesOffset = 0;
  size_t stepOffset = 0; ///< the step reductions' rows (the first launch's)
  size_t total = 0;
};

StagingLayout stagingLayout(const Manifest &m, size_t numTensors,
                            int64_t numTiles, size_t stepBytes = 0) {
  StagingLayout l;
  l.uniformBytes = m.numUniforms() * sizeof(float);
  l.descOffset = align16(l.uniformOffset + std::max<size_t>(l.uniformBytes, 16));
  l.descBytes = numTensors * static_cast<size_t>(m.launch.descriptor_bytes);
  l.tileOffset = align16(l.descOffset + l.descBytes);
  if (static_cast<uint64_t>(numTiles) > (SIZE_MAX - l.tileOffset) / 4)
    fail(QOPT_ERROR_INVALID_ARGUMENT, numTiles, " tiles do not fit in memory");
  l.uploadEnd = l.tileOffset + static_cast<size_t>(numTiles) * sizeof(int32_t);
  l.partialsOffset = align16(l.uploadEnd);
  l.valuesOffset = align16(
      l.partialsOffset +
      static_cast<size_t>(numTiles) * size_t(m.workspace.partialBytesPerTile));
  l.stepOffset = align16(
      l.valuesOffset + numTensors * size_t(m.workspace.valueBytesPerTensor));
  l.total = stepBytes ? l.stepOffset + stepBytes : l.stepOffset;
  return l;
}

} // namespace

Kernel::Slot Kernel::makeSlot(size_t bytes) {
  size_t cap = 4096;
  while (cap < bytes)
    cap *= 2;
  Slot s;
  try {
    QOPT_CU(cuMemAlloc, &s.dev, cap);
    QOPT_CU(cuMemHostAlloc, &s.host, cap, 0u);
    std::memset(s.host, 0, kWorkCounterBytes); // the work counters' zeros
    QOPT_CU(cuEventCreate, &s.done, cu::CU_EVENT_DISABLE_TIMING);
  } catch (...) {
    freeSlot(s);
    throw;
  }
  s.capacity = cap;
  return s;
}

void Kernel::reclaimSlot(Slot &s, size_t bytes) {
  if (s.pending) {
    QOPT_CU(cuEventSynchronize, s.done);
    s.pending = false;
  }
  if (s.capacity < bytes) {
    Slot fresh = makeSlot(bytes);
    freeSlot(s);
    s = fresh;
  }
}

void Kernel::freeSlot(Slot &s) {
  // Teardown: the first failure is not worth more than the others.
  const cu::Driver &d = cu::driver();
  if (s.done)
    (void)d.cuEventDestroy(s.done);
  if (s.host)
    (void)d.cuMemFreeHost(s.host);
  if (s.dev)
    (void)d.cuMemFree(s.dev);
  s = Slot();
}

bool Kernel::slotIdle(Slot &s) {
  if (s.captured)
    return false;
  if (!s.pending)
    return true;
  cu::CUresult r = cu::driver().cuEventQuery(s.done);
  if (r == cu::CUDA_SUCCESS) {
    s.pending = false;
    return true;
  }
  if (r == cu::CUDA_ERROR_NOT_READY)
    return false;
  cu::check(r, "cuEventQuery", "on a staging buffer's event");
  return false;
}

long Kernel::pickSlot(size_t bytes, bool capturing,
                      const std::function<int(const Slot &)> &holds) {
  // A slot held by a step between its phases, or owned by a graph, is
  // never picked.
  auto taken = [](const Slot &s) { return s.captured || s.busy; };
  long pick = -1;
  if (capturing) {
    // Capture may not allocate or query events, so it takes a slot known
    // to be idle (the spare every uncaptured step leaves).
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot &s = slots_[i];
      if (taken(s) || s.pending || s.capacity < bytes)
        continue;
      if (pick < 0 || holds(s) > holds(slots_[size_t(pick)]))
        pick = static_cast<long>(i);
    }
    if (pick < 0)
      fail(QOPT_ERROR_CAPTURE, "kernel '", manifest_->kernel, "': no idle "
           "staging buffer of ", bytes, " bytes reserved for stream capture; "
           "run one step of this tensor list outside capture first (warm-up)");
    return pick;
  }
  // The slots known to be idle first, then (only while none of them holds
  // this step's tables) those still marked in flight, whose events are
  // queried one by one: a steady loop asks the driver about one event.
  size_t uncaptured = 0;
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot &s = slots_[i];
    if (s.captured)
      continue;
    ++uncaptured;
    if (s.busy || s.pending || s.capacity < bytes || best == 2)
      continue;
    int h = holds(s);
    if (h > best) {
      best = h;
      pick = static_cast<long>(i);
    }
  }
  for (size_t i = 0; i < slots_.size() && best < 2; ++i) {
    Slot &s = slots_[i];
    if (taken(s) || !s.pending || s.capacity < bytes)
      continue;
    int h = holds(s);
    if (h > best && slotIdle(s)) {
      best = h;
      pick = static_cast<long>(i);
    }
  }
  if (pick < 0) {
    // Grow an idle slot that is too small, else add one, else wait.
    for (size_t i = 0; i < slots_.size() && pick < 0; ++i) {
      Slot &s = slots_[i];
      if (!taken(s) && (!s.pending || slotIdle(s))) {
        Slot fresh = makeSlot(bytes);
        freeSlot(s);
        s = fresh;
        pick = static_cast<long>(i);
      }
    }
  }
  if (pick < 0 && uncaptured < kMaxSlots) {
    slots_.push_back(makeSlot(bytes));
    ++uncaptured;
    pick = static_cast<long>(slots_.size() - 1);
  }
  if (pick < 0) {
    // Back-pressure: the host is kMaxSlots steps ahead of the device.
    for (size_t i = 0; i < slots_.size() && pick < 0; ++i) {
      Slot &s = slots_[i];
      if (taken(s))
        continue;
      reclaimSlot(s, bytes);
      pick = static_cast<long>(i);
    }
  }
  if (pick < 0)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel '", manifest_->kernel,
         "': every one of its ", kMaxSlots, " staging buffers is held by "
         "this step (the kernel is in too many launches of one step)");
  // Leave one idle slot of this size for a capture that may follow (a
  // capture may neither allocate nor wait). With every other slot in
  // flight and no room for another, wait for the oldest: the host then
  // runs at most kMaxSlots - 1 steps ahead, and a burst of steps followed
  // by a capture still finds its slot.
  bool spare = false;
  for (size_t i = 0; i < slots_.size() && !spare; ++i) {
    Slot &s = slots_[i];
    spare = long(i) != pick && !taken(s) && s.capacity >= bytes &&
            (!s.pending || slotIdle(s));
  }
  if (!spare && uncaptured < kMaxSlots) {
    slots_.push_back(makeSlot(bytes));
  } else if (!spare) {
    long oldest = -1;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot &s = slots_[i];
      if (long(i) == pick || taken(s))
        continue;
      if (oldest < 0 || s.sequence < slots_[oldest].sequence)
        oldest = static_cast<long>(i);
    }
    if (oldest >= 0) {
      reclaimSlot(slots_[static_cast<size_t>(oldest)], bytes);
    }
  }
  return pick;
}

void Kernel::uploadCuda(LaunchRun &r, const std::vector<float> *hostUniforms,
                        const StepBuffers &extra, size_t stepWorkspaceBytes) {
  const Manifest &m = *manifest_;
  const qopt_tensor_list *t = r.t;
  const CheckedList &c = *r.checked;
  cu::CUstream cuStream = static_cast<cu::CUstream>(r.stream);
  StagingLayout L =
      stagingLayout(m, t->num_tensors, c.numTiles, stepWorkspaceBytes);
  scratch_.resize(L.descBytes);
  buildDescriptors(m, t, c, scratch_.data());

  int capture = cu::CU_STREAM_CAPTURE_STATUS_NONE;
  cu::check(cu::driver().cuStreamIsCapturing(cuStream, &capture),
            "cuStreamIsCapturing");
  if (capture != cu::CU_STREAM_CAPTURE_STATUS_NONE &&
      capture != cu::CU_STREAM_CAPTURE_STATUS_ACTIVE)
    fail(QOPT_ERROR_CAPTURE, "the stream's capture sequence was invalidated "
         "by an earlier call; end it and capture again");
  r.capturing = capture == cu::CU_STREAM_CAPTURE_STATUS_ACTIVE;

  // What a slot already holds of this step's tables: 2, the descriptors and
  // the tile map (only the uniforms are uploaded); 1, the tile map (the
  // descriptors are uploaded, the tile map is not); 0, neither. The tile map
  // is the bulk of the tables (4 bytes a tile), the descriptors change
  // whenever a buffer moves.
  auto holds = [&](const Slot &s) {
    if (s.capacity < L.total || s.tileGeneration != c.tileGeneration ||
        s.numTensors != t->num_tensors)
      return 0;
    return s.descValid &&
                   std::memcmp(static_cast<unsigned char *>(s.host) +
                                   L.descOffset,
                               scratch_.data(), L.descBytes) == 0
               ? 2
               : 1;
  };
  r.slot = pickSlot(L.total, r.capturing, holds);
  Slot &s = slots_[static_cast<size_t>(r.slot)];
  s.busy = true;
  auto *host = static_cast<unsigned char *>(s.host);
  int held = holds(s);
  bool writeTiles = held < 1, writeDesc = held < 2;
  if (writeTiles) {
    fillTileMap(t->numels, c.firstTile.data(), t->num_tensors,
                m.launch.tile_elements,
                reinterpret_cast<int32_t *>(host + L.tileOffset));
    s.tileGeneration = c.tileGeneration;
    s.numTensors = t->num_tensors;
  }
  if (writeDesc) {
    std::memcpy(host + L.descOffset, scratch_.data(), L.descBytes);
    s.descValid = true;
  }
  bool writeUniforms = hostUniforms && L.uniformBytes > 0;
  if (writeUniforms)
    std::memcpy(host + L.uniformOffset, hostUniforms->data(), L.uniformBytes);
  // Every upload starts at the work counters (their pinned bytes are zero),
  // in stream order before the launch: a fresh slot's tables are written
  // with it (descValid and tileGeneration are set only with an upload), and a
  // launch that left them nonzero (one that never finished) does not carry
  // over to a step with an upload.
  size_t copyEnd = writeTiles      ? L.uploadEnd
                   : writeDesc     ? L.descOffset + L.descBytes
                   : writeUniforms ? L.uniformOffset + L.uniformBytes
                                   : 0;
  if (copyEnd > 0) {
    r.enqueued = true;
    cu::check(cu::driver().cuMemcpyHtoDAsync(s.dev, host, copyEnd, cuStream),
              "cuMemcpyHtoDAsync", "uploading the descriptor table");
  }
  LaunchArgs &a = r.args;
  a.workCounters = s.dev;
  a.descs = s.dev + L.descOffset;
  a.tileMap = s.dev + L.tileOffset;
  a.uniforms = hostUniforms ? s.dev + L.uniformOffset
                            : reinterpret_cast<uintptr_t>(extra.deviceUniforms);
  a.numerics = reinterpret_cast<uintptr_t>(extra.counters);
  a.partials = s.dev + L.partialsOffset;
  a.values = s.dev + L.valuesOffset;
  a.numTiles = c.numTiles;
  a.numTensors = static_cast<int64_t>(t->num_tensors);
  a.tables.clear();
  for (size_t i = 0; i < m.tables.size(); ++i)
    a.tables.push_back(reinterpret_cast<uintptr_t>(r.tables[i]));
  r.stepWorkspace = stepWorkspaceBytes ? s.dev + L.stepOffset : 0;
}

void Kernel::launchStep(LaunchRun &r) {
  const Manifest &m = *manifest_;
  int64_t numTiles = r.args.numTiles;
  if (numTiles == 0)
    return; // no tiles: the step has nothing to walk
  std::vector<void *> params = r.args.params(m.args);
  const qopt_launch_info &l = m.launch;
  unsigned grid =
      static_cast<unsigned>(qopt_launch_grid(&l, maxBlocks_, numTiles));
  // The block holds the producer warps besides the threads that compute the
  // tile: a kernel launched without them waits for copies nobody issues.
  int64_t threads = blockThreads(l);
  cu::check(cu::driver().cuLaunchKernel(
                function_, grid, 1, 1, static_cast<unsigned>(threads), 1, 1,
                static_cast<unsigned>(l.shared_bytes),
                static_cast<cu::CUstream>(r.stream), params.data(), nullptr),
            "cuLaunchKernel",
            cat("for kernel '", m.kernel, "' (", grid, " blocks of ", threads,
                " threads",
                l.producer_warps > 0
                    ? cat(" (", l.producer_warps, " producer warp",
                          l.producer_warps == 1 ? "" : "s", ")")
                    : std::string(),
                ", ", l.shared_bytes, " bytes of shared memory, ", numTiles,
                " tiles)"));
}

void Kernel::endCuda(LaunchRun &r, bool failed) {
  if (r.slot < 0)
    return;
  Slot &s = slots_[static_cast<size_t>(r.slot)];
  r.slot = -1;
  s.busy = false;
  cu::CUstream stream = static_cast<cu::CUstream>(r.stream);
  if (failed) {
    if (r.enqueued) {
      // The copy may still read the pinned buffer: fence it, or retire it
      // (a retired slot is never reused and is freed with the kernel).
      if (!r.capturing &&
          cu::driver().cuEventRecord(s.done, stream) == cu::CUDA_SUCCESS)
        s.pending = true;
      else
        s.captured = true;
    }
    s.descValid = false;
    s.tileGeneration = 0;
    return;
  }
  if (r.capturing) {
    s.captured = true; // the graph's copy node reads this pinned buffer
  } else {
    cu::check(cu::driver().cuEventRecord(s.done, stream), "cuEventRecord",
              "after the launch");
    s.pending = true;
    s.sequence = ++stepSequence_;
  }
}

void Kernel::stepCuda(const qopt_tensor_list *t, const CheckedList &c,
                      const std::vector<float> *hostUniforms,
                      const StepBuffers &extra, const void *const *tables,
                      void *stream) {
  if (c.numTiles == 0)
    return; // nothing to step; nothing launched
  LaunchRun r;
  r.t = t;
  r.checked = CheckedListPtr(CheckedListPtr(), &c); // not owned
  r.tables = tables;
  r.stream = stream;
  cu::RelaxedCaptureScope relaxed;
  cu::ScopedContext scope(ctx_->cuContext());
  try {
    uploadCuda(r, hostUniforms, extra, 0);
    launchPhases(r.args, static_cast<cu::CUstream>(stream), 0,
                 manifest_->phases.size());
    launchStep(r);
  } catch (...) {
    endCuda(r, true);
    throw;
  }
  endCuda(r, false);
  scope.pop();
}

} // namespace qopt::rt

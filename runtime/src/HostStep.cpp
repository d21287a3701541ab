//===- HostStep.cpp - A kernel's steps on the host backend ----------------===//
//
// The host backend runs a step to completion in the call: the descriptors and
// the tile map in host memory, the tiles split into contiguous ranges over
// the hardware threads. A kernel with reductions computes a tensor's in the
// range that holds its first tile, from the whole tensor, so its ranges end
// where tensors do (docs/abi.md, "Reductions").
//
//===----------------------------------------------------------------------===//
#include "Kernel.h"

#include "Error.h"
#include "TileMap.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>
#include <thread>

namespace qopt::rt {

void Kernel::forEachTileRange(
    const qopt_tensor_list *t, const CheckedList &c, const int32_t *tileMap,
    const std::function<void(int64_t, int64_t)> &fn) const {
  const Manifest &m = *manifest_;
  // Tiles are independent: split them into contiguous ranges over the
  // hardware threads (QOPT_HOST_THREADS overrides), at least kMinTiles tiles
  // and kMinElements elements per thread, so that a small list (many small
  // tensors: many tiles, few elements) does not pay for starting threads.
  constexpr int64_t kMinTiles = 16;
  constexpr int64_t kMinElements = int64_t(1) << 18;
  int64_t elements = 0;
  for (size_t k = 0; k < t->num_tensors; ++k)
    elements += t->numels[k];
  int64_t threads = static_cast<int64_t>(std::thread::hardware_concurrency());
  if (const char *env = std::getenv("QOPT_HOST_THREADS"))
    threads = std::max<int64_t>(1, std::atoll(env));
  threads = std::max<int64_t>(
      1, std::min({threads, c.numTiles / kMinTiles, elements / kMinElements}));
  int64_t per = (c.numTiles + threads - 1) / threads;
  // A kernel with reductions computes a tensor's before the first of its
  // tiles in a range, from the whole tensor: its ranges end where tensors do,
  // a range's end moved on to the end of the tensor it falls in.
  const int64_t tile = m.launch.tile_elements;
  auto rangeStart = [&](int64_t w) {
    int64_t b = std::min(c.numTiles, w * per);
    if (!m.reductions || b == c.numTiles)
      return b;
    size_t k = static_cast<size_t>(tileMap[static_cast<size_t>(b)]);
    if (c.firstTile[k] == b)
      return b;
    return std::min(c.numTiles,
                    c.firstTile[k] + (t->numels[k] + tile - 1) / tile);
  };
  // Every worker started is joined, whatever leaves this function: a
  // std::thread destroyed unjoined (an exception in between) would call
  // std::terminate and abort the caller's process.
  std::vector<std::thread> workers;
  struct JoinAll {
    std::vector<std::thread> &workers;
    ~JoinAll() {
      for (std::thread &worker : workers)
        if (worker.joinable())
          worker.join();
    }
  } joinAll{workers};
  workers.reserve(static_cast<size_t>(threads));
  for (int64_t w = 1; w < threads; ++w) {
    int64_t begin = rangeStart(w), end = rangeStart(w + 1);
    if (begin >= end)
      continue;
    try {
      workers.emplace_back([=, &fn] { fn(begin, end); });
    } catch (const std::system_error &) {
      fn(begin, end); // no thread to be had (EAGAIN): this one steps it
    }
  }
  fn(0, rangeStart(1));
}

void Kernel::stepHost(const qopt_tensor_list *t, const CheckedList &c,
                      const float *uniforms, int64_t *counters,
                      const void *const *tables) {
  const Manifest &m = *manifest_;
  if (!hostFn_)
    fail(QOPT_ERROR_UNSUPPORTED, "kernel '", m.kernel,
         "' has no host function");
  if (c.numTiles == 0)
    return;
  scratch_.resize(t->num_tensors * size_t(m.launch.descriptor_bytes));
  buildDescriptors(m, t, c, scratch_.data());
  std::vector<int32_t> tileMap(static_cast<size_t>(c.numTiles));
  fillTileMap(t->numels, c.firstTile.data(), t->num_tensors,
              m.launch.tile_elements, tileMap.data());
  std::vector<const float *> tablePtrs(m.tables.size());
  for (size_t i = 0; i < m.tables.size(); ++i)
    tablePtrs[i] = static_cast<const float *>(tables[i]);
  static const float kNoUniform = 0.0f;
  const float *u = uniforms ? uniforms : &kNoUniform;
  const float *const *tp = tablePtrs.empty() ? nullptr : tablePtrs.data();
  // A kernel with numerics counters takes them last (its function is a
  // qopt_host_counted_kernel_fn); they are added to atomically.
  const bool counted = takesCounters();
  forEachTileRange(t, c, tileMap.data(), [&](int64_t begin, int64_t end) {
    if (counted)
      reinterpret_cast<qopt_host_counted_kernel_fn>(hostFn_)(
          scratch_.data(), tileMap.data(), c.numTiles, u, tp, begin, end,
          counters);
    else
      hostFn_(scratch_.data(), tileMap.data(), c.numTiles, u, tp, begin, end);
  });
}

} // namespace qopt::rt

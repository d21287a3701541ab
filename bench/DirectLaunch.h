//===- DirectLaunch.h - qopt-bench's own launch path ----------------------===//
//
// The bench launches the kernels itself so that no host work sits between
// timed launches: a kernel module loaded from the manifest's binary, random
// device pools the buffer sets are filled from, each set's streams,
// descriptor table and tile map (docs/abi.md), the launch with the
// manifest's arguments, and CUDA-event timing of back-to-back enqueues.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_BENCH_DIRECTLAUNCH_H
#define QOPT_BENCH_DIRECTLAUNCH_H

#include "BenchCommon.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qopt::bench {

/// The threads of the step kernel's block, as the runtime launches it: the
/// threads_per_block that compute the tile and the producer warps after them
/// (docs/abi.md, "Kernel arguments").
inline int blockThreads(const qopt_launch_info &l) {
  return l.threads_per_block + 32 * l.producer_warps;
}

/// A kernel module the bench loads itself.
struct DirectKernel {
  cu::CUmodule module = nullptr;
  cu::CUfunction fn = nullptr;
  std::vector<cu::CUfunction> phaseFns; ///< spec.phases' entries
  std::vector<int> phaseOccupancy;       ///< their resident blocks per SM
  int regs = 0, localBytes = 0, staticSmem = 0, maxThreads = 0, binaryVersion = 0;
  int occupancyBlocks = 0; ///< resident blocks per SM at the manifest's block (blockThreads)
  /// `imagePath` overrides the manifest's binary (e.g. its PTX); `maxRegs`
  /// > 0 JIT-compiles that PTX with CU_JIT_MAX_REGISTERS (an experiment: what
  /// occupancy would buy; the kernels themselves are not changed).
  explicit DirectKernel(const Spec &spec, const std::string &imagePath = "", int maxRegs = 0) {
    const std::string path = imagePath.empty() ? spec.binaryPath : imagePath;
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw std::runtime_error("cannot read " + path);
    std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    image.push_back('\0'); // PTX must be NUL-terminated; harmless for the rest
    const cu::Driver &d = cu::driver();
    int jitOpt[1] = {0}; // CU_JIT_MAX_REGISTERS
    void *jitVal[1] = {reinterpret_cast<void *>(static_cast<uintptr_t>(maxRegs))};
    BCU(d.cuModuleLoadDataEx(&module, image.data(), maxRegs > 0 ? 1 : 0,
                             maxRegs > 0 ? jitOpt : nullptr, maxRegs > 0 ? jitVal : nullptr));
    BCU(d.cuModuleGetFunction(&fn, module, spec.info.entry));
    for (const Spec::Phase &p : spec.phases) {
      cu::CUfunction f = nullptr;
      BCU(d.cuModuleGetFunction(&f, module, p.entry.c_str()));
      phaseFns.push_back(f);
      int resident = 0;
      BCU(extra().cuOccupancyMaxActiveBlocksPerMultiprocessor(&resident, f, p.threadsPerBlock, 0));
      phaseOccupancy.push_back(std::max(resident, 1));
    }
    const DriverExtra &x = extra();
    BCU(x.cuFuncGetAttribute(&regs, kFuncNumRegs, fn));
    BCU(x.cuFuncGetAttribute(&localBytes, kFuncLocalSizeBytes, fn));
    BCU(x.cuFuncGetAttribute(&staticSmem, kFuncSharedSizeBytes, fn));
    BCU(x.cuFuncGetAttribute(&maxThreads, kFuncMaxThreadsPerBlock, fn));
    BCU(x.cuFuncGetAttribute(&binaryVersion, kFuncBinaryVersion, fn));
    int64_t dyn = spec.info.launch.shared_bytes;
    if (dyn > 0) // static + dynamic may pass 48 KiB (the runtime does the same)
      BCU(d.cuFuncSetAttribute(fn, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(dyn)));
    BCU(x.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &occupancyBlocks, fn, blockThreads(spec.info.launch), size_t(dyn)));
  }
  ~DirectKernel() {
    if (module)
      (void)cu::driver().cuModuleUnload(module);
  }
};

/// Random device pools the buffer sets are filled from (DtoD copies from
/// varying offsets: no host work per set, realistic values, never zeros).
class Pools {
public:
  static constexpr size_t kElems = size_t(16) << 20;
  /// role: 0 parameter (N(0, 0.02)), 1 gradient (N(0, 1e-3), 0.5% of
  /// elements x10..x100: heavy tails), 2 gradient of a realistic spread (scale
  /// log-uniform in [1e-4, 1e-1] per 4096 elements, 0.2% x10..x100, 5% of
  /// 768-element rows exactly zero).
  cu::CUdeviceptr get(int role, qopt_dtype dtype) {
    auto key = std::make_pair(role, int(dtype));
    auto it = pools_.find(key);
    if (it != pools_.end())
      return it->second.ptr;
    size_t esize = 0;
    BQ(qopt_dtype_size(dtype, &esize));
    std::vector<uint8_t> host(kElems * esize);
    const size_t chunk = 1 << 20;
    parallelFor(kElems / chunk, [&](size_t c) {
      Rng r(mix(0xb0b0 + role, c));
      for (size_t i = c * chunk; i < (c + 1) * chunk; ++i) {
        float v;
        if (role == 0) {
          v = 0.02f * r.normal();
        } else if (role == 2) {
          Rng blk(mix(0x5ca1e, i / 4096));
          Rng row(mix(0x0e0, i / 768));
          v = float(std::pow(10.0, -4.0 + 3.0 * blk.uniform())) * r.normal();
          if (r.uniform() < 0.002)
            v *= float(std::pow(10.0, 1.0 + r.uniform()));
          if (row.uniform() < 0.05)
            v = 0.0f;
        } else {
          v = 1e-3f * r.normal();
          if (r.uniform() < 0.005)
            v *= float(std::pow(10.0, 1.0 + r.uniform()));
        }
        switch (dtype) {
        case QOPT_DTYPE_BF16: {
          uint16_t b = toBF16(v);
          std::memcpy(&host[i * 2], &b, 2);
          break;
        }
        case QOPT_DTYPE_F16: {
          uint16_t b = toF16(v);
          std::memcpy(&host[i * 2], &b, 2);
          break;
        }
        case QOPT_DTYPE_F32:
          std::memcpy(&host[i * 4], &v, 4);
          break;
        default: // integer streams: random bytes
          for (size_t b = 0; b < esize; ++b)
            host[i * esize + b] = uint8_t(r.next());
        }
      }
    });
    DeviceMem m(host.size());
    BCU(cu::driver().cuMemcpyHtoD(m.ptr, host.data(), host.size()));
    // A pageable copy may return before its DMA ends, and the fills read the
    // pool on another stream: wait for it.
    BCU(cu::driver().cuCtxSynchronize());
    cu::CUdeviceptr p = m.ptr;
    pools_.emplace(key, std::move(m));
    return p;
  }
  size_t bytes(qopt_dtype dtype) const {
    size_t e = 0;
    qopt_dtype_size(dtype, &e);
    return kElems * e;
  }

private:
  std::map<std::pair<int, int>, DeviceMem> pools_;
};

/// One buffer set: every stream of every tensor of the list, its descriptor
/// table and tile map (docs/abi.md), ready to launch.
struct TensorSet {
  Arena arena;
  DeviceMem meta;
  /// work_counters: zero, and left zero by each launch (docs/abi.md); a
  /// set's launches run one at a time on the bench's stream.
  /// numerics_counters: QOPT_NUMERICS_COUNTERS int64s that the kernels add to (docs/abi.md).
  cu::CUdeviceptr descs = 0, tiles = 0, workCounters = 0, numericsCounters = 0;
  /// The reduction workspace of a kernel with phases: chunk partials and
  /// per-tensor values (docs/abi.md, "Reductions").
  DeviceMem workspace;
  cu::CUdeviceptr partials = 0, values = 0, stepPartials = 0;
  int64_t numTiles = 0, numTensors = 0;
  std::vector<void *> voidPtrs;
};

inline void fillSet(const Spec &spec, const std::vector<int64_t> &numels, TensorSet &set, Pools &pools,
             const std::vector<const float *> &hostTables, uint64_t seed, cu::CUstream stream,
             int gradRole = 1) {
  const cu::Driver &d = cu::driver();
  const size_t S = spec.streams.size();
  std::vector<qopt_buffer_layout> lay(S);
  for (size_t k = 0; k < numels.size(); ++k) {
    BQ(qopt_manifest_state_layout(spec.manifest, numels[k], hostTables.data(), hostTables.size(),
                                  lay.data(), lay.size()));
    for (size_t s = 0; s < S; ++s) {
      const qopt_buffer_layout &L = lay[s];
      cu::CUdeviceptr dst = set.arena.ptr[k * S + s];
      if (L.bytes != set.arena.bytes[k * S + s])
        throw std::runtime_error("layout and arena disagree on " + std::string(L.name));
      if (L.bytes == 0)
        continue;
      if (L.role == QOPT_ROLE_PARAM || L.role == QOPT_ROLE_GRAD) {
        cu::CUdeviceptr pool = pools.get(L.role == QOPT_ROLE_PARAM ? 0 : gradRole, L.dtype);
        size_t poolBytes = pools.bytes(L.dtype), half = poolBytes / 2;
        for (uint64_t done = 0, piece = 0; done < L.bytes; ++piece) {
          uint64_t len = std::min<uint64_t>(L.bytes - done, half);
          uint64_t off = (mix(seed, k * 64 + s * 8 + piece) % (half / 16)) * 16;
          BCU(extra().cuMemcpyDtoDAsync(dst + done, pool + off, len, stream));
          done += len;
        }
      } else {
        size_t esize = L.bytes / uint64_t(L.count);
        uint64_t bits = L.init == QOPT_INIT_FILL ? L.fill_bits : 0;
        if (L.init == QOPT_INIT_CODEBOOK_ZERO)
          throw std::runtime_error("codebook zero code without tables");
        if (esize == 1)
          BCU(d.cuMemsetD8(dst, uint8_t(bits), L.bytes));
        else if (esize == 2)
          BCU(extra().cuMemsetD16(dst, uint16_t(bits), L.bytes / 2));
        else
          BCU(d.cuMemsetD32(dst, uint32_t(bits), L.bytes / 4));
      }
    }
  }
  // Descriptors and tile map.
  const qopt_launch_info &launch = spec.info.launch;
  std::vector<int64_t> firstTile(numels.size());
  int64_t numTiles = 0;
  BQ(qopt_tile_map_build(numels.data(), numels.size(), launch.tile_elements, nullptr, nullptr, 0,
                         &numTiles));
  std::vector<int32_t> tileMap(size_t(std::max<int64_t>(numTiles, 1)));
  BQ(qopt_tile_map_build(numels.data(), numels.size(), launch.tile_elements, firstTile.data(),
                         tileMap.data(), tileMap.size(), &numTiles));
  const size_t descBytes = size_t(launch.descriptor_bytes) * numels.size();
  std::vector<uint8_t> desc(descBytes, 0);
  for (size_t k = 0; k < numels.size(); ++k) {
    uint8_t *p = desc.data() + k * size_t(launch.descriptor_bytes);
    std::memcpy(p, &numels[k], 8);
    std::memcpy(p + 8, &firstTile[k], 8);
    for (size_t s = 0; s < S; ++s) {
      uint64_t ptr = set.arena.ptr[k * S + s];
      std::memcpy(p + 16 + 8 * s, &ptr, 8);
    }
  }
  size_t tileOff = (descBytes + 255) / 256 * 256;
  size_t counterOff = (tileOff + tileMap.size() * 4 + 255) / 256 * 256;
  size_t numericsOff = counterOff + 256;
  set.meta = DeviceMem(numericsOff + 8 * QOPT_NUMERICS_COUNTERS);
  BCU(d.cuMemcpyHtoD(set.meta.ptr, desc.data(), descBytes));
  BCU(d.cuMemcpyHtoD(set.meta.ptr + tileOff, tileMap.data(), tileMap.size() * 4));
  BCU(d.cuMemsetD8(set.meta.ptr + counterOff, 0, numericsOff - counterOff + 8 * QOPT_NUMERICS_COUNTERS));
  set.descs = set.meta.ptr;
  set.tiles = set.meta.ptr + tileOff;
  set.workCounters = set.meta.ptr + counterOff;
  set.numericsCounters = set.meta.ptr + numericsOff;
  set.numTiles = numTiles;
  set.numTensors = int64_t(numels.size());
  if (!spec.phases.empty()) {
    size_t partialBytes = size_t(numTiles * spec.partialBytesPerTile + 255) / 256 * 256;
    size_t valueBytes = size_t(set.numTensors * spec.valueBytesPerTensor + 255) / 256 * 256;
    set.workspace = DeviceMem(partialBytes + valueBytes +
                              size_t(set.numTensors * spec.stepPartialBytesPerTensor));
    set.partials = set.workspace.ptr;
    set.values = set.workspace.ptr + partialBytes;
    set.stepPartials = set.values + valueBytes;
  }
  set.voidPtrs = set.arena.voidPtrs();
}

struct Launcher {
  const Spec &spec;
  const DirectKernel &k;
  std::vector<cu::CUdeviceptr> tables; // device tables in manifest order
  /// -1: the phases and the step; i < phases: only phase i; phases.size():
  /// only the step.
  int only = -1;
  void operator()(const TensorSet &set, cu::CUdeviceptr uniforms, unsigned grid,
                  cu::CUstream stream) const {
    cu::CUdeviceptr descs = set.descs, tiles = set.tiles, counters = set.workCounters;
    cu::CUdeviceptr numerics = set.numericsCounters;
    cu::CUdeviceptr partials = set.partials, values = set.values, rows = set.stepPartials;
    int64_t numTiles = set.numTiles, numTensors = set.numTensors;
    std::vector<cu::CUdeviceptr> tbl = tables;
    auto paramsOf = [&](const std::vector<std::string> &names) {
      std::vector<void *> params;
      for (const std::string &a : names) {
        if (a == "reduction_partials")
          params.push_back(&partials);
        else if (a == "reduction_values")
          params.push_back(&values);
        else if (a == "num_tensors" || a == "num_step_tensors")
          params.push_back(&numTensors);
        else if (a == "step_partials")
          params.push_back(&rows);
        else
          params.push_back(param(a, descs, tiles, numTiles, uniforms, counters, numerics, tbl));
      }
      return params;
    };
    // The phases first, on the same stream, as the runtime launches them: a
    // wave of the blocks that fit (the step's grid scaled by the two
    // occupancies), no more blocks than tiles or tensors.
    for (size_t i = 0; i < spec.phases.size(); ++i) {
      if (only >= 0 && size_t(only) != i)
        continue;
      const Spec::Phase &p = spec.phases[i];
      std::vector<void *> params = paramsOf(p.args);
      int64_t wave = int64_t(grid) * k.phaseOccupancy[i] / std::max(k.occupancyBlocks, 1);
      unsigned g = p.one ? 1u
                         : unsigned(std::max<int64_t>(
                               1, std::min<int64_t>(p.overTensors ? numTensors : numTiles, wave)));
      BCU(cu::driver().cuLaunchKernel(k.phaseFns[i], g, 1, 1, unsigned(p.threadsPerBlock), 1, 1, 0,
                                      stream, params.data(), nullptr));
    }
    if (only >= 0 && size_t(only) != spec.phases.size())
      return;
    std::vector<void *> params = paramsOf(spec.args);
    const qopt_launch_info &l = spec.info.launch;
    BCU(cu::driver().cuLaunchKernel(k.fn, grid, 1, 1, unsigned(blockThreads(l)), 1, 1,
                                    unsigned(l.shared_bytes), stream, params.data(), nullptr));
  }

  /// The address of argument `a`'s value among the step's arguments.
  void *param(const std::string &a, cu::CUdeviceptr &descs, cu::CUdeviceptr &tiles,
              int64_t &numTiles, cu::CUdeviceptr &uniforms, cu::CUdeviceptr &counters,
              cu::CUdeviceptr &numerics, std::vector<cu::CUdeviceptr> &tbl) const {
    if (a == "descriptors")
      return &descs;
    if (a == "tile_map")
      return &tiles;
    if (a == "num_tiles")
      return &numTiles;
    if (a == "uniforms")
      return &uniforms;
    if (a == "work_counters")
      return &counters;
    if (a == "numerics_counters")
      return &numerics;
    size_t i = 0;
    while (i < spec.tables.size() && spec.tables[i].name != a)
      ++i;
    if (i == spec.tables.size())
      throw std::runtime_error("unknown kernel argument '" + a + "'");
    return &tbl[i];
  }
};

/// Device buffer of a spec's uniforms at `step` (manifest defaults).
inline DeviceMem uniformsAt(const Spec &spec, int64_t step) {
  std::vector<float> u(std::max<size_t>(spec.info.num_uniforms, 1), 0.0f);
  BQ(qopt_manifest_evaluate_uniforms(spec.manifest, nullptr, 0, step, u.data(), u.size()));
  DeviceMem m(u.size() * 4);
  BCU(cu::driver().cuMemcpyHtoD(m.ptr, u.data(), u.size() * 4));
  return m;
}

/// Events around each of n enqueues; a large copy goes first so the host
/// queues every launch before the device reaches them (no launch gaps).
inline std::vector<double> timeEach(int n, const std::function<void(int)> &enqueue, cu::CUstream stream,
                             const DeviceMem &spacerA, const DeviceMem &spacerB) {
  const cu::Driver &d = cu::driver();
  std::vector<cu::CUevent> ev(2 * size_t(n));
  for (auto &e : ev)
    BCU(d.cuEventCreate(&e, 0));
  BCU(extra().cuMemcpyDtoDAsync(spacerB.ptr, spacerA.ptr, spacerA.bytes, stream));
  for (int i = 0; i < n; ++i) {
    BCU(d.cuEventRecord(ev[2 * i], stream));
    enqueue(i);
    BCU(d.cuEventRecord(ev[2 * i + 1], stream));
  }
  BCU(d.cuStreamSynchronize(stream));
  std::vector<double> ms(n);
  for (int i = 0; i < n; ++i) {
    float t = 0;
    BCU(extra().cuEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms[i] = t;
  }
  for (auto &e : ev)
    (void)d.cuEventDestroy(e);
  return ms;
}

inline std::string fmtSize(int64_t n) {
  if (n % (1 << 20) == 0)
    return std::to_string(n >> 20) + "Mi";
  return std::to_string(n);
}

/// Bytes of the first `maxElems` parameters of tensor 0 of set that are not
/// finite (bf16/f16/f32), a guard against timing NaN-filled garbage.
inline int64_t nonFiniteParams(const Spec &spec, const TensorSet &set, int64_t numel) {
  const StreamDesc &p = spec.streams[0];
  int64_t n = std::min<int64_t>(numel, 1 << 16);
  std::vector<uint8_t> h(size_t(n) * p.elementBytes);
  BCU(cu::driver().cuMemcpyDtoH(h.data(), set.arena.ptr[0], h.size()));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p.elementBytes == 2) {
      uint16_t v;
      std::memcpy(&v, &h[size_t(i) * 2], 2);
      bool isF16 = p.dtype == QOPT_DTYPE_F16;
      uint16_t expMask = isF16 ? 0x7c00 : 0x7f80;
      bad += (v & expMask) == expMask;
    } else {
      float v;
      std::memcpy(&v, &h[size_t(i) * 4], 4);
      bad += !std::isfinite(v);
    }
  }
  return bad;
}

} // namespace qopt::bench

#endif // QOPT_BENCH_DIRECTLAUNCH_H

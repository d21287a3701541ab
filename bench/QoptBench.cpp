//===- QoptBench.cpp - qopt-bench: every shipped kernel against the copy roof ===//
//
// For each manifest under --kernels (the fatbin subdirectory if present, else
// ptx), and for single tensors of 1, 16, 64 and 256 Mi parameters and the
// GPT-2 124M parameter list (one launch for the whole list):
//   * time of one launch: CUDA events around each launch, median of >= 20
//     timed launches after warm-up, inputs rotated over K >= 3 buffer sets
//     whose total footprint is at least 4x the L2 cache;
//   * effective GB/s = bytes the step must move (each stream read once, each
//     written stream written once, from the manifest's streams; numerics.md
//     §4) / time, and its fraction of a 1 GiB cuMemcpyDtoD measured in the
//     same run (before and after the kernels);
//   * registers, local memory and occupancy of each kernel from the driver;
//   * at 64 Mi: a sweep of the grid size (the kernels are persistent, any
//     grid is correct) and the time through the runtime's qopt_step (host
//     validation + upload included), to separate launch configuration and
//     runtime overhead from the kernel itself.
// The bench launches the kernels itself (module loaded from the manifest's
// binary, descriptors and tile map built per docs/abi.md) so that no host
// work sits between timed launches; a self-check first steps a small list
// both ways and requires every byte to agree with qopt_step's result.
//
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"
#include "DirectLaunch.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <dirent.h>

using namespace qopt::bench;
using json = nlohmann::json;

namespace {

struct Options {
  std::string kernels;
  std::vector<std::string> specs; // stems; empty = all
  std::vector<int64_t> sizesMi = {1, 16, 64, 256};
  bool gpt2 = true;
  bool sweep = true;
  /// The size whose grid the sweep varies ("64Mi", "256Mi", ...).
  std::string sweepAt = "64Mi";
  bool runtimePath = true;
  /// Experiments at 64 Mi and on the GPT-2 list instead of the standard run:
  /// the realistic-gradient pool, and the PTX JIT-compiled with register caps.
  bool experiments = false;
  /// CU_JIT_MAX_REGISTERS caps (like -maxrregcount, ptxas ignores them for
  /// kernels with .maxntid, which every qopt kernel has; kept for kernels
  /// without it). Empty by default.
  std::vector<int> maxRegs;
  /// Directory of experiment PTX files <stem>.<tag>.ptx (e.g. the shipped PTX
  /// with `.minnctapersm 2` added: launch bounds (256, 2)).
  std::string expPtxDir;
  int iters = 25;
  int warmupSteps = 3;
  std::string jsonOut = "qopt-bench.json";
  std::string csvOut = "qopt-bench.csv";
};

std::vector<std::string> splitComma(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty())
      out.push_back(item);
  return out;
}

void usage() {
  std::printf(
      "usage: qopt-bench [--kernels DIR] [--specs a,b] [--sizes 1,16,64,256] [--no-gpt2]\n"
      "                  [--no-sweep | --sweep-at 64] [--no-runtime] [--iters N]\n"
      "                  [--json FILE] [--csv FILE]\n"
      "                  [--experiments [--exp-ptx DIR] [--maxregs 128,96]]\n"
      "  DIR: build/kernels (its fatbin/ subdirectory is used if present, else ptx/)\n"
      "  A kernel with reductions (reduce pre-pass, finish[, combine], step) is also timed\n"
      "  one phase at a time on the same buffers and grids: 'phases alone' (ms, medians).\n");
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
#ifdef QOPT_BENCH_DEFAULT_KERNELS
  opt.kernels = QOPT_BENCH_DEFAULT_KERNELS;
#endif
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--kernels")
      opt.kernels = next();
    else if (a == "--specs")
      opt.specs = splitComma(next());
    else if (a == "--sizes") {
      opt.sizesMi.clear();
      for (const std::string &s : splitComma(next()))
        opt.sizesMi.push_back(std::stoll(s));
    } else if (a == "--no-gpt2")
      opt.gpt2 = false;
    else if (a == "--no-sweep")
      opt.sweep = false;
    else if (a == "--sweep-at") {
      // 256, 256Mi or gpt2: the case name the sizes loop gives it.
      std::string s = next();
      opt.sweepAt = s == "gpt2"                                  ? "gpt2-124M"
                    : s.size() > 2 && s.substr(s.size() - 2) == "Mi" ? s
                                                                    : s + "Mi";
    }
    else if (a == "--no-runtime")
      opt.runtimePath = false;
    else if (a == "--experiments")
      opt.experiments = true;
    else if (a == "--exp-ptx")
      opt.expPtxDir = next();
    else if (a == "--maxregs") {
      opt.maxRegs.clear();
      for (const std::string &s : splitComma(next()))
        opt.maxRegs.push_back(std::stoi(s));
    }
    else if (a == "--iters")
      opt.iters = std::max(20, std::stoi(next()));
    else if (a == "--json")
      opt.jsonOut = next();
    else if (a == "--csv")
      opt.csvOut = next();
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "qopt-bench: unknown option %s\n", a.c_str());
      usage();
      return 2;
    }
  }

  std::string why = gpuUnavailableReason();
  if (!why.empty()) {
    std::printf("qopt-bench: no GPU (%s); nothing to measure.\n", why.c_str());
    return 0;
  }

  try {
    DeviceSession dev;
    const cu::Driver &d = cu::driver();
    cu::CUstream stream = nullptr;
    BCU(d.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING));
    qopt_context *ctx = nullptr;
    BQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx));

    std::string dir = resolveKernelDir(opt.kernels, "flash_adamw");
    if (dir.empty()) {
      std::vector<std::string> any = listManifests(opt.kernels + "/fatbin");
      dir = !any.empty() ? opt.kernels + "/fatbin" : opt.kernels + "/ptx";
    }
    std::vector<std::string> manifests = listManifests(dir);
    if (manifests.empty())
      throw std::runtime_error("no *.manifest.json under " + dir);

    std::printf("qopt-bench %s on %s (sm_%d%d, %d SMs, L2 %d MiB, %.1f GiB, driver %d, "
                "theoretical %.0f GB/s)\nkernels: %s\n",
                utcDateTime().c_str(), dev.name.c_str(), dev.ccMajor, dev.ccMinor, dev.sms,
                dev.l2Bytes >> 20, double(dev.totalMem) / double(1ull << 30), dev.driverVersion,
                dev.theoreticalGBps(), dir.c_str());

    CopyRoof roofBefore = measureCopyRoof(stream);
    std::printf("copy roof (cuMemcpyDtoD 1 GiB, median of %d): %.3f ms, %.0f GB/s\n",
                roofBefore.iters, roofBefore.ms, roofBefore.gbps);
    // Spacer buffers: a 512 MiB copy ahead of each timed batch.
    DeviceMem spacerA(size_t(512) << 20), spacerB(size_t(512) << 20);
    BCU(d.cuMemsetD32(spacerA.ptr, 0, spacerA.bytes / 4));

    Pools pools;
    json out;
    out["tool"] = "qopt-bench";
    out["date"] = utcDateTime();
    out["device"] = {{"name", dev.name},
                     {"cc", std::to_string(dev.ccMajor) + "." + std::to_string(dev.ccMinor)},
                     {"sms", dev.sms},
                     {"l2_bytes", dev.l2Bytes},
                     {"total_mem_bytes", dev.totalMem},
                     {"sm_clock_khz", dev.smClockKHz},
                     {"mem_clock_khz", dev.memClockKHz},
                     {"bus_width_bits", dev.busWidthBits},
                     {"theoretical_gbps", dev.theoreticalGBps()},
                     {"max_threads_per_sm", dev.maxThreadsPerSM},
                     {"max_regs_per_sm", dev.maxRegsPerSM},
                     {"driver_version", dev.driverVersion}};
    out["kernel_dir"] = dir;
    out["method"] =
        "CUDA events around each launch; warm-up: 3 steps on every buffer set; timed: median of "
        ">= " + std::to_string(opt.iters) +
        " launches rotating over K >= 3 buffer sets with K * footprint >= 4 * L2; a 512 MiB copy "
        "is queued first so no launch waits for the host. Bytes: every stream read once, every "
        "written stream written once (manifest streams). Roof: cuMemcpyDtoD of 1 GiB, 2 * bytes / "
        "time, median of 20, before and after the kernels; fractions use the higher of the two.";
    json kernels = json::array();
    struct Row {
      std::string spec, kase;
      int64_t numel, tensors;
      uint64_t bytes;
      double bpp, ms, msMin, msMax, gbps;
      int sets, launches;
      unsigned grid;
    };
    std::vector<Row> rows;

    std::vector<std::pair<std::string, std::vector<int64_t>>> cases;
    for (int64_t mi : opt.sizesMi)
      cases.push_back({fmtSize(mi << 20), {mi << 20}});
    if (opt.gpt2) {
      std::vector<int64_t> g;
      for (const NamedShape &s : gpt2Shapes())
        g.push_back(s.numel());
      cases.push_back({"gpt2-124M", g});
    }
    if (opt.sweep &&
        std::none_of(cases.begin(), cases.end(),
                     [&](const auto &c) { return c.first == opt.sweepAt; }))
      std::fprintf(stderr, "qopt-bench: --sweep-at %s is not among the sizes run; no grid sweep\n",
                   opt.sweepAt.c_str());

    for (const std::string &mpath : manifests) {
      Spec spec(mpath);
      if (!opt.specs.empty() &&
          std::find(opt.specs.begin(), opt.specs.end(), spec.stem) == opt.specs.end())
        continue;
      DirectKernel k(spec);
      const qopt_launch_info &L = spec.info.launch;
      int warpsPerSM = k.occupancyBlocks * blockThreads(L) / 32; // producer warps too
      double occ = double(warpsPerSM) / double(dev.maxThreadsPerSM / 32);
      // The runtime's wave: the resident blocks (the manifest's suggestion
      // where the driver cannot say); a case's grid is qopt_launch_grid's.
      int64_t waveBlocks =
          dev.sms * (k.occupancyBlocks > 0 ? k.occupancyBlocks : L.suggested_blocks_per_sm);
      std::string producers =
          L.producer_warps > 0 ? " + " + std::to_string(L.producer_warps) + " producer warps" : "";
      std::printf("\n== %s (%s, %s) %s\n   %d regs, %d B local, %d B static smem, %d threads x "
                  "%d elems%s; %d resident blocks/SM (%d warps, %.0f%% occupancy) vs %d suggested\n",
                  spec.stem.c_str(), spec.info.kernel, spec.binaryFormat.c_str(),
                  spec.streamSummary().c_str(), k.regs, k.localBytes, k.staticSmem,
                  L.threads_per_block, L.elements_per_thread, producers.c_str(), k.occupancyBlocks,
                  warpsPerSM, 100 * occ, L.suggested_blocks_per_sm);
      std::fflush(stdout);

      std::vector<std::vector<float>> hostTablesData = codebookTables(spec);
      std::vector<const float *> hostTables;
      std::vector<DeviceMem> devTables;
      std::vector<cu::CUdeviceptr> devTablePtrs;
      for (const auto &t : hostTablesData) {
        hostTables.push_back(t.data());
        devTables.emplace_back(1024);
        BCU(d.cuMemcpyHtoD(devTables.back().ptr, t.data(), 1024));
        devTablePtrs.push_back(devTables.back().ptr);
      }
      std::vector<const void *> tableArgs;
      for (auto p : devTablePtrs)
        tableArgs.push_back(reinterpret_cast<const void *>(static_cast<uintptr_t>(p)));
      Launcher launch{spec, k, devTablePtrs};
      DeviceMem u1 = uniformsAt(spec, 1), u2 = uniformsAt(spec, 2), u3 = uniformsAt(spec, 3),
                uT = uniformsAt(spec, 1000);
      const cu::CUdeviceptr warm[3] = {u1.ptr, u2.ptr, u3.ptr};

      qopt_registry *registry = nullptr;
      qopt_kernel *rk = nullptr;
      BQ(qopt_registry_create(&registry));
      BQ(qopt_registry_add_manifest_file(registry, spec.path.c_str()));
      BQ(qopt_kernel_create(ctx, registry, spec.info.kernel, &rk));

      json kj;
      kj["spec"] = spec.stem;
      kj["kernel"] = spec.info.kernel;
      kj["binary"] = spec.binaryFormat;
      kj["streams"] = spec.streamSummary();
      kj["regs"] = k.regs;
      kj["local_bytes"] = k.localBytes;
      kj["static_smem"] = k.staticSmem;
      kj["binary_version"] = k.binaryVersion;
      kj["threads_per_block"] = L.threads_per_block;
      kj["producer_warps"] = L.producer_warps;
      kj["elements_per_thread"] = L.elements_per_thread;
      kj["suggested_blocks_per_sm"] = L.suggested_blocks_per_sm;
      kj["resident_blocks_per_sm"] = k.occupancyBlocks;
      kj["warps_per_sm"] = warpsPerSM;
      kj["occupancy"] = occ;
      kj["bytes_per_param"] = double(spec.bytesMoved({int64_t(1) << 20})) / double(1 << 20);

      // Self-check: the bench's own launch equals qopt_step, byte for byte.
      auto selfCheck = [&](const DirectKernel &dk, uint64_t &total) -> uint64_t {
        std::vector<int64_t> small = {70001, 3 * 4096 + 17, 4096, 31};
        TensorSet a, b;
        a.arena = allocateArena(spec, small);
        b.arena = allocateArena(spec, small);
        fillSet(spec, small, a, pools, hostTables, 77, stream);
        fillSet(spec, small, b, pools, hostTables, 77, stream);
        BCU(d.cuCtxSynchronize()); // memsets run on the legacy stream
        qopt_tensor_list list{};
        list.num_tensors = small.size();
        list.num_streams = spec.streams.size();
        list.numels = small.data();
        list.data = a.voidPtrs.data();
        Launcher la{spec, dk, devTablePtrs};
        for (int64_t step = 1; step <= 2; ++step) {
          BQ(qopt_step(rk, &list, nullptr, 0, step, tableArgs.data(), tableArgs.size(), stream));
          la(b, step == 1 ? u1.ptr : u2.ptr, unsigned(qopt_launch_grid(&L, waveBlocks, b.numTiles)),
             stream);
        }
        BCU(d.cuStreamSynchronize(stream));
        uint64_t differ = 0;
        total = 0;
        for (size_t i = 0; i < a.arena.ptr.size(); ++i) {
          std::vector<uint8_t> ha(a.arena.bytes[i]), hb(a.arena.bytes[i]);
          if (ha.empty())
            continue;
          BCU(d.cuMemcpyDtoH(ha.data(), a.arena.ptr[i], ha.size()));
          BCU(d.cuMemcpyDtoH(hb.data(), b.arena.ptr[i], hb.size()));
          total += ha.size();
          for (size_t j = 0; j < ha.size(); ++j)
            differ += ha[j] != hb[j];
        }
        return differ;
      };
      {
        uint64_t total = 0;
        uint64_t differ = selfCheck(k, total);
        kj["selfcheck"] = {{"bytes", total}, {"differ", differ}};
        std::printf("   self-check (bench launch vs qopt_step, 2 steps, 4 tensors): %s (%llu of "
                    "%llu bytes differ)\n",
                    differ == 0 ? "identical" : "MISMATCH", (unsigned long long)differ,
                    (unsigned long long)total);
        if (differ != 0)
          throw std::runtime_error("bench launch disagrees with qopt_step for " + spec.stem);
      }

      if (opt.experiments) {
        // Same buffer sets for every variant: the shipped binary on the default
        // and on the realistic gradient pool, the PTX JIT-compiled as is, and
        // the PTX JIT-compiled with each register cap.
        std::string ptx = opt.kernels + "/ptx/" + spec.stem + ".ptx";
        struct Variant {
          std::string name;
          std::unique_ptr<DirectKernel> k;
          bool realistic = false;
        };
        std::vector<Variant> variants;
        variants.push_back({"shipped", nullptr, false});
        variants.push_back({"shipped, realistic grads", nullptr, true});
        {
          std::ifstream probe(ptx);
          if (probe) {
            variants.push_back({"ptx jit", std::make_unique<DirectKernel>(spec, ptx, 0), false});
            for (int cap : opt.maxRegs)
              if (cap < k.regs)
                variants.push_back({"ptx jit maxreg " + std::to_string(cap),
                                    std::make_unique<DirectKernel>(spec, ptx, cap), false});
          }
          // Experiment PTX: <stem>.<tag>.ptx, sorted by tag; the first one is
          // also run on the realistic-gradient pool.
          if (!opt.expPtxDir.empty()) {
            std::vector<std::string> files;
            if (DIR *dd = opendir(opt.expPtxDir.c_str())) {
              while (dirent *e = readdir(dd)) {
                std::string n = e->d_name;
                if (n.rfind(spec.stem + ".", 0) == 0 && n.size() > 4 &&
                    n.compare(n.size() - 4, 4, ".ptx") == 0 &&
                    n.find('.', spec.stem.size() + 1) == n.size() - 4)
                  files.push_back(n);
              }
              closedir(dd);
            }
            std::sort(files.begin(), files.end());
            for (size_t f = 0; f < files.size(); ++f) {
              std::string tag = files[f].substr(spec.stem.size() + 1,
                                                files[f].size() - spec.stem.size() - 5);
              std::string path = opt.expPtxDir + "/" + files[f];
              variants.push_back({"ptx " + tag, std::make_unique<DirectKernel>(spec, path, 0),
                                  false});
              if (f == 0)
                variants.push_back({"ptx " + tag + ", realistic grads",
                                    std::make_unique<DirectKernel>(spec, path, 0), true});
            }
          }
        }
        json ej = json::array();
        std::vector<std::pair<std::string, std::vector<int64_t>>> ecases;
        for (const auto &c : cases)
          if (c.first == "64Mi" || c.first == "gpt2-124M")
            ecases.push_back(c);
        for (const auto &[name, numels] : ecases) {
          uint64_t bytes = spec.bytesMoved(numels);
          const int K = 3;
          std::vector<TensorSet> setsD(K), setsR(K);
          for (int s = 0; s < K; ++s) {
            setsD[s].arena = allocateArena(spec, numels);
            fillSet(spec, numels, setsD[s], pools, hostTables, mix(name.size(), s + 1), stream, 1);
            setsR[s].arena = allocateArena(spec, numels);
            fillSet(spec, numels, setsR[s], pools, hostTables, mix(name.size(), s + 1), stream, 2);
          }
          BCU(d.cuCtxSynchronize());
          unsigned grid = unsigned(qopt_launch_grid(&L, waveBlocks, setsD[0].numTiles));
          for (Variant &v : variants) {
            const DirectKernel &dk = v.k ? *v.k : k;
            std::vector<TensorSet> &sets = v.realistic ? setsR : setsD;
            Launcher lv{spec, dk, devTablePtrs};
            for (int w = 0; w < opt.warmupSteps; ++w)
              for (int s = 0; s < K; ++s)
                lv(sets[s], warm[std::min(w, 2)], grid, stream);
            BCU(d.cuStreamSynchronize(stream));
            std::vector<double> ms = timeEach(
                opt.iters, [&](int i) { lv(sets[i % K], uT.ptr, grid, stream); }, stream, spacerA,
                spacerB);
            Stats st = stats(ms);
            double gbps = double(bytes) / (st.median * 1e-3) / 1e9;
            uint64_t total = 0, differ = 0;
            if (v.k && !v.realistic && name == "64Mi")
              differ = selfCheck(dk, total);
            json e = {{"variant", v.name}, {"case", name}, {"regs", dk.regs},
                      {"local_bytes", dk.localBytes}, {"resident_blocks_per_sm", dk.occupancyBlocks},
                      {"ms_median", st.median}, {"ms_min", st.min}, {"gbps", gbps},
                      {"bytes", bytes}};
            if (v.k && !v.realistic && name == "64Mi")
              e["selfcheck_differ"] = differ;
            ej.push_back(e);
            std::printf("   %-26s %-10s %3d regs %4d B local %d blk/SM  %8.4f ms  %7.1f GB/s%s\n",
                        v.name.c_str(), name.c_str(), dk.regs, dk.localBytes, dk.occupancyBlocks,
                        st.median, gbps,
                        v.k && !v.realistic && name == "64Mi"
                            ? (differ == 0 ? "  (bit-exact vs qopt_step)" : "  SELF-CHECK MISMATCH")
                            : "");
            std::fflush(stdout);
          }
        }
        kj["experiments"] = ej;
        kernels.push_back(kj);
        qopt_kernel_destroy(rk);
        qopt_registry_destroy(registry);
        continue;
      }

      json cj = json::array();
      for (const auto &[name, numels] : cases) {
        uint64_t foot = spec.footprint(numels);
        uint64_t bytes = spec.bytesMoved(numels);
        int64_t numel = 0;
        for (int64_t n : numels)
          numel += n;
        int K = int(std::max<uint64_t>(3, (4 * uint64_t(dev.l2Bytes) + foot - 1) / foot));
        K = std::min(K, 64);
        std::vector<TensorSet> sets(K);
        for (int s = 0; s < K; ++s) {
          sets[s].arena = allocateArena(spec, numels);
          fillSet(spec, numels, sets[s], pools, hostTables, mix(name.size(), s + 1), stream);
        }
        BCU(d.cuCtxSynchronize()); // memsets run on the legacy stream
        unsigned grid = unsigned(qopt_launch_grid(&L, waveBlocks, sets[0].numTiles));
        for (int w = 0; w < opt.warmupSteps; ++w)
          for (int s = 0; s < K; ++s)
            launch(sets[s], warm[std::min(w, 2)], grid, stream);
        BCU(d.cuStreamSynchronize(stream));
        int n = std::max(opt.iters, K);
        std::vector<double> ms = timeEach(
            n, [&](int i) { launch(sets[i % K], uT.ptr, grid, stream); }, stream, spacerA, spacerB);
        Stats st = stats(ms);
        double gbps = double(bytes) / (st.median * 1e-3) / 1e9;
        int64_t bad = nonFiniteParams(spec, sets[0], numels[0]);
        json c = {{"case", name},       {"numel", numel},
                  {"tensors", numels.size()}, {"bytes", bytes},
                  {"bytes_per_param", double(bytes) / double(numel)},
                  {"footprint_bytes", foot}, {"sets", K},
                  {"launches", n},      {"grid", grid},
                  {"tiles", sets[0].numTiles}, {"ms_median", st.median},
                  {"ms_min", st.min},   {"ms_max", st.max},
                  {"ms_mean", st.mean}, {"gbps", gbps},
                  {"nonfinite_params_sampled", bad}};
        std::printf("   %-10s %11lld params %3zu tensors  %8.4f ms (min %.4f)  %7.1f GB/s  "
                    "%.2f B/param  K=%d grid=%u%s\n",
                    name.c_str(), (long long)numel, numels.size(), st.median, st.min, gbps,
                    double(bytes) / double(numel), K, grid, bad ? "  NONFINITE PARAMS" : "");
        std::fflush(stdout);
        // Each phase alone, then the step alone: where the time goes.
        if (!spec.phases.empty()) {
          json pj = json::array();
          std::printf("   phases alone:");
          for (size_t i = 0; i <= spec.phases.size(); ++i) {
            Launcher alone{spec, k, devTablePtrs, int(i)};
            Stats s2 = stats(timeEach(
                n, [&](int j) { alone(sets[j % K], uT.ptr, grid, stream); }, stream, spacerA,
                spacerB));
            std::string phase = i < spec.phases.size() ? spec.phases[i].name : "step";
            pj.push_back({{"phase", phase}, {"ms_median", s2.median}, {"ms_min", s2.min}});
            std::printf(" %s %.4f ms", phase.c_str(), s2.median);
          }
          std::printf("\n");
          c["phases_alone"] = pj;
        }
        rows.push_back({spec.stem, name, numel, int64_t(numels.size()), bytes,
                        double(bytes) / double(numel), st.median, st.min, st.max, gbps, K, n,
                        grid});

        // Grid sweep at 64 Mi (or the size of --sweep-at).
        if (opt.sweep && name == opt.sweepAt) {
          json sw = json::array();
          std::vector<int64_t> grids;
          for (int b : {1, 2, 3, 4, 6, 8, 16})
            grids.push_back(int64_t(b) * dev.sms);
          grids.push_back(sets[0].numTiles);
          std::printf("   grid sweep at %s:", name.c_str());
          for (int64_t g : grids) {
            unsigned gg = unsigned(std::min<int64_t>(g, sets[0].numTiles));
            std::vector<double> t = timeEach(
                20, [&](int i) { launch(sets[i % K], uT.ptr, gg, stream); }, stream, spacerA,
                spacerB);
            Stats s2 = stats(t);
            double gb = double(bytes) / (s2.median * 1e-3) / 1e9;
            sw.push_back({{"grid", gg}, {"blocks_per_sm", double(gg) / dev.sms},
                          {"ms_median", s2.median}, {"gbps", gb}});
            std::printf(" %u:%.4fms", gg, s2.median);
          }
          std::printf("\n");
          c["grid_sweep"] = sw;
        }
        // Through the runtime: qopt_step per launch (validation, upload, launch).
        if (opt.runtimePath && (name == "64Mi" || name == "gpt2-124M")) {
          std::vector<qopt_tensor_list> lists(K);
          for (int s = 0; s < K; ++s) {
            lists[s] = qopt_tensor_list{};
            lists[s].num_tensors = numels.size();
            lists[s].num_streams = spec.streams.size();
            lists[s].numels = numels.data();
            lists[s].data = sets[s].voidPtrs.data();
          }
          for (int w = 0; w < 2 * K; ++w)
            BQ(qopt_step(rk, &lists[w % K], nullptr, 0, 1000, tableArgs.data(), tableArgs.size(),
                         stream));
          BCU(d.cuStreamSynchronize(stream));
          cu::CUevent e0, e1;
          BCU(d.cuEventCreate(&e0, 0));
          BCU(d.cuEventCreate(&e1, 0));
          std::vector<double> hostUs;
          BCU(d.cuEventRecord(e0, stream));
          for (int i = 0; i < n; ++i) {
            auto t0 = std::chrono::steady_clock::now();
            BQ(qopt_step(rk, &lists[i % K], nullptr, 0, 1000, tableArgs.data(), tableArgs.size(),
                         stream));
            auto t1 = std::chrono::steady_clock::now();
            hostUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          BCU(d.cuEventRecord(e1, stream));
          BCU(d.cuStreamSynchronize(stream));
          float total = 0;
          BCU(extra().cuEventElapsedTime(&total, e0, e1));
          (void)d.cuEventDestroy(e0);
          (void)d.cuEventDestroy(e1);
          Stats hs = stats(hostUs);
          double per = double(total) / n;
          c["runtime_path"] = {{"ms_per_step_back_to_back", per},
                               {"gbps", double(bytes) / (per * 1e-3) / 1e9},
                               {"host_us_per_call_median", hs.median},
                               {"host_us_per_call_max", hs.max},
                               {"steps", n}};
          std::printf("   qopt_step back to back (%s): %.4f ms/step, host %.1f us/call (median)\n",
                      name.c_str(), per, hs.median);
        }
        cj.push_back(c);
      }
      kj["cases"] = cj;
      kernels.push_back(kj);
      qopt_kernel_destroy(rk);
      qopt_registry_destroy(registry);
    }

    CopyRoof roofAfter = measureCopyRoof(stream);
    double roof = std::max(roofBefore.gbps, roofAfter.gbps);
    std::printf("\ncopy roof after: %.3f ms, %.0f GB/s; roof used: %.0f GB/s\n", roofAfter.ms,
                roofAfter.gbps, roof);
    for (auto &kj : kernels) {
      if (kj.contains("experiments"))
        for (auto &e : kj["experiments"])
          e["roof_fraction"] = e["gbps"].get<double>() / roof;
      if (!kj.contains("cases"))
        continue;
      for (auto &c : kj["cases"]) {
        c["roof_fraction"] = c["gbps"].get<double>() / roof;
        if (c.contains("runtime_path"))
          c["runtime_path"]["roof_fraction"] = c["runtime_path"]["gbps"].get<double>() / roof;
        if (c.contains("grid_sweep"))
          for (auto &g : c["grid_sweep"])
            g["roof_fraction"] = g["gbps"].get<double>() / roof;
      }
    }
    out["copy_roof"] = {{"bytes", roofBefore.bytes},
                        {"ms_before", roofBefore.ms},
                        {"gbps_before", roofBefore.gbps},
                        {"ms_after", roofAfter.ms},
                        {"gbps_after", roofAfter.gbps},
                        {"gbps", roof}};
    out["kernels"] = kernels;
    {
      std::ofstream f(opt.jsonOut);
      f << out.dump(1) << "\n";
    }
    {
      std::ofstream f(opt.csvOut);
      f << "spec,case,numel,tensors,bytes,bytes_per_param,ms_median,ms_min,ms_max,gbps,"
           "roof_fraction,sets,launches,grid\n";
      for (const Row &r : rows)
        f << r.spec << "," << r.kase << "," << r.numel << "," << r.tensors << "," << r.bytes << ","
          << r.bpp << "," << r.ms << "," << r.msMin << "," << r.msMax << "," << r.gbps << ","
          << r.gbps / roof << "," << r.sets << "," << r.launches << "," << r.grid << "\n";
    }
    std::printf("\n%-22s", "GB/s (fraction of roof)");
    std::vector<std::string> caseNames;
    for (const auto &c : cases)
      caseNames.push_back(c.first);
    for (const auto &c : caseNames)
      std::printf(" %15s", c.c_str());
    std::printf("\n");
    std::string cur;
    for (const Row &r : rows) {
      if (r.spec != cur) {
        if (!cur.empty())
          std::printf("\n");
        cur = r.spec;
        std::printf("%-22s", r.spec.c_str());
      }
      std::printf(" %7.0f (%4.2f)", r.gbps, r.gbps / roof);
    }
    std::printf("\nwrote %s and %s\n", opt.jsonOut.c_str(), opt.csvOut.c_str());
    qopt_context_destroy(ctx);
    (void)d.cuStreamDestroy(stream);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "qopt-bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

//===- HostPath.cpp - qopt-bench-host: host time of qopt_step per call ----===//
//
// What a trainer's step costs on the host, through the runtime's C API, for a
// kernel and a tensor list (the GPT-2 124M list, 148 tensors; a ResNet-like
// list of 300 small tensors), in the cases a training loop meets:
//   same         the same buffers every step (a captured or static loop);
//   grads_new    every gradient pointer new each step (zero_grad with
//                set_to_none=True, PyTorch's default: the gradients come back
//                from the caching allocator at other addresses), rotating
//                over three gradient sets;
//   one_param_new  one parameter's buffer moves every step;
//   cold         every fact asked anew (qopt_context_forget_allocations
//                before each step): the first step of a new list.
// Each buffer set is one allocation, as PyTorch's allocator carves tensors
// from a few segments. Host time: steady_clock around each qopt_step call on
// an idle stream (back to back, a call waits for a staging buffer once the
// host runs a queue's length ahead, and then measures the device), median
// and 90th percentile over --steps calls; device time: events around --steps
// back-to-back launches, per step. JSON to --out.
//
//   qopt-bench-host --kernels build/kernels [--specs flash_adamw,...]
//                   [--steps 300] [--out host_path.json]
//
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace qopt::bench;
using json = nlohmann::json;

namespace {

#ifndef QOPT_BENCH_DEFAULT_KERNELS
#define QOPT_BENCH_DEFAULT_KERNELS "build/kernels"
#endif

struct Options {
  std::string kernels = QOPT_BENCH_DEFAULT_KERNELS;
  std::vector<std::string> specs = {"flash_adamw", "adamw8bit_block256",
                                    "adamw8bit_block2048"};
  int steps = 300;
  std::string out = "host_path.json";
};

/// A ResNet-like list of 300 small tensors: 50 bottleneck-style units of a
/// 1x1 convolution, a 3x3 convolution and two batch norms (weight, bias).
std::vector<int64_t> resnetLikeNumels() {
  std::vector<int64_t> v;
  for (int i = 0; i < 50; ++i) {
    int64_t c = int64_t(64) << std::min(3, i * 4 / 50);
    v.push_back(4 * c * c);     // 1x1 conv, c -> 4c
    v.push_back(c);             // bn weight
    v.push_back(c);             // bn bias
    v.push_back(c * c * 9);     // 3x3 conv
    v.push_back(c);             // bn weight
    v.push_back(c);             // bn bias
  }
  return v;
}

/// The pointer of stream `s` of tensor `k` in a buffer set.
void *at(const Arena &a, size_t k, size_t s) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(a.ptr[k * a.numStreams + s]));
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "qopt-bench-host: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--kernels")
      opt.kernels = value();
    else if (a == "--steps")
      opt.steps = std::max(10, std::atoi(value().c_str()));
    else if (a == "--out")
      opt.out = value();
    else if (a == "--specs") {
      opt.specs.clear();
      std::stringstream ss(value());
      for (std::string s; std::getline(ss, s, ',');)
        opt.specs.push_back(s);
    } else {
      std::fprintf(stderr, "usage: qopt-bench-host [--kernels DIR] [--specs a,b] [--steps N] "
                           "[--out FILE]\n");
      return 2;
    }
  }
  std::string why = gpuUnavailableReason();
  if (!why.empty()) {
    std::printf("qopt-bench-host: no GPU (%s); nothing measured\n", why.c_str());
    return 0;
  }
  try {
    DeviceSession dev;
    const cu::Driver &d = cu::driver();
    cu::CUstream stream = nullptr;
    BCU(d.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING));
    qopt_context *ctx = nullptr;
    BQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx));
    json out;
    out["device"] = dev.name;
    out["date"] = utcDateTime();
    out["driver_version"] = dev.driverVersion;
    out["steps"] = opt.steps;
    json rows = json::array();
    std::printf("qopt-bench-host on %s, %s; host us per qopt_step call (median, p90), device "
                "ms per step\n", dev.name.c_str(), utcDateTime().c_str());

    std::vector<int64_t> gpt2;
    for (const NamedShape &s : gpt2Shapes())
      gpt2.push_back(s.numel());
    const std::vector<std::pair<std::string, std::vector<int64_t>>> lists = {
        {"gpt2-124M", gpt2}, {"resnet-like-300", resnetLikeNumels()}};

    for (const std::string &stem : opt.specs) {
      std::string dir = resolveKernelDir(opt.kernels, stem);
      if (dir.empty()) {
        std::printf("%s: no manifest under %s; skipped\n", stem.c_str(), opt.kernels.c_str());
        continue;
      }
      Spec spec(dir + "/" + stem + ".manifest.json");
      qopt_registry *registry = nullptr;
      qopt_kernel *kernel = nullptr;
      BQ(qopt_registry_create(&registry));
      BQ(qopt_registry_add_manifest_file(registry, spec.path.c_str()));
      BQ(qopt_kernel_create(ctx, registry, spec.info.kernel, &kernel));
      std::vector<DeviceMem> tables;
      std::vector<const void *> tableArgs;
      for (const auto &t : codebookTables(spec)) {
        tables.emplace_back(1024);
        BCU(d.cuMemcpyHtoD(tables.back().ptr, t.data(), 1024));
        tableArgs.push_back(reinterpret_cast<const void *>(uintptr_t(tables.back().ptr)));
      }
      size_t gradStream = 0, paramStream = 0;
      for (size_t s = 0; s < spec.streams.size(); ++s) {
        if (spec.streams[s].role == QOPT_ROLE_GRAD)
          gradStream = s;
        if (spec.streams[s].role == QOPT_ROLE_PARAM)
          paramStream = s;
      }

      for (const auto &[listName, numels] : lists) {
        // Set 0 holds everything; sets 1, 2 lend their gradients (and tensor 0's
        // parameter for one_param_new).
        std::vector<Arena> sets;
        for (int k = 0; k < 3; ++k) {
          sets.push_back(allocateArena(spec, numels));
          BCU(d.cuMemsetD8(sets.back().mem.ptr, 0, sets.back().mem.bytes));
        }
        const size_t S = spec.streams.size(), N = numels.size();
        auto listFor = [&](const std::string &kase, int step) {
          std::vector<void *> data(N * S);
          for (size_t k = 0; k < N; ++k)
            for (size_t s = 0; s < S; ++s)
              data[k * S + s] = at(sets[0], k, s);
          if (kase == "grads_new")
            for (size_t k = 0; k < N; ++k)
              data[k * S + gradStream] = at(sets[step % 3], k, gradStream);
          if (kase == "one_param_new")
            data[paramStream] = at(sets[step % 2], 0, paramStream);
          return data;
        };
        for (const std::string kase : {"same", "grads_new", "one_param_new", "cold"}) {
          // Every step's pointer array is made before timing: the trainer's
          // own bookkeeping is not the runtime's.
          int total = opt.steps + 6;
          std::vector<std::vector<void *>> data(total);
          std::vector<qopt_tensor_list> tl(total);
          for (int i = 0; i < total; ++i) {
            data[i] = listFor(kase, i);
            tl[i] = qopt_tensor_list{};
            tl[i].num_tensors = N;
            tl[i].num_streams = S;
            tl[i].numels = numels.data();
            tl[i].data = data[i].data();
          }
          for (int i = 0; i < 6; ++i)
            BQ(qopt_step(kernel, &tl[i], nullptr, 0, 1000, tableArgs.data(), tableArgs.size(),
                         stream));
          BCU(d.cuStreamSynchronize(stream));
          cu::CUevent e0, e1;
          BCU(d.cuEventCreate(&e0, 0));
          BCU(d.cuEventCreate(&e1, 0));
          std::vector<double> hostUs;
          BCU(d.cuEventRecord(e0, stream));
          for (int i = 6; i < total; ++i) {
            if (kase == std::string("cold"))
              BQ(qopt_context_forget_allocations(ctx));
            auto t0 = std::chrono::steady_clock::now();
            BQ(qopt_step(kernel, &tl[i], nullptr, 0, 1000, tableArgs.data(), tableArgs.size(),
                         stream));
            auto t1 = std::chrono::steady_clock::now();
            hostUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          BCU(d.cuEventRecord(e1, stream));
          BCU(d.cuStreamSynchronize(stream));
          float ms = 0;
          BCU(extra().cuEventElapsedTime(&ms, e0, e1));
          (void)d.cuEventDestroy(e0);
          (void)d.cuEventDestroy(e1);
          // Back to back, a call waits for a staging buffer once the host is
          // a queue's length ahead of the device: the times above are the
          // device's. The host path's own cost: each call on an idle stream.
          hostUs.clear();
          for (int i = 6; i < total; ++i) {
            BCU(d.cuStreamSynchronize(stream));
            if (kase == std::string("cold"))
              BQ(qopt_context_forget_allocations(ctx));
            auto t0 = std::chrono::steady_clock::now();
            BQ(qopt_step(kernel, &tl[i], nullptr, 0, 1000, tableArgs.data(), tableArgs.size(),
                         stream));
            auto t1 = std::chrono::steady_clock::now();
            hostUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          BCU(d.cuStreamSynchronize(stream));
          Stats h = stats(hostUs);
          double p90 = percentile(hostUs, 0.9);
          double perStep = double(ms) / opt.steps;
          std::printf("  %-20s %-16s %-14s host %7.1f us (p90 %7.1f)  device %.4f ms/step\n",
                      stem.c_str(), listName.c_str(), kase.c_str(), h.median, p90, perStep);
          std::fflush(stdout);
          rows.push_back({{"spec", stem},
                          {"kernel", spec.info.kernel},
                          {"list", listName},
                          {"tensors", N},
                          {"case", kase},
                          {"host_us_median", h.median},
                          {"host_us_p90", p90},
                          {"host_us_min", h.min},
                          {"device_ms_per_step", perStep}});
        }
      }
      qopt_kernel_destroy(kernel);
      qopt_registry_destroy(registry);
    }
    out["rows"] = rows;
    std::ofstream(opt.out) << out.dump(1) << "\n";
    std::printf("wrote %s\n", opt.out.c_str());
    qopt_context_destroy(ctx);
    (void)d.cuStreamDestroy(stream);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "qopt-bench-host: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

//===- FirstStep.cpp - Time from process start to the first step ----------===//
//
// qopt-first-step: how long a trainer's process waits before its first qopt
// step is done (issue 5: within 50 ms of process start; FlashOptim spends
// 6.7 s compiling first). It uses the shipped kernels embedded in
// libqopt_kernels, as a trainer does, and reports each milestone's time since
// process start:
//   main() entered (exec, dynamic loading of the runtime and the kernels),
//   CUDA context (cuInit and the device's primary context: the driver's,
//   paid once by any CUDA process, PyTorch's included),
//   shipped kernels registered, the kernel's module loaded,
//   buffers of one tensor allocated and initialized,
//   first step done (launch and completion).
// Process start is the launcher's clock reading passed as --start-ns
// (CLOCK_REALTIME nanoseconds, e.g. `--start-ns $(date +%s%N)` just before
// the exec); without it, the kernel's process start time from /proc (10 ms
// resolution). Exit 0 without a GPU, after saying so.
//
//===----------------------------------------------------------------------===//

#include "qopt/kernels.h"
#include "qopt/runtime.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

double nowRealtimeMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/// This process's start as CLOCK_REALTIME milliseconds, from /proc/self/stat
/// (start time in clock ticks after boot) and the boot-time clock.
double processStartFromProcMs() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  std::getline(f, line);
  // Field 22; the command name (field 2) may hold spaces, so count from ')'.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long long startTicks = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22)
      startTicks = std::strtoull(field.c_str(), nullptr, 10);
  timespec boot{};
  clock_gettime(CLOCK_BOOTTIME, &boot);
  double sinceBootMs = boot.tv_sec * 1e3 + boot.tv_nsec / 1e6;
  double startSinceBootMs = 1e3 * double(startTicks) / double(sysconf(_SC_CLK_TCK));
  return nowRealtimeMs() - (sinceBootMs - startSinceBootMs);
}

bool ok(qopt_status s, const char *what) {
  if (s == QOPT_SUCCESS)
    return true;
  std::fprintf(stderr, "qopt-first-step: %s: %s\n", what, qopt_last_error());
  return false;
}

} // namespace

int main(int argc, char **argv) {
  double entered = nowRealtimeMs();
  double start = -1;
  const char *kernelName = "FlashAdamW";
  int64_t numel = int64_t(1) << 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--start-ns") && i + 1 < argc) {
      // The launcher's clock reading: nanoseconds, a whole number.
      char *end = nullptr;
      errno = 0;
      const char *text = argv[++i];
      long long ns = std::strtoll(text, &end, 10);
      if (end == text || *end || errno || ns < 0) {
        std::fprintf(stderr, "qopt-first-step: --start-ns takes CLOCK_REALTIME "
                             "nanoseconds (a whole number), got '%s'\n", text);
        return 2;
      }
      start = double(ns) / 1e6;
    } else if (!std::strcmp(argv[i], "--kernel") && i + 1 < argc)
      kernelName = argv[++i];
    else if (!std::strcmp(argv[i], "--numel") && i + 1 < argc) {
      // A whole number of elements, at least one: a tensor to step.
      char *end = nullptr;
      errno = 0;
      const char *text = argv[++i];
      numel = std::strtoll(text, &end, 10);
      if (end == text || *end || errno || numel < 1) {
        std::fprintf(stderr, "qopt-first-step: --numel takes a positive whole "
                             "number, got '%s'\n", text);
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: qopt-first-step [--start-ns NS] [--kernel NAME] "
                   "[--numel N]\n");
      return 2;
    }
  }
  const char *startSource = "launcher's clock (--start-ns)";
  if (start < 0) {
    start = processStartFromProcMs();
    startSource = "/proc/self/stat (10 ms resolution)";
  }
  std::printf("qopt-first-step: kernel %s, one tensor of %lld elements; times since "
              "process start (%s)\n",
              kernelName, static_cast<long long>(numel), startSource);
  auto mark = [&](const char *what) {
    std::printf("  %-44s %8.1f ms\n", what, nowRealtimeMs() - start);
  };
  std::printf("  %-44s %8.1f ms\n", "main() entered", entered - start);

  int32_t devices = 0;
  if (qopt_cuda_device_count(&devices) != QOPT_SUCCESS) {
    std::printf("  no CUDA driver (%s): nothing to time\n", qopt_last_error());
    return 0;
  }
  if (devices == 0) {
    std::printf("  the CUDA driver reports no device: nothing to time\n");
    return 0;
  }
  qopt_context *ctx = nullptr;
  if (!ok(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), "context"))
    return 1;
  mark("CUDA context (cuInit, primary context)");
  qopt_registry *registry = nullptr;
  size_t added = 0;
  if (!ok(qopt_registry_create(&registry), "registry") ||
      !ok(qopt_registry_add_shipped(registry, &added), "shipped kernels"))
    return 1;
  mark("shipped kernels registered");
  qopt_kernel *kernel = nullptr;
  if (!ok(qopt_kernel_create(ctx, registry, kernelName, &kernel), "kernel"))
    return 1;
  mark("kernel module loaded");

  qopt_manifest *manifest = nullptr;
  if (!ok(qopt_registry_get_manifest(registry, kernelName, &manifest), "manifest"))
    return 1;
  qopt_manifest_info info{};
  qopt_manifest_get_info(manifest, &info);
  std::vector<qopt_buffer_layout> layout(info.num_streams);
  if (!ok(qopt_manifest_state_layout(manifest, numel, nullptr, 0, layout.data(),
                                     layout.size()),
          "state layout"))
    return 1;
  std::vector<void *> data(info.num_streams, nullptr);
  for (size_t s = 0; s < info.num_streams; ++s) {
    if (!layout[s].bytes)
      continue;
    if (!ok(qopt_buffer_alloc(ctx, layout[s].bytes, &data[s]), "allocation"))
      return 1;
    // Zero parameter, error bits and states (a valid initial state for
    // group-quantized states); a gradient of 2^-10 everywhere.
    std::vector<unsigned char> host(layout[s].bytes, 0);
    if (layout[s].role == QOPT_ROLE_GRAD) {
      size_t size = 0;
      qopt_dtype_size(layout[s].dtype, &size);
      for (size_t i = 0; i + size <= host.size(); i += size) {
        if (size == 2) { // bf16/f16: 2^-10
          uint16_t bits = layout[s].dtype == QOPT_DTYPE_BF16 ? 0x3A80 : 0x1400;
          std::memcpy(&host[i], &bits, 2);
        } else {
          float v = 1.0f / 1024.0f;
          std::memcpy(&host[i], &v, 4);
        }
      }
    }
    if (!ok(qopt_buffer_upload(ctx, data[s], host.data(), host.size()), "upload"))
      return 1;
  }
  mark("buffers allocated and initialized");
  qopt_tensor_list list{};
  list.num_tensors = 1;
  list.num_streams = info.num_streams;
  list.numels = &numel;
  list.data = data.data();
  if (!ok(qopt_step(kernel, &list, nullptr, 0, 1, nullptr, 0, nullptr), "step"))
    return 1;
  unsigned char probe = 0;
  if (!ok(qopt_buffer_download(ctx, &probe, data[0], 1), "download"))
    return 1;
  mark("first step done (launch and completion)");
  qopt_manifest_destroy(manifest);
  qopt_kernel_destroy(kernel);
  qopt_registry_destroy(registry);
  qopt_context_destroy(ctx);
  return 0;
}

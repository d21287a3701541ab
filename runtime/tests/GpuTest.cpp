//===- GpuTest.cpp - Module loading and launches on a real GPU ------------===//
//
// Every test here needs a CUDA driver and a device and skips (GTEST_SKIP,
// with the reason) without one. The kernel is kernels/qopt_test_sgd_f32.ptx,
// written by hand with the qopt kernel ABI, embedded as a string; the cubin
// and fatbin beside the test binary are built from it with ptxas when the
// build machine has one.
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"
#include "TestKernels.h"
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

using json = nlohmann::json;
using namespace qopt::test;
namespace cu = qopt::rt::cu;

namespace {

#define CU_OK(call)                                                            \
  ASSERT_EQ((call), cu::CUDA_SUCCESS) << #call << ": " << cu::describe(call)

/// Device memory for a test.
struct DevBuf {
  cu::CUdeviceptr p = 0;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) {
    cu::CUresult r = cu::driver().cuMemAlloc(&p, n);
    EXPECT_EQ(r, cu::CUDA_SUCCESS) << "cuMemAlloc(" << n << "): " << cu::describe(r);
  }
  ~DevBuf() {
    if (p)
      (void)cu::driver().cuMemFree(p);
  }
  void *ptr() const { return reinterpret_cast<void *>(p); }
  void upload(const void *src, size_t n) const {
    cu::CUresult r = cu::require(cu::driver().cuMemcpyHtoD, "cuMemcpyHtoD")(p, src, n);
    EXPECT_EQ(r, cu::CUDA_SUCCESS) << cu::describe(r);
  }
  void download(void *dst, size_t n, size_t offset = 0) const {
    cu::CUresult r =
        cu::require(cu::driver().cuMemcpyDtoH, "cuMemcpyDtoH")(dst, p + offset, n);
    EXPECT_EQ(r, cu::CUDA_SUCCESS) << cu::describe(r);
  }
};

class Gpu : public ::testing::Test {
protected:
  qopt_context *ctx = nullptr;
  cu::CUdevice dev = 0;
  cu::CUcontext cuctx = nullptr;
  qopt_device_info info{};

  void SetUp() override {
    QOPT_REQUIRE_GPU();
    ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_context_get_device_info(ctx, &info), QOPT_SUCCESS);
    const cu::Driver &d = cu::driver();
    CU_OK(d.cuDeviceGet(&dev, 0));
    CU_OK(d.cuDevicePrimaryCtxRetain(&cuctx, dev));
    CU_OK(d.cuCtxPushCurrent(cuctx));
  }
  void TearDown() override {
    if (cuctx) {
      cu::CUcontext popped;
      (void)cu::driver().cuCtxPopCurrent(&popped);
      (void)cu::driver().cuDevicePrimaryCtxRelease(dev);
    }
    qopt_context_destroy(ctx);
  }
  void sync() {
    cu::CUresult r = cu::require(cu::driver().cuCtxSynchronize, "cuCtxSynchronize")();
    ASSERT_EQ(r, cu::CUDA_SUCCESS) << cu::describe(r);
  }
  qopt_kernel *ptxKernel(const std::string &manifestJson = sgdManifestJson()) {
    qopt_manifest *m = parseOrDie(manifestJson);
    qopt_kernel *k = nullptr;
    EXPECT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_PTX, kSgdPtx,
                                            std::strlen(kSgdPtx), &k),
              QOPT_SUCCESS)
        << qopt_last_error();
    qopt_manifest_destroy(m);
    return k;
  }
};

/// Host copies and device buffers of p and g for a list of tensor sizes; each
/// buffer has 16 guard elements past numel that no step may touch.
struct DeviceList {
  static constexpr int64_t kGuard = 16;
  std::vector<int64_t> numels;
  std::vector<std::vector<float>> p, g;
  std::vector<std::unique_ptr<DevBuf>> bufs;
  std::vector<void *> data;
  qopt_tensor_list list{};
  explicit DeviceList(std::vector<int64_t> n) : numels(std::move(n)) {
    for (size_t k = 0; k < numels.size(); ++k) {
      size_t len = static_cast<size_t>(numels[k] + kGuard);
      p.emplace_back(len, -7.0f);
      g.emplace_back(len, 1.0f);
      for (int64_t i = 0; i < numels[k]; ++i) {
        p[k][i] = static_cast<float>(k * 1000 + i) * 0.125f;
        g[k][i] = static_cast<float>((i % 7) - 3) + 0.5f;
      }
      for (auto *v : {&p[k], &g[k]}) {
        bufs.push_back(std::make_unique<DevBuf>(len * 4));
        bufs.back()->upload(v->data(), len * 4);
        data.push_back(bufs.back()->ptr());
      }
    }
    list = {numels.size(), 2, numels.data(), data.data(), nullptr, nullptr, nullptr};
    // The uploads are ordered with the legacy stream only; finish them before
    // a test steps on a stream of its own.
    cu::CUresult r = cu::require(cu::driver().cuCtxSynchronize, "cuCtxSynchronize")();
    EXPECT_EQ(r, cu::CUDA_SUCCESS) << cu::describe(r);
  }
  /// Applies p -= u * g on the host copies (the expected result).
  void apply(float u) {
    for (size_t k = 0; k < numels.size(); ++k)
      for (int64_t i = 0; i < numels[k]; ++i) {
        float prod = u * g[k][i];
        p[k][i] = p[k][i] - prod;
      }
  }
  /// Every element of every p, guards included, equals the host copy.
  void expectEqualOnDevice() {
    for (size_t k = 0; k < numels.size(); ++k) {
      std::vector<float> got(p[k].size());
      bufs[2 * k]->download(got.data(), got.size() * 4);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], p[k][i]) << "tensor " << k << " element " << i
                                   << (int64_t(i) >= numels[k] ? " (guard)" : "");
    }
  }
};

/// u0 = lr * (1 - beta^step), as the manifest's uniform: float64, one rounding.
float uniform(double lr, double beta, int64_t step) {
  return static_cast<float>(lr * (1.0 - std::pow(beta, static_cast<double>(step))));
}

TEST_F(Gpu, DeviceInfo) {
  EXPECT_EQ(info.backend, QOPT_BACKEND_CUDA);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GT(info.driver_version, 0);
  EXPECT_EQ(std::string(info.arch), "sm_" + std::to_string(info.cc_major) +
                                        std::to_string(info.cc_minor));
  std::printf("[ device   ] %s, %s, %d SMs, driver API %d\n", info.name, info.arch,
              info.multiprocessors, info.driver_version);
}

TEST_F(Gpu, SmokePtxAddsOne) {
  qopt_kernel *k = ptxKernel();
  ASSERT_NE(k, nullptr);
  qopt_kernel_info ki;
  ASSERT_EQ(qopt_kernel_get_info(k, &ki), QOPT_SUCCESS);
  EXPECT_EQ(ki.format, QOPT_BINARY_PTX);
  EXPECT_STREQ(ki.origin, "<memory>");
  // One wave of resident blocks: the driver's occupancy, which for this
  // kernel (128 threads, a few registers, no shared memory) is bound by the
  // multiprocessor's thread and block limits alone.
  cu::CUdevice dev = 0;
  int maxThreads = 0, maxBlocks = 0;
  CU_OK(cu::driver().cuDeviceGet(&dev, 0));
  CU_OK(cu::driver().cuDeviceGetAttribute(
      &maxThreads, 39 /* CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR */, dev));
  CU_OK(cu::driver().cuDeviceGetAttribute(
      &maxBlocks, 106 /* CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR */, dev));
  EXPECT_EQ(ki.max_blocks, info.multiprocessors * std::min(maxBlocks, maxThreads / 128));

  DeviceList l({1000});
  for (int64_t i = 0; i < 1000; ++i) {
    l.p[0][i] = static_cast<float>(i);
    l.g[0][i] = -1.0f;
  }
  l.bufs[0]->upload(l.p[0].data(), l.p[0].size() * 4);
  l.bufs[1]->upload(l.g[0].data(), l.g[0].size() * 4);
  // lr = 1, beta = 0: u0 = 1 * (1 - 0^1) = 1, so p -= 1 * (-1) adds one.
  qopt_hyper h[] = {{"lr", 1.0}, {"beta", 0.0}};
  ASSERT_EQ(qopt_step(k, &l.list, h, 2, 1, nullptr, 0, nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  sync();
  std::vector<float> got(1000);
  l.bufs[0]->download(got.data(), 4000);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(got[i], static_cast<float>(i) + 1.0f) << i;
  qopt_kernel_destroy(k);
}

TEST_F(Gpu, OneLaunchStepsAListOfVeryDifferentSizes) {
  qopt_kernel *k = ptxKernel();
  DeviceList l({1, 1023, 1024, 1025, 4097, 100000, 0, 3, 1 << 20});
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
  ASSERT_EQ(qopt_step(k, &l.list, h, 2, 2, nullptr, 0, nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  sync();
  l.apply(uniform(0.5, 0.5, 2));
  l.expectEqualOnDevice();
  qopt_kernel_destroy(k);
}

TEST_F(Gpu, ManyStepsWithoutSynchronizing) {
  // 60 steps back to back: each reads its own uniforms, so a staging buffer
  // reused before its step ran would show up as a wrong value.
  qopt_kernel *k = ptxKernel();
  DeviceList l({5000, 70000, 3});
  qopt_hyper h[] = {{"lr", 0.01}, {"beta", 0.9}};
  double hostSeconds = 0;
  for (int64_t step = 1; step <= 60; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    qopt_status s = qopt_step(k, &l.list, h, 2, step, nullptr, 0, nullptr);
    hostSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(s, QOPT_SUCCESS) << qopt_last_error();
    l.apply(uniform(0.01, 0.9, step));
  }
  sync();
  std::printf("[ timing   ] qopt_step host time: %.1f us per call (60 calls, 3 tensors, "
              "including the first allocations)\n",
              hostSeconds / 60 * 1e6);
  l.expectEqualOnDevice();
  // Alternate two lists too (the cached descriptor tables must not mix).
  DeviceList other({2000, 1});
  for (int64_t step = 61; step <= 70; ++step) {
    ASSERT_EQ(qopt_step(k, &l.list, h, 2, step, nullptr, 0, nullptr), QOPT_SUCCESS);
    ASSERT_EQ(qopt_step(k, &other.list, h, 2, step, nullptr, 0, nullptr), QOPT_SUCCESS);
    l.apply(uniform(0.01, 0.9, step));
    other.apply(uniform(0.01, 0.9, step));
  }
  sync();
  l.expectEqualOnDevice();
  other.expectEqualOnDevice();
  qopt_kernel_destroy(k);
}

TEST_F(Gpu, ValidationChecksEveryPointerWithTheDriver) {
  qopt_kernel *k = ptxKernel();
  DeviceList l({1000, 2000});
  const char *names[] = {"w0", "w1"};
  l.list.names = names;

  std::vector<float> hostMem(4096);
  void *aligned = reinterpret_cast<void *>(
      (reinterpret_cast<uintptr_t>(hostMem.data()) + 15) & ~uintptr_t(15));
  l.data[3] = aligned;
  EXPECT_EQ(qopt_step(k, &l.list, nullptr, 0, 1, nullptr, 0, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("tensor 'w1' (#1), stream 'g': pointer 0x"),
            std::string::npos)
      << qopt_last_error();
  {
    // Plain malloc'd memory: unknown to CUDA, or host memory where the
    // driver tracks pageable memory (HMM).
    std::string msg = qopt_last_error();
    EXPECT_TRUE(msg.find("is not CUDA memory") != std::string::npos ||
                msg.find("is host memory, not device memory") != std::string::npos)
        << msg;
  }

  void *pinned = nullptr;
  CU_OK(cu::driver().cuMemHostAlloc(&pinned, 8192, 0));
  l.data[3] = pinned;
  EXPECT_EQ(qopt_step(k, &l.list, nullptr, 0, 1, nullptr, 0, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("is host memory, not device memory"),
            std::string::npos)
      << qopt_last_error();
  (void)cu::driver().cuMemFreeHost(pinned);
  l.data[3] = l.bufs[3]->ptr();

  // numel larger than the allocation: caught by the allocation's range. The
  // gradient has 2 MiB (no allocation granularity can hide the overrun), and
  // a spacer that is not in the list follows it, so the overrun does not
  // reach another buffer of the step (that would be reported as an overlap
  // first: a 2 MiB parameter followed by its gradient was, on the H200).
  {
    DevBuf p2(size_t(4) << 20), g2(size_t(2) << 20), spacer(size_t(2) << 20);
    std::vector<int64_t> numels = {(int64_t(2) << 20) / 4 + 1024};
    std::vector<void *> data = {p2.ptr(), g2.ptr()};
    const char *n1[] = {"big"};
    qopt_tensor_list over{1, 2, numels.data(), data.data(), nullptr, nullptr, n1};
    EXPECT_EQ(qopt_step(k, &over, nullptr, 0, 1, nullptr, 0, nullptr), QOPT_ERROR_VALIDATION);
    std::string msg = qopt_last_error();
    EXPECT_NE(msg.find("tensor 'big' (#0), stream 'g': 2101248 bytes from 0x"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("run past the end of its allocation (2097152 bytes from 0x"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(") by 4096 bytes"), std::string::npos) << msg;
  }

  // Nothing was launched by the rejected steps.
  sync();
  l.expectEqualOnDevice();
  ASSERT_EQ(qopt_validate(k, &l.list, nullptr, 0), QOPT_SUCCESS) << qopt_last_error();
  qopt_kernel_destroy(k);
}

TEST_F(Gpu, JitErrorLogIsInTheMessage) {
  std::string broken = kSgdPtx;
  size_t at = broken.find("mul.rn.f32");
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, 10, "mul.rn.f99");
  qopt_manifest *m = parseOrDie(sgdManifestJson());
  qopt_kernel *k = nullptr;
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_PTX, broken.data(),
                                          broken.size(), &k),
            QOPT_ERROR_MODULE_LOAD);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("cuModuleLoadDataEx failed for ptx <memory>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("JIT error log:"), std::string::npos) << msg;
  std::printf("[ message  ] %s\n", msg.c_str());
  qopt_manifest_destroy(m);
}

TEST_F(Gpu, MissingEntryPointIsNamed) {
  json j = json::parse(sgdManifestJson());
  j["entry"] = "no_such_kernel";
  qopt_manifest *m = parseOrDie(j.dump());
  qopt_kernel *k = nullptr;
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_AUTO, kSgdPtx,
                                          std::strlen(kSgdPtx), &k),
            QOPT_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(qopt_last_error()).find("entry point 'no_such_kernel'"),
            std::string::npos)
      << qopt_last_error();
  qopt_manifest_destroy(m);
}

TEST_F(Gpu, RegistryPicksCubinThenFatbinThenPtx) {
  std::string cubin = exeDir() + "/kernels/qopt_test_sgd_f32.sm_90.cubin";
  std::string fatbin = exeDir() + "/kernels/qopt_test_sgd_f32.fatbin";
  if (!fileExists(cubin) || !fileExists(fatbin))
    GTEST_SKIP() << "built without ptxas/fatbinary: no " << cubin;
  std::string dir = makeTempDir();
  auto copy = [&](const std::string &from, const std::string &to) {
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(to, std::ios::binary);
    out << in.rdbuf();
  };
  writeFile(dir + "/qopt_test_sgd_f32.manifest.json", sgdManifestJson());
  copy(cubin, dir + "/qopt_test_sgd_f32.cubin");
  copy(fatbin, dir + "/qopt_test_sgd_f32.fatbin");
  writeFile(dir + "/qopt_test_sgd_f32.ptx", kSgdPtx);

  auto loadAndStep = [&](qopt_binary_format want) {
    qopt_registry *r = nullptr;
    ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_add_directory(r, dir.c_str(), nullptr), QOPT_SUCCESS)
        << qopt_last_error();
    qopt_kernel *k = nullptr;
    ASSERT_EQ(qopt_kernel_create(ctx, r, "qopt_test_sgd_f32", &k), QOPT_SUCCESS)
        << qopt_last_error();
    qopt_kernel_info ki;
    ASSERT_EQ(qopt_kernel_get_info(k, &ki), QOPT_SUCCESS);
    EXPECT_EQ(ki.format, want) << ki.origin;
    DeviceList l({3000, 5});
    ASSERT_EQ(qopt_step(k, &l.list, nullptr, 0, 3, nullptr, 0, nullptr), QOPT_SUCCESS)
        << qopt_last_error();
    sync();
    l.apply(uniform(0.5, 0.5, 3));
    l.expectEqualOnDevice();
    qopt_kernel_destroy(k);
    qopt_registry_destroy(r);
  };
  bool sm90 = std::string(info.arch) == "sm_90";
  // On sm_90 the cubin matches exactly; elsewhere it cannot run and the
  // fatbin (sm_90 cubin + PTX) is next.
  loadAndStep(sm90 ? QOPT_BINARY_CUBIN : QOPT_BINARY_FATBIN);
  std::remove((dir + "/qopt_test_sgd_f32.cubin").c_str());
  loadAndStep(QOPT_BINARY_FATBIN);
  std::remove((dir + "/qopt_test_sgd_f32.fatbin").c_str());
  loadAndStep(QOPT_BINARY_PTX);

  // A manifest listing only a binary this device cannot run.
  json j = json::parse(sgdManifestJson());
  j["kernel"] = "elsewhere";
  j["binaries"] = {{{"format", "cubin"}, {"arch", "sm_100a"}, {"path", "elsewhere.cubin"}}};
  std::string sub = makeTempDir();
  writeFile(sub + "/elsewhere.manifest.json", j.dump());
  copy(cubin, sub + "/elsewhere.cubin");
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  ASSERT_EQ(qopt_registry_add_directory(r, sub.c_str(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_kernel *k = nullptr;
  EXPECT_EQ(qopt_kernel_create(ctx, r, "elsewhere", &k), QOPT_ERROR_NOT_FOUND);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("has no binary for " + std::string(info.arch)), std::string::npos) << msg;
  EXPECT_NE(msg.find("a cubin for sm_100a does not run on"), std::string::npos) << msg;
  qopt_registry_destroy(r);
}

TEST_F(Gpu, CapturedStepReplaysInACudaGraph) {
  const cu::Driver &d = cu::driver();
  auto streamCreate = cu::require(d.cuStreamCreate, "cuStreamCreate");
  auto beginCapture = cu::require(d.cuStreamBeginCapture, "cuStreamBeginCapture");
  auto endCapture = cu::require(d.cuStreamEndCapture, "cuStreamEndCapture");
  auto instantiate = cu::require(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  auto graphLaunch = cu::require(d.cuGraphLaunch, "cuGraphLaunch");
  auto streamSync = cu::require(d.cuStreamSynchronize, "cuStreamSynchronize");
  cu::CUstream stream = nullptr;
  CU_OK(streamCreate(&stream, cu::CU_STREAM_NON_BLOCKING));

  qopt_kernel *k = ptxKernel();
  DeviceList l({5000, 1, 70000});
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};

  // A capture before any uncaptured step has no staging buffer reserved.
  CU_OK(beginCapture(stream, cu::CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(qopt_step(k, &l.list, h, 2, 1, nullptr, 0, stream), QOPT_ERROR_CAPTURE);
  EXPECT_NE(std::string(qopt_last_error()).find("warm-up"), std::string::npos)
      << qopt_last_error();
  cu::CUgraph empty = nullptr;
  CU_OK(endCapture(stream, &empty));
  if (empty)
    (void)cu::require(d.cuGraphDestroy, "cuGraphDestroy")(empty);

  // Warm-up, then capture step 2 and replay it twice.
  ASSERT_EQ(qopt_step(k, &l.list, h, 2, 1, nullptr, 0, stream), QOPT_SUCCESS)
      << qopt_last_error();
  l.apply(uniform(0.5, 0.5, 1));
  CU_OK(beginCapture(stream, cu::CU_STREAM_CAPTURE_MODE_GLOBAL));
  qopt_status s = qopt_step(k, &l.list, h, 2, 2, nullptr, 0, stream);
  std::string msg = qopt_last_error();
  cu::CUgraph graph = nullptr;
  CU_OK(endCapture(stream, &graph));
  ASSERT_EQ(s, QOPT_SUCCESS) << msg;
  ASSERT_NE(graph, nullptr);
  cu::CUgraphExec exec = nullptr;
  CU_OK(instantiate(&exec, graph, 0));
  // Capturing ran nothing.
  CU_OK(streamSync(stream));
  l.expectEqualOnDevice();
  CU_OK(graphLaunch(exec, stream));
  CU_OK(graphLaunch(exec, stream));
  CU_OK(streamSync(stream));
  l.apply(uniform(0.5, 0.5, 2));
  l.apply(uniform(0.5, 0.5, 2));
  l.expectEqualOnDevice();
  // Uncaptured steps after the capture still work and leave the graph alone.
  ASSERT_EQ(qopt_step(k, &l.list, h, 2, 3, nullptr, 0, stream), QOPT_SUCCESS);
  CU_OK(graphLaunch(exec, stream));
  CU_OK(streamSync(stream));
  l.apply(uniform(0.5, 0.5, 3));
  l.apply(uniform(0.5, 0.5, 2));
  l.expectEqualOnDevice();
  (void)d.cuGraphExecDestroy(exec);
  (void)d.cuGraphDestroy(graph);

  // Device uniforms: one capture, a new learning rate before each replay.
  DevBuf uni(16);
  float u = 0.25f;
  uni.upload(&u, 4);
  sync();
  ASSERT_EQ(qopt_step_device_uniforms(k, &l.list, static_cast<const float *>(uni.ptr()),
                                      nullptr, 0, stream),
            QOPT_SUCCESS)
      << qopt_last_error(); // warm-up
  l.apply(0.25f);
  CU_OK(beginCapture(stream, cu::CU_STREAM_CAPTURE_MODE_GLOBAL));
  s = qopt_step_device_uniforms(k, &l.list, static_cast<const float *>(uni.ptr()), nullptr,
                                0, stream);
  msg = qopt_last_error();
  CU_OK(endCapture(stream, &graph));
  ASSERT_EQ(s, QOPT_SUCCESS) << msg;
  CU_OK(instantiate(&exec, graph, 0));
  for (float lr : {0.5f, 0.125f, 2.0f}) {
    CU_OK(streamSync(stream));
    uni.upload(&lr, 4);
    sync(); // the upload went through the legacy stream
    CU_OK(graphLaunch(exec, stream));
    l.apply(lr);
  }
  CU_OK(streamSync(stream));
  l.expectEqualOnDevice();
  (void)d.cuGraphExecDestroy(exec);
  (void)d.cuGraphDestroy(graph);
  qopt_kernel_destroy(k);
  (void)cu::require(d.cuStreamDestroy, "cuStreamDestroy")(stream);
}

TEST_F(Gpu, TensorPastTwoToThe31Elements) {
  const cu::Driver &d = cu::driver();
  size_t freeBytes = 0, total = 0;
  CU_OK(cu::require(d.cuMemGetInfo, "cuMemGetInfo")(&freeBytes, &total));
  const int64_t n = 2147483653LL; // 2^31 + 5
  if (freeBytes < size_t(20) << 30)
    GTEST_SKIP() << "needs 20 GiB of free device memory, has " << (freeBytes >> 20) << " MiB";
  qopt_kernel *k = ptxKernel();
  DevBuf p(size_t(n) * 4), g(size_t(n) * 4);
  auto memset32 = cu::require(d.cuMemsetD32, "cuMemsetD32");
  CU_OK(memset32(p.p, 0x3f800000u, size_t(n))); // 1.0f
  CU_OK(memset32(g.p, 0x40000000u, size_t(n))); // 2.0f
  DeviceList small({3000});
  std::vector<int64_t> numels = {n, 3000};
  std::vector<void *> data = {p.ptr(), g.ptr(), small.data[0], small.data[1]};
  std::vector<uint64_t> bytes = {uint64_t(n) * 4, uint64_t(n) * 4, 3016 * 4, 3016 * 4};
  const char *names[] = {"huge", "small"};
  qopt_tensor_list l{2, 2, numels.data(), data.data(), bytes.data(), nullptr, names};
  qopt_hyper h[] = {{"lr", 0.25}, {"beta", 0.0}}; // u0 = 0.25: p = 1 - 0.25 * 2
  ASSERT_EQ(qopt_step(k, &l, h, 2, 1, nullptr, 0, nullptr), QOPT_SUCCESS) << qopt_last_error();
  sync();
  auto expectHalf = [&](int64_t from, int64_t count) {
    ASSERT_LE(from + count, n) << "reading past the tensor";
    std::vector<float> got(static_cast<size_t>(count));
    p.download(got.data(), got.size() * 4, size_t(from) * 4);
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(got[i], 0.5f) << "element " << from + i;
  };
  expectHalf(0, 4096);
  expectHalf(int64_t(1) << 30, 4096);
  expectHalf(n - 8192, 8192); // across element 2^31, to the partial last tile
  small.apply(0.25f);
  small.expectEqualOnDevice();
  // One element short in the byte count is caught before any launch.
  bytes[0] -= 4;
  EXPECT_EQ(qopt_step(k, &l, h, 2, 1, nullptr, 0, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("tensor 'huge' (#0), stream 'p': the buffer "
                                                "holds 8589934608 bytes, the step needs "
                                                "8589934612"),
            std::string::npos)
      << qopt_last_error();
  sync();
  expectHalf(n - 16, 16);
  qopt_kernel_destroy(k);
}

/// Converts float32 values to the bits of `dtype` (f32, bf16 or f16).
std::vector<unsigned char> encode(const std::vector<float> &v, qopt_dtype dtype) {
  std::vector<unsigned char> out;
  if (dtype == QOPT_DTYPE_F32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  out.resize(v.size() * 2);
  std::vector<int8_t> scratch(v.size());
  EXPECT_EQ(qopt_error_bits_init(dtype, QOPT_DTYPE_INT8, v.data(),
                                 static_cast<int64_t>(v.size()), out.data(), scratch.data()),
            QOPT_SUCCESS)
      << qopt_last_error();
  return out;
}

TEST_F(Gpu, CompiledKernelsFromQoptOpt) {
  // Kernels and manifests written by qopt-opt (e.g. `qopt-opt spec.qopt
  // --emit=ptx -o dir/name.ptx` for each shipped spec); the GPU machine has no
  // compiler, so they are built elsewhere and pointed to here.
  const char *dir = std::getenv("QOPT_TEST_KERNEL_DIR");
  if (!dir || !*dir)
    GTEST_SKIP() << "set QOPT_TEST_KERNEL_DIR to a directory of qopt-opt output";
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  size_t added = 0;
  ASSERT_EQ(qopt_registry_add_directory(r, dir, &added), QOPT_SUCCESS) << qopt_last_error();
  ASSERT_GT(added, 0u);
  for (size_t ki = 0; ki < added; ++ki) {
    const char *name = nullptr;
    ASSERT_EQ(qopt_registry_kernel_name(r, ki, &name), QOPT_SUCCESS);
    SCOPED_TRACE(name);
    qopt_kernel *k = nullptr;
    ASSERT_EQ(qopt_kernel_create(ctx, r, name, &k), QOPT_SUCCESS) << qopt_last_error();
    qopt_manifest *m = nullptr;
    ASSERT_EQ(qopt_kernel_get_manifest(k, &m), QOPT_SUCCESS);
    qopt_manifest_info mi;
    ASSERT_EQ(qopt_manifest_get_info(m, &mi), QOPT_SUCCESS);

    // Ascending codebook tables: 256 evenly spaced values in [-1, 1].
    std::vector<float> table(256);
    for (int i = 0; i < 256; ++i)
      table[i] = -1.0f + 2.0f * static_cast<float>(i) / 255.0f;
    table[127] = 0.0f;
    std::vector<const float *> hostTables(mi.num_tables, table.data());
    std::vector<std::unique_ptr<DevBuf>> tableBufs;
    std::vector<const void *> devTables;
    for (size_t t = 0; t < mi.num_tables; ++t) {
      tableBufs.push_back(std::make_unique<DevBuf>(1024));
      tableBufs.back()->upload(table.data(), 1024);
      devTables.push_back(tableBufs.back()->ptr());
    }

    const std::vector<int64_t> numels = {5000, 3 * 4096 + 17, 1};
    std::vector<std::unique_ptr<DevBuf>> bufs;
    std::vector<void *> data;
    std::vector<uint64_t> bytes;
    std::vector<std::vector<float>> masters;
    for (int64_t n : numels) {
      std::vector<qopt_buffer_layout> layout(mi.num_streams);
      ASSERT_EQ(qopt_manifest_state_layout(m, n, hostTables.data(), hostTables.size(),
                                           layout.data(), layout.size()),
                QOPT_SUCCESS)
          << qopt_last_error();
      std::vector<float> master(static_cast<size_t>(n)), grad(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        master[i] = std::sin(0.37f * static_cast<float>(i)) * 0.5f;
        grad[i] = std::cos(0.11f * static_cast<float>(i)) * 0.01f;
      }
      for (const qopt_buffer_layout &b : layout) {
        bufs.push_back(std::make_unique<DevBuf>(std::max<uint64_t>(b.bytes, 16)));
        DevBuf &buf = *bufs.back();
        data.push_back(buf.ptr());
        bytes.push_back(b.bytes);
        std::vector<unsigned char> init(b.bytes, 0);
        size_t esize = 0;
        qopt_dtype_size(b.dtype, &esize);
        if (b.role == QOPT_ROLE_PARAM) {
          init = encode(master, b.dtype);
        } else if (b.role == QOPT_ROLE_GRAD) {
          init = encode(grad, b.dtype);
        } else if (b.role == QOPT_ROLE_ERROR_BITS && b.dtype == QOPT_DTYPE_BF16) {
          // A Kahan compensation starts at zero (docs/numerics.md).
        } else if (b.role == QOPT_ROLE_ERROR_BITS) {
          std::vector<uint16_t> p16(static_cast<size_t>(n));
          ASSERT_EQ(qopt_error_bits_init(mi.param_dtype, b.dtype, master.data(), n,
                                         p16.data(), init.data()),
                    QOPT_SUCCESS);
        } else if (b.init == QOPT_INIT_FILL) {
          for (int64_t i = 0; i < b.count; ++i)
            std::memcpy(init.data() + i * esize, &b.fill_bits, esize);
        }
        if (!init.empty())
          buf.upload(init.data(), init.size());
      }
      masters.push_back(master);
    }
    qopt_tensor_list list{numels.size(), mi.num_streams, numels.data(), data.data(),
                          bytes.data(), nullptr, nullptr};
    for (int64_t step = 1; step <= 3; ++step) {
      ASSERT_EQ(qopt_step(k, &list, nullptr, 0, step, devTables.data(), devTables.size(),
                          nullptr),
                QOPT_SUCCESS)
          << qopt_last_error();
    }
    sync();
    // The reconstructed masters moved, and nothing became NaN.
    size_t moved = 0, nans = 0, total = 0;
    // (A Kahan compensation is no error bits: the parameter is its bf16.)
    bool ecc = mi.error_bits_dtype != QOPT_DTYPE_INVALID &&
               mi.error_bits_dtype != QOPT_DTYPE_BF16;
    for (size_t t = 0; t < numels.size(); ++t) {
      size_t n = static_cast<size_t>(numels[t]);
      std::vector<unsigned char> raw(bytes[t * mi.num_streams]);
      bufs[t * mi.num_streams]->download(raw.data(), raw.size());
      std::vector<float> p(n);
      if (mi.param_dtype == QOPT_DTYPE_F32) {
        std::memcpy(p.data(), raw.data(), n * 4);
      } else {
        std::vector<unsigned char> rho(n * 2, 0);
        qopt_dtype rhoType = ecc ? mi.error_bits_dtype : QOPT_DTYPE_INT8;
        if (ecc)
          bufs[t * mi.num_streams + 1]->download(rho.data(), bytes[t * mi.num_streams + 1]);
        ASSERT_EQ(qopt_error_bits_decode(mi.param_dtype, rhoType, raw.data(), rho.data(),
                                         static_cast<int64_t>(n), p.data()),
                  QOPT_SUCCESS);
      }
      for (size_t i = 0; i < n; ++i) {
        nans += std::isnan(p[i]);
        moved += p[i] != masters[t][i];
        ++total;
      }
    }
    std::printf("[ kernel   ] %s: 3 steps on %zu elements, %zu parameters moved, %zu NaN\n",
                name, total, moved, nans);
    EXPECT_EQ(nans, 0u);
    EXPECT_GT(moved, 0u);
    qopt_manifest_destroy(m);
    qopt_kernel_destroy(k);
  }
  qopt_registry_destroy(r);
}

} // namespace

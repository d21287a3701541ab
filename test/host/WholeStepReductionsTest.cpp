//===- WholeStepReductionsTest.cpp - Whole-step reductions vs the reference -===//
//
// The host functions of a spec with whole-step reductions (docs/abi.md,
// "Whole-step reductions"), called as the ABI describes them without the
// runtime: `<kernel>_partials` of every launch into the step's rows, each
// launch's `<kernel>_combine` over all rows into its uniform slots, then each
// launch's step function. The C++ reference (ref::stepWhole) steps copies of
// the same buffers; every byte of every stream must agree. Gradients of a wide
// range and both signs make the float64 sums cancel, so any other order over
// the chunks or the tensors gives other float32 values. Then the same through
// the runtime (qopt_step_many over several launches, and the split API that
// lets a caller all-reduce the step's rows), on the host backend and, where a
// GPU is present, on CUDA with the PTX kernels: FlashAdamWClip over several
// steps and launches, GlobalProbe's order.
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Reference.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace ref = qopt::ref;

namespace {

using StepFn = void (*)(const void *, const int32_t *, int64_t, const float *,
                        const float *const *, int64_t, int64_t);
using PartialsFn = void (*)(const void *, const int32_t *, int64_t, const float *,
                            const float *const *, int64_t, int64_t, double *);
using CombineFn = void (*)(int64_t, const double *, float *);

/// A host library of test/host/specs and its three functions.
struct Library {
  void *handle = nullptr;
  StepFn step = nullptr;
  PartialsFn partials = nullptr;
  CombineFn combine = nullptr;
  explicit Library(const std::string &stem, const std::string &kernel) {
    const char *dir = std::getenv("QOPT_TEST_EXTRA_KERNEL_DIR");
    std::string path = std::string(dir && *dir ? dir : QOPT_EXTRA_KERNEL_DIR) + "/" + stem + ".so";
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return;
    step = reinterpret_cast<StepFn>(dlsym(handle, (kernel + "_host").c_str()));
    partials = reinterpret_cast<PartialsFn>(dlsym(handle, (kernel + "_partials").c_str()));
    combine = reinterpret_cast<CombineFn>(dlsym(handle, (kernel + "_combine").c_str()));
  }
  ~Library() {
    if (handle)
      dlclose(handle);
  }
};

constexpr int64_t kTile = 4096; // global_probe's launch.tile_elements

/// One launch's descriptor table and tile map (docs/abi.md) over `tensors`.
struct LaunchTables {
  std::vector<uint8_t> descs;
  std::vector<int32_t> tileMap;
  LaunchTables(std::vector<ref::TensorBuffers> &tensors) {
    for (size_t k = 0; k < tensors.size(); ++k) {
      std::vector<ref::Buffer *> streams = tensors[k].streams();
      int64_t firstTile = static_cast<int64_t>(tileMap.size());
      int64_t numel = tensors[k].numel;
      size_t at = descs.size();
      descs.resize(at + 16 + 8 * streams.size());
      std::memcpy(&descs[at], &numel, 8);
      std::memcpy(&descs[at + 8], &firstTile, 8);
      for (size_t s = 0; s < streams.size(); ++s) {
        void *p = streams[s]->data();
        std::memcpy(&descs[at + 16 + 8 * s], &p, 8);
      }
      for (int64_t t = 0; t < (numel + kTile - 1) / kTile; ++t)
        tileMap.push_back(static_cast<int32_t>(k));
    }
  }
  int64_t numTiles() const { return static_cast<int64_t>(tileMap.size()); }
};

ref::StepSpec globalProbe() {
  ref::StepSpec s;
  s.optimizer = ref::Optimizer::GlobalProbe;
  s.param = ref::DType::F32;
  s.grad = ref::DType::F32;
  s.states = {ref::StateScheme::plainF32("a"), ref::StateScheme::plainF32("b"),
              ref::StateScheme::plainF32("c")};
  s.tileElements = kTile;
  return s;
}

/// Gradients whose float64 sums cancel: +-2^e, e in [-30, 30], and a few
/// exact opposites.
std::vector<float> cancellingGradient(int64_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> exponent(-30, 30), sign(0, 1);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i)
    g[i] = (sign(rng) ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), exponent(rng));
  for (int64_t i = 1; i < n; i += 7)
    g[i] = -g[i - 1];
  return g;
}

/// Steps `launches` (tensor sizes per launch) with the library as the ABI
/// says and with the reference; every stream must agree byte for byte.
/// Returns the kernel's parameter of the first tensor (global_sum of g).
float checkStep(const std::vector<std::vector<int64_t>> &sizes, uint32_t seed,
                float poison = 0.0f,
                const std::vector<std::vector<std::vector<float>>> *gradients = nullptr) {
  Library lib("global_probe", "GlobalProbe");
  if (!lib.handle) {
    ADD_FAILURE() << "global_probe.so not built";
    return 0.0f;
  }
  if (!(lib.step && lib.partials && lib.combine)) {
    ADD_FAILURE() << "a function of global_probe.so is missing";
    return 0.0f;
  }
  ref::StepSpec spec = globalProbe();
  std::mt19937 rng(seed);
  std::vector<std::vector<ref::TensorBuffers>> kernel(sizes.size()), expected(sizes.size());
  for (size_t l = 0; l < sizes.size(); ++l)
    for (int64_t n : sizes[l]) {
      ref::TensorBuffers t = ref::makeTensor(spec, n);
      std::vector<float> g = gradients ? (*gradients)[l][kernel[l].size()]
                                       : cancellingGradient(n, rng);
      if (poison != 0.0f && l + 1 == sizes.size())
        g[n / 2] = poison;
      ref::setGrad(spec, t, g);
      kernel[l].push_back(t);
      expected[l].push_back(t);
    }
  std::vector<ref::Launch> launches;
  for (auto &tensors : expected)
    launches.push_back({spec, &tensors});
  ref::stepWhole(launches, /*step=*/1);

  // Phase A: each launch's rows of the step; phase B: each launch's
  // combine into its own uniforms, then its step.
  constexpr int64_t kS = 3; // global_max, global_norm, global_sum
  std::vector<LaunchTables> tables;
  int64_t rows = 0;
  for (auto &tensors : kernel) {
    tables.emplace_back(tensors);
    rows += static_cast<int64_t>(tensors.size());
  }
  std::vector<double> partials(rows * kS, std::nan(""));
  int64_t base = 0;
  for (size_t l = 0; l < kernel.size(); ++l) {
    lib.partials(tables[l].descs.data(), tables[l].tileMap.data(), tables[l].numTiles(), nullptr,
                 nullptr, 0, tables[l].numTiles(), partials.data() + base * kS);
    base += static_cast<int64_t>(kernel[l].size());
  }
  for (size_t l = 0; l < kernel.size(); ++l) {
    std::vector<float> uniforms(kS, 0.0f);
    lib.combine(rows, partials.data(), uniforms.data());
    lib.step(tables[l].descs.data(), tables[l].tileMap.data(), tables[l].numTiles(),
             uniforms.data(), nullptr, 0, tables[l].numTiles());
  }
  for (size_t l = 0; l < kernel.size(); ++l)
    for (size_t k = 0; k < kernel[l].size(); ++k) {
      std::vector<ref::Buffer *> got = kernel[l][k].streams(), want = expected[l][k].streams();
      std::vector<std::string> names = expected[l][k].streamNames(spec);
      for (size_t s = 0; s < got.size(); ++s)
        EXPECT_EQ(0, std::memcmp(got[s]->data(), want[s]->data(), want[s]->bytes()))
            << "launch " << l << " tensor " << k << " stream " << names[s];
    }
  return kernel[0][0].param.as<float>()[0];
}

TEST(WholeStepReductions, OneLaunchMatchesReferenceByteForByte) {
  checkStep({{5000, 3 * 2048 + 7, 1, 70000}}, 1);
}

TEST(WholeStepReductions, SeveralLaunchesMatchReferenceByteForByte) {
  // The tree runs over the step's tensors across launches: 3 + 2 + 4 rows.
  checkStep({{5000, 33, 131072}, {1, 4097}, {2048, 2049, 9000, 12}}, 2);
}

TEST(WholeStepReductions, OrderAcrossTensorsIsThePairwiseTree) {
  // Tensors whose sums are 2^100, 1, -2^100, 1 (two launches of two): the
  // tree over the rows gives (2^100 + 1) + (-2^100 + 1) = 0 (1 is below half
  // an ulp of 2^100), a left fold over the tensors 1, and so would a sum
  // that ignored the launches' boundaries in another order.
  const float big = std::ldexp(1.0f, 100);
  std::vector<std::vector<std::vector<float>>> g = {
      {{big, 3.0f, -3.0f}, {1.0f}}, {{-big}, {0.5f, 0.5f}}};
  EXPECT_EQ(checkStep({{3, 1}, {1, 2}}, 0, 0.0f, &g), 0.0f);
}

TEST(WholeStepReductions, NaNGradientGivesTheCanonicalNaN) {
  checkStep({{5000, 33}, {4097}}, 3, std::nanf("0x123"));
}

TEST(WholeStepReductions, InfiniteGradient) {
  checkStep({{5000, 33}, {4097}}, 4, -INFINITY);
}

TEST(WholeStepReductions, ReferenceOrderIsTheTreeOverTensors) {
  // The reference's order itself, against docs/numerics.md read by hand:
  // the tree over {1, 1e16, -1e16, 1} is (1 + 1e16) + (-1e16 + 1) = 1e16 -
  // 1e16 = 0 (each inner sum rounds to +-1e16: 1 is half an ulp there, a
  // tie to the even 1e16); a left fold gives ((1 + 1e16) - 1e16) + 1 = 1.
  EXPECT_EQ(ref::reduceStep(ref::Reduction::Sum, {1.0, 1e16, -1e16, 1.0}), 0.0f);
  // Three rows pad to four with -0: (1e16 + 1) + (-1e16 + -0) = 0, while
  // 1e16 + (1 + -1e16) (a right fold) = 1e16 - 1e16 = 0 too; and with the
  // 1 last: (1e16 + -1e16) + (1 + -0) = 1, which a left fold also gives.
  EXPECT_EQ(ref::reduceStep(ref::Reduction::Sum, {1e16, -1e16, 1.0}), 1.0f);
  EXPECT_EQ(ref::reduceStep(ref::Reduction::Norm, {16.0, 9.0}), 5.0f);
  EXPECT_EQ(ref::reduceStep(ref::Reduction::Max, {-1.0, 2.0, -0.5}), 2.0f);
  EXPECT_THROW(ref::reduceStep(ref::Reduction::Mean, {1.0}), std::invalid_argument);
}

/// A kernel loaded through the runtime on one backend, and buffers of the
/// context holding copies of reference tensors.
class RuntimeStep {
public:
  RuntimeStep(qopt_backend backend, const std::string &manifestPath) {
    if (backend == QOPT_BACKEND_CUDA) {
      int32_t n = 0;
      if (qopt_cuda_device_count(&n) != QOPT_SUCCESS || n == 0) {
        skip = "no CUDA device";
        return;
      }
    }
    ok = qopt_context_create(backend, 0, &ctx) == QOPT_SUCCESS &&
         qopt_registry_create(&registry) == QOPT_SUCCESS &&
         qopt_registry_add_manifest_file(registry, manifestPath.c_str()) == QOPT_SUCCESS &&
         qopt_manifest_load(manifestPath.c_str(), &manifest) == QOPT_SUCCESS &&
         qopt_manifest_get_info(manifest, &info) == QOPT_SUCCESS &&
         qopt_kernel_create(ctx, registry, info.kernel, &kernel) == QOPT_SUCCESS;
    if (!ok)
      error = qopt_last_error();
  }
  ~RuntimeStep() {
    for (void *b : buffers)
      qopt_buffer_free(ctx, b);
    qopt_kernel_destroy(kernel);
    qopt_registry_destroy(registry);
    qopt_manifest_destroy(manifest);
    qopt_context_destroy(ctx);
  }

  /// A launch's list over device copies of `tensors` (uploaded now).
  struct List {
    std::vector<int64_t> numels;
    std::vector<void *> pointers;
    qopt_tensor_list list{};
  };
  void upload(std::vector<ref::TensorBuffers> &tensors, List &out) {
    out.numels.clear();
    out.pointers.clear();
    for (ref::TensorBuffers &t : tensors) {
      out.numels.push_back(t.numel);
      for (ref::Buffer *b : t.streams()) {
        void *d = nullptr;
        ASSERT_EQ(qopt_buffer_alloc(ctx, b->bytes(), &d), QOPT_SUCCESS) << qopt_last_error();
        buffers.push_back(d);
        ASSERT_EQ(qopt_buffer_upload(ctx, d, b->data(), b->bytes()), QOPT_SUCCESS);
        out.pointers.push_back(d);
      }
    }
    out.list.num_tensors = tensors.size();
    out.list.num_streams = info.num_streams;
    out.list.numels = out.numels.data();
    out.list.data = out.pointers.data();
  }
  /// Copies the device streams of `list` back into `tensors`.
  void download(const List &list, std::vector<ref::TensorBuffers> &tensors) {
    size_t i = 0;
    for (ref::TensorBuffers &t : tensors)
      for (ref::Buffer *b : t.streams())
        ASSERT_EQ(qopt_buffer_download(ctx, b->data(), list.pointers[i++], b->bytes()),
                  QOPT_SUCCESS);
  }

  qopt_context *ctx = nullptr;
  qopt_registry *registry = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_manifest_info info{};
  qopt_kernel *kernel = nullptr;
  std::vector<void *> buffers;
  bool ok = false;
  std::string skip, error;
};

std::string manifestPath(qopt_backend backend, bool shipped, const std::string &stem) {
  if (shipped) {
    // $QOPT_TEST_KERNEL_ROOT: the shipped kernels' folder (<build>/kernels) elsewhere.
    const char *root = std::getenv("QOPT_TEST_KERNEL_ROOT");
    std::string host = root && *root ? std::string(root) + "/host" : QOPT_DEFAULT_KERNEL_DIR;
    std::string dir = host.substr(0, host.rfind('/')) + (backend == QOPT_BACKEND_CUDA ? "/ptx" : "/host");
    return dir + "/" + stem + ".manifest.json";
  }
  const char *env = std::getenv("QOPT_TEST_EXTRA_KERNEL_DIR");
  std::string dir = env && *env ? env : QOPT_EXTRA_KERNEL_DIR;
  return dir + (backend == QOPT_BACKEND_CUDA ? "/ptx/" : "/") + stem + ".manifest.json";
}

class WholeStepRuntime : public ::testing::TestWithParam<qopt_backend> {};

/// FlashAdamWClip's reference; `f32`: the `.f32` variant (float32 parameter
/// and gradient, no error bits).
ref::StepSpec flashAdamWClip(double maxGradNorm, bool f32 = false) {
  ref::Hyper h;
  h.maxGradNorm = maxGradNorm;
  ref::StepSpec s = ref::flashAdamW(h, f32 ? ref::Master::None : ref::Master::EccI8);
  s.optimizer = ref::Optimizer::FlashAdamWClip;
  if (f32) {
    s.param = ref::DType::F32;
    s.grad = ref::DType::F32;
  }
  return s;
}

/// Three steps of FlashAdamWClip over two launches (one qopt_step_many), with
/// gradients whose global norm is far above max_grad_norm (clipped), then far
/// below (not clipped); every stream byte for byte against ref::stepWhole.
void checkFlashAdamWClip(qopt_backend backend, bool f32);

TEST_P(WholeStepRuntime, FlashAdamWClipMatchesReferenceByteForByte) {
  for (bool f32 : {false, true}) {
    SCOPED_TRACE(f32 ? "flash_adamw_clip.f32" : "flash_adamw_clip");
    checkFlashAdamWClip(GetParam(), f32);
    if (HasFatalFailure() || IsSkipped())
      return;
  }
}

void checkFlashAdamWClip(qopt_backend backend, bool f32) {
  RuntimeStep rt(backend, manifestPath(backend, true, f32 ? "flash_adamw_clip.f32" : "flash_adamw_clip"));
  if (!rt.skip.empty())
    GTEST_SKIP() << rt.skip;
  ASSERT_TRUE(rt.ok) << rt.error;
  for (double maxGradNorm : {0.5, 1e6}) {
    ref::StepSpec spec = flashAdamWClip(maxGradNorm, f32);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::vector<std::vector<int64_t>> sizes = {{5000, 70000, 33}, {4097, 1}};
    std::vector<std::vector<ref::TensorBuffers>> got(2), want(2);
    std::vector<RuntimeStep::List> lists(2);
    for (size_t l = 0; l < 2; ++l) {
      for (int64_t n : sizes[l]) {
        ref::TensorBuffers t = ref::makeTensor(spec, n);
        std::vector<float> x(n);
        for (float &v : x)
          v = normal(rng);
        ref::setMaster(spec, t, x);
        got[l].push_back(t);
        want[l].push_back(t);
      }
      rt.upload(got[l], lists[l]);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
    }
    for (int64_t step = 1; step <= 3; ++step) {
      for (size_t l = 0; l < 2; ++l)
        for (size_t k = 0; k < want[l].size(); ++k) {
          std::vector<float> g(want[l][k].numel);
          for (float &v : g)
            v = normal(rng) * (step == 2 ? 1e-3f : 3.0f);
          ref::setGrad(spec, want[l][k], g);
          got[l][k].grad = want[l][k].grad;
        }
      // The gradients go to the device: the lists' grad streams.
      for (size_t l = 0; l < 2; ++l) {
        size_t i = 0;
        for (ref::TensorBuffers &t : got[l])
          for (ref::Buffer *b : t.streams()) {
            if (b == &t.grad)
              ASSERT_EQ(qopt_buffer_upload(rt.ctx, lists[l].pointers[i], b->data(), b->bytes()),
                        QOPT_SUCCESS);
            ++i;
          }
      }
      std::vector<ref::Launch> launches = {{spec, &want[0]}, {spec, &want[1]}};
      ref::stepWhole(launches, step);
      qopt_hyper hyper{"max_grad_norm", maxGradNorm};
      qopt_launch runs[2] = {};
      for (size_t l = 0; l < 2; ++l) {
        runs[l].kernel = rt.kernel;
        runs[l].tensors = &lists[l].list;
        runs[l].hypers = &hyper;
        runs[l].num_hypers = 1;
        runs[l].step = step;
      }
      ASSERT_EQ(qopt_step_many(runs, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
      for (size_t l = 0; l < 2; ++l) {
        rt.download(lists[l], got[l]);
        for (size_t k = 0; k < want[l].size(); ++k) {
          std::vector<ref::Buffer *> g = got[l][k].streams(), w = want[l][k].streams();
          std::vector<std::string> names = want[l][k].streamNames(spec);
          for (size_t s = 0; s < w.size(); ++s)
            EXPECT_EQ(0, std::memcmp(g[s]->data(), w[s]->data(), w[s]->bytes()))
                << "max_grad_norm " << maxGradNorm << " step " << step << " launch " << l
                << " tensor " << k << " stream " << names[s];
        }
      }
    }
  }
}

/// GlobalProbe through the runtime: two launches in one qopt_step_many,
/// then the same step split in two calls with the rows in a caller's buffer
/// (as an all-reduce between them would leave them): both byte for byte as
/// the reference.
TEST_P(WholeStepRuntime, GlobalProbeOneCallAndSplitCallsMatchReference) {
  RuntimeStep rt(GetParam(), manifestPath(GetParam(), false, "global_probe"));
  if (!rt.skip.empty())
    GTEST_SKIP() << rt.skip;
  ASSERT_TRUE(rt.ok) << rt.error;
  ref::StepSpec spec = globalProbe();
  std::mt19937 rng(11);
  const std::vector<std::vector<int64_t>> sizes = {{5000, 33, 131072}, {1, 4097}};
  for (bool split : {false, true}) {
    std::vector<std::vector<ref::TensorBuffers>> got(2), want(2);
    std::vector<RuntimeStep::List> lists(2);
    for (size_t l = 0; l < 2; ++l) {
      for (int64_t n : sizes[l]) {
        ref::TensorBuffers t = ref::makeTensor(spec, n);
        ref::setGrad(spec, t, cancellingGradient(n, rng));
        got[l].push_back(t);
        want[l].push_back(t);
      }
      rt.upload(got[l], lists[l]);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
    }
    std::vector<ref::Launch> launches = {{spec, &want[0]}, {spec, &want[1]}};
    ref::stepWhole(launches, 1);
    qopt_launch runs[2] = {};
    for (size_t l = 0; l < 2; ++l) {
      runs[l].kernel = rt.kernel;
      runs[l].tensors = &lists[l].list;
      runs[l].step = 1;
    }
    if (!split) {
      ASSERT_EQ(qopt_step_many(runs, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
    } else {
      void *rows = nullptr;
      ASSERT_EQ(qopt_buffer_alloc(rt.ctx, 5 * 3 * sizeof(double), &rows), QOPT_SUCCESS);
      rt.buffers.push_back(rows);
      ASSERT_EQ(qopt_step_many_partials(runs, 2, static_cast<double *>(rows), nullptr),
                QOPT_SUCCESS)
          << qopt_last_error();
      ASSERT_EQ(qopt_step_many_from_partials(runs, 2, static_cast<const double *>(rows), nullptr),
                QOPT_SUCCESS)
          << qopt_last_error();
    }
    for (size_t l = 0; l < 2; ++l) {
      rt.download(lists[l], got[l]);
      for (size_t k = 0; k < want[l].size(); ++k) {
        std::vector<ref::Buffer *> g = got[l][k].streams(), w = want[l][k].streams();
        for (size_t s = 0; s < w.size(); ++s)
          EXPECT_EQ(0, std::memcmp(g[s]->data(), w[s]->data(), w[s]->bytes()))
              << (split ? "split" : "one call") << " launch " << l << " tensor " << k
              << " stream " << s;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, WholeStepRuntime,
                         ::testing::Values(QOPT_BACKEND_HOST, QOPT_BACKEND_CUDA),
                         [](const ::testing::TestParamInfo<qopt_backend> &i) {
                           return std::string(i.param == QOPT_BACKEND_HOST ? "Host" : "Cuda");
                         });

} // namespace

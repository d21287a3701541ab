//===- HostKernelNumericsTest.cpp - Host kernels vs the C++ reference -----===//
//
// Each shipped spec's strict host kernel, as qopt-opt compiled it (the same
// qopt IR as the GPU kernel, lowered by convert-qopt-to-host), steps a list of
// tensors on host memory through the runtime's C API; the C++ reference
// (test/reference), which shares no code with the compiler, steps copies of
// the same buffers. Every byte of every stream (parameter, error bits, codes,
// scales, absmax) must agree after every step: on the cases of the GPU suite
// (test/gpu/KernelNumericsTest.cpp), and on edge cases: all-zero gradients,
// NaN and infinities in the gradient (any NaN payload), values near the
// float16 and bfloat16 limits, and the tile range split across two threads.
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Codebook.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Step.h"
#include "ShippedSpecCases.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ref = qopt::ref;

namespace {

/// Where the host libraries of the shipped specs, or of the test-only specs
/// of test/host/specs, are.
std::string kernelDir(bool shipped) {
  const char *dir = std::getenv(shipped ? "QOPT_TEST_KERNEL_DIR" : "QOPT_TEST_EXTRA_KERNEL_DIR");
  return dir && *dir ? dir : shipped ? QOPT_DEFAULT_KERNEL_DIR : QOPT_EXTRA_KERNEL_DIR;
}

/// A spec and the reference step that specifies it.
struct Case {
  std::string spec;                    // file stem in specs/ (or test/host/specs/)
  std::function<ref::StepSpec()> make; // the reference's description
  std::vector<qopt_hyper> hypers;      // values given to the kernel
  bool shipped = true;                 // false: a test-only spec
};

using namespace qopt::test;

/// test/host/specs/adamw_seed003.qopt: seed 003's group options on groups
/// of 8 and 64, an f16 parameter with int16 error bits, an f32 gradient.
ref::StepSpec seed003Groups() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI16);
  s.param = ref::DType::F16;
  s.grad = ref::DType::F32;
  s.states[0].group = ref::GroupScheme::seed003(/*isSigned=*/true, ref::Companding::Softsign);
  s.states[0].group.group = 8;
  s.states[1].group = ref::GroupScheme::seed003(/*isSigned=*/false, ref::Companding::Sqrt);
  s.states[1].group.group = 64;
  s.states[1].group.scaleDType = ref::ScaleDType::F32;
  return s;
}

/// test/host/specs/adamw_plain.qopt: plain bf16 and f32 states, an f32
/// parameter, an f16 gradient.
ref::StepSpec plainStates() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::None);
  s.param = ref::DType::F32;
  s.grad = ref::DType::F16;
  s.states = {ref::StateScheme::plainBF16("m"), ref::StateScheme::plainF32("v")};
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const SpecCase &c : shippedSpecCases())
    all.push_back({c.spec, c.make, c.hypers});
  all.push_back({"adamw_seed003", seed003Groups, kAdamHypers, /*shipped=*/false});
  all.push_back({"adamw_plain", plainStates, kAdamHypers, /*shipped=*/false});
  return all;
}

/// Fills the gradient of tensor `k` at step `step`.
using GradFn = std::function<std::vector<float>(int64_t step, size_t k, int64_t n)>;
/// Rewrites raw gradient bytes after the values are set (special NaN payloads).
using PokeFn = std::function<void(size_t k, ref::Buffer &grad)>;

/// The routine of every test: a registry of kernels/host, a host context and
/// the spec's kernel; `run` steps the host kernel and the reference on
/// copies of the same tensors and compares every stream after every step.
class HostKernelNumerics : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    const Case &c = GetParam();
    spec = c.make();
    ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS)
        << qopt_last_error();
    manifestPath = kernelDir(c.shipped) + "/" + c.spec + ".manifest.json";
    ASSERT_EQ(qopt_manifest_load(manifestPath.c_str(), &manifest), QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_add_manifest_file(registry, manifestPath.c_str()),
              QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_kernel_create(ctx, registry, info.kernel, &kernel), QOPT_SUCCESS)
        << qopt_last_error();
    qopt_kernel_info kinfo{};
    ASSERT_EQ(qopt_kernel_get_info(kernel, &kinfo), QOPT_SUCCESS);
    ASSERT_EQ(kinfo.format, QOPT_BINARY_HOST);
    for (const ref::StateScheme &st : spec.states)
      if (st.kind == ref::StateKind::Codebook)
        tables.push_back(st.qmap.data());
  }

  void TearDown() override {
    qopt_kernel_destroy(kernel);
    qopt_registry_destroy(registry);
    qopt_manifest_destroy(manifest);
    qopt_context_destroy(ctx);
  }

  /// Steps `tensors` with the host kernel `k` (default: the registry's).
  void hostStep(std::vector<ref::TensorBuffers> &tensors, int64_t step,
                qopt_kernel *k = nullptr) {
    std::vector<int64_t> numels;
    std::vector<void *> pointers;
    for (ref::TensorBuffers &t : tensors) {
      numels.push_back(t.numel);
      std::vector<ref::Buffer *> streams = t.streams();
      ASSERT_EQ(streams.size(), info.num_streams)
          << "reference and manifest disagree on streams";
      for (ref::Buffer *b : streams)
        pointers.push_back(b->data());
    }
    qopt_tensor_list list{};
    list.num_tensors = tensors.size();
    list.num_streams = info.num_streams;
    list.numels = numels.data();
    list.data = pointers.data();
    const Case &c = GetParam();
    ASSERT_EQ(qopt_step(k ? k : kernel, &list, c.hypers.data(), c.hypers.size(), step,
                        tables.data(), tables.size(), nullptr),
              QOPT_SUCCESS)
        << qopt_last_error();
  }

  /// Four steps of the reference and of the host kernel from `initial`.
  void run(const std::vector<ref::TensorBuffers> &initial, const GradFn &grads,
           const PokeFn &poke = nullptr, qopt_kernel *k = nullptr) {
    std::vector<ref::TensorBuffers> want = initial, got = initial;
    for (int64_t step = 1; step <= 4; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (size_t i = 0; i < want.size(); ++i) {
        ref::setGrad(spec, want[i], grads(step, i, want[i].numel));
        if (poke)
          poke(i, want[i].grad);
        got[i].grad = want[i].grad;
      }
      ref::step(spec, want, step);
      hostStep(got, step, k);
      if (HasFatalFailure())
        return;
      compare(got, want);
      if (HasFailure())
        return;
    }
  }

  /// Adds a failure per stream whose bytes differ, with a few examples.
  void compare(std::vector<ref::TensorBuffers> &got, std::vector<ref::TensorBuffers> &want) {
    const std::string &name = GetParam().spec;
    for (size_t k = 0; k < want.size(); ++k) {
      std::vector<ref::Buffer *> gs = got[k].streams(), ws = want[k].streams();
      std::vector<std::string> names = want[k].streamNames(spec);
      for (size_t s = 0; s < ws.size(); ++s) {
        const std::vector<uint8_t> &g = gs[s]->raw(), &w = ws[s]->raw();
        if (g == w)
          continue;
        size_t esize = ref::dtypeSize(ws[s]->dtype());
        size_t mismatches = 0;
        std::string examples;
        for (size_t i = 0; i < g.size(); i += esize)
          if (std::memcmp(&g[i], &w[i], esize) != 0 && ++mismatches <= 4) {
            char hex[8];
            examples += " [" + std::to_string(i / esize) + "] got 0x";
            for (size_t b = esize; b-- > 0;) {
              std::snprintf(hex, sizeof hex, "%02x", g[i + b]);
              examples += hex;
            }
            examples += " want 0x";
            for (size_t b = esize; b-- > 0;) {
              std::snprintf(hex, sizeof hex, "%02x", w[i + b]);
              examples += hex;
            }
          }
        ADD_FAILURE() << name << ": tensor " << k << " of " << want[k].numel
                      << " elements, stream " << names[s] << ": " << mismatches << " of "
                      << ws[s]->count() << " elements differ:" << examples;
      }
    }
  }

  /// Whether NaNs reach Lion's sign(), where the reference gives NaN
  /// (test/reference/lib/Step.cpp, signOf) and the DSL and torch.sign give +0
  /// (docs/dsl.md), which the compiler follows.
  /// Tensors of `sizes` with masters 0.5 * N(0, 1).
  std::vector<ref::TensorBuffers> randomTensors(const std::vector<int64_t> &sizes) {
    std::vector<ref::TensorBuffers> tensors;
    for (int64_t n : sizes) {
      tensors.push_back(ref::makeTensor(spec, n));
      std::vector<float> x(n);
      for (float &v : x)
        v = 0.5f * normal(rng);
      ref::setMaster(spec, tensors.back(), x);
    }
    return tensors;
  }

  ref::StepSpec spec;
  std::string manifestPath;
  qopt_context *ctx = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_manifest_info info{};
  qopt_registry *registry = nullptr;
  qopt_kernel *kernel = nullptr;
  std::vector<const void *> tables;
  std::mt19937 rng{1234};
  std::normal_distribution<float> normal{0.0f, 1.0f};
};

TEST_P(HostKernelNumerics, StrictKernelMatchesReferenceByteForByte) {
  // Sizes: empty, one element, a partial group, a full tile, a tile and a
  // bit, several tiles with a partial block, and a larger tensor.
  run(randomTensors({0, 1, 31, 4096, 4097, 3 * 4096 + 17, 70001}),
      [&](int64_t step, size_t, int64_t n) {
        std::vector<float> g(n);
        float scale = step == 3 ? 1e-3f : 1e-2f; // a step with smaller gradients
        for (float &v : g)
          v = scale * normal(rng);
        return g;
      });
}

TEST_P(HostKernelNumerics, SeedBatteryGradients) {
  // One launch over tensors whose gradients follow seed 004's battery
  // (numerics.md §5), at reduced sizes: normal, heavy_tail (randn *
  // exp(3 randn)), tiny (randn * 1e-20), adam_v_like ((1e-3 randn)^2),
  // nonmult32 (2^16 + 17 elements), const_groups (all 0.37), with_zeros (30%
  // exact zeros).
  enum Kind { Normal, HeavyTail, Tiny, AdamVLike, NonMult32, ConstGroups, WithZeros };
  const std::vector<int64_t> sizes = {1 << 14, 1 << 14, 1 << 12, 1 << 14,
                                      (1 << 16) + 17, 1 << 12, 1 << 14};
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  run(randomTensors(sizes), [&](int64_t, size_t k, int64_t n) {
    std::vector<float> g(n);
    for (float &v : g) {
      float r = normal(rng);
      switch (static_cast<Kind>(k)) {
      case Normal:
      case NonMult32:
        v = r;
        break;
      case HeavyTail:
        v = r * std::exp(3.0f * normal(rng));
        break;
      case Tiny:
        v = r * 1e-20f;
        break;
      case AdamVLike:
        v = (1e-3f * r) * (1e-3f * r);
        break;
      case ConstGroups:
        v = 0.37f;
        break;
      case WithZeros:
        v = uniform(rng) < 0.3f ? 0.0f : r;
        break;
      }
    }
    return g;
  });
}

TEST_P(HostKernelNumerics, AllZeroGradient) {
  // A zero master (all-zero state) and a random one; every gradient is 0.
  std::vector<ref::TensorBuffers> tensors = randomTensors({33, 5000});
  ref::setMaster(spec, tensors[0], std::vector<float>(33, 0.0f));
  run(tensors, [](int64_t, size_t, int64_t n) { return std::vector<float>(n, 0.0f); });
}

TEST_P(HostKernelNumerics, NonFiniteGradient) {
  // NaN, +inf and -inf scattered, a group of 32 all NaN, a group all +inf;
  // then raw bf16 NaNs of other payloads and signs (a signalling one too).
  const float inf = std::numeric_limits<float>::infinity();
  run(randomTensors({4096 + 100, 300}),
      [&](int64_t step, size_t k, int64_t n) {
        std::vector<float> g(n);
        for (int64_t i = 0; i < n; ++i) {
          g[i] = 1e-2f * normal(rng);
          if (step == 4 && k == 1)
            continue; // finite again: the state keeps what the earlier steps left
          if (i % 97 == 5 || (i >= 64 && i < 96))
            g[i] = std::nanf("");
          else if (i % 101 == 7 || (i >= 128 && i < 160))
            g[i] = inf;
          else if (i % 103 == 9)
            g[i] = -inf;
        }
        return g;
      },
      [](size_t, ref::Buffer &grad) {
        if (grad.dtype() != ref::DType::BF16 || grad.count() < 300)
          return;
        uint16_t *bits = grad.as<uint16_t>();
        bits[200] = 0xffc1; // negative quiet NaN with a payload
        bits[201] = 0x7f81; // signalling NaN
        bits[233] = 0xff80; // -inf
      });
}

TEST_P(HostKernelNumerics, NearFloat16AndBFloat16Limits) {
  // Masters near the bf16 and f16 limits and gradients of magnitudes that
  // overflow f16 scales, land in f16 subnormals, or are f32/bf16 subnormal.
  // An infinite scale dequantizes a zero code to NaN.
  const std::vector<float> masters = {3.3895314e38f, -3.38e38f, 65504.0f, 65520.0f,
                                      -65536.0f,     6.1035156e-5f, 5.9604645e-8f,
                                      1.1754944e-38f, 1e-40f,   0.0f};
  const std::vector<float> magnitudes = {3e38f,   1e6f,  65504.0f, 65520.0f, 1e4f,
                                         6.1e-5f, 6e-8f, 1e-10f,   1.2e-38f, 1e-40f};
  std::vector<ref::TensorBuffers> tensors;
  for (size_t k = 0; k < masters.size(); ++k) {
    int64_t n = 64 + 7 * int64_t(k); // two groups, the second partial
    tensors.push_back(ref::makeTensor(spec, n));
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = masters[k] * (i % 3 == 0 ? 1.0f : i % 3 == 1 ? -0.999f : 0.5f);
    ref::setMaster(spec, tensors.back(), x);
  }
  run(tensors, [&](int64_t step, size_t k, int64_t n) {
    std::vector<float> g(n);
    float m = magnitudes[(k + size_t(step)) % magnitudes.size()];
    for (int64_t i = 0; i < n; ++i)
      g[i] = m * (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.25f * std::fabs(normal(rng)));
    return g;
  });
}

/// The host function of the kernel under test, for the splitting trampoline.
qopt_host_kernel_fn gHostFunction = nullptr;

/// Calls the host function on two halves of the tile range, from two threads
/// at once, as a runtime may.
void splitTiles(const void *descs, const int32_t *tileMap, int64_t numTiles,
                const float *uniforms, const float *const *tables, int64_t begin,
                int64_t end) {
  int64_t mid = begin + (end - begin) / 2;
  std::thread second(gHostFunction, descs, tileMap, numTiles, uniforms, tables, mid, end);
  gHostFunction(descs, tileMap, numTiles, uniforms, tables, begin, mid);
  second.join();
}

TEST_P(HostKernelNumerics, TileRangeSplitAcrossThreads) {
  std::string library = kernelDir(GetParam().shipped) + "/" + GetParam().spec + ".so";
  void *handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  std::string symbol = std::string(info.kernel) + "_host";
  gHostFunction = reinterpret_cast<qopt_host_kernel_fn>(dlsym(handle, symbol.c_str()));
  ASSERT_NE(gHostFunction, nullptr) << symbol << " not in " << library;
  qopt_kernel *split = nullptr;
  ASSERT_EQ(qopt_kernel_create_host(ctx, manifest, splitTiles, &split), QOPT_SUCCESS)
      << qopt_last_error();
  run(randomTensors({31, 4097, 70001}),
      [&](int64_t, size_t, int64_t n) {
        std::vector<float> g(n);
        for (float &v : g)
          v = 1e-2f * normal(rng);
        return g;
      },
      nullptr, split);
  qopt_kernel_destroy(split);
  dlclose(handle);
}

/// Names a case by its spec in test listings (CTest's names stay stable).
void PrintTo(const Case &c, std::ostream *os) { *os << c.spec; }

INSTANTIATE_TEST_SUITE_P(Specs, HostKernelNumerics, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.spec;
                         });

} // namespace

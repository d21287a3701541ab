//===- HostKernelNumerics.h - Host kernels vs the C++ reference ---------===//
//
// The fixture of the host suites (HostKernelNumericsTest.cpp,
// HostGradScalingTest.cpp): each case is a spec's host library, as qopt-opt
// compiled it (the same qopt IR as the GPU kernel, lowered by
// convert-qopt-to-host), and the C++ reference step that specifies it (test/
// reference, which shares no code with the compiler). `run` steps a list of
// tensors on host memory through the runtime's C API and the reference on
// copies of the same buffers, and compares every byte of every stream and the
// numerics counters after every step.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_HOST_HOSTKERNELNUMERICS_H
#define QOPT_TEST_HOST_HOSTKERNELNUMERICS_H

#include "qopt/reference/Codebook.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Step.h"
#include "HostKernelHandles.h"
#include "ShippedSpecCases.h"
#include "RandomTensors.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
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

namespace qopt::host_test {

namespace ref = qopt::ref;

/// Where the host libraries of the shipped specs, or of the test-only specs
/// of test/host/specs, are.
std::string kernelDir(bool shipped);

/// A spec and the reference step that specifies it.
struct Case {
  std::string spec;                    // file stem in specs/ (or test/host/specs/)
  std::function<ref::StepSpec()> make; // the reference's description
  std::vector<qopt_hyper> hypers;      // values given to the kernel
  bool shipped = true;                 // false: a test-only spec
};

/// A shipped spec's --param-type variant (specs/CMakeLists.txt builds
/// <spec>.f16 and <spec>.f32): the parameter and the gradient of type `t`;
/// an f32 parameter is its own master weight, without error bits.
ref::StepSpec retyped(ref::StepSpec s, ref::DType t);

/// Every shipped spec, its f16 and f32 variants, and the test-only specs.
std::vector<Case> cases();

/// Names a case by its spec in test listings (CTest's names stay stable).
void PrintTo(const Case &c, std::ostream *os);

/// A test name: the spec with the variant's dots as underscores.
std::string caseName(const ::testing::TestParamInfo<Case> &info);

/// Fills the gradient of tensor `k` at step `step`.
using GradFn = std::function<std::vector<float>(int64_t step, size_t k, int64_t n)>;
/// Rewrites raw gradient bytes after the values are set (special NaN payloads).
using PokeFn = std::function<void(size_t k, ref::Buffer &grad)>;

/// Whether two f32 or f16 elements are both NaN. IEEE 754 fixes neither the
/// sign nor the payload of a NaN that an operation produces; on x86 it is the
/// first NaN operand's, and LLVM may commute the operands of + and * where g++
/// does not, so an f32 parameter (stored as computed) or an f16 one (which
/// keeps a NaN's sign) can hold a NaN of the other sign than the reference's.
/// Such elements count as equal; every other byte must agree. (A bf16
/// parameter stores every NaN as 0x7fc0, like the reference.)
inline bool bothNaN(ref::DType dtype, const uint8_t *a, const uint8_t *b) {
  if (dtype == ref::DType::F32) {
    float x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return std::isnan(x) && std::isnan(y);
  }
  if (dtype == ref::DType::F16) {
    uint16_t x, y;
    std::memcpy(&x, a, 2);
    std::memcpy(&y, b, 2);
    auto nan = [](uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; };
    return nan(x) && nan(y);
  }
  return false;
}

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
    // A launch's tensors lie at their first tiles (stochastic rounding's index).
    spec.tileElements = info.launch.tile_elements;
    ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_add_manifest_file(registry, manifestPath.c_str()),
              QOPT_SUCCESS)
        << qopt_last_error();
    ASSERT_EQ(qopt_kernel_create(ctx, registry, info.kernel, &kernel), QOPT_SUCCESS)
        << qopt_last_error();
    qopt_kernel_info kinfo{};
    ASSERT_EQ(qopt_kernel_get_info(kernel, &kinfo), QOPT_SUCCESS);
    ASSERT_EQ(kinfo.format, QOPT_BINARY_HOST);
    tables = qopt::test::codebookTables(spec);
  }

  void TearDown() override { qopt::test::destroyHostKernel(kernel, registry, manifest, ctx); }

  /// Steps `tensors` with the host kernel `k` (default: the registry's),
  /// adding its saturated and non-finite groups to `counters`.
  void hostStep(std::vector<ref::TensorBuffers> &tensors, int64_t step,
                qopt_kernel *k = nullptr) {
    qopt_status status = QOPT_SUCCESS;
    tryHostStep(tensors, step, k, &status);
    ASSERT_EQ(status, QOPT_SUCCESS) << qopt_last_error();
  }

  /// hostStep, its status in `status` (the stream count checked).
  void tryHostStep(std::vector<ref::TensorBuffers> &tensors, int64_t step,
                   qopt_kernel *k, qopt_status *status) {
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
    // extraHypers replace the case's values of the same name.
    std::vector<qopt_hyper> hypers = GetParam().hypers;
    for (const qopt_hyper &e : extraHypers) {
      auto same = std::find_if(hypers.begin(), hypers.end(), [&](const qopt_hyper &h) {
        return std::string(h.name) == e.name;
      });
      if (same != hypers.end())
        same->value = e.value;
      else
        hypers.push_back(e);
    }
    qopt_launch launch{};
    launch.kernel = k ? k : kernel;
    launch.tensors = &list;
    launch.hypers = hypers.data();
    launch.num_hypers = hypers.size();
    launch.step = step;
    launch.tables = tables.data();
    launch.num_tables = tables.size();
    launch.numerics_counters = counters.data();
    *status = qopt_step_many(&launch, 1, nullptr);
  }

  /// Expects the kernel's counters to equal the reference's counts.
  void compareCounters() {
    EXPECT_EQ(counters[QOPT_COUNTER_SATURATED_GROUPS], refCounts.saturated)
        << "saturated groups";
    EXPECT_EQ(counters[QOPT_COUNTER_NONFINITE_GROUPS], refCounts.nonfinite)
        << "non-finite groups";
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
      ref::step(spec, want, step, &refCounts);
      hostStep(got, step, k);
      if (HasFatalFailure())
        return;
      compare(got, want);
      compareCounters();
      if (HasFailure())
        return;
    }
    lastStepped = got;
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
          if (std::memcmp(&g[i], &w[i], esize) != 0 &&
              !bothNaN(ws[s]->dtype(), &g[i], &w[i]) && ++mismatches <= 4) {
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
        if (mismatches == 0)
          continue; // only NaNs of another sign or payload (see bothNaN)
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
    return qopt::test::randomTensors(spec, sizes, rng, normal);
  }

  ref::StepSpec spec;
  /// Hyperparameters given to the kernel after the case's (grad scaling).
  std::vector<qopt_hyper> extraHypers;
  /// The kernel's numerics counters, and the reference's counts of run().
  std::array<int64_t, QOPT_NUMERICS_COUNTERS> counters{};
  ref::NumericsCounts refCounts;
  /// The host kernel's tensors after run()'s last step.
  std::vector<ref::TensorBuffers> lastStepped;
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

} // namespace qopt::host_test

#endif // QOPT_TEST_HOST_HOSTKERNELNUMERICS_H

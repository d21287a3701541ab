//===- CheckedRoundingTest.cpp - Checked rounding equals the IEEE chain ---===//
//
// The default strict kernels quantize through approximate division and
// square root and keep that code only where a rounding margin proves it
// equal to the IEEE chain's (convert-qopt-to-gpu checked-rounding,
// lib/Codegen/GroupQuantization.cpp). This suite steps every shipped spec with both builds —
// the default kernels and the same specs compiled with
// --checked-rounding=false --codebook-buckets=false (every code through
// div.rn/sqrt.rn, every codebook code by the full 8-step search) — on the same
// 16 Mi-element tensors and requires every byte of every stream to agree
// after every step. The gradients span many scales per group, with zero
// groups and outliers, so that many codes land near a rounding boundary and
// take the IEEE fallback (about one code in a thousand), and many land just
// outside the margin. KernelNumericsTest compares the default kernels with
// the C++ reference as well.
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"
#include "qopt/reference/Step.h"
#include "ShippedSpecCases.h"
#include "RandomTensors.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <algorithm>
#include <cmath>
#include <vector>

namespace ref = qopt::ref;
namespace cu = qopt::rt::cu;

namespace {

std::string envOr(const char *name, const char *fallback) {
  const char *dir = std::getenv(name);
  return dir && *dir ? dir : fallback;
}

using qopt::test::DeviceBuffer;
using qopt::test::haveGpu;
using qopt::test::LoadedKernel;
using qopt::test::loadKernel;
using Case = qopt::test::SpecCase;

/// An ascending 256-entry codebook that crowds the bucketed search: 100
/// codes in [0.90, 0.95] (buckets of more than 7 midpoints, the full
/// search's fallback), 50 tiny ones of each sign around an exact 0 (the
/// buckets beside -0 and +0), the rest spread over [-1, -0.5].
std::vector<float> crowdedQmap() {
  std::vector<float> q;
  for (int i = 0; i < 100; ++i)
    q.push_back(0.90f + 0.05f * i / 99.0f);
  for (int i = 0; i < 50; ++i) {
    float t = std::pow(10.0f, -30.0f + 27.0f * i / 49.0f);
    q.push_back(t);
    q.push_back(-t);
  }
  q.push_back(0.0f);
  while (q.size() < 256)
    q.push_back(-1.0f + 0.5f * (q.size() - 201) / 54.0f);
  std::sort(q.begin(), q.end());
  return q;
}

class CheckedRounding : public ::testing::TestWithParam<Case> {
protected:
  /// Steps the default build and the --checked-rounding=false
  /// --guarded-ieee=false --codebook-buckets=false build of the spec on the
  /// same tensors and compares every byte; `crowded`: the codebook states
  /// take crowdedQmap() instead of the spec's tables; `beta2`, where given,
  /// replaces the spec's beta2 (skipped for a spec without one).
  void compareBuilds(bool crowded, std::optional<double> beta2 = std::nullopt);
};

TEST_P(CheckedRounding, DefaultKernelEqualsIEEERoundingKernel) { compareBuilds(false); }

TEST_P(CheckedRounding, CrowdedCodebookEqualsFullSearch) { compareBuilds(true); }

// beta2 = 1 - 1e-14: bc2 = 1 - beta2^step is about 1e-14 * step, below the
// 2^-40 a sqrt code's known root needs (lib/Codegen/LaneMath.cpp, knownRoot): every
// thread fails its check and the lanes check themselves on the sqrt.approx
// chain. beta2 = 0: bc2 = 1, the range's upper end.
TEST_P(CheckedRounding, BiasCorrectionBelowTheKnownRootsRange) {
  compareBuilds(false, 1.0 - 1e-14);
}

TEST_P(CheckedRounding, BiasCorrectionOne) { compareBuilds(false, 0.0); }

void CheckedRounding::compareBuilds(bool crowded, std::optional<double> beta2) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const Case &c = GetParam();
  std::vector<qopt_hyper> hypers = c.hypers;
  if (beta2) {
    auto it = std::find_if(hypers.begin(), hypers.end(), [](const qopt_hyper &h) {
      return std::string(h.name) == "beta2";
    });
    if (it == hypers.end())
      GTEST_SKIP() << c.spec << " has no beta2";
    it->value = *beta2;
  }
  ref::StepSpec spec = c.make();
  if (crowded) {
    bool codebook = false;
    for (ref::StateScheme &st : spec.states)
      if (st.kind == ref::StateKind::Codebook) {
        std::vector<float> q = crowdedQmap();
        std::copy(q.begin(), q.end(), st.qmap.begin());
        codebook = true;
      }
    if (!codebook)
      GTEST_SKIP() << c.spec << " has no codebook state";
  }

  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  cu::CUdevice dev = 0;
  cu::CUcontext primary = nullptr;
  CU_CHECK(cu::driver().cuDeviceGet(&dev, 0));
  CU_CHECK(cu::driver().cuDevicePrimaryCtxRetain(&primary, dev));
  CU_CHECK(cu::driver().cuCtxPushCurrent(primary));

  LoadedKernel builds[2];
  const std::string dirs[2] = {envOr("QOPT_TEST_KERNEL_DIR", QOPT_DEFAULT_KERNEL_DIR),
                               envOr("QOPT_TEST_IEEE_ROUNDING_DIR", QOPT_IEEE_ROUNDING_DIR)};
  for (int i = 0; i < 2; ++i) {
    loadKernel(ctx, dirs[i] + "/" + c.spec + ".manifest.json", builds[i]);
    ASSERT_FALSE(HasFatalFailure());
  }
  // Stochastic rounding keys its bits by each element's place in the tile
  // walk, so two builds compare only on the same tiles.
  ASSERT_EQ(builds[0].info.launch.tile_elements, builds[1].info.launch.tile_elements)
      << c.spec << ": the default build (" << dirs[0] << ") and the IEEE-rounding build ("
      << dirs[1] << ") walk different tiles: build both with the same plan options";

  // A 16 Mi-element tensor with a partial last tile, and a small one.
  const std::vector<int64_t> sizes = {(int64_t(1) << 24) + 77, 4097};
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<ref::TensorBuffers> tensors = qopt::test::randomTensors(spec, sizes, rng, normal);

  // Two device copies of every stream, in ABI order.
  std::vector<std::vector<DeviceBuffer>> device[2];
  std::vector<void *> pointers[2];
  for (int i = 0; i < 2; ++i) {
    device[i].resize(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<ref::Buffer *> streams = tensors[k].streams();
      ASSERT_EQ(streams.size(), builds[i].info.num_streams);
      device[i][k].resize(streams.size());
      for (size_t s = 0; s < streams.size(); ++s) {
        DeviceBuffer &d = device[i][k][s];
        d.bytes = streams[s]->bytes();
        CU_CHECK(cu::driver().cuMemAlloc(&d.ptr, std::max<size_t>(d.bytes, 16)));
        if (d.bytes)
          CU_CHECK(cu::driver().cuMemcpyHtoD(d.ptr, streams[s]->data(), d.bytes));
        pointers[i].push_back(reinterpret_cast<void *>(d.ptr));
      }
    }
  }
  std::vector<DeviceBuffer> tables;
  std::vector<const void *> tablePointers;
  for (const ref::StateScheme &st : spec.states)
    if (st.kind == ref::StateKind::Codebook) {
      tables.emplace_back();
      tables.back().bytes = 1024;
      CU_CHECK(cu::driver().cuMemAlloc(&tables.back().ptr, 1024));
      CU_CHECK(cu::driver().cuMemcpyHtoD(tables.back().ptr, st.qmap.data(), 1024));
      tablePointers.push_back(reinterpret_cast<void *>(tables.back().ptr));
    }

  const int gradStream = spec.eccDType() == ref::DType::None ? 1 : 2;
  size_t comparedBytes = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    for (size_t k = 0; k < sizes.size(); ++k) {
      // Per 32-element group a scale from 1e-7 to 1; 3% of groups all zero;
      // 0.1% of elements 100 times larger.
      std::vector<float> g(sizes[k]);
      float scale = 1.0f;
      for (int64_t i = 0; i < sizes[k]; ++i) {
        if (i % 32 == 0)
          scale = uniform(rng) < 0.03f ? 0.0f : std::pow(10.0f, -7.0f * uniform(rng));
        g[i] = scale * normal(rng) * (uniform(rng) < 1e-3f ? 100.0f : 1.0f);
      }
      ref::setGrad(spec, tensors[k], g);
      for (int i = 0; i < 2; ++i) {
        ref::Buffer *b = tensors[k].streams()[gradStream];
        CU_CHECK(cu::driver().cuMemcpyHtoD(device[i][k][gradStream].ptr, b->data(), b->bytes()));
      }
    }
    for (int i = 0; i < 2; ++i) {
      qopt_tensor_list list{};
      list.num_tensors = sizes.size();
      list.num_streams = builds[i].info.num_streams;
      list.numels = sizes.data();
      list.data = pointers[i].data();
      ASSERT_EQ(qopt_step(builds[i].kernel, &list, hypers.data(), hypers.size(), step,
                          tablePointers.data(), tablePointers.size(), nullptr),
                QOPT_SUCCESS)
          << qopt_last_error();
    }
    CU_CHECK(cu::driver().cuCtxSynchronize());
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<std::string> names = tensors[k].streamNames(spec);
      for (size_t s = 0; s < device[0][k].size(); ++s) {
        size_t bytes = device[0][k][s].bytes;
        std::vector<uint8_t> a(bytes), b(bytes);
        if (bytes) {
          CU_CHECK(cu::driver().cuMemcpyDtoH(a.data(), device[0][k][s].ptr, bytes));
          CU_CHECK(cu::driver().cuMemcpyDtoH(b.data(), device[1][k][s].ptr, bytes));
        }
        comparedBytes += bytes;
        if (a == b)
          continue;
        size_t first = 0, count = 0;
        for (size_t j = 0; j < bytes; ++j)
          if (a[j] != b[j] && count++ == 0)
            first = j;
        ADD_FAILURE() << c.spec << ": tensor of " << sizes[k] << " elements, stream "
                      << names[s] << ": " << count << " bytes differ, first at byte " << first
                      << " (default 0x" << std::hex << int(a[first]) << ", IEEE rounding 0x"
                      << int(b[first]) << std::dec << ")";
      }
    }
    if (HasFailure())
      break;
  }
  RecordProperty("compared_bytes", std::to_string(comparedBytes));

  for (auto &d : device)
    d.clear();
  tables.clear();
  qopt_context_destroy(ctx);
  cu::CUcontext popped = nullptr;
  (void)cu::driver().cuCtxPopCurrent(&popped);
  (void)cu::driver().cuDevicePrimaryCtxRelease(dev);
}

std::vector<Case> cases() {
  std::vector<Case> all = qopt::test::shippedSpecCases();
  for (const Case &c : qopt::test::reductionSpecCases())
    all.push_back(c);
  return all;
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, CheckedRounding, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.spec;
                         });

} // namespace

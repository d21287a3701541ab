//===- KernelNumericsTest.cpp - Shipped kernels vs the C++ reference ------===//
//
// Each shipped spec's strict kernel, as qopt-opt compiled it, steps a list of
// tensors of very different sizes (partial tiles, groups and blocks included)
// for several steps on the GPU; the C++ reference (test/reference), which
// shares no code with the compiler, steps copies of the same buffers. Every
// byte of every stream (parameter, error bits, codes, scales, absmax) must
// agree after every step, and the numerics counters (saturated and
// non-finite groups, docs/abi.md) the reference's counts; a gradient spike
// (1e6, 1e10, infinities) leaves every state and the parameters finite
// (docs/numerics.md "Overflow").
//
//===----------------------------------------------------------------------===//

#include "GpuTestUtil.h"
#include "FourBitTableValues.h"
#include "GradientSpike.h"
#include "qopt/reference/Codebook.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Step.h"
#include "ShippedSpecCases.h"
#include "RandomTensors.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ref = qopt::ref;
namespace cu = qopt::rt::cu;

namespace {

std::string kernelDir() {
  const char *dir = std::getenv("QOPT_TEST_KERNEL_DIR");
  return dir && *dir ? dir : QOPT_DEFAULT_KERNEL_DIR;
}

using qopt::test::DeviceBuffer;
using qopt::test::haveGpu;

using Case = qopt::test::SpecCase;
using qopt::test::adamHyper;

/// The specs that read per-tensor reductions (reduce pre-pass, finish, step;
/// docs/abi.md, "Reductions"), also as their .f16 and .f32 variants:
/// parameter and gradient of that type, an f32 one without error bits.
std::vector<Case> reductionCases() {
  std::vector<Case> all;
  for (const Case &c : qopt::test::reductionSpecCases()) {
    all.push_back(c);
    for (auto [suffix, t] : {std::pair{".f16", ref::DType::F16}, std::pair{".f32", ref::DType::F32}}) {
      std::function<ref::StepSpec()> make = c.make;
      all.push_back({c.spec + suffix,
                     [make, t = t] {
                       ref::StepSpec s = make();
                       s.param = s.grad = t;
                       if (t == ref::DType::F32)
                         s.master = ref::Master::None;
                       return s;
                     },
                     c.hypers});
    }
  }
  return all;
}

std::vector<Case> cases() {
  std::vector<Case> all = qopt::test::shippedSpecCases();
  for (const Case &c : reductionCases())
    all.push_back(c);
  return all;
}

/// Whether element `i` of two float streams of `dtype` are both NaN (of any
/// sign and payload: neither IEEE 754 nor the ABI fixes which NaN an
/// operation returns, and x86's sqrt of a negative is -NaN where sm_90's is
/// +NaN).
bool bothNaN(ref::DType dtype, const uint8_t *a, const uint8_t *b) {
  auto isNaN = [&](const uint8_t *x) {
    uint32_t bits = 0;
    std::memcpy(&bits, x, ref::dtypeSize(dtype));
    switch (dtype) {
    case ref::DType::F32:
      return std::isnan(ref::bitsToFloat(bits));
    case ref::DType::BF16:
      return std::isnan(ref::bf16BitsToFloat(uint16_t(bits)));
    case ref::DType::F16:
      return std::isnan(ref::f16BitsToFloat(uint16_t(bits)));
    default:
      return false;
    }
  };
  return isNaN(a) && isNaN(b);
}

/// Steps tensors of `sizes` elements (parameters 0.5 N(0, 1)) `steps` times
/// with the kernel of `kernelName` and with the C++ reference on copies of the
/// same buffers, the gradients of tensor k at step t from `grads(t, k, n)`;
/// every byte of every stream must agree after every step. `prepare(k, t)`,
/// where given, sets up tensor k's buffers before the first step (states
/// other than their initial zeros). Where `nanMatchesNaN`, two NaN elements
/// of a float stream agree whatever their bits. The kernel's numerics
/// counters must equal the reference's counts after every step; `counts`
/// and `last`, where given, receive the counts and the reference's tensors
/// after the last step.
void expectStepsMatchReference(
    const std::string &kernelName, const ref::StepSpec &given,
    const std::vector<qopt_hyper> &hypers, const std::vector<int64_t> &sizes,
    int64_t steps, std::mt19937 &rng,
    const std::function<std::vector<float>(int64_t, size_t, int64_t)> &grads,
    const std::function<void(size_t, ref::TensorBuffers &)> &prepare = {},
    bool nanMatchesNaN = false, ref::NumericsCounts *counts = nullptr,
    std::vector<ref::TensorBuffers> *last = nullptr) {
  ref::StepSpec spec = given;
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  // The test's own allocations use the device's primary context, as PyTorch's do.
  cu::CUdevice dev = 0;
  cu::CUcontext primary = nullptr;
  CU_CHECK(cu::driver().cuDeviceGet(&dev, 0));
  CU_CHECK(cu::driver().cuDevicePrimaryCtxRetain(&primary, dev));
  CU_CHECK(cu::driver().cuCtxPushCurrent(primary));
  auto loaded = std::make_unique<qopt::test::LoadedKernel>();
  qopt::test::loadKernel(ctx, kernelDir() + "/" + kernelName + ".manifest.json", *loaded);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const qopt_manifest_info &info = loaded->info;
  qopt_kernel *kernel = loaded->kernel;
  // A launch's tensors lie at their first tiles (stochastic rounding's index).
  spec.tileElements = info.launch.tile_elements;

  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<ref::TensorBuffers> tensors;
  for (int64_t n : sizes) {
    tensors.push_back(qopt::test::randomTensor(spec, n, rng, normal));
    if (prepare)
      prepare(tensors.size() - 1, tensors.back());
  }
  // Device copies of every stream, in ABI order.
  std::vector<std::vector<DeviceBuffer>> device(sizes.size());
  std::vector<void *> pointers;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<ref::Buffer *> streams = tensors[k].streams();
    ASSERT_EQ(streams.size(), info.num_streams) << "reference and manifest disagree on streams";
    device[k].resize(streams.size());
    for (size_t s = 0; s < streams.size(); ++s) {
      DeviceBuffer &d = device[k][s];
      d.bytes = streams[s]->bytes();
      CU_CHECK(cu::driver().cuMemAlloc(&d.ptr, std::max<size_t>(d.bytes, 16)));
      pointers.push_back(reinterpret_cast<void *>(d.ptr));
    }
  }
  // Codebook tables, one per codebook state, in state order.
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
  auto upload = [&](size_t k, size_t s) {
    ref::Buffer *b = tensors[k].streams()[s];
    if (b->bytes()) {
      ASSERT_EQ(cu::driver().cuMemcpyHtoD(device[k][s].ptr, b->data(), b->bytes()),
                cu::CUDA_SUCCESS);
    }
  };
  for (size_t k = 0; k < sizes.size(); ++k)
    for (size_t s = 0; s < device[k].size(); ++s)
      upload(k, s);

  qopt_tensor_list list{};
  list.num_tensors = sizes.size();
  list.num_streams = info.num_streams;
  list.numels = sizes.data();
  list.data = pointers.data();
  DeviceBuffer counters;
  counters.bytes = QOPT_NUMERICS_COUNTERS * sizeof(int64_t);
  CU_CHECK(cu::driver().cuMemAlloc(&counters.ptr, counters.bytes));
  CU_CHECK(cu::driver().cuMemsetD8(counters.ptr, 0, counters.bytes));
  ref::NumericsCounts refCounts;

  const int gradStream = spec.eccDType() == ref::DType::None ? 1 : 2;
  for (int64_t step = 1; step <= steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    for (size_t k = 0; k < sizes.size(); ++k) {
      ref::setGrad(spec, tensors[k], grads(step, k, sizes[k]));
      upload(k, gradStream);
    }
    ref::step(spec, tensors, step, &refCounts);
    qopt_launch launch{};
    launch.kernel = kernel;
    launch.tensors = &list;
    launch.hypers = hypers.data();
    launch.num_hypers = hypers.size();
    launch.step = step;
    launch.tables = tablePointers.data();
    launch.num_tables = tablePointers.size();
    launch.numerics_counters = reinterpret_cast<int64_t *>(counters.ptr);
    ASSERT_EQ(qopt_step_many(&launch, 1, nullptr), QOPT_SUCCESS) << qopt_last_error();
    CU_CHECK(cu::driver().cuCtxSynchronize());
    int64_t gotCounts[QOPT_NUMERICS_COUNTERS] = {};
    CU_CHECK(cu::driver().cuMemcpyDtoH(gotCounts, counters.ptr, counters.bytes));
    EXPECT_EQ(gotCounts[QOPT_COUNTER_SATURATED_GROUPS], refCounts.saturated)
        << kernelName << ": saturated groups";
    EXPECT_EQ(gotCounts[QOPT_COUNTER_NONFINITE_GROUPS], refCounts.nonfinite)
        << kernelName << ": non-finite groups";
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<ref::Buffer *> streams = tensors[k].streams();
      std::vector<std::string> names = tensors[k].streamNames(spec);
      for (size_t s = 0; s < streams.size(); ++s) {
        const ref::Buffer &want = *streams[s];
        std::vector<uint8_t> got(want.bytes());
        if (!got.empty())
          CU_CHECK(cu::driver().cuMemcpyDtoH(got.data(), device[k][s].ptr, got.size()));
        if (got == want.raw())
          continue;
        size_t esize = ref::dtypeSize(want.dtype());
        size_t mismatches = 0;
        std::string examples;
        for (size_t i = 0; i < got.size(); i += esize)
          if (std::memcmp(&got[i], &want.raw()[i], esize) != 0 &&
              !(nanMatchesNaN && bothNaN(want.dtype(), &got[i], &want.raw()[i]))) {
            if (++mismatches <= 4) {
              examples += " [" + std::to_string(i / esize) + "] got 0x";
              char hex[8];
              for (size_t b = esize; b-- > 0;) {
                std::snprintf(hex, sizeof hex, "%02x", got[i + b]);
                examples += hex;
              }
              examples += " want 0x";
              for (size_t b = esize; b-- > 0;) {
                std::snprintf(hex, sizeof hex, "%02x", want.raw()[i + b]);
                examples += hex;
              }
            }
          }
        if (mismatches == 0)
          continue;
        ADD_FAILURE() << kernelName << ": tensor of " << sizes[k] << " elements, stream "
                      << names[s] << ": " << mismatches << " of " << want.count()
                      << " elements differ:" << examples;
      }
    }
    if (::testing::Test::HasFailure())
      break;
  }
  if (counts)
    *counts = refCounts;
  if (last)
    *last = tensors;

  device.clear();
  tables.clear();
  loaded.reset();
  qopt_context_destroy(ctx);
  cu::CUcontext popped = nullptr;
  (void)cu::driver().cuCtxPopCurrent(&popped);
  (void)cu::driver().cuDevicePrimaryCtxRelease(dev);
}


class KernelNumerics : public ::testing::TestWithParam<Case> {};

TEST_P(KernelNumerics, StrictKernelMatchesReferenceByteForByte) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const Case &c = GetParam();
  // Sizes: one element, a partial group, a full tile, a tile and a bit,
  // several tiles with a partial block, a larger tensor, and one of more
  // tiles than the grid has blocks (at least 1280 tiles against at most 528
  // blocks on an H200), so that blocks step runs of several tiles: the async
  // copies' copy-ahead into both stages, waits with a group pending.
  const std::vector<int64_t> sizes = {1,     31,    4096, 4097, 3 * 4096 + 17,
                                      70001, 5 * 1024 * 1024 + 3};
  std::mt19937 rng(1234);
  expectStepsMatchReference(c.spec, c.make(), c.hypers, sizes, 4, rng,
                            [&](int64_t step, size_t, int64_t n) {
                              std::normal_distribution<float> normal(0.0f, 1.0f);
                              std::vector<float> g(n);
                              // A step with smaller gradients.
                              float scale = step == 3 ? 1e-3f : 1e-2f;
                              for (float &v : g)
                                v = scale * normal(rng);
                              return g;
                            });
}

TEST_P(KernelNumerics, GradientSpikeLeavesStatesAndModelFinite) {
  // GradientSpike.h: one spike step, three ordinary ones; byte for byte the reference, the
  // counters its counts, every state finite and every parameter but the infinite spike's.
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const Case &c = GetParam();
  const ref::StepSpec spec = c.make();
  if (std::string skip = qopt::test::spikeSkipReason(spec); !skip.empty())
    GTEST_SKIP() << skip;
  // Partial tiles and groups, and runs of whole (staged) tiles.
  const std::vector<int64_t> sizes = {300, 4096 + 100, 70001};
  for (float spike : qopt::test::gradientSpikes()) {
    SCOPED_TRACE("spike " + std::to_string(spike));
    std::mt19937 rng(77);
    ref::NumericsCounts counts;
    std::vector<ref::TensorBuffers> last;
    expectStepsMatchReference(
        c.spec, spec, c.hypers, sizes, 4, rng,
        [&](int64_t step, size_t, int64_t n) {
          return qopt::test::spikeGradient(step, n, spike, rng);
        },
        {}, /*nanMatchesNaN=*/true, &counts, &last);
    if (HasFailure())
      return;
    for (const ref::TensorBuffers &t : last)
      ASSERT_TRUE(qopt::test::finiteAfterSpike(spec, t, spike));
    qopt::test::expectSpikeCounted(spec, spike, counts);
  }
}

/// The reductions' order on the GPU (docs/numerics.md §7): each 2048-element
/// chunk (and, with an offset, each 1024-element half) starts with +-2^60,
/// alternating, among N(0, 1) values, so that the float64 sums lose the small
/// values to the large ones in an order-dependent way; the chunk's tree, the
/// tree over the chunks (tensors of up to 2561 chunks: a finish thread's run
/// of several) and the padding show in the result.
class ReductionOrder : public ::testing::TestWithParam<Case> {};

TEST_P(ReductionOrder, CancellingGradientsMatchReference) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const Case &c = GetParam();
  if (c.make().grad == ref::DType::F16)
    GTEST_SKIP() << "an f16 gradient cannot hold +-2^60 (it rounds to inf)";
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<int64_t> sizes = {1, 2047, 2049, 3 * 2048 + 5, 70001,
                                      2561 * 2048 - 7};
  expectStepsMatchReference(c.spec, c.make(), c.hypers, sizes, 3, rng,
                            [&](int64_t step, size_t, int64_t n) {
                              std::vector<float> g(n);
                              for (int64_t i = 0; i < n; ++i) {
                                int64_t at = (i + (step % 2) * 1024) % 2048;
                                g[i] = at == 0 ? std::ldexp((i / 2048) % 2 ? -1.0f : 1.0f, 60)
                                               : normal(rng);
                              }
                              return g;
                            });
}

INSTANTIATE_TEST_SUITE_P(ReductionSpecs, ReductionOrder, ::testing::ValuesIn(reductionCases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           std::string name = info.param.spec;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, KernelNumerics, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           std::string name = info.param.spec;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

/// Normalized values on and beside every midpoint of seed 000's codebook
/// codes. With beta1 = beta2 = 0 the new states are m = g and v = g * g
/// exactly, and every block's first element is +-1, so the block's absmax is
/// 1 and m's normalized value is g itself: each midpoint of the signed map,
/// the floats next to it and their negatives; +-0; values below the buckets'
/// clamp (2^-24), on it and beside it; the edges of a bucket (2^-24 (1 +
/// 2^-7)); +-1. v's values are g * g for g the floats around the square root
/// of each midpoint of the unsigned map. f32 gradients (bf16 ones could not
/// land on a midpoint). The codes of the bucket table, and of the full search
/// where a block's values are not finite, must equal the reference's count
/// of midpoints below c, with every other byte of the step.
std::vector<float> codebookBoundaryValues() {
  auto next = [](float x, float to) { return std::nextafter(x, to); };
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values;
  auto withNeighbours = [&](float x) {
    for (float y : {next(x, -inf), x, next(x, inf)})
      if (std::fabs(y) <= 1.0f) {
        values.push_back(y);
        values.push_back(-y);
      }
  };
  std::vector<float> signedMap = ref::createDynamicMap(/*isSigned=*/true);
  std::vector<float> unsignedMap = ref::createDynamicMap(/*isSigned=*/false);
  for (float mid : ref::codebookMidpoints(signedMap.data()))
    withNeighbours(mid);
  for (float mid : ref::codebookMidpoints(unsignedMap.data()))
    withNeighbours(std::sqrt(mid));
  for (float x : {0.0f, 1e-30f, 0x1p-24f, 0x1p-24f * (1.0f + 0x1p-7f), 0x1p-23f,
                  1.0f, 0.5f})
    withNeighbours(x);
  return values;
}

struct BoundaryCase {
  std::string kernel;
  int64_t block;
  /// The signed map's largest negative code moved to -2^-23, so that a
  /// midpoint lies on -2^-24, the buckets' clamp: the fill must clear the
  /// flag (a value below the clamp, -1e-30, lies above that midpoint).
  bool midpointOnClamp = false;
  /// v quantized with the signed map too: its entries below zero leave v
  /// without the range facts of an unsigned map (the guards look at the
  /// lanes, the codes at c's sign).
  bool signedV = false;
};

void PrintTo(const BoundaryCase &c, std::ostream *os) {
  *os << c.kernel << (c.midpointOnClamp ? " (midpoint on the clamp)" : "")
      << (c.signedV ? " (v on the signed map)" : "");
}

class CodebookBoundaries : public ::testing::TestWithParam<BoundaryCase> {};

TEST_P(CodebookBoundaries, CodesOnAndBesideEveryMidpointMatchReference) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const BoundaryCase &c = GetParam();
  ref::Hyper hyper = adamHyper();
  hyper.beta1 = 0.0;
  hyper.beta2 = 0.0;
  std::vector<float> signedMap = ref::createDynamicMap(/*isSigned=*/true);
  if (c.midpointOnClamp) {
    std::sort(signedMap.begin(), signedMap.end());
    auto zero = std::find(signedMap.begin(), signedMap.end(), 0.0f);
    ASSERT_TRUE(zero != signedMap.begin() && zero != signedMap.end());
    zero[-1] = -0x1p-23f;
    ASSERT_EQ((zero[-1] + zero[0]) * 0.5f, -0x1p-24f);
  }
  ref::StepSpec spec = ref::seed000AdamW(
      signedMap, c.signedV ? signedMap : ref::createDynamicMap(/*isSigned=*/false), hyper,
      ref::DType::F32, c.block);
  spec.param = ref::DType::F32;
  const std::vector<qopt_hyper> hypers = {
      {"lr", hyper.lr}, {"beta1", 0.0}, {"beta2", 0.0}, {"eps", hyper.eps},
      {"weight_decay", hyper.weightDecay}};
  const std::vector<float> values = codebookBoundaryValues();
  // Every value several times over (in blocks of both signs of the +-1),
  // a partial last block. In the last step one block of the small tensor
  // holds 1e20, whose square overflows: v's absmax is inf there (the full
  // search: NaN codes and zeros), m's and the parameter stay finite. Its
  // third block is 1e-12 times the values: an absmax below 2^-30, where the
  // codes take the exact division and the full search. In the large tensor
  // every third block is three times the values: c = x / 3 by the division
  // sequence, tiny x included.
  const int64_t n = (int64_t(values.size()) * 4 / c.block + 2) * c.block + 123;
  const std::vector<int64_t> sizes = {n, 3 * c.block + 5};
  std::mt19937 rng(99);
  expectStepsMatchReference(
      c.kernel, spec, hypers, sizes, 2, rng, [&](int64_t step, size_t k, int64_t count) {
        std::vector<float> g(count);
        size_t at = size_t(step) * 977;
        for (int64_t i = 0; i < count; ++i)
          g[i] = i % c.block == 0 ? ((i / c.block) % 2 ? -1.0f : 1.0f)
                                  : values[at++ % values.size()];
        if (k == 1 && step == 2)
          g[c.block + 7] = 1e20f;
        if (k == 1) // a block whose absmax is below 2^-30: the exact division
          for (int64_t i = 2 * c.block; i < 3 * c.block; ++i)
            g[i] *= 1e-12f;
        if (k == 0) // every third block divided by absmax 3, not 1
          for (int64_t i = 0; i < count; ++i)
            if ((i / c.block) % 3 == 2)
              g[i] *= 3.0f;
        return g;
      });
}

INSTANTIATE_TEST_SUITE_P(SeedBlocks, CodebookBoundaries,
                         ::testing::Values(BoundaryCase{"adamw8bit_block2048.f32", 2048},
                                           BoundaryCase{"adamw8bit_block256.f32", 256},
                                           BoundaryCase{"adamw8bit_block2048.f32", 2048, true},
                                           BoundaryCase{"adamw8bit_block256.f32", 256, false, true}),
                         [](const ::testing::TestParamInfo<BoundaryCase> &info) {
                           return "block" + std::to_string(info.param.block) +
                                  (info.param.midpointOnClamp ? "_midpoint_on_clamp" : "") +
                                  (info.param.signedV ? "_signed_v" : "");
                         });

/// The 4-bit tables' code search (test/common/FourBitTableValues.h) on
/// AdamW4bit's f32 variant: c on, and a float beside, each midpoint, in
/// groups of absmax 1 and (every third group) 3, where c = x / 3 takes the
/// division.
TEST(FourBitTables, CodesOnAndBesideEveryMidpointMatchReference) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  ASSERT_TRUE(qopt::test::fourBitTableValuesHitTies());
  ref::StepSpec spec = qopt::test::adamW4bit(/*stochastic=*/false);
  spec.param = ref::DType::F32;
  spec.grad = ref::DType::F32;
  spec.hyper.beta1 = 0.0;
  spec.hyper.beta2 = 0.0;
  std::vector<qopt_hyper> hypers = qopt::test::kAdamHypers;
  for (qopt_hyper &h : hypers)
    if (std::string(h.name) == "beta1" || std::string(h.name) == "beta2")
      h.value = 0.0;
  const int64_t group = spec.states[0].group.group;
  const std::vector<float> values = qopt::test::fourBitTableValues();
  const int64_t n = (int64_t(values.size()) * 4 / group + 2) * group + 45;
  std::mt19937 rng(77);
  expectStepsMatchReference(
      "adamw4bit.f32", spec, hypers, {n, 3 * group + 7}, 3, rng,
      [&](int64_t step, size_t k, int64_t count) {
        std::vector<float> g(count);
        size_t at = size_t(step) * 131 + k * 7;
        for (int64_t i = 0; i < count; ++i) {
          g[i] = i % group == 0 ? ((i / group) % 2 ? -1.0f : 1.0f)
                                : values[at++ % values.size()];
          if ((i / group) % 3 == 2)
            g[i] *= 3.0f;
        }
        return g;
      });
}

/// The qmap flag: the barrier after a qmap's copy to shared memory
/// and-reduces "no entry below zero", and where it holds the kernel takes
/// the dequantized state for nonnegative (the guards of sqrt(v / bc2) and of
/// the last division skip their lane checks, v's codes skip c's sign). Here
/// v is quantized with the signed map, beta2 > 0, and v starts on negative
/// entries (random values in [-1, 1], some blocks wholly negative, and
/// gradients of zero there), so that the reference's v stays negative: its
/// square root is NaN, the parameter NaN, and v's new codes are those of
/// negative values. A flag wrongly set would look up those codes among the
/// positive buckets. The parameters' NaN agree whatever their bits.
class CodebookQmapFlag : public ::testing::TestWithParam<BoundaryCase> {};

TEST_P(CodebookQmapFlag, NegativeSecondMomentOnSignedMapMatchesReference) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  const BoundaryCase &c = GetParam();
  const std::vector<float> signedMap = ref::createDynamicMap(/*isSigned=*/true);
  ref::StepSpec spec = ref::seed000AdamW(signedMap, signedMap, adamHyper(),
                                         ref::DType::BF16, c.block);
  const std::vector<int64_t> sizes = {5 * c.block + 77, 40 * c.block};
  std::mt19937 rng(4321);
  int64_t negativeV = 0;
  auto prepare = [&](size_t, ref::TensorBuffers &t) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> v(t.numel);
    for (int64_t i = 0; i < t.numel; ++i)
      v[i] = (i / c.block) % 3 == 1 ? -std::fabs(uniform(rng)) : uniform(rng);
    ref::writeState(spec, t, 1, v);
    for (float x : ref::readState(spec, t, 1))
      negativeV += x < 0.0f;
  };
  expectStepsMatchReference(
      c.kernel, spec, qopt::test::kAdamHypers, sizes, 3, rng,
      [&](int64_t, size_t, int64_t n) {
        std::normal_distribution<float> normal(0.0f, 1e-2f);
        std::vector<float> g(n);
        for (int64_t i = 0; i < n; ++i)
          g[i] = (i / c.block) % 3 == 1 ? 0.0f : normal(rng);
        return g;
      },
      prepare, /*nanMatchesNaN=*/true);
  if (HasFatalFailure())
    return;
  // The case is what it says: v starts below zero in many lanes.
  EXPECT_GT(negativeV, (sizes[0] + sizes[1]) / 4);
}

INSTANTIATE_TEST_SUITE_P(SeedBlocks, CodebookQmapFlag,
                         ::testing::Values(BoundaryCase{"adamw8bit_block2048", 2048},
                                           BoundaryCase{"adamw8bit_block256", 256}),
                         [](const ::testing::TestParamInfo<BoundaryCase> &info) {
                           return "block" + std::to_string(info.param.block);
                         });

std::string readFile(const std::string &path) {
  std::string text;
  if (FILE *f = std::fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

/// Loads `stem`'s kernel (its PTX) on a CUDA context from its manifest
/// with launch.shared_bytes replaced by `sharedBytes`: the load must be
/// refused with QOPT_ERROR_UNSUPPORTED and no kernel handed out. The PTX's
/// own copy of the manifest (`<kernel>_manifest`, docs/abi.md "The GPU
/// module's manifest") is taken out, as in a module built before qopt-opt
/// embedded it: with it the edit is refused as a mismatch before the
/// device's limit is asked. `original` gets the manifest's own
/// shared_bytes, `error` the message.
void expectLoadRefused(const std::string &stem, int64_t sharedBytes, int64_t &original,
                       std::string &error, bool keepEmbedded = false,
                       qopt_status expected = QOPT_ERROR_UNSUPPORTED) {
  std::string json = readFile(kernelDir() + "/" + stem + ".manifest.json");
  std::string image = readFile(kernelDir() + "/" + stem + ".ptx");
  if (image.empty())
    GTEST_SKIP() << "no " << stem << ".ptx in " << kernelDir()
                 << ": a fatbin's embedded manifest cannot be taken out";
  ASSERT_FALSE(json.empty()) << "no " << stem << " manifest in " << kernelDir();
  size_t global = image.find("_manifest[");
  if (keepEmbedded)
    ASSERT_NE(global, std::string::npos) << stem << ".ptx embeds no manifest";
  else if (global != std::string::npos) {
    size_t lineStart = image.rfind('\n', global) + 1;
    image.erase(lineStart, image.find('\n', global) + 1 - lineStart);
  }
  ASSERT_EQ(image.find("_manifest[") != std::string::npos, keepEmbedded);
  const std::string key = "\"shared_bytes\": ";
  size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos);
  size_t end = json.find_first_not_of("0123456789", at + key.size());
  original = std::stoll(json.substr(at + key.size(), end - at - key.size()));
  json.replace(at + key.size(), end - at - key.size(), std::to_string(sharedBytes));

  qopt_manifest *manifest = nullptr;
  std::string label = stem + " (" + std::to_string(sharedBytes) + " bytes)";
  ASSERT_EQ(qopt_manifest_parse(json.data(), json.size(), label.c_str(), &manifest),
            QOPT_SUCCESS)
      << qopt_last_error();
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  qopt_kernel *kernel = nullptr;
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, manifest, QOPT_BINARY_AUTO, image.data(),
                                          image.size(), &kernel),
            expected);
  error = qopt_last_error();
  EXPECT_EQ(kernel, nullptr);
  if (kernel)
    qopt_kernel_destroy(kernel);
  qopt_manifest_destroy(manifest);
  qopt_context_destroy(ctx);
}

// The staged kernels ask for up to 160 KiB of dynamic shared memory (4
// stages); a device that allows less per block (consumer Ampere and Ada: 99
// KiB) must refuse the kernel at load, naming both sizes, and hand out no
// kernel. Here FlashAdamW's manifest asks for 1 MiB, more than any device.
TEST(KernelLoad, MoreSharedMemoryThanTheDeviceAllowsIsRefused) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  int64_t original = 0;
  std::string error;
  expectLoadRefused("flash_adamw", 1048576, original, error);
  if (HasFatalFailure() || IsSkipped())
    return;
  EXPECT_GT(original, 0) << "FlashAdamW is staged: it has dynamic shared memory";
  EXPECT_NE(error.find("needs 1048576 bytes of dynamic shared memory per block"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("allows"), std::string::npos) << error;
}

// With the module's own manifest in place (the real driver's
// cuModuleGetGlobal finds `FlashAdamW_manifest`), the same edit is refused
// as a mismatch, naming the field and both values, before any launch.
TEST(KernelLoad, ManifestEditedAgainstTheModulesOwnIsRefused) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  int64_t original = 0;
  std::string error;
  expectLoadRefused("flash_adamw", 65536, original, error, /*keepEmbedded=*/true,
                    QOPT_ERROR_MANIFEST);
  if (HasFatalFailure() || IsSkipped())
    return;
  EXPECT_NE(error.find("field 'launch.shared_bytes' is 65536"), std::string::npos) << error;
  EXPECT_NE(error.find("but " + std::to_string(original) + " in the module"), std::string::npos)
      << error;
}

// The limit holds for dynamic and static shared memory together: the
// blockwise AdamW (about 5 KiB of static tables: qmaps, midpoints, slots)
// with a manifest asking for the device's whole limit less 1 KiB of dynamic
// memory passes on the dynamic bytes alone, and must still be refused at
// load, with both counts named, not by the driver at a launch.
TEST(KernelLoad, StaticAndDynamicSharedMemoryTogetherAreChecked) {
  std::string why;
  if (!haveGpu(why))
    GTEST_SKIP() << "GPU test skipped: " << why;
  cu::CUdevice dev = 0;
  int optin = 0;
  CU_CHECK(cu::driver().cuDeviceGet(&dev, 0));
  CU_CHECK(cu::driver().cuDeviceGetAttribute(
      &optin, cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  ASSERT_GT(optin, 4096);
  int64_t original = 0;
  std::string error;
  expectLoadRefused("adamw8bit_block2048", optin - 1024, original, error);
  if (HasFatalFailure() || IsSkipped())
    return;
  EXPECT_NE(error.find("needs " + std::to_string(optin - 1024) +
                       " bytes of dynamic shared memory per block and "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("allows " + std::to_string(optin)), std::string::npos) << error;
}

} // namespace

//===- EccExhaustiveTest.cpp - The lowered §3 split on every input ---------===//
//
// numerics.md §3's split master weight as the compiler lowers it
// (lib/Codegen/MasterWeights.cpp: splitMaster, reconstructMaster), against the C++
// reference's eccEncode / eccDecode (float formulas as written), for the four
// formats bf16/f16 x int8/int16:
//   - encode on every one of the 2^32 float32 bit patterns: kernel
//     EccEncode_<format> steps p = g with an f32 gradient, so the stored x16
//     and rho are the encode of g;
//   - decode on every x16 with every int8 rho, or with 2^14 int16 rho (all of
//     [-2^12, 2^12] and a stride over the rest): kernel EccDecode_<format>
//     stores s = p in an f32 state, the decoded master weight.
// The specs are written by test/host/CMakeLists.txt. The host backend runs
// the int8 formats in CI (its encode is the integer and two-step form); the
// CUDA backend, where there is a GPU, runs all four (its encode is the
// six-operation float form). A NaN stores the GPU's canonical bf16 NaN
// (0x7fff) where the reference and the host store 0x7fc0
// (docs/numerics-notes.md, "Known differences"): a NaN input must give a NaN
// and the reference's rho (0); a NaN x16 must decode to a NaN.
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Ecc.h"
#include "qopt/reference/Float.h"
#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace ref = qopt::ref;

namespace {

struct Format {
  const char *name;
  ref::DType param, rho;
  bool inHostCI; // host runs of the int16 formats take minutes
};

const Format kFormats[] = {
    {"bf16_i8", ref::DType::BF16, ref::DType::I8, true},
    {"f16_i8", ref::DType::F16, ref::DType::I8, true},
    {"bf16_i16", ref::DType::BF16, ref::DType::I16, false},
    {"f16_i16", ref::DType::F16, ref::DType::I16, false},
};

bool isI8(const Format &f) { return f.rho == ref::DType::I8; }

bool isNaN16(uint16_t x16, const Format &f) {
  return f.param == ref::DType::BF16 ? (x16 & 0x7FFFu) > 0x7F80u
                                     : (x16 & 0x7FFFu) > 0x7C00u;
}

std::string manifestPath(qopt_backend backend, const std::string &name) {
  const char *dir = std::getenv("QOPT_TEST_EXTRA_KERNEL_DIR");
  std::string base = dir && *dir ? dir : QOPT_EXTRA_KERNEL_DIR;
  return base + (backend == QOPT_BACKEND_HOST ? "/" : "/ptx/") + name + ".manifest.json";
}

/// A context and one kernel of the test specs, and device buffers.
class EccKernel {
public:
  EccKernel(qopt_backend backend, const std::string &spec, const std::string &kernelName) {
    if (qopt_context_create(backend, 0, &ctx) != QOPT_SUCCESS) {
      error = qopt_last_error();
      return;
    }
    qopt_registry_create(&registry);
    const std::string path = manifestPath(backend, spec);
    if (qopt_registry_add_manifest_file(registry, path.c_str()) != QOPT_SUCCESS ||
        qopt_kernel_create(ctx, registry, kernelName.c_str(), &kernel) != QOPT_SUCCESS)
      error = qopt_last_error();
  }
  ~EccKernel() {
    for (void *p : buffers)
      qopt_buffer_free(ctx, p);
    if (kernel)
      qopt_kernel_destroy(kernel);
    if (registry)
      qopt_registry_destroy(registry);
    if (ctx)
      qopt_context_destroy(ctx);
  }
  void *alloc(int64_t bytes) {
    void *p = nullptr;
    if (qopt_buffer_alloc(ctx, bytes, &p) == QOPT_SUCCESS)
      buffers.push_back(p);
    return p;
  }
  /// One step (step 1, no hyperparameters) over one tensor of n elements.
  bool step(std::vector<void *> streams, int64_t n) {
    qopt_tensor_list list{};
    list.num_tensors = 1;
    list.num_streams = static_cast<int32_t>(streams.size());
    list.numels = &n;
    list.data = streams.data();
    return qopt_step(kernel, &list, nullptr, 0, 1, nullptr, 0, nullptr) == QOPT_SUCCESS;
  }
  qopt_context *ctx = nullptr;
  qopt_registry *registry = nullptr;
  qopt_kernel *kernel = nullptr;
  std::vector<void *> buffers;
  std::string error;
};

/// Runs body(t, threads) on every hardware thread and joins them.
void inParallel(const std::function<void(unsigned, unsigned)> &body) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(body, t, threads);
  for (std::thread &th : pool)
    th.join();
}

using Param = std::tuple<qopt_backend, int>;

class EccExhaustive : public ::testing::TestWithParam<Param> {
protected:
  void SetUp() override {
    backend = std::get<0>(GetParam());
    format = kFormats[std::get<1>(GetParam())];
    if (backend == QOPT_BACKEND_CUDA) {
      int32_t n = 0;
      if (qopt_cuda_device_count(&n) != QOPT_SUCCESS || n == 0)
        GTEST_SKIP() << "GPU test skipped: no CUDA device";
    } else if (!format.inHostCI && !std::getenv("QOPT_TEST_ECC_ALL_HOST")) {
      GTEST_SKIP() << "int16 formats on the host: set QOPT_TEST_ECC_ALL_HOST=1 (minutes)";
    }
  }
  qopt_backend backend{};
  Format format{};
};

TEST_P(EccExhaustive, EveryFloatEncodesAsTheReference) {
  EccKernel k(backend, std::string("ecc_encode_") + format.name,
              std::string("EccEncode_") + format.name);
  ASSERT_TRUE(k.error.empty()) << k.error;
  const int64_t chunk = int64_t(1) << 25;
  const int rhoBytes = isI8(format) ? 1 : 2;
  void *x16Dev = k.alloc(chunk * 2), *rhoDev = k.alloc(chunk * rhoBytes),
       *gDev = k.alloc(chunk * 4);
  ASSERT_TRUE(x16Dev && rhoDev && gDev);
  std::vector<uint32_t> g(chunk);
  std::vector<uint16_t> x16(chunk);
  std::vector<uint8_t> rhoRaw(chunk * rhoBytes);
  uint64_t mismatches = 0;
  uint32_t firstBad = 0;
  for (uint64_t start = 0; start < (uint64_t(1) << 32); start += chunk) {
    for (int64_t i = 0; i < chunk; ++i)
      g[i] = static_cast<uint32_t>(start + i);
    ASSERT_EQ(qopt_buffer_upload(k.ctx, gDev, g.data(), chunk * 4), QOPT_SUCCESS);
    ASSERT_TRUE(k.step({x16Dev, rhoDev, gDev}, chunk)) << qopt_last_error();
    ASSERT_EQ(qopt_buffer_download(k.ctx, x16.data(), x16Dev, chunk * 2), QOPT_SUCCESS);
    ASSERT_EQ(qopt_buffer_download(k.ctx, rhoRaw.data(), rhoDev, chunk * rhoBytes),
              QOPT_SUCCESS);
    std::vector<uint64_t> bad(std::max(1u, std::thread::hardware_concurrency()), 0);
    std::vector<uint32_t> first(bad.size(), 0);
    inParallel([&](unsigned t, unsigned threads) {
      for (int64_t i = t; i < chunk; i += threads) {
        const ref::EccSplit s = ref::eccEncode(ref::bitsToFloat(g[i]), format.param, format.rho);
        int32_t rho;
        if (isI8(format)) {
          rho = static_cast<int8_t>(rhoRaw[i]);
        } else {
          int16_t r;
          std::memcpy(&r, &rhoRaw[2 * i], 2);
          rho = r;
        }
        const bool nan = isNaN16(s.x16, format) && isNaN16(x16[i], format);
        if ((s.x16 != x16[i] && !nan) || s.rho != rho) {
          if (!bad[t]++)
            first[t] = g[i];
        }
      }
    });
    for (size_t t = 0; t < bad.size(); ++t) {
      if (bad[t] && !mismatches)
        firstBad = first[t];
      mismatches += bad[t];
    }
  }
  EXPECT_EQ(mismatches, 0u) << "first differing float32 pattern 0x" << std::hex << firstBad;
}

TEST_P(EccExhaustive, EveryX16AndRhoDecodesAsTheReference) {
  EccKernel k(backend, std::string("ecc_decode_") + format.name,
              std::string("EccDecode_") + format.name);
  ASSERT_TRUE(k.error.empty()) << k.error;
  // The rho values: all 256 of int8; for int16 all of [-2^12, 2^12] and a
  // stride of 7 over the rest (the range ends included).
  std::vector<int32_t> rhos;
  if (isI8(format)) {
    for (int32_t r = -128; r < 128; ++r)
      rhos.push_back(r);
  } else {
    for (int32_t r = -32768; r < 32768; ++r)
      if ((r >= -4096 && r <= 4096) || r % 7 == 0 || r == -32768 || r == 32767)
        rhos.push_back(r);
  }
  const int rhoBytes = isI8(format) ? 1 : 2;
  const int64_t perChunk = 64; // rho values per launch: 64 x 65536 elements
  const int64_t chunk = perChunk * 65536;
  void *x16Dev = k.alloc(chunk * 2), *rhoDev = k.alloc(chunk * rhoBytes),
       *gDev = k.alloc(chunk * 4), *sDev = k.alloc(chunk * 4);
  ASSERT_TRUE(x16Dev && rhoDev && gDev && sDev);
  std::vector<uint16_t> x16(chunk);
  std::vector<uint8_t> rhoRaw(chunk * rhoBytes);
  std::vector<uint32_t> s(chunk);
  std::vector<int32_t> rhoOf(chunk);
  uint64_t mismatches = 0, checked = 0;
  uint32_t firstX16 = 0;
  int32_t firstRho = 0;
  ASSERT_EQ(qopt_buffer_upload(k.ctx, gDev, std::vector<float>(chunk, 0.0f).data(), chunk * 4),
            QOPT_SUCCESS);
  for (size_t base = 0; base < rhos.size(); base += perChunk) {
    const int64_t n = std::min<int64_t>(perChunk, rhos.size() - base) * 65536;
    for (int64_t i = 0; i < n; ++i) {
      x16[i] = static_cast<uint16_t>(i & 0xFFFF);
      rhoOf[i] = rhos[base + i / 65536];
      if (isI8(format)) {
        rhoRaw[i] = static_cast<uint8_t>(static_cast<int8_t>(rhoOf[i]));
      } else {
        const int16_t r = static_cast<int16_t>(rhoOf[i]);
        std::memcpy(&rhoRaw[2 * i], &r, 2);
      }
    }
    ASSERT_EQ(qopt_buffer_upload(k.ctx, x16Dev, x16.data(), n * 2), QOPT_SUCCESS);
    ASSERT_EQ(qopt_buffer_upload(k.ctx, rhoDev, rhoRaw.data(), n * rhoBytes), QOPT_SUCCESS);
    ASSERT_TRUE(k.step({x16Dev, rhoDev, gDev, sDev}, n)) << qopt_last_error();
    ASSERT_EQ(qopt_buffer_download(k.ctx, s.data(), sDev, n * 4), QOPT_SUCCESS);
    std::vector<uint64_t> bad(std::max(1u, std::thread::hardware_concurrency()), 0);
    std::vector<int64_t> first(bad.size(), 0);
    inParallel([&](unsigned t, unsigned threads) {
      for (int64_t i = t; i < n; i += threads) {
        const float want = ref::eccDecode(x16[i], rhoOf[i], format.param, format.rho);
        const bool same = std::isnan(want) ? std::isnan(ref::bitsToFloat(s[i]))
                                           : ref::floatBits(want) == s[i];
        if (!same && !bad[t]++)
          first[t] = i;
      }
    });
    for (size_t t = 0; t < bad.size(); ++t) {
      if (bad[t] && !mismatches) {
        firstX16 = x16[first[t]];
        firstRho = rhoOf[first[t]];
      }
      mismatches += bad[t];
    }
    checked += n;
  }
  EXPECT_EQ(checked, rhos.size() * 65536);
  EXPECT_EQ(mismatches, 0u) << "first: x16 0x" << std::hex << firstX16 << std::dec
                            << ", rho " << firstRho;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, EccExhaustive,
    ::testing::Combine(::testing::Values(QOPT_BACKEND_HOST, QOPT_BACKEND_CUDA),
                       ::testing::Range(0, 4)),
    [](const ::testing::TestParamInfo<Param> &info) {
      return std::string(std::get<0>(info.param) == QOPT_BACKEND_HOST ? "Host_" : "Cuda_") +
             kFormats[std::get<1>(info.param)].name;
    });

} // namespace

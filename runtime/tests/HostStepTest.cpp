//===- HostStepTest.cpp - Validation and steps on the host backend -------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

extern "C" void qopt_test_sgd_f32_host(const void *, const int32_t *, int64_t,
                                       const float *, const float *const *,
                                       int64_t, int64_t);

using json = nlohmann::json;
using namespace qopt::test;

namespace {

std::atomic<int> gCalls{0};

extern "C" void countingKernel(const void *d, const int32_t *m, int64_t n,
                               const float *u, const float *const *t,
                               int64_t b, int64_t e) {
  ++gCalls;
  (void)d, (void)m, (void)n, (void)u, (void)t, (void)b, (void)e;
}

/// A host context plus a kernel of `manifestJson` running `fn`.
struct HostKernel {
  qopt_context *ctx = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_kernel *kernel = nullptr;
  HostKernel(const std::string &manifestJson, qopt_host_kernel_fn fn) {
    EXPECT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS)
        << qopt_last_error();
    manifest = parseOrDie(manifestJson);
    EXPECT_EQ(qopt_kernel_create_host(ctx, manifest, fn, &kernel), QOPT_SUCCESS)
        << qopt_last_error();
  }
  ~HostKernel() {
    qopt_kernel_destroy(kernel);
    qopt_manifest_destroy(manifest);
    qopt_context_destroy(ctx);
  }
};

/// 16-byte-aligned host memory.
struct Arena {
  std::vector<unsigned char> bytes;
  size_t used = 0;
  explicit Arena(size_t n) : bytes(n + 64) {}
  void *take(size_t n) {
    uintptr_t base = reinterpret_cast<uintptr_t>(bytes.data());
    uintptr_t p = (base + used + 63) & ~uintptr_t(63);
    used = p - base + n;
    EXPECT_LE(used, bytes.size());
    return reinterpret_cast<void *>(p);
  }
};

/// The flash manifest's 8 streams for `numels.size()` tensors, carved from an
/// arena, with names, byte sizes and dtypes filled in.
struct FlashList {
  Arena arena{1 << 20};
  std::vector<int64_t> numels;
  std::vector<void *> data;
  std::vector<uint64_t> bytes;
  std::vector<int32_t> dtypes;
  std::vector<const char *> names;
  qopt_tensor_list list{};
  explicit FlashList(std::vector<int64_t> n) : numels(std::move(n)) {
    static const char *kNames[] = {"a", "layer1.w", "c", "d", "e"};
    const qopt_dtype dt[] = {QOPT_DTYPE_BF16, QOPT_DTYPE_INT8, QOPT_DTYPE_BF16,
                             QOPT_DTYPE_INT8, QOPT_DTYPE_F16,  QOPT_DTYPE_UINT8,
                             QOPT_DTYPE_F32,  QOPT_DTYPE_F32};
    for (size_t k = 0; k < numels.size(); ++k) {
      int64_t e = numels[k];
      uint64_t b[] = {uint64_t(2 * e), uint64_t(e), uint64_t(2 * e), uint64_t(e),
                      uint64_t(2 * ((e + 31) / 32)), uint64_t(e),
                      uint64_t(4 * ((e + 2047) / 2048)), uint64_t(4 * e)};
      for (int j = 0; j < 8; ++j) {
        data.push_back(arena.take(b[j]));
        bytes.push_back(b[j]);
        dtypes.push_back(dt[j]);
      }
      names.push_back(kNames[k % 5]);
    }
    refresh();
  }
  void refresh() {
    list.num_tensors = numels.size();
    list.num_streams = 8;
    list.numels = numels.data();
    list.data = data.data();
    list.bytes = bytes.data();
    list.dtypes = dtypes.data();
    list.names = names.data();
  }
};

class Validation : public ::testing::Test {
protected:
  HostKernel k{flashManifestJson(), countingKernel};
  float table[256] = {};
  const void *tables[1] = {table};

  /// Validates and steps; both must fail with `fragment` in the message, and
  /// the step must not call the kernel.
  void expectRejected(const qopt_tensor_list &l, const std::string &fragment,
                      qopt_status want = QOPT_ERROR_VALIDATION,
                      const void *const *t = nullptr, size_t nt = 1) {
    if (!t)
      t = tables;
    EXPECT_EQ(qopt_validate(k.kernel, &l, t, nt), want);
    std::string msg = qopt_last_error();
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    int before = gCalls;
    EXPECT_EQ(qopt_step(k.kernel, &l, nullptr, 0, 1, t, nt, nullptr), want);
    EXPECT_EQ(std::string(qopt_last_error()), msg);
    EXPECT_EQ(gCalls, before) << "a rejected step must launch nothing";
  }
};

TEST_F(Validation, AGoodListPasses) {
  FlashList f({500, 4096, 33});
  ASSERT_EQ(qopt_validate(k.kernel, &f.list, tables, 1), QOPT_SUCCESS) << qopt_last_error();
  int before = gCalls;
  ASSERT_EQ(qopt_step(k.kernel, &f.list, nullptr, 0, 1, tables, 1, nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(gCalls, before + 1);
}

TEST_F(Validation, Misaligned) {
  FlashList f({500, 4096, 33});
  f.data[1 * 8 + 4] = static_cast<char *>(f.data[1 * 8 + 4]) + 4;
  f.bytes[1 * 8 + 4] = 0; // keep the size check quiet: alignment comes first
  f.list.bytes = nullptr;
  expectRejected(f.list, "tensor 'layer1.w' (#1), stream 'm.scales': pointer 0x");
  expectRejected(f.list, "is not 16-byte aligned (address mod 16 = 4)");
}

/// What the counted kernel below was last called with.
std::atomic<int64_t *> gCounters{nullptr};
std::atomic<int> gCountedCalls{0};

/// A host kernel that takes the numerics counters (qopt_host_counted_kernel_fn)
/// and adds 1 to each per call.
extern "C" void countedKernel(const void *d, const int32_t *m, int64_t n, const float *u,
                              const float *const *t, int64_t b, int64_t e, int64_t *counters) {
  (void)d, (void)m, (void)n, (void)u, (void)t, (void)b, (void)e;
  ++gCountedCalls;
  gCounters = counters;
  if (counters)
    for (int i = 0; i < QOPT_NUMERICS_COUNTERS; ++i)
      __atomic_fetch_add(&counters[i], 1, __ATOMIC_RELAXED);
}

/// The flash manifest with a saturating group state: the kernel takes the
/// numerics counters, last.
std::string countedManifestJson() {
  json j = json::parse(flashManifestJson());
  j["states"][0]["overflow"] = "saturate";
  j["args"].push_back("numerics_counters");
  return j.dump();
}

/// One launch of `l` through qopt_step_many with `counters`.
qopt_status stepCounted(qopt_kernel *k, const qopt_tensor_list &l, const void *const *tables,
                        int64_t *counters) {
  qopt_launch launch{};
  launch.kernel = k;
  launch.tensors = &l;
  launch.step = 1;
  launch.tables = tables;
  launch.num_tables = 1;
  launch.numerics_counters = counters;
  return qopt_step_many(&launch, 1, nullptr);
}

TEST_F(Validation, NumericsCountersReachTheKernel) {
  HostKernel counted(countedManifestJson(),
                     reinterpret_cast<qopt_host_kernel_fn>(countedKernel));
  FlashList f({500, 4096, 33});
  alignas(16) int64_t counters[QOPT_NUMERICS_COUNTERS] = {};
  int before = gCountedCalls;
  ASSERT_EQ(stepCounted(counted.kernel, f.list, tables, counters), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(gCounters.load(), counters);
  int calls = gCountedCalls - before;
  EXPECT_GE(calls, 1);
  for (int64_t c : counters)
    EXPECT_EQ(c, calls); // every call added to both, none reset them
  // qopt_step passes none; a kernel without counters ignores them, even a
  // pointer it would refuse.
  ASSERT_EQ(qopt_step(counted.kernel, &f.list, nullptr, 0, 1, tables, 1, nullptr),
            QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(gCounters.load(), nullptr);
  int64_t *odd = reinterpret_cast<int64_t *>(reinterpret_cast<char *>(counters) + 4);
  EXPECT_EQ(stepCounted(k.kernel, f.list, tables, odd), QOPT_SUCCESS) << qopt_last_error();
}

TEST_F(Validation, NumericsCountersAreCheckedAsAWrittenBuffer) {
  HostKernel counted(countedManifestJson(),
                     reinterpret_cast<qopt_host_kernel_fn>(countedKernel));
  FlashList f({500, 4096, 33});
  alignas(16) int64_t counters[QOPT_NUMERICS_COUNTERS + 1] = {};
  int before = gCountedCalls;
  int64_t *odd = reinterpret_cast<int64_t *>(reinterpret_cast<char *>(counters) + 4);
  EXPECT_EQ(stepCounted(counted.kernel, f.list, tables, odd), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("numerics counters: pointer 0x"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_NE(std::string(qopt_last_error()).find("is not 8-byte aligned"), std::string::npos);
  // Counters inside tensor 1's m3 (written by the kernel).
  int64_t *inside = reinterpret_cast<int64_t *>(static_cast<char *>(f.data[1 * 8 + 7]) + 64);
  EXPECT_EQ(stepCounted(counted.kernel, f.list, tables, inside), QOPT_ERROR_VALIDATION);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("overlapping buffers: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("numerics counters"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'layer1.w' (#1), stream 'm3'"), std::string::npos) << msg;
  EXPECT_EQ(gCountedCalls, before) << "a rejected step must launch nothing";
}

TEST_F(Validation, LaunchesMayShareTheirCountersAndNothingWritten) {
  // The launches of one step add to one counters buffer; any other byte a
  // launch writes is a byte of no other launch's buffers.
  HostKernel counted(countedManifestJson(),
                     reinterpret_cast<qopt_host_kernel_fn>(countedKernel));
  FlashList a({500, 4096}), b({33});
  alignas(16) int64_t counters[QOPT_NUMERICS_COUNTERS] = {};
  qopt_launch l[2] = {};
  for (int i = 0; i < 2; ++i) {
    l[i].kernel = counted.kernel;
    l[i].tensors = i ? &b.list : &a.list;
    l[i].step = 1;
    l[i].tables = tables;
    l[i].num_tables = 1;
    l[i].numerics_counters = counters;
  }
  int before = gCountedCalls;
  ASSERT_EQ(qopt_step_many(l, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_GT(gCountedCalls, before);
  // Launch 1's counters inside launch 0's 'm3' of tensor #1.
  int64_t *inside = reinterpret_cast<int64_t *>(static_cast<char *>(a.data[1 * 8 + 7]) + 64);
  l[1].numerics_counters = inside;
  before = gCountedCalls;
  EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_VALIDATION);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("overlapping buffers across launches: launch 1's numerics counters"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("launch 0's tensor 'layer1.w' (#1), stream 'm3'"), std::string::npos)
      << msg;
  // Counters that overlap another launch's without being them.
  l[1].numerics_counters = counters + 1;
  EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("numerics counters"), std::string::npos)
      << qopt_last_error();
  // b's parameter is a's gradient #0 (read by launch 0, written by launch 1).
  l[1].numerics_counters = counters;
  b.data[0] = a.data[2];
  EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_VALIDATION);
  msg = qopt_last_error();
  EXPECT_NE(msg.find("launch 1's tensor 'a' (#0), stream 'p'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("launch 0's tensor 'a' (#0), stream 'g'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("one of them is written"), std::string::npos) << msg;
  EXPECT_EQ(gCountedCalls, before) << "a refused step must launch nothing";
}

TEST_F(Validation, CrossLaunchOverlapIsRefusedWhileAnotherThreadValidates) {
  // Launch 1's parameter is launch 0's: refused at every step, while another
  // thread validates other lists with launch 0's kernel (the spans checked
  // must be this step's lists', not the other thread's). A race found in
  // review accepted a few in 100k such steps in 5 s; this runs for 1 s.
  HostKernel k2(flashManifestJson(), countingKernel);
  FlashList x({500}), z({33}), y1({500}), y2({700});
  z.data[0] = x.data[0];
  qopt_launch l[2] = {};
  l[0].kernel = k.kernel;
  l[0].tensors = &x.list;
  l[1].kernel = k2.kernel;
  l[1].tensors = &z.list;
  for (qopt_launch &e : l) {
    e.step = 1;
    e.tables = tables;
    e.num_tables = 1;
  }
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop) {
      qopt_validate(k.kernel, &y1.list, tables, 1);
      qopt_validate(k.kernel, &y2.list, tables, 1);
    }
  });
  int accepted = 0, steps = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
    ++steps;
    accepted += qopt_step_many(l, 2, nullptr) == QOPT_SUCCESS;
  }
  stop = true;
  other.join();
  EXPECT_EQ(accepted, 0) << accepted << " of " << steps << " overlapping steps accepted";
}

TEST_F(Validation, TensorCountPastInt32IsRefusedBeforeItIsUsed) {
  // SIZE_MAX / 8 + 2 tensors of 8 streams: the product wraps to 8 pointers.
  FlashList f({500});
  f.list.num_tensors = SIZE_MAX / 8 + 2;
  expectRejected(f.list, "tensors in one launch: at most 2^31 - 1",
                 QOPT_ERROR_INVALID_ARGUMENT);
}

TEST_F(Validation, WrongStreamCount) {
  FlashList f({500});
  f.list.num_streams = 7;
  expectRejected(f.list, "wrong stream count: the tensor list has 7 stream pointers per "
                         "tensor, kernel 'FlashAdamW_strict' takes 8 (p, p.ecc, g, "
                         "m.codes, m.scales, m2.codes, m2.absmax, m3)");
}

TEST_F(Validation, BufferTooSmall) {
  FlashList f({500, 4096, 33});
  f.bytes[0 * 8 + 4] = 30; // ceil(500/32) = 16 f16 scales = 32 bytes
  expectRejected(f.list, "tensor 'a' (#0), stream 'm.scales': the buffer holds 30 bytes, "
                         "the step needs 32 (ceil(500 / 32) = 16 groups of f16)");
}

TEST_F(Validation, WrongDtype) {
  FlashList f({500, 4096, 33});
  f.dtypes[2 * 8 + 5] = QOPT_DTYPE_INT8;
  expectRejected(f.list, "tensor 'c' (#2), stream 'm2.codes': dtype int8 given, the "
                         "kernel expects uint8");
  f.dtypes[2 * 8 + 5] = 77; // the caller's int32, no dtype: printed as given
  expectRejected(f.list, "tensor 'c' (#2), stream 'm2.codes': dtype (unknown dtype 77) "
                         "given, the kernel expects uint8");
}

TEST_F(Validation, ByteCountOverflow) {
  // 2^62 elements of f32 are 2^64 bytes: a validation error naming the
  // tensor and stream, not an overflowed size.
  FlashList f({500, 4096, 33});
  f.numels[1] = int64_t(1) << 62;
  f.list.bytes = nullptr;
  expectRejected(f.list, "tensor 'layer1.w' (#1), stream 'm3': 4611686018427387904 "
                         "elements (4611686018427387904 of f32) overflow a 64-bit byte count");
}

TEST_F(Validation, NullPointer) {
  FlashList f({500, 4096, 33});
  f.data[2 * 8 + 2] = nullptr;
  expectRejected(f.list, "tensor 'c' (#2), stream 'g': null pointer for 66 bytes");
}

TEST_F(Validation, NegativeNumel) {
  FlashList f({500, 4096, 33});
  f.numels[1] = -7;
  f.list.bytes = nullptr;
  expectRejected(f.list, "tensor 'layer1.w' (#1): numel -7 is negative");
}

TEST_F(Validation, OverlappingWrittenBuffers) {
  FlashList f({500, 4096, 33});
  // Tensor 2's m3 starts inside tensor 0's m3.
  f.data[2 * 8 + 7] = static_cast<char *>(f.data[0 * 8 + 7]) + 1024;
  expectRejected(f.list, "overlapping buffers: ");
  expectRejected(f.list, "tensor 'c' (#2), stream 'm3'");
  expectRejected(f.list, "tensor 'a' (#0), stream 'm3'");
  expectRejected(f.list, "both are written");
}

TEST_F(Validation, ReadOnlyOverlapIsAllowedButNotWithAWrite) {
  FlashList f({500, 500});
  // The same gradient read twice is harmless.
  f.data[1 * 8 + 2] = f.data[0 * 8 + 2];
  EXPECT_EQ(qopt_validate(k.kernel, &f.list, tables, 1), QOPT_SUCCESS) << qopt_last_error();
  // A gradient that aliases a written state is not.
  f.data[1 * 8 + 2] = f.data[0 * 8 + 3];
  f.list.bytes = nullptr;
  expectRejected(f.list, "one of them is written");
  expectRejected(f.list, "tensor 'layer1.w' (#1), stream 'g'");
}

TEST_F(Validation, TableErrors) {
  FlashList f({500});
  expectRejected(f.list, "wrong table count: kernel 'FlashAdamW_strict' takes 1 codebook "
                         "table(s), got 0",
                 QOPT_ERROR_VALIDATION, tables, 0);
  const void *nullTable[] = {nullptr};
  expectRejected(f.list, "table 'm2.qmap': null pointer", QOPT_ERROR_VALIDATION, nullTable, 1);
  // The table overlapping a written stream.
  const void *aliased[] = {f.data[7]};
  expectRejected(f.list, "table 'm2.qmap'", QOPT_ERROR_VALIDATION, aliased, 1);
}

TEST_F(Validation, EmptyTensorsNeedNoMemory) {
  FlashList f({0, 0});
  for (void *&p : f.data)
    p = nullptr;
  EXPECT_EQ(qopt_validate(k.kernel, &f.list, tables, 1), QOPT_SUCCESS) << qopt_last_error();
  int before = gCalls;
  EXPECT_EQ(qopt_step(k.kernel, &f.list, nullptr, 0, 1, tables, 1, nullptr), QOPT_SUCCESS);
  EXPECT_EQ(gCalls, before) << "no tiles, no launch";
}

TEST_F(Validation, CountsPastTwoToThe31) {
  // Validation only looks at addresses on the host backend, so a list with a
  // 2^31 + 5 element tensor can be checked without the memory.
  const int64_t n = 2147483653LL;
  std::vector<int64_t> numels = {n};
  std::vector<void *> data(8);
  std::vector<uint64_t> bytes = {uint64_t(2 * n), uint64_t(n), uint64_t(2 * n), uint64_t(n),
                                 uint64_t(2 * 67108865LL), uint64_t(n), uint64_t(4 * 1048577LL),
                                 uint64_t(4 * n)};
  uint64_t at = uint64_t(1) << 40;
  for (int j = 0; j < 8; ++j) {
    data[j] = reinterpret_cast<void *>(at);
    at += (bytes[j] + 4095) & ~uint64_t(4095);
  }
  const char *names[] = {"embedding"};
  qopt_tensor_list l{1, 8, numels.data(), data.data(), bytes.data(), nullptr, names};
  EXPECT_EQ(qopt_validate(k.kernel, &l, tables, 1), QOPT_SUCCESS) << qopt_last_error();
  bytes[4] -= 2; // one f16 scale short
  EXPECT_EQ(qopt_validate(k.kernel, &l, tables, 1), QOPT_ERROR_VALIDATION);
  EXPECT_STREQ(qopt_last_error(),
               "tensor 'embedding' (#0), stream 'm.scales': the buffer holds 134217728 bytes, "
               "the step needs 134217730 (ceil(2147483653 / 32) = 67108865 groups of f16)");
  bytes[4] += 2;
  bytes[7] = uint64_t(4) * n - 4;
  EXPECT_EQ(qopt_validate(k.kernel, &l, tables, 1), QOPT_ERROR_VALIDATION);
  EXPECT_STREQ(qopt_last_error(),
               "tensor 'embedding' (#0), stream 'm3': the buffer holds 8589934608 bytes, "
               "the step needs 8589934612 (2147483653 elements of f32)");
}

TEST_F(Validation, UnnamedTensorsAreNumbered) {
  FlashList f({500, 4096});
  f.list.names = nullptr;
  f.data[1 * 8 + 0] = nullptr;
  expectRejected(f.list, "tensor #1, stream 'p': null pointer for 8192 bytes");
}

//===--- Steps through the host ABI ---------------------------------------===//

/// p and g for a list of sizes, with names.
struct SgdList {
  std::vector<int64_t> numels;
  std::vector<std::vector<float>> p, g;
  std::vector<void *> data;
  qopt_tensor_list list{};
  explicit SgdList(std::vector<int64_t> n) : numels(std::move(n)) {
    for (size_t k = 0; k < numels.size(); ++k) {
      p.emplace_back(static_cast<size_t>(numels[k]) + 4);
      g.emplace_back(static_cast<size_t>(numels[k]) + 4);
      for (int64_t i = 0; i < numels[k]; ++i) {
        p[k][i] = static_cast<float>(k * 1000 + i) * 0.125f;
        g[k][i] = static_cast<float>((i % 7) - 3) + 0.5f;
      }
    }
    for (size_t k = 0; k < numels.size(); ++k) {
      data.push_back(p[k].data());
      data.push_back(g[k].data());
    }
    list = {numels.size(), 2, numels.data(), data.data(), nullptr, nullptr, nullptr};
  }
  /// Element-wise expected result of `steps` steps with uniform u.
  std::vector<std::vector<float>> expected(float u, int steps) const {
    auto out = p;
    for (size_t k = 0; k < numels.size(); ++k)
      for (int s = 0; s < steps; ++s)
        for (int64_t i = 0; i < numels[k]; ++i) {
          float prod = u * g[k][i];
          out[k][i] = out[k][i] - prod;
        }
    return out;
  }
};

TEST(HostStep, StepsEveryElementOfEveryTensorOnce) {
  HostKernel k(sgdManifestJson(), qopt_test_sgd_f32_host);
  SgdList l({0, 1, 1023, 1024, 1025, 5000, 3});
  auto want = l.expected(0.375f, 1); // 0.5 * (1 - 0.5^2)
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
  ASSERT_EQ(qopt_step(k.kernel, &l.list, h, 2, 2, nullptr, 0, nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  for (size_t t = 0; t < l.numels.size(); ++t)
    for (int64_t i = 0; i < l.numels[t] + 4; ++i)
      ASSERT_EQ(l.p[t][i], i < l.numels[t] ? want[t][i] : 0.0f) << "tensor " << t << " element " << i;
}

TEST(HostStep, DeviceUniformsVariantReadsTheCallersBuffer) {
  HostKernel k(sgdManifestJson(), qopt_test_sgd_f32_host);
  SgdList l({100, 2000});
  auto want = l.expected(0.25f, 1);
  float uniforms[1] = {0.25f};
  ASSERT_EQ(qopt_step_device_uniforms(k.kernel, &l.list, uniforms, nullptr, 0, nullptr),
            QOPT_SUCCESS)
      << qopt_last_error();
  for (size_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < l.numels[t]; ++i)
      ASSERT_EQ(l.p[t][i], want[t][i]);
  EXPECT_EQ(qopt_step_device_uniforms(k.kernel, &l.list, nullptr, nullptr, 0, nullptr),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("device_uniforms is NULL"), std::string::npos);
}

TEST(HostStep, HostLibraryFromTheManifest) {
  std::string lib = exeDir() + "/libqopt_test_host_kernels.so";
  ASSERT_TRUE(fileExists(lib)) << lib;
  std::string dir = makeTempDir();
  json j = json::parse(sgdManifestJson());
  j["host"] = {{"library", lib}, {"symbol", "qopt_test_sgd_f32_host"}};
  writeFile(dir + "/qopt_test_sgd_f32.manifest.json", j.dump());
  json bad = json::parse(sgdManifestJson());
  bad["kernel"] = "no_symbol";
  bad["host"] = {{"library", lib}};
  writeFile(dir + "/no_symbol.manifest.json", bad.dump());
  json none = json::parse(sgdManifestJson());
  none["kernel"] = "gpu_only";
  writeFile(dir + "/gpu_only.manifest.json", none.dump());

  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  ASSERT_EQ(qopt_registry_add_directory(r, dir.c_str(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS);
  qopt_kernel *kernel = nullptr;
  ASSERT_EQ(qopt_kernel_create(ctx, r, "qopt_test_sgd_f32", &kernel), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_kernel_info info;
  ASSERT_EQ(qopt_kernel_get_info(kernel, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.backend, QOPT_BACKEND_HOST);
  EXPECT_EQ(info.format, QOPT_BINARY_HOST);
  EXPECT_EQ(std::string(info.origin), lib);

  SgdList l({3000, 7});
  auto want = l.expected(0.25f, 1); // lr 0.5 * (1 - 0.5^1)
  ASSERT_EQ(qopt_step(kernel, &l.list, nullptr, 0, 1, nullptr, 0, nullptr),
            QOPT_SUCCESS)
      << qopt_last_error();
  for (size_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < l.numels[t]; ++i)
      ASSERT_EQ(l.p[t][i], want[t][i]);
  qopt_kernel_destroy(kernel);

  EXPECT_EQ(qopt_kernel_create(ctx, r, "no_symbol", &kernel), QOPT_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(qopt_last_error()).find("has no symbol 'no_symbol_host'"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(qopt_kernel_create(ctx, r, "gpu_only", &kernel), QOPT_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(qopt_last_error()).find("kernel 'gpu_only' has no host implementation"),
            std::string::npos)
      << qopt_last_error();
  qopt_context_destroy(ctx);
  qopt_registry_destroy(r);
}

TEST(HostStep, HostContextRejectsGpuImages) {
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS);
  qopt_manifest *m = parseOrDie(sgdManifestJson());
  qopt_kernel *kernel = nullptr;
  const char ptx[] = ".version 8.0";
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_PTX, ptx, sizeof ptx, &kernel),
            QOPT_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(qopt_last_error()).find("needs a CUDA context"), std::string::npos);
  qopt_context *other = nullptr;
  EXPECT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 1, &other), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(other, nullptr);
  qopt_manifest_destroy(m);
  qopt_context_destroy(ctx);
}

} // namespace

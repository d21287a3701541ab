//===- SimulatedDeviceTest.cpp - The CUDA launch path on a simulated device ===//
//
// QOPT_CUDA_LIBRARY points at libqopt_sim_cuda.so (SimulatedCuda.c): a driver
// whose device memory is host memory, whose launches run nothing and which
// counts its calls. The tests check what the host path of a step costs in
// driver work and upload bytes (each fact checked once, the tile map not
// uploaded again when only buffers moved) and that the tables a launch reads
// hold the step's pointers, on machines without a GPU.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

using namespace qopt::test;

namespace {

struct Sim {
  void (*reset)() = nullptr;
  long (*count)(const char *) = nullptr;
  void (*setArgCount)(int) = nullptr;
  uint64_t (*lastArg)(int) = nullptr;
  unsigned (*lastGrid)() = nullptr;
  void (*setEventsPending)(int) = nullptr;
  void (*setFunctionArgs)(const char *, int) = nullptr;
  int (*logged)() = nullptr;
  const char *(*loggedName)(int) = nullptr;
  unsigned (*loggedGrid)(int) = nullptr;
  unsigned (*loggedBlock)(int) = nullptr;
  uint64_t (*loggedArg)(int, int) = nullptr;
  void (*setCapturing)(int) = nullptr;
  void (*setOccupancy)(int) = nullptr;
  int (*lastOccupancyBlock)() = nullptr;
};

Sim &sim() {
  static Sim s;
  return s;
}

constexpr int64_t kTile = 1024; // sgdManifestJson's tile_elements
constexpr size_t kStaging = 16; // the work counters before the uniforms

/// A test with one CUDA context on the simulated device, the test SGD
/// kernel (streams p, g: f32; one uniform) and two "segments" (allocations)
/// from which tensors are carved, as PyTorch's caching allocator does.
class SimulatedDevice : public ::testing::Test {
protected:
  qopt_context *ctx = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_kernel *kernel = nullptr;
  char *params = nullptr, *grads = nullptr;
  static constexpr size_t kSegment = 64 << 20;

  void SetUp() override {
    ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS)
        << qopt_last_error();
    manifest = parseOrDie(sgdManifestJson());
    const char ptx[] = "// simulated";
    ASSERT_EQ(qopt_kernel_create_from_image(ctx, manifest, QOPT_BINARY_PTX, ptx,
                                            sizeof ptx, &kernel),
              QOPT_SUCCESS)
        << qopt_last_error();
    void *p = nullptr, *g = nullptr;
    ASSERT_EQ(qopt_buffer_alloc(ctx, kSegment, &p), QOPT_SUCCESS);
    ASSERT_EQ(qopt_buffer_alloc(ctx, kSegment, &g), QOPT_SUCCESS);
    params = static_cast<char *>(p);
    grads = static_cast<char *>(g);
    sim().setArgCount(4); // descriptors, tile_map, num_tiles, uniforms
    sim().setEventsPending(0);
    sim().setOccupancy(0);
    sim().reset();
  }
  void TearDown() override {
    qopt_kernel_destroy(kernel);
    qopt_manifest_destroy(manifest);
    qopt_context_destroy(ctx);
  }

  /// A list of `numels.size()` tensors whose parameters and gradients lie
  /// back to back in the two segments, the gradients from byte `gradOffset`.
  struct List {
    std::vector<int64_t> numels;
    std::vector<void *> data;
    qopt_tensor_list view{};
  };
  List makeList(const std::vector<int64_t> &numels, size_t gradOffset = 0) {
    List l;
    l.numels = numels;
    size_t po = 0, go = gradOffset;
    for (int64_t n : numels) {
      l.data.push_back(params + po);
      l.data.push_back(grads + go);
      size_t bytes = (static_cast<size_t>(n) * 4 + 255) & ~size_t(255);
      po += bytes;
      go += bytes;
    }
    l.view.num_tensors = numels.size();
    l.view.num_streams = 2;
    l.view.numels = l.numels.data();
    l.view.data = l.data.data();
    return l;
  }
  /// A second kernel of the fixture's manifest on `context` (null on error).
  qopt_kernel *anotherKernel(qopt_context *context) {
    qopt_kernel *k = nullptr;
    const char ptx[] = "// simulated";
    qopt_kernel_create_from_image(context, manifest, QOPT_BINARY_PTX, ptx,
                                  sizeof ptx, &k);
    return k;
  }
  qopt_status step(List &l, int64_t step = 1) {
    qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
    return qopt_step(kernel, &l.view, h, 2, step, nullptr, 0, nullptr);
  }
};

std::vector<int64_t> mixedSizes(size_t n) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < n; ++i)
    v.push_back(int64_t(1 + (i * 7919) % 5000));
  return v;
}

TEST_F(SimulatedDevice, DriverIsAskedOncePerAllocation) {
  List l = makeList(mixedSizes(148));
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  // 296 buffers in two allocations: the driver describes each allocation once.
  EXPECT_EQ(sim().count("cuPointerGetAttributes"), 2);
  EXPECT_EQ(sim().count("cuLaunchKernel"), 1);
}

TEST_F(SimulatedDevice, UnchangedListUploadsOnlyTheUniforms) {
  List l = makeList(mixedSizes(148));
  ASSERT_EQ(step(l, 1), QOPT_SUCCESS) << qopt_last_error();
  ASSERT_EQ(step(l, 2), QOPT_SUCCESS) << qopt_last_error(); // fills a second slot
  sim().reset();
  ASSERT_EQ(step(l, 3), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(sim().count("cuPointerGetAttributes"), 0);
  EXPECT_EQ(sim().count("cuMemcpyHtoDAsync"), 1);
  // The work counters and the one float32 uniform.
  EXPECT_EQ(sim().count("copied_bytes"), long(kStaging + 4));
  // The uniform the launch reads is this step's: lr * (1 - beta^3).
  float u = 0;
  std::memcpy(&u, reinterpret_cast<const void *>(sim().lastArg(3)), 4);
  EXPECT_EQ(u, 0.4375f);
}

TEST_F(SimulatedDevice, MovedGradientsPatchTheDescriptorsNotTheTileMap) {
  std::vector<int64_t> sizes = mixedSizes(148);
  List a = makeList(sizes);
  ASSERT_EQ(step(a), QOPT_SUCCESS) << qopt_last_error();
  ASSERT_EQ(step(a), QOPT_SUCCESS) << qopt_last_error();
  int64_t tiles = 0;
  for (int64_t n : sizes)
    tiles += (n + kTile - 1) / kTile;
  // Every gradient moves (zero_grad(set_to_none=True) and a new backward).
  List b = makeList(sizes, 32 << 20);
  sim().reset();
  ASSERT_EQ(step(b), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(sim().count("cuPointerGetAttributes"), 0);
  // Counters, the uniform (padded to 16 bytes) and 148 descriptors of 32
  // bytes; not the tile map.
  EXPECT_EQ(sim().count("copied_bytes"), long(kStaging + 16 + 148 * 32));
  // What the launch reads: the new gradient pointers and the tile map.
  const auto *desc = reinterpret_cast<const unsigned char *>(sim().lastArg(0));
  const auto *tileMap = reinterpret_cast<const int32_t *>(sim().lastArg(1));
  EXPECT_EQ(int64_t(sim().lastArg(2)), tiles);
  int64_t first = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    int64_t numel = 0, firstTile = 0;
    uint64_t p = 0, g = 0;
    std::memcpy(&numel, desc + 32 * k, 8);
    std::memcpy(&firstTile, desc + 32 * k + 8, 8);
    std::memcpy(&p, desc + 32 * k + 16, 8);
    std::memcpy(&g, desc + 32 * k + 24, 8);
    ASSERT_EQ(numel, sizes[k]) << k;
    ASSERT_EQ(firstTile, first) << k;
    ASSERT_EQ(p, reinterpret_cast<uintptr_t>(b.data[2 * k])) << k;
    ASSERT_EQ(g, reinterpret_cast<uintptr_t>(b.data[2 * k + 1])) << k;
    for (int64_t t = 0; t < (sizes[k] + kTile - 1) / kTile; ++t)
      ASSERT_EQ(tileMap[first + t], int32_t(k)) << k;
    first += (sizes[k] + kTile - 1) / kTile;
  }
}

TEST_F(SimulatedDevice, SteadyStepsQueryAtMostOneEvent) {
  List l = makeList(mixedSizes(148));
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  sim().reset();
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_LE(sim().count("cuEventQuery"), 20);
  EXPECT_EQ(sim().count("cuEventSynchronize"), 0);
  EXPECT_EQ(sim().count("cuMemAlloc"), 0); // no staging buffer added
  EXPECT_EQ(sim().count("copied_bytes"), long(20 * (kStaging + 4)));
}

TEST_F(SimulatedDevice, HostFarAheadWaitsForTheOldestStep) {
  // Every step stays in flight: the kernel adds staging buffers up to its
  // limit (16), then each step waits for the oldest, and every step still
  // launches with this step's uniform.
  sim().setEventsPending(1);
  List l = makeList(mixedSizes(20));
  for (int i = 1; i <= 40; ++i) {
    ASSERT_EQ(step(l, i), QOPT_SUCCESS) << i << ": " << qopt_last_error();
    float u = 0;
    std::memcpy(&u, reinterpret_cast<const void *>(sim().lastArg(3)), 4);
    ASSERT_EQ(u, float(0.5 * (1 - std::pow(0.5, i)))) << i;
  }
  EXPECT_EQ(sim().count("cuLaunchKernel"), 40);
  EXPECT_LE(sim().count("cuMemAlloc"), 16);
  EXPECT_GE(sim().count("cuEventSynchronize"), 40 - 16);
  sim().setEventsPending(0);
}

TEST_F(SimulatedDevice, NewSizesUploadTheTileMap) {
  List a = makeList({5000, 3000});
  ASSERT_EQ(step(a), QOPT_SUCCESS) << qopt_last_error();
  List b = makeList({2048, 4097});
  sim().reset();
  ASSERT_EQ(step(b), QOPT_SUCCESS) << qopt_last_error();
  const auto *tileMap = reinterpret_cast<const int32_t *>(sim().lastArg(1));
  EXPECT_EQ(sim().lastArg(2), 7u);
  std::vector<int32_t> want = {0, 0, 1, 1, 1, 1, 1};
  EXPECT_EQ(std::vector<int32_t>(tileMap, tileMap + 7), want);
}

TEST_F(SimulatedDevice, NewAllocationIsAskedAbout) {
  List l = makeList(mixedSizes(10));
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  void *fresh = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(ctx, 1 << 20, &fresh), QOPT_SUCCESS);
  l.data[1] = fresh;
  sim().reset();
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(sim().count("cuPointerGetAttributes"), 1);
  // Freed by qopt_buffer_free, the allocation is forgotten: the driver
  // (which no longer knows it) is asked, and the step is refused.
  ASSERT_EQ(qopt_buffer_free(ctx, fresh), QOPT_SUCCESS);
  sim().reset();
  EXPECT_EQ(step(l), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("is not CUDA memory"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(sim().count("cuPointerGetAttributes"), 1);
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
}

TEST_F(SimulatedDevice, ForgetAllocationsAsksAgain) {
  List l = makeList(mixedSizes(10));
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  ASSERT_EQ(qopt_context_forget_allocations(ctx), QOPT_SUCCESS);
  List moved = makeList(mixedSizes(10), 4096);
  sim().reset();
  ASSERT_EQ(step(moved), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(sim().count("cuPointerGetAttributes"), 2);
}

TEST_F(SimulatedDevice, BufferPastItsAllocationIsRefusedEvenWhenCached) {
  List l = makeList({1000});
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  // The gradient starts inside the cached segment and runs past its end.
  l.data[1] = grads + kSegment - 1024;
  sim().reset();
  EXPECT_EQ(step(l), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("run past the end of its allocation"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
}

TEST_F(SimulatedDevice, HostMemoryIsRefusedEveryTime) {
  List l = makeList({256});
  std::vector<float> host(256);
  l.data[1] = host.data();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(step(l), QOPT_ERROR_VALIDATION);
    EXPECT_NE(std::string(qopt_last_error()).find("is not CUDA memory"),
              std::string::npos)
        << qopt_last_error();
  }
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
}

TEST_F(SimulatedDevice, OverlapIsRefusedAfterAnAcceptedList) {
  List l = makeList({1000, 1000});
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  l.data[3] = l.data[1]; // two gradients share memory: allowed (read only)
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  l.data[2] = l.data[0]; // two parameters share memory: refused
  EXPECT_EQ(step(l), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("overlapping buffers"),
            std::string::npos)
      << qopt_last_error();
}

TEST_F(SimulatedDevice, MovedBuffersAreCheckedWhereTheyMoved) {
  // Each case moves one gradient of an accepted list (only the moved
  // buffers are checked) to a place that must be refused; the list it
  // leaves behind is accepted again afterwards.
  std::vector<int64_t> sizes = mixedSizes(40);
  List good = makeList(sizes);
  ASSERT_EQ(step(good), QOPT_SUCCESS) << qopt_last_error();
  std::vector<float> host(4096);
  void *small = nullptr; // smaller than tensor #9's gradient
  ASSERT_EQ(qopt_buffer_alloc(ctx, 1024, &small), QOPT_SUCCESS);
  struct Case {
    const char *what;
    void *grad;
    const char *message;
  } cases[] = {
      {"onto a parameter", good.data[2 * 7], "overlapping buffers"},
      {"into the middle of a parameter", static_cast<char *>(good.data[2 * 7]) + 256,
       "overlapping buffers"},
      {"null", nullptr, "null pointer"},
      {"misaligned", static_cast<char *>(good.data[2 * 5 + 1]) + 8, "not 16-byte aligned"},
      {"host memory", host.data(), "is not CUDA memory"},
      {"past its allocation", small, "run past the end of its allocation"},
  };
  for (const Case &c : cases) {
    List l = makeList(sizes, 1 << 20); // every gradient moved, each accepted
    l.data[2 * 9 + 1] = c.grad;        // but one
    sim().reset();
    EXPECT_EQ(step(l), QOPT_ERROR_VALIDATION) << c.what;
    EXPECT_NE(std::string(qopt_last_error()).find(c.message), std::string::npos)
        << c.what << ": " << qopt_last_error();
    EXPECT_NE(std::string(qopt_last_error()).find("tensor #9, stream 'g'"), std::string::npos)
        << c.what << ": " << qopt_last_error();
    EXPECT_EQ(sim().count("cuLaunchKernel"), 0) << c.what;
    ASSERT_EQ(step(good), QOPT_SUCCESS) << c.what << ": " << qopt_last_error();
  }
  // Two moved gradients onto one another: read-only, allowed.
  List shared = makeList(sizes, 1 << 20);
  shared.data[2 * 3 + 1] = shared.data[2 * 4 + 1];
  EXPECT_EQ(step(shared), QOPT_SUCCESS) << qopt_last_error();
}

TEST_F(SimulatedDevice, StepManyRefusesEveryLaunchWhenOneIsInvalid) {
  qopt_kernel *second = anotherKernel(ctx);
  ASSERT_NE(second, nullptr) << qopt_last_error();
  List a = makeList({1000, 2000});
  List b = makeList({3000}, 1 << 20);
  for (auto &p : b.data) // a second group in other parts of the segments
    p = static_cast<char *>(p) + (8 << 20);
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
  qopt_launch launches[2] = {{kernel, &a.view, h, 2, 1, nullptr, nullptr, 0},
                             {second, &b.view, h, 2, 1, nullptr, nullptr, 0}};
  ASSERT_EQ(qopt_step_many(launches, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 2);

  b.data[1] = static_cast<char *>(b.data[1]) + 4; // misaligned gradient
  sim().reset();
  EXPECT_EQ(qopt_step_many(launches, 2, nullptr), QOPT_ERROR_VALIDATION);
  std::string msg = qopt_last_error();
  EXPECT_EQ(msg.rfind("launch 1: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("not 16-byte aligned"), std::string::npos) << msg;
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);

  launches[1].hypers = nullptr; // lr and beta have defaults; step 0 is refused
  launches[1].num_hypers = 0;
  launches[1].step = 0;
  b.data[1] = static_cast<char *>(b.data[1]) - 4;
  EXPECT_EQ(qopt_step_many(launches, 2, nullptr), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(qopt_last_error()).rfind("launch 1: ", 0), 0u)
      << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
  qopt_kernel_destroy(second);
}

TEST_F(SimulatedDevice, StepManyRefusesBuffersSharedAcrossLaunches) {
  // Within a launch a written buffer may share no byte with another buffer;
  // the same holds between the launches of one step.
  qopt_kernel *second = anotherKernel(ctx);
  ASSERT_NE(second, nullptr) << qopt_last_error();
  List a = makeList({1000, 2000});
  List b = makeList({3000}, 1 << 20);
  b.data[0] = static_cast<char *>(b.data[0]) + (8 << 20);
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
  qopt_launch launches[2] = {{kernel, &a.view, h, 2, 1, nullptr, nullptr, 0},
                             {second, &b.view, h, 2, 1, nullptr, nullptr, 0}};
  ASSERT_EQ(qopt_step_many(launches, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  struct Case {
    const char *what;
    qopt_kernel *k1;
    qopt_tensor_list *t1;
    int stream;  // b's stream moved (-1: none)
    void *where; // its new place
  } cases[] = {
      {"the same list twice, other kernels", second, &a.view, -1, nullptr},
      {"the same list twice, one kernel", kernel, &a.view, -1, nullptr},
      {"b's parameter on a's parameter #1", second, &b.view, 0, a.data[2]},
      {"b's parameter inside a's gradient #0", second, &b.view, 0,
       static_cast<char *>(a.data[1]) + 256},
      {"b's gradient on a's parameter #0", second, &b.view, 1, a.data[0]},
  };
  for (const Case &c : cases) {
    List moved = b;
    moved.view.data = moved.data.data();
    moved.view.numels = moved.numels.data();
    if (c.stream >= 0)
      moved.data[c.stream] = c.where;
    qopt_launch l[2] = {launches[0], launches[1]};
    l[1].kernel = c.k1;
    l[1].tensors = c.t1 == &b.view ? &moved.view : c.t1;
    sim().reset();
    EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_VALIDATION) << c.what;
    std::string msg = qopt_last_error();
    EXPECT_NE(msg.find("overlapping buffers across launches: launch 1's tensor #0"),
              std::string::npos)
        << c.what << ": " << msg;
    EXPECT_NE(msg.find("launch 0's tensor #"), std::string::npos) << c.what << ": " << msg;
    EXPECT_EQ(sim().count("cuLaunchKernel"), 0) << c.what;
  }
  // Read-only buffers may be shared: b's gradient is a's gradient #1.
  List shared = b;
  shared.view.data = shared.data.data();
  shared.view.numels = shared.numels.data();
  shared.data[1] = a.data[3];
  launches[1].tensors = &shared.view;
  sim().reset();
  EXPECT_EQ(qopt_step_many(launches, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 2);
  qopt_kernel_destroy(second);
}

/// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST_F(SimulatedDevice, ProducerWarpsJoinTheBlock) {
  // A kernel whose block holds one producer warp after the 128 threads that
  // compute its tile (docs/abi.md, "Kernel arguments"): the occupancy query
  // and the launch are of 160 threads; the tile stays 128 * 8 elements.
  std::string text = replaced(sgdManifestJson(), "\"version\": 1", "\"version\": 2");
  text = replaced(text, "\"suggested_blocks_per_sm\": 2}",
                  "\"suggested_blocks_per_sm\": 2, \"producer_warps\": 1}");
  qopt_manifest *m = parseOrDie(text);
  ASSERT_NE(m, nullptr);
  sim().setOccupancy(3);
  qopt_kernel *k = nullptr;
  const char ptx[] = "// simulated";
  ASSERT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_PTX, ptx, sizeof ptx, &k),
            QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(sim().lastOccupancyBlock(), 160);
  qopt_kernel_info info;
  ASSERT_EQ(qopt_kernel_get_info(k, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.max_blocks, 132 * 3); // the driver's answer for 160 threads
  sim().setOccupancy(0);

  List l = makeList({5000, 10}); // 5 + 1 tiles of 1024
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
  ASSERT_EQ(qopt_step(k, &l.view, h, 2, 1, nullptr, 0, nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(sim().logged(), 1);
  EXPECT_EQ(sim().loggedBlock(0), 160u);
  EXPECT_EQ(sim().loggedGrid(0), 6u);
  EXPECT_EQ(sim().loggedArg(0, 2), 6u); // num_tiles: tiles of the consumers' 1024
  // The fixture's kernel, without producer warps, launches its 128.
  ASSERT_EQ(step(l), QOPT_SUCCESS) << qopt_last_error();
  ASSERT_EQ(sim().logged(), 2);
  EXPECT_EQ(sim().loggedBlock(1), 128u);
  qopt_kernel_destroy(k);
  qopt_manifest_destroy(m);
}

TEST_F(SimulatedDevice, DestroyedContextsBuffersAreForgotten) {
  // A kernel outlives its context's handle and shares its allocation cache:
  // the buffers the context frees on destruction must not stay known.
  qopt_context *other = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &other), QOPT_SUCCESS);
  qopt_kernel *k = anotherKernel(other);
  ASSERT_NE(k, nullptr) << qopt_last_error();
  void *big = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(other, 1 << 20, &big), QOPT_SUCCESS);
  std::vector<int64_t> numels = {1000};
  std::vector<void *> data = {big, static_cast<char *>(big) + (512 << 10)};
  qopt_tensor_list list{};
  list.num_tensors = 1;
  list.num_streams = 2;
  list.numels = numels.data();
  list.data = data.data();
  qopt_hyper h[] = {{"lr", 0.5}, {"beta", 0.5}};
  ASSERT_EQ(qopt_step(k, &list, h, 2, 1, nullptr, 0, nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_context_destroy(other), QOPT_SUCCESS);
  data[0] = static_cast<char *>(big) + 8192; // moved, inside the freed buffer
  sim().reset();
  EXPECT_EQ(qopt_step(k, &list, h, 2, 1, nullptr, 0, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("is not CUDA memory"), std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
  qopt_kernel_destroy(k);
}

/// A GPU kernel with one step reduction (norm, uniform 1) and no per-tensor
/// one: reduce, finish and combine phases (docs/abi.md, "Step reductions").
std::string stepManifest(const std::string &k) {
  return R"({
  "format": "qopt-manifest", "version": 1, "kernel": ")" + k + R"(", "arch": "sm_90",
  "param": {"name": "p", "dtype": "f32"}, "grad": {"name": "g", "dtype": "f32"},
  "hypers": [{"name": "lr", "default": 0.5}],
  "streams": [{"name": "p", "role": "param", "dtype": "f32", "per": "element", "access": "read_write"},
              {"name": "g", "role": "grad", "dtype": "f32", "per": "element", "access": "read"}],
  "uniforms": [{"index": 0, "expr": "lr"}],
  "reductions": [{"kind": "norm", "scope": "step", "uniform": 1}],
  "args": ["descriptors", "tile_map", "num_tiles", "uniforms"],
  "phases": [{"name": "reduce", "entry": ")" + k + R"(_reduce", "grid": "tiles", "threads_per_block": 256,
              "args": ["descriptors", "tile_map", "num_tiles", "uniforms", "reduction_partials"]},
             {"name": "finish", "entry": ")" + k + R"(_finish", "grid": "tensors", "threads_per_block": 512,
              "args": ["descriptors", "num_tensors", "uniforms", "reduction_partials", "step_partials"]},
             {"name": "combine", "entry": ")" + k + R"(_combine", "grid": "one", "threads_per_block": 512,
              "args": ["num_step_tensors", "step_partials", "uniforms"]}],
  "reduction_workspace": {"chunk_elements": 2048, "partial_bytes_per_tile": 8,
                          "step_partial_bytes_per_tensor": 8},
  "launch": {"threads_per_block": 256, "elements_per_thread": 8, "tile_elements": 2048,
             "descriptor_bytes": 32}
})";
}

/// Two kernels with the step reduction, on the fixture's context.
class SimulatedStepReductions : public SimulatedDevice {
protected:
  qopt_manifest *ma = nullptr, *mb = nullptr;
  qopt_kernel *ka = nullptr, *kb = nullptr;
  void SetUp() override {
    SimulatedDevice::SetUp();
    const char ptx[] = "// simulated";
    ma = parseOrDie(stepManifest("sa"));
    mb = parseOrDie(stepManifest("sb"));
    ASSERT_EQ(qopt_kernel_create_from_image(ctx, ma, QOPT_BINARY_PTX, ptx, sizeof ptx, &ka),
              QOPT_SUCCESS) << qopt_last_error();
    ASSERT_EQ(qopt_kernel_create_from_image(ctx, mb, QOPT_BINARY_PTX, ptx, sizeof ptx, &kb),
              QOPT_SUCCESS) << qopt_last_error();
    for (const char *k : {"sa", "sb"}) {
      std::string n = k;
      sim().setFunctionArgs(n.c_str(), 4);
      sim().setFunctionArgs((n + "_reduce").c_str(), 5);
      sim().setFunctionArgs((n + "_finish").c_str(), 5);
      sim().setFunctionArgs((n + "_combine").c_str(), 3);
    }
    sim().reset();
  }
  void TearDown() override {
    qopt_kernel_destroy(ka);
    qopt_kernel_destroy(kb);
    qopt_manifest_destroy(ma);
    qopt_manifest_destroy(mb);
    SimulatedDevice::TearDown();
  }
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (int i = 0; i < sim().logged(); ++i)
      v.push_back(sim().loggedName(i));
    return v;
  }
};

TEST_F(SimulatedStepReductions, PhaseAOverEveryLaunchThenCombineAndStep) {
  List a = makeList({3000, 10});
  List b = makeList({5000, 1, 2048}, 32 << 20);
  // b's parameters after a's.
  for (size_t k = 0; k < 3; ++k)
    b.data[2 * k] = static_cast<char *>(b.data[2 * k]) + (16 << 20);
  qopt_launch l[] = {{ka, &a.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr},
                     {kb, &b.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr}};
  for (int round = 0; round < 2; ++round) {
    sim().reset();
    ASSERT_EQ(qopt_step_many(l, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
    EXPECT_EQ(names(), (std::vector<std::string>{"sa_reduce", "sa_finish", "sb_reduce",
                                                 "sb_finish", "sa_combine", "sa",
                                                 "sb_combine", "sb"}))
        << round;
    // The finishes write rows 0-1 and 2-4 of one workspace; both combines
    // read all 5 rows and write slot 1 of their launch's uniforms, which
    // their step reads.
    uint64_t rows = sim().loggedArg(1, 4);
    EXPECT_EQ(rows % 8, 0u);
    EXPECT_EQ(sim().loggedArg(3, 4), rows + 2 * 8);
    for (int c : {4, 6}) {
      EXPECT_EQ(sim().loggedArg(c, 0), 5u) << c;   // num_step_tensors
      EXPECT_EQ(sim().loggedArg(c, 1), rows) << c; // step_partials
      EXPECT_EQ(sim().loggedGrid(c), 1u) << c;
      EXPECT_EQ(sim().loggedBlock(c), 512u) << c;
      EXPECT_EQ(sim().loggedArg(c + 1, 3), sim().loggedArg(c, 2)) << c; // uniforms
    }
    EXPECT_NE(sim().loggedArg(4, 2), sim().loggedArg(6, 2));
    // The uniforms uploaded: lr, then the step value's slot (0.0 until the
    // combine writes it).
    const float *u = reinterpret_cast<const float *>(sim().loggedArg(5, 3));
    EXPECT_EQ(u[0], 0.5f);
    EXPECT_EQ(u[1], 0.0f);
    // The second step reuses the staging buffers, workspace and all.
    if (round == 1)
      EXPECT_EQ(sim().count("cuMemAlloc"), 0);
  }
}

TEST_F(SimulatedStepReductions, SplitApiWritesAndReadsTheCallersRows) {
  List a = makeList({3000, 10});
  List b = makeList({5000}, 32 << 20);
  b.data[0] = static_cast<char *>(b.data[0]) + (16 << 20);
  qopt_launch l[] = {{ka, &a.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr},
                     {kb, &b.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr}};
  int64_t T = 0, S = 0;
  ASSERT_EQ(qopt_step_partials_shape(l, 2, &T, &S), QOPT_SUCCESS);
  EXPECT_EQ(T, 3);
  EXPECT_EQ(S, 1);
  void *rows = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(ctx, 64, &rows), QOPT_SUCCESS);
  auto at = [&](int k) { return uint64_t(reinterpret_cast<uintptr_t>(rows)) + 8u * k; };
  ASSERT_EQ(qopt_step_many_partials(l, 2, static_cast<double *>(rows), nullptr),
            QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(names(), (std::vector<std::string>{"sa_reduce", "sa_finish", "sb_reduce",
                                               "sb_finish"}));
  EXPECT_EQ(sim().loggedArg(1, 4), at(0));
  EXPECT_EQ(sim().loggedArg(3, 4), at(2));
  sim().reset();
  // Without per-tensor reductions phase B launches no reduce or finish.
  ASSERT_EQ(qopt_step_many_from_partials(l, 2, static_cast<double *>(rows), nullptr),
            QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(names(), (std::vector<std::string>{"sa_combine", "sa", "sb_combine", "sb"}));
  EXPECT_EQ(sim().loggedArg(0, 0), 3u);
  EXPECT_EQ(sim().loggedArg(0, 1), at(0));
  EXPECT_EQ(sim().loggedArg(2, 1), at(0));
  qopt_buffer_free(ctx, rows);
}

TEST_F(SimulatedStepReductions, CallersRowsMayNotOverlapTheLaunchesBuffers) {
  List a = makeList({3000, 10});
  qopt_launch l[] = {{ka, &a.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr}};
  std::vector<unsigned char> before(params, params + 4096);
  double *onParam = reinterpret_cast<double *>(params + 1024);
  double *onGrad = reinterpret_cast<double *>(grads);
  // A step accepted with rows of its own first: the check of the rows is not
  // skipped when the same launches come back with other rows.
  void *good = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(ctx, 64, &good), QOPT_SUCCESS);
  ASSERT_EQ(qopt_step_many_partials(l, 1, static_cast<double *>(good), nullptr),
            QOPT_SUCCESS)
      << qopt_last_error();
  std::memcpy(before.data(), params, before.size());
  for (double *rows : {onParam, onGrad}) {
    sim().reset();
    EXPECT_EQ(qopt_step_many_partials(l, 1, rows, nullptr), QOPT_ERROR_VALIDATION);
    std::string msg = qopt_last_error();
    EXPECT_EQ(msg.rfind("overlapping buffers: step_partials [", 0), 0u) << msg;
    EXPECT_NE(msg.find("the step's rows share no byte with a launch's buffers"),
              std::string::npos)
        << msg;
    EXPECT_EQ(qopt_step_many_from_partials(l, 1, rows, nullptr), QOPT_ERROR_VALIDATION);
    EXPECT_EQ(std::string(qopt_last_error()).rfind("overlapping buffers: step_partials [", 0),
              0u)
        << qopt_last_error();
    EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
  }
  EXPECT_EQ(std::memcmp(before.data(), params, before.size()), 0);
  qopt_buffer_free(ctx, good);
}

TEST_F(SimulatedStepReductions, CombineWritesTheCallersDeviceUniforms) {
  List a = makeList({3000});
  void *u = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(ctx, 64, &u), QOPT_SUCCESS);
  ASSERT_EQ(qopt_step_device_uniforms(ka, &a.view, static_cast<float *>(u), nullptr, 0,
                                      nullptr),
            QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(names(), (std::vector<std::string>{"sa_reduce", "sa_finish", "sa_combine", "sa"}));
  EXPECT_EQ(sim().loggedArg(2, 2), uint64_t(reinterpret_cast<uintptr_t>(u)));
  EXPECT_EQ(sim().loggedArg(3, 3), uint64_t(reinterpret_cast<uintptr_t>(u)));
  // The combine writes the uniforms: a buffer inside the gradient is refused.
  sim().reset();
  EXPECT_EQ(qopt_step_device_uniforms(ka, &a.view, reinterpret_cast<float *>(grads + 64),
                                      nullptr, 0, nullptr),
            QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("overlapping buffers"), std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
  qopt_buffer_free(ctx, u);
}

TEST_F(SimulatedStepReductions, CaptureUsesTheWorkspaceAWarmUpReserved) {
  List a = makeList({3000, 10});
  List b = makeList({5000}, 32 << 20);
  b.data[0] = static_cast<char *>(b.data[0]) + (16 << 20);
  qopt_launch l[] = {{ka, &a.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr},
                     {kb, &b.view, nullptr, 0, 1, nullptr, nullptr, 0, nullptr}};
  // Without a warm-up the capture finds no staging buffer (the rows' workspace
  // included) and launches nothing.
  sim().setCapturing(1);
  EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_CAPTURE);
  EXPECT_NE(std::string(qopt_last_error()).find("warm-up"), std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(sim().count("cuLaunchKernel"), 0);
  EXPECT_EQ(sim().count("cuMemAlloc"), 0);
  // A warm-up step reserves it; the captured step then allocates nothing.
  sim().setCapturing(0);
  ASSERT_EQ(qopt_step_many(l, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  sim().reset();
  sim().setCapturing(1);
  ASSERT_EQ(qopt_step_many(l, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  sim().setCapturing(0);
  EXPECT_EQ(sim().count("cuMemAlloc"), 0);
  EXPECT_EQ(names(), (std::vector<std::string>{"sa_reduce", "sa_finish", "sb_reduce",
                                               "sb_finish", "sa_combine", "sa",
                                               "sb_combine", "sb"}));
  // The graph keeps its buffers, workspace and all: the next uncaptured step
  // uses others.
  uint64_t captured = sim().loggedArg(1, 4);
  sim().reset();
  ASSERT_EQ(qopt_step_many(l, 2, nullptr), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_NE(sim().loggedArg(1, 4), captured);
}

} // namespace

int main(int argc, char **argv) {
  void *h = openSimulatedDriver();
  if (!h)
    return 1;
  Sim &s = sim();
  s.reset = reinterpret_cast<void (*)()>(::dlsym(h, "sim_reset"));
  s.count = reinterpret_cast<long (*)(const char *)>(::dlsym(h, "sim_count"));
  s.setArgCount = reinterpret_cast<void (*)(int)>(::dlsym(h, "sim_set_arg_count"));
  s.lastArg = reinterpret_cast<uint64_t (*)(int)>(::dlsym(h, "sim_last_arg"));
  s.lastGrid = reinterpret_cast<unsigned (*)()>(::dlsym(h, "sim_last_grid"));
  s.setEventsPending = reinterpret_cast<void (*)(int)>(::dlsym(h, "sim_set_events_pending"));
  s.setFunctionArgs =
      reinterpret_cast<void (*)(const char *, int)>(::dlsym(h, "sim_set_function_args"));
  s.logged = reinterpret_cast<int (*)()>(::dlsym(h, "sim_logged"));
  s.loggedName = reinterpret_cast<const char *(*)(int)>(::dlsym(h, "sim_logged_name"));
  s.loggedGrid = reinterpret_cast<unsigned (*)(int)>(::dlsym(h, "sim_logged_grid"));
  s.loggedBlock = reinterpret_cast<unsigned (*)(int)>(::dlsym(h, "sim_logged_block"));
  s.loggedArg = reinterpret_cast<uint64_t (*)(int, int)>(::dlsym(h, "sim_logged_arg"));
  s.setCapturing = reinterpret_cast<void (*)(int)>(::dlsym(h, "sim_set_capturing"));
  s.setOccupancy = reinterpret_cast<void (*)(int)>(::dlsym(h, "sim_set_occupancy"));
  s.lastOccupancyBlock = reinterpret_cast<int (*)()>(::dlsym(h, "sim_last_occupancy_block"));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

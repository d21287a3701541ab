//===- BufferTest.cpp - qopt_buffer_alloc/free/upload/download ------------===//
//
// Host buffers everywhere; CUDA buffers (and a step on them) where there is a
// GPU, skipped with the reason otherwise. Only the public C API and the C++
// wrapper: this file is built into the shared-library suite.
//
//===----------------------------------------------------------------------===//
#include "qopt/runtime.hpp"

#include "TestKernels.h"
#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

extern "C" void qopt_test_sgd_f32_host(const void *, const int32_t *, int64_t,
                                       const float *, const float *const *,
                                       int64_t, int64_t);

using namespace qopt::test;

namespace {

/// A context of `backend`, destroyed at the end of the test.
struct Ctx {
  qopt_context *c = nullptr;
  explicit Ctx(qopt_backend backend) {
    EXPECT_EQ(qopt_context_create(backend, 0, &c), QOPT_SUCCESS)
        << qopt_last_error();
  }
  ~Ctx() { qopt_context_destroy(c); }
};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<unsigned char>((i * 131 + seed * 7 + 3) & 0xff);
  return v;
}

/// Round trip, offsets, range checks, foreign pointers, frees: the same
/// expectations for both backends.
void exerciseBuffers(qopt_context *ctx) {
  void *p = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(ctx, 1000, &p), QOPT_SUCCESS) << qopt_last_error();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);

  std::vector<unsigned char> in = pattern(1000, 1), out(1000, 0);
  ASSERT_EQ(qopt_buffer_upload(ctx, p, in.data(), in.size()), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_buffer_download(ctx, out.data(), p, out.size()), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(in, out);

  // Part of a buffer, at an offset.
  std::vector<unsigned char> part = pattern(100, 2);
  char *base = static_cast<char *>(p);
  ASSERT_EQ(qopt_buffer_upload(ctx, base + 900, part.data(), 100), QOPT_SUCCESS)
      << qopt_last_error();
  std::vector<unsigned char> back(100, 0);
  ASSERT_EQ(qopt_buffer_download(ctx, back.data(), base + 900, 100), QOPT_SUCCESS);
  EXPECT_EQ(back, part);

  // Past the end: refused, nothing copied.
  std::vector<unsigned char> sentinel(200, 0xAB), keep = sentinel;
  EXPECT_EQ(qopt_buffer_upload(ctx, base + 901, part.data(), 100),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("runs past the end of its buffer (1000 bytes"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(qopt_buffer_download(ctx, sentinel.data(), base, 1001),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sentinel, keep);
  ASSERT_EQ(qopt_buffer_download(ctx, back.data(), base + 900, 100), QOPT_SUCCESS);
  EXPECT_EQ(back, part) << "a refused upload changed the buffer";

  // A pointer that is not a buffer of this context.
  unsigned char local[16] = {0};
  EXPECT_EQ(qopt_buffer_upload(ctx, local, part.data(), 16),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("not inside a buffer"), std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(qopt_buffer_download(ctx, local, local, 16), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_buffer_free(ctx, base + 16), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("qopt_buffer_free"), std::string::npos);

  // NULL arguments.
  EXPECT_EQ(qopt_buffer_alloc(nullptr, 8, &p), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_buffer_alloc(ctx, 8, nullptr), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_buffer_upload(ctx, p, nullptr, 8), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_buffer_download(ctx, nullptr, p, 8), QOPT_ERROR_INVALID_ARGUMENT);

  // Zero bytes: a NULL buffer, and copies of nothing succeed.
  void *z = reinterpret_cast<void *>(1);
  ASSERT_EQ(qopt_buffer_alloc(ctx, 0, &z), QOPT_SUCCESS);
  EXPECT_EQ(z, nullptr);
  EXPECT_EQ(qopt_buffer_upload(ctx, nullptr, nullptr, 0), QOPT_SUCCESS);
  EXPECT_EQ(qopt_buffer_free(ctx, nullptr), QOPT_SUCCESS);

  // Free once; a second free is an error.
  EXPECT_EQ(qopt_buffer_free(ctx, p), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(qopt_buffer_free(ctx, p), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("freed already"), std::string::npos);
  EXPECT_EQ(qopt_buffer_download(ctx, out.data(), p, 1), QOPT_ERROR_INVALID_ARGUMENT);
}

TEST(Buffer, HostBuffers) {
  Ctx ctx(QOPT_BACKEND_HOST);
  exerciseBuffers(ctx.c);
}

TEST(Buffer, AnotherContextsBufferIsRefused) {
  Ctx a(QOPT_BACKEND_HOST), b(QOPT_BACKEND_HOST);
  void *p = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(a.c, 64, &p), QOPT_SUCCESS);
  float x = 1.0f;
  EXPECT_EQ(qopt_buffer_upload(b.c, p, &x, sizeof x), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_buffer_free(b.c, p), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_buffer_free(a.c, p), QOPT_SUCCESS);
}

TEST(Buffer, ContextDestroyFreesWhatIsLeft) {
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(qopt_buffer_alloc(ctx, 1 << 20, &p), QOPT_SUCCESS);
  ASSERT_EQ(qopt_buffer_alloc(ctx, 17, &q), QOPT_SUCCESS);
  EXPECT_EQ(qopt_context_destroy(ctx), QOPT_SUCCESS);
}

TEST(Buffer, HostAllocationFailureIsOutOfMemory) {
  Ctx ctx(QOPT_BACKEND_HOST);
  void *p = nullptr;
  EXPECT_EQ(qopt_buffer_alloc(ctx.c, uint64_t(1) << 62, &p), QOPT_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(qopt_last_error()).find("host memory"), std::string::npos)
      << qopt_last_error();
}

/// The test kernel (p -= lr * (1 - beta^step) * g) on buffers of `ctx`, with
/// `kernel` made by the caller; checks the stepped parameter.
void stepOnBuffers(qopt::Context &ctx, qopt::Kernel &kernel) {
  const int64_t n = 3000;
  std::vector<float> p(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = 0.25f * static_cast<float>(i % 17);
    g[i] = 1.0f - 0.125f * static_cast<float>(i % 5);
  }
  qopt::Buffer pb(ctx, n * 4), gb(ctx, n * 4);
  pb.upload(p.data(), n * 4);
  gb.upload(g.data(), n * 4);
  qopt::TensorList list(2);
  list.add("w", n, {pb.get(), gb.get()}, {uint64_t(n * 4), uint64_t(n * 4)},
           {QOPT_DTYPE_F32, QOPT_DTYPE_F32});
  kernel.step(list, {{"lr", 1.0}, {"beta", 0.5}}, 1); // u0 = 0.5
  std::vector<float> out(n);
  pb.download(out.data(), n * 4);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], p[i] - 0.5f * g[i]) << "element " << i;
}

TEST(Buffer, HostStepOnBuffers) {
  qopt::Context ctx(QOPT_BACKEND_HOST, 0);
  qopt::Manifest m = qopt::Manifest::parse(sgdManifestJson(), "sgd.json");
  qopt::Kernel k(ctx, m, qopt_test_sgd_f32_host);
  stepOnBuffers(ctx, k);
}

TEST(Buffer, CudaBuffers) {
  QOPT_REQUIRE_GPU();
  Ctx ctx(QOPT_BACKEND_CUDA);
  exerciseBuffers(ctx.c);
}

TEST(Buffer, CudaStepOnBuffers) {
  QOPT_REQUIRE_GPU();
  qopt::Context ctx(QOPT_BACKEND_CUDA, 0);
  qopt::Manifest m = qopt::Manifest::parse(sgdManifestJson(), "sgd.json");
  qopt::Kernel k(ctx, m, QOPT_BINARY_PTX, kSgdPtx, sizeof kSgdPtx);
  stepOnBuffers(ctx, k);
}

} // namespace

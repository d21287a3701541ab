//===- StepReductionTest.cpp - Step reductions on the host backend --------===//
//
// A toy kernel with two step reductions (norm and max of the gradient),
// written here as host functions: its partials follow docs/numerics.md §7
// (each 2048-element chunk a pairwise tree of its terms, a tensor the
// pairwise tree of its chunks, both padded with the identity to a power of
// two), its combine the tree over the step's rows, and its step
// p -= u0 * g * u1 + u2 * 2^-20. The expectations are computed in this file
// from the tensors, in launch order, never read back from the runtime: a
// row written at the wrong place, a launch left out of the rows or a wrong
// tensor count changes the values the step reads.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

using namespace qopt::test;

namespace {

constexpr int64_t kChunk = 2048;
constexpr int64_t kTile = 2048;

/// U = 1 (lr), S = 2: norm(g) at uniform 1, max(g) at uniform 2.
std::string toyManifest(const char *kernel = "toy",
                        const char *reductions = nullptr) {
  std::string r = reductions ? reductions
                             : R"([{"kind": "norm", "scope": "step", "uniform": 1},
                                  {"kind": "max", "scope": "step", "uniform": 2}])";
  return std::string(R"({
  "format": "qopt-manifest", "version": 1, "kernel": ")") + kernel + R"(",
  "param": {"name": "p", "dtype": "f32"}, "grad": {"name": "g", "dtype": "f32"},
  "hypers": [{"name": "lr", "default": 0.5}],
  "streams": [{"name": "p", "role": "param", "dtype": "f32", "per": "element", "access": "read_write"},
              {"name": "g", "role": "grad", "dtype": "f32", "per": "element", "access": "read"}],
  "uniforms": [{"index": 0, "expr": "lr"}],
  "reductions": )" + r + R"(,
  "phases": [{"name": "partials", "entry": ")" + kernel + R"(_partials", "grid": "tiles"},
             {"name": "combine", "entry": ")" + kernel + R"(_combine", "grid": "one"}],
  "launch": {"threads_per_block": 256, "elements_per_thread": 8, "tile_elements": 2048,
             "descriptor_bytes": 32}
})";
}

struct Desc {
  int64_t numel, firstTile;
  float *p;
  const float *g;
};

const Desc &descAt(const void *d, int64_t k) {
  return static_cast<const Desc *>(d)[k];
}

/// The pairwise tree of `v` padded with `id` to a power of two.
double tree(std::vector<double> v, double id,
            const std::function<double(double, double)> &op) {
  size_t n = 1;
  while (n < v.size())
    n *= 2;
  v.resize(n, id);
  for (; n > 1; n /= 2)
    for (size_t i = 0; i < n / 2; ++i)
      v[i] = op(v[2 * i], v[2 * i + 1]);
  return v.empty() ? id : v[0];
}

double add(double a, double b) { return a + b; }
double fmax2(double a, double b) { return a > b ? a : b; }

/// A tensor's accumulation of (squares, values) of g: chunk trees, then the
/// tree over chunks.
std::pair<double, double> accumulate(const float *g, int64_t n) {
  std::vector<double> sq, mx;
  for (int64_t c = 0; c * kChunk < n; ++c) {
    std::vector<double> s2, m;
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      s2.push_back(double(g[i]) * double(g[i]));
      m.push_back(double(g[i]));
    }
    sq.push_back(tree(s2, 0.0, add));
    mx.push_back(tree(m, -INFINITY, fmax2));
  }
  return {tree(sq, 0.0, add), tree(mx, -INFINITY, fmax2)};
}

std::atomic<int> gPartialsCalls{0}, gSteps{0};
std::atomic<int64_t> gSeenT{-1};
float gSeen[3];

extern "C" void toy_partials(const void *d, const int32_t *tileMap,
                             int64_t numTiles, const float *, const float *const *,
                             int64_t begin, int64_t end, double *rows) {
  ++gPartialsCalls;
  for (int64_t t = begin; t < end; ++t) {
    int64_t k = tileMap[t];
    const Desc &e = descAt(d, k);
    if (e.firstTile != t)
      continue;
    auto [sq, mx] = accumulate(e.g, e.numel);
    rows[k * 2 + 0] = sq;
    rows[k * 2 + 1] = mx;
  }
  (void)numTiles;
}

extern "C" void toy_combine(int64_t T, const double *rows, float *u) {
  gSeenT = T;
  std::vector<double> sq, mx;
  for (int64_t k = 0; k < T; ++k) {
    sq.push_back(rows[k * 2]);
    mx.push_back(rows[k * 2 + 1]);
  }
  u[1] = float(std::sqrt(tree(sq, 0.0, add)));
  u[2] = float(tree(mx, -INFINITY, fmax2));
}

extern "C" void toy_step(const void *d, const int32_t *tileMap, int64_t,
                         const float *u, const float *const *, int64_t begin,
                         int64_t end) {
  ++gSteps;
  std::memcpy(gSeen, u, sizeof gSeen);
  for (int64_t t = begin; t < end; ++t) {
    const Desc &e = descAt(d, tileMap[t]);
    int64_t lo = (t - e.firstTile) * kTile;
    for (int64_t i = lo; i < std::min(e.numel, lo + kTile); ++i)
      e.p[i] = e.p[i] - u[0] * e.g[i] * u[1] + u[2] * 0x1p-20f;
  }
}

/// The expected p after a step of `lr` over all `g` of the step (every
/// launch's tensors, in order), from the contract's order.
struct Expected {
  float norm, max;
};
Expected expected(const std::vector<std::vector<float>> &grads) {
  std::vector<double> sq, mx;
  for (const auto &g : grads) {
    auto [s, m] = accumulate(g.data(), int64_t(g.size()));
    sq.push_back(s);
    mx.push_back(m);
  }
  return {float(std::sqrt(tree(sq, 0.0, add))), float(tree(mx, -INFINITY, fmax2))};
}

/// A host kernel of the toy manifest with its phases given.
struct Toy {
  qopt_context *ctx = nullptr;
  qopt_manifest *manifest = nullptr;
  qopt_kernel *kernel = nullptr;
  explicit Toy(const std::string &json = toyManifest(), bool phases = true) {
    EXPECT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS);
    manifest = parseOrDie(json);
    EXPECT_EQ(qopt_kernel_create_host(ctx, manifest, toy_step, &kernel),
              QOPT_SUCCESS)
        << qopt_last_error();
    if (phases) {
      EXPECT_EQ(qopt_kernel_set_host_phase(
                    kernel, "partials",
                    reinterpret_cast<qopt_host_phase_fn>(toy_partials)),
                QOPT_SUCCESS)
          << qopt_last_error();
      EXPECT_EQ(qopt_kernel_set_host_phase(
                    kernel, "combine",
                    reinterpret_cast<qopt_host_phase_fn>(toy_combine)),
                QOPT_SUCCESS)
          << qopt_last_error();
    }
  }
  ~Toy() {
    qopt_kernel_destroy(kernel);
    qopt_manifest_destroy(manifest);
    qopt_context_destroy(ctx);
  }
};

/// The tensors of one launch: p and g per tensor, 64-byte aligned.
struct List {
  std::vector<std::vector<float>> p, g;
  std::vector<float *> pAligned;
  std::vector<std::vector<float>> storage;
  std::vector<int64_t> numels;
  std::vector<void *> data;
  qopt_tensor_list list{};
  List(const std::vector<int64_t> &n, unsigned seed) {
    for (size_t k = 0; k < n.size(); ++k) {
      std::vector<float> gk(size_t(n[k])), pk(size_t(n[k]));
      for (int64_t i = 0; i < n[k]; ++i) {
        seed = seed * 1664525u + 1013904223u;
        gk[size_t(i)] = float(int32_t(seed >> 8) % 20001 - 10000) * 1e-4f *
                        float(k + 1);
        pk[size_t(i)] = float(i % 97) * 0.01f;
      }
      g.push_back(gk);
      p.push_back(pk);
    }
    numels = n;
    storage.resize(2 * n.size());
    for (size_t k = 0; k < n.size(); ++k) {
      for (int j = 0; j < 2; ++j) {
        const std::vector<float> &src = j == 0 ? p[k] : g[k];
        std::vector<float> &st = storage[2 * k + size_t(j)];
        st.resize(src.size() + 16);
        auto base = reinterpret_cast<uintptr_t>(st.data());
        float *a = reinterpret_cast<float *>((base + 63) & ~uintptr_t(63));
        std::copy(src.begin(), src.end(), a);
        data.push_back(src.empty() ? nullptr : a);
      }
    }
    list = {n.size(), 2, numels.data(), data.data(), nullptr, nullptr, nullptr};
  }
  const float *param(size_t k) const {
    return static_cast<const float *>(data[2 * k]);
  }
};

/// A launch of `l` at step 1 with the default lr (0.5).
qopt_launch launchOf(Toy &t, List &l) {
  qopt_launch x{};
  x.kernel = t.kernel;
  x.tensors = &l.list;
  x.step = 1;
  return x;
}

/// p after the toy step with norm `e.norm`, max `e.max`, lr 0.5.
void expectStepped(const List &l, Expected e, const char *what) {
  for (size_t k = 0; k < l.numels.size(); ++k)
    for (size_t i = 0; i < size_t(l.numels[k]); ++i) {
      float want = l.p[k][i] - 0.5f * l.g[k][i] * e.norm + e.max * 0x1p-20f;
      ASSERT_EQ(l.param(k)[i], want) << what << ": tensor " << k << " [" << i << "]";
    }
}

void expectUntouched(const List &l, const char *what) {
  for (size_t k = 0; k < l.numels.size(); ++k)
    ASSERT_EQ(std::memcmp(l.param(k), l.p[k].data(), l.p[k].size() * 4), 0)
        << what << ": tensor " << k;
}

std::vector<std::vector<float>> gradsOf(std::initializer_list<const List *> ls) {
  std::vector<std::vector<float>> out;
  for (const List *l : ls)
    for (const auto &g : l->g)
      out.push_back(g);
  return out;
}

class StepReductions : public ::testing::Test {
protected:
  void SetUp() override {
    // Ranges split across threads: a tensor's row comes from the range
    // that holds its first tile.
    ::setenv("QOPT_HOST_THREADS", "3", 1);
    gPartialsCalls = 0;
    gSteps = 0;
    gSeenT = -1;
  }
  void TearDown() override { ::unsetenv("QOPT_HOST_THREADS"); }
};

TEST_F(StepReductions, SeveralLaunchesReadEveryTensorInTheContractsOrder) {
  Toy a, b, c(toyManifest("toy2"));
  // Tensors of 1 to 9 chunks, an empty one (its row is the identity) and
  // sizes that end inside a chunk; at 2^18 elements per thread the big
  // launch's tiles are split over three ranges.
  List la({5 * kChunk + 7, 0, 100}, 1u), lb({800000, 2 * kChunk}, 2u),
      lc({9 * kChunk - 1, 3}, 3u);
  qopt_launch l[] = {launchOf(a, la), launchOf(b, lb), launchOf(c, lc)};
  ASSERT_EQ(qopt_step_many(l, 3, nullptr), QOPT_SUCCESS) << qopt_last_error();
  Expected e = expected(gradsOf({&la, &lb, &lc}));
  EXPECT_EQ(gSeenT.load(), 7);
  EXPECT_EQ(gSeen[1], e.norm);
  EXPECT_EQ(gSeen[2], e.max);
  expectStepped(la, e, "launch 0");
  expectStepped(lb, e, "launch 1");
  expectStepped(lc, e, "launch 2");
  // The shape a caller of the split API sizes its buffer with.
  int64_t T = 0, S = 0;
  ASSERT_EQ(qopt_step_partials_shape(l, 3, &T, &S), QOPT_SUCCESS);
  EXPECT_EQ(T, 7);
  EXPECT_EQ(S, 2);
}

TEST_F(StepReductions, SingleStepCallsReadTheirOwnTensors) {
  Toy a;
  List la({3 * kChunk, 17}, 4u);
  ASSERT_EQ(qopt_step(a.kernel, &la.list, nullptr, 0, 1, nullptr, 0, nullptr),
            QOPT_SUCCESS)
      << qopt_last_error();
  Expected e = expected(la.g);
  expectStepped(la, e, "qopt_step");
  // With the caller's uniforms: read, not written (the host combine
  // completes a copy).
  List lb({kChunk + 1}, 5u);
  float u[3] = {0.5f, -7.0f, -7.0f};
  ASSERT_EQ(qopt_step_device_uniforms(a.kernel, &lb.list, u, nullptr, 0, nullptr),
            QOPT_SUCCESS)
      << qopt_last_error();
  expectStepped(lb, expected(lb.g), "qopt_step_device_uniforms");
  EXPECT_EQ(u[1], -7.0f);
  EXPECT_EQ(u[2], -7.0f);
}

TEST_F(StepReductions, RepeatedStepsReuseNothingStale) {
  // A second step of other sizes and values: its rows are its own, not the
  // first step's (the workspace is rewritten every step, identity rows
  // included).
  Toy a;
  List first({4 * kChunk, 5, kChunk}, 6u);
  qopt_launch l1[] = {launchOf(a, first)};
  ASSERT_EQ(qopt_step_many(l1, 1, nullptr), QOPT_SUCCESS) << qopt_last_error();
  List second({0, 10}, 7u);
  qopt_launch l2[] = {launchOf(a, second)};
  ASSERT_EQ(qopt_step_many(l2, 1, nullptr), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(gSeenT.load(), 2);
  expectStepped(second, expected(second.g), "second step");
}

TEST_F(StepReductions, KernelsOfOneStepHaveTheSameKinds) {
  Toy a, other(toyManifest("toy_sum", R"([{"kind": "sum", "scope": "step", "uniform": 1},
                                        {"kind": "max", "scope": "step", "uniform": 2}])"));
  List la({kChunk}, 8u), lb({kChunk}, 9u);
  qopt_launch l[] = {launchOf(a, la), launchOf(other, lb)};
  for (auto call : {+[](qopt_launch *x) { return qopt_step_many(x, 2, nullptr); },
                    +[](qopt_launch *x) {
                      double rows[4];
                      return qopt_step_many_partials(x, 2, rows, nullptr);
                    }}) {
    EXPECT_EQ(call(l), QOPT_ERROR_VALIDATION);
    std::string msg = qopt_last_error();
    EXPECT_NE(msg.find("launches 0 and 1 of one step have different step "
                       "reductions: kernel 'toy' has [norm, max], kernel "
                       "'toy_sum' has [sum, max]"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(gPartialsCalls.load(), 0);
  EXPECT_EQ(gSteps.load(), 0);
  expectUntouched(la, "launch 0");
  expectUntouched(lb, "launch 1");
}

TEST_F(StepReductions, KernelWithoutStepReductionsCannotJoinOne) {
  std::string plain = toyManifest("plain", "[]");
  // A kernel without reductions has no phases.
  plain.replace(plain.find("\"phases\""), plain.find("\"launch\"") - plain.find("\"phases\""), "");
  Toy a, b(plain, false);
  List la({kChunk}, 10u), lb({kChunk}, 11u);
  qopt_launch l[] = {launchOf(b, lb), launchOf(a, la)};
  EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_NE(std::string(qopt_last_error()).find("kernel 'plain' has []"),
            std::string::npos)
      << qopt_last_error();
  expectUntouched(la, "launch 1");
  expectUntouched(lb, "launch 0");
}

TEST_F(StepReductions, SplitApiWithAnAllReduceEqualsTheWholeStep) {
  // Two "ranks" hold the two halves of every tensor, split at a power of
  // two of chunks that is half the tensor's padded chunk tree: the rows
  // summed (norm) and maxed (max) between the phases are the whole
  // tensors' rows, bit for bit, so the halves step as the whole does.
  const std::vector<int64_t> whole = {3 * kChunk + 100, 5 * kChunk, 2 * kChunk};
  const std::vector<int64_t> half0 = {2 * kChunk, 4 * kChunk, kChunk};
  Toy a, b;
  List full({whole}, 12u);
  List r0(half0, 0u), r1({whole[0] - half0[0], whole[1] - half0[1],
                          whole[2] - half0[2]}, 0u);
  // The halves hold the whole tensors' values.
  for (size_t k = 0; k < whole.size(); ++k)
    for (int64_t i = 0; i < whole[k]; ++i) {
      List &r = i < half0[k] ? r0 : r1;
      int64_t j = i < half0[k] ? i : i - half0[k];
      r.g[k][size_t(j)] = full.g[k][size_t(i)];
      r.p[k][size_t(j)] = full.p[k][size_t(i)];
      const_cast<float *>(static_cast<const float *>(r.data[2 * k + 1]))[j] =
          full.g[k][size_t(i)];
      const_cast<float *>(r.param(k))[j] = full.p[k][size_t(i)];
    }
  qopt_launch lf[] = {launchOf(a, full)};
  ASSERT_EQ(qopt_step_many(lf, 1, nullptr), QOPT_SUCCESS) << qopt_last_error();

  qopt_launch l0[] = {launchOf(a, r0)}, l1[] = {launchOf(b, r1)};
  std::vector<double> rows0(6, 123.0), rows1(6, 123.0);
  ASSERT_EQ(qopt_step_many_partials(l0, 1, rows0.data(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_step_many_partials(l1, 1, rows1.data(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(gSteps.load(), 1); // the full step's only: phase A steps nothing
  expectUntouched(r0, "rank 0 after phase A");
  std::vector<double> reduced(6);
  for (size_t k = 0; k < 3; ++k) {
    reduced[2 * k] = rows0[2 * k] + rows1[2 * k];                   // SUM
    reduced[2 * k + 1] = std::max(rows0[2 * k + 1], rows1[2 * k + 1]); // MAX
  }
  ASSERT_EQ(qopt_step_many_from_partials(l0, 1, reduced.data(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_step_many_from_partials(l1, 1, reduced.data(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  for (size_t k = 0; k < whole.size(); ++k) {
    ASSERT_EQ(std::memcmp(r0.param(k), full.param(k), size_t(half0[k]) * 4), 0) << k;
    ASSERT_EQ(std::memcmp(r1.param(k), full.param(k) + half0[k],
                          size_t(whole[k] - half0[k]) * 4), 0) << k;
  }
  // The independent value too.
  expectStepped(full, expected(full.g), "whole step");
}

TEST_F(StepReductions, RefusedStepLeavesEveryTensorUntouched) {
  Toy a, b;
  List la({kChunk}, 13u), lb({kChunk, kChunk}, 14u);
  lb.data[3] = nullptr; // tensor 1's g
  qopt_launch l[] = {launchOf(a, la), launchOf(b, lb)};
  EXPECT_EQ(qopt_step_many(l, 2, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_EQ(std::string(qopt_last_error()).rfind("launch 1: ", 0), 0u)
      << qopt_last_error();
  double rows[6];
  EXPECT_EQ(qopt_step_many_partials(l, 2, rows, nullptr), QOPT_ERROR_VALIDATION);
  EXPECT_EQ(qopt_step_many_from_partials(l, 2, rows, nullptr),
            QOPT_ERROR_VALIDATION);
  EXPECT_EQ(gPartialsCalls.load(), 0);
  EXPECT_EQ(gSteps.load(), 0);
  expectUntouched(la, "launch 0");
}

TEST_F(StepReductions, SplitApiChecksItsBuffer) {
  Toy a;
  List la({kChunk}, 15u);
  qopt_launch l[] = {launchOf(a, la)};
  EXPECT_EQ(qopt_step_many_partials(l, 1, nullptr, nullptr),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("step_partials is NULL"),
            std::string::npos);
  alignas(8) unsigned char buf[64];
  EXPECT_EQ(qopt_step_many_from_partials(
                l, 1, reinterpret_cast<double *>(buf + 4), nullptr),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("is not 8-byte aligned"),
            std::string::npos);
  expectUntouched(la, "after refused split calls");
}

TEST_F(StepReductions, HostKernelWithoutPhaseFunctionsIsUnsupported) {
  Toy a(toyManifest(), false);
  List la({kChunk}, 16u);
  EXPECT_EQ(qopt_step(a.kernel, &la.list, nullptr, 0, 1, nullptr, 0, nullptr),
            QOPT_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(qopt_last_error()).find("no host partials function"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(qopt_kernel_set_host_phase(a.kernel, "reduce",
                                       reinterpret_cast<qopt_host_phase_fn>(toy_combine)),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("expected partials or combine"),
            std::string::npos);
  expectUntouched(la, "no phase functions");
}

TEST_F(StepReductions, ManifestGivesTheReductionsAndTheirSlots) {
  qopt_manifest *m = parseOrDie(toyManifest());
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_uniforms, 3u); // lr, then the two step values
  EXPECT_EQ(info.num_reductions, 2u);
  EXPECT_EQ(info.num_step_reductions, 2u);
  qopt_reduction_info r;
  ASSERT_EQ(qopt_manifest_get_reduction(m, 1, &r), QOPT_SUCCESS);
  EXPECT_EQ(r.kind, QOPT_REDUCTION_MAX);
  EXPECT_EQ(r.scope, QOPT_REDUCTION_SCOPE_STEP);
  EXPECT_EQ(r.index, 1);
  EXPECT_EQ(r.uniform, 2);
  EXPECT_EQ(qopt_manifest_get_reduction(m, 2, &r), QOPT_ERROR_INVALID_ARGUMENT);
  float u[3] = {-1, -1, -1};
  qopt_hyper lr{"lr", 0.25};
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, &lr, 1, 1, u, 3), QOPT_SUCCESS);
  EXPECT_EQ(u[0], 0.25f);
  EXPECT_EQ(u[1], 0.0f);
  EXPECT_EQ(u[2], 0.0f);
  EXPECT_EQ(qopt_manifest_evaluate_uniforms(m, &lr, 1, 1, u, 1),
            QOPT_ERROR_INVALID_ARGUMENT);
  qopt_manifest_destroy(m);
}

} // namespace

//===- QoptStepTest.cpp - qopt-step on files vs the C++ reference ---------===//
//
// Runs the qopt-step binary (host backend, the shipped specs' host kernels of
// build/kernels/host) on safetensors files written here and compares every
// byte of every output stream with the C++ reference (test/reference), which
// steps copies of the same tensors: three steps with a gradient per step
// (<tensor>/g@<step>), one gradient reused from a later --step-start, a run
// split in two, state started by --init-missing-state, and the built-in
// dynamic codebooks (the errors: QoptStepErrorsTest.cpp). A CUDA run is
// compared with the host run where there is a GPU (skipped otherwise).
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Codebook.h"
#include "qopt/safetensors/SafeTensors.h"
#include "qopt/reference/Step.h"
#include "ShippedSpecCases.h"
#include "qopt/runtime.h"
#include "QoptStepTestUtil.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>


namespace ref = qopt::ref;
namespace st = qopt::st;
using namespace qopt::steptest;

namespace {

const char *stDtype(ref::DType d) {
  switch (d) {
  case ref::DType::F32:
    return "F32";
  case ref::DType::BF16:
    return "BF16";
  case ref::DType::F16:
    return "F16";
  case ref::DType::I8:
    return "I8";
  case ref::DType::U8:
    return "U8";
  case ref::DType::I16:
    return "I16";
  default:
    return "?";
  }
}

st::Tensor toTensor(const ref::Buffer &b, std::vector<int64_t> shape) {
  st::Tensor t;
  t.dtype = stDtype(b.dtype());
  t.shape = std::move(shape);
  t.data = b.raw();
  return t;
}

/// A shipped spec, its reference step and hyperparameters
/// (test/common/ShippedSpecCases.h), and the --table arguments it needs.
struct Case {
  std::string spec;
  std::function<ref::StepSpec()> make;
  std::vector<std::pair<std::string, double>> hypers;
  std::vector<std::string> tables; ///< --table arguments
};

/// gtest prints a case by its spec name.
void PrintTo(const Case &c, std::ostream *os) { *os << c.spec; }

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const qopt::test::SpecCase &c : qopt::test::shippedSpecCases()) {
    Case k{c.spec, c.make, {}, {}};
    for (const qopt_hyper &h : c.hypers)
      k.hypers.push_back({h.name, h.value});
    // Each codebook state's table: the dynamic map its reference step uses.
    for (const ref::StateScheme &st : c.make().states)
      if (st.kind == ref::StateKind::Codebook)
        k.tables.push_back(st.name + ".qmap=" +
                           (st.qmap.front() < 0 ? "dynamic-signed" : "dynamic-unsigned"));
    all.push_back(std::move(k));
  }
  return all;
}

/// A tensor of the test: its name (a '/' inside, as a module path) and shape.
struct Shape {
  std::string name;
  std::vector<int64_t> dims;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
};

const std::vector<Shape> kShapes = {
    {"wte", {7, 10001}}, {"h.0/attn/w", {4097}}, {"b", {31}}, {"one", {1}}, {"empty", {0}}};

/// The reference's step of `tensors` (kShapes' order) as qopt-step launches them: one list in the
/// order of their names, which places each tensor's elements for stochastic rounding.
void stepInLaunchOrder(const ref::StepSpec &spec, std::vector<ref::TensorBuffers> &tensors,
                       int64_t step, ref::NumericsCounts *counts = nullptr) {
  std::vector<size_t> order(tensors.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  std::sort(order.begin(), order.end(),
            [](size_t a, size_t b) { return kShapes[a].name < kShapes[b].name; });
  std::vector<ref::TensorBuffers> launch;
  for (size_t k : order)
    launch.push_back(tensors[k]);
  ref::step(spec, launch, step, counts);
  for (size_t i = 0; i < order.size(); ++i)
    tensors[order[i]] = launch[i];
}

class QoptStep : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    spec = GetParam().make();
    // A launch's tensors lie at their first tiles (stochastic rounding's
    // index): the tile of the host kernel qopt-step runs.
    std::string manifestPath = kernelDir() + "/" + GetParam().spec + ".manifest.json";
    qopt_manifest *manifest = nullptr;
    ASSERT_EQ(qopt_manifest_load(manifestPath.c_str(), &manifest), QOPT_SUCCESS) << qopt_last_error();
    qopt_manifest_info info{};
    ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
    spec.tileElements = info.launch.tile_elements;
    qopt_manifest_destroy(manifest);
    dir = makeTempDir();
    for (const Shape &s : kShapes) {
      tensors.push_back(ref::makeTensor(spec, s.numel()));
      std::vector<float> x(static_cast<size_t>(s.numel()));
      for (float &v : x)
        v = 0.5f * normal(rng);
      ref::setMaster(spec, tensors.back(), x);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  /// The common arguments: kernel, backend, kernels, hypers, tables.
  std::vector<std::string> baseArgs(const std::string &backend = "host") const {
    std::vector<std::string> a = {"--kernel", GetParam().spec, "--backend=" + backend,
                                  "--kernels", kernelDir(), "--quiet"};
    for (const auto &[name, value] : GetParam().hypers) {
      std::ostringstream os;
      os.precision(17);
      os << name << "=" << value;
      a.push_back("--hyper");
      a.push_back(os.str());
    }
    for (const std::string &t : GetParam().tables)
      a.push_back("--table=" + t);
    return a;
  }

  /// The shape a stream of tensor `k` is written with.
  std::vector<int64_t> streamShape(size_t k, const ref::Buffer &b) const {
    if (b.count() == kShapes[k].numel())
      return kShapes[k].dims;
    return {b.count()};
  }

  /// Writes every stream of `ts` but the gradient to `path`, except the
  /// streams `skip` returns true for.
  void writeState(const std::string &path, const std::vector<ref::TensorBuffers> &ts,
                  const std::function<bool(const std::string &)> &skip = nullptr) {
    st::File f;
    for (size_t k = 0; k < ts.size(); ++k) {
      ref::TensorBuffers t = ts[k];
      std::vector<ref::Buffer *> streams = t.streams();
      std::vector<std::string> names = t.streamNames(spec, "p", "g");
      for (size_t j = 0; j < streams.size(); ++j) {
        if (streams[j] == &t.grad || (skip && skip(names[j])))
          continue;
        f.put(kShapes[k].name + "/" + names[j], toTensor(*streams[j], streamShape(k, *streams[j])));
      }
    }
    f.save(path);
  }

  /// Random gradients of every tensor for one step.
  std::vector<ref::Buffer> randomGrads(float scale) {
    std::vector<ref::Buffer> g;
    for (const Shape &s : kShapes) {
      std::vector<float> v(static_cast<size_t>(s.numel()));
      for (float &x : v)
        x = scale * normal(rng);
      ref::TensorBuffers t = ref::makeTensor(spec, s.numel());
      ref::setGrad(spec, t, v);
      g.push_back(t.grad);
    }
    return g;
  }

  /// Adds a failure for every stream of `want` that `path` does not hold
  /// byte for byte (with the same dtype and shape), and for any tensor of
  /// `path` that is neither a state stream nor a table.
  void expectOutput(const std::string &path, const std::vector<ref::TensorBuffers> &want) {
    st::File got;
    try {
      got = st::File::load(path);
    } catch (const st::Error &e) {
      FAIL() << e.what();
    }
    std::set<std::string> expected;
    for (size_t k = 0; k < want.size(); ++k) {
      ref::TensorBuffers t = want[k];
      std::vector<ref::Buffer *> streams = t.streams();
      std::vector<std::string> names = t.streamNames(spec, "p", "g");
      for (size_t j = 0; j < streams.size(); ++j) {
        if (streams[j] == &t.grad)
          continue;
        std::string name = kShapes[k].name + "/" + names[j];
        expected.insert(name);
        if (!got.has(name)) {
          ADD_FAILURE() << GetParam().spec << ": output lacks " << name;
          continue;
        }
        const st::Tensor &g = got.get(name);
        EXPECT_EQ(g.dtype, stDtype(streams[j]->dtype())) << name;
        EXPECT_EQ(g.shape, streamShape(k, *streams[j])) << name;
        if (g.data != streams[j]->raw()) {
          size_t es = ref::dtypeSize(streams[j]->dtype()), differ = 0, first = 0;
          for (size_t i = 0; i + es <= g.data.size() && i < streams[j]->raw().size(); i += es)
            if (std::memcmp(&g.data[i], &streams[j]->raw()[i], es) != 0 && differ++ == 0)
              first = i / es;
          ADD_FAILURE() << GetParam().spec << ": " << name << ": " << differ << " of "
                        << streams[j]->count() << " elements differ from the reference "
                        << "(first at " << first << ")";
        }
      }
    }
    for (const ref::StateScheme &s : spec.states)
      if (s.kind == ref::StateKind::Codebook)
        expected.insert(s.name + ".qmap");
    for (const std::string &name : got.names())
      EXPECT_TRUE(expected.count(name)) << "unexpected tensor in the output: " << name;
    EXPECT_EQ(got.names().size(), expected.size());
  }

  ref::StepSpec spec;
  std::string dir;
  std::vector<ref::TensorBuffers> tensors;
  std::mt19937 rng{4321};
  std::normal_distribution<float> normal{0.0f, 1.0f};
};

TEST_P(QoptStep, ThreeStepsWithAGradientPerStepMatchTheReference) {
  writeState(dir + "/state.safetensors", tensors);
  st::File grads;
  std::vector<ref::TensorBuffers> want = tensors;
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<ref::Buffer> g = randomGrads(step == 3 ? 1e-3f : 1e-2f);
    for (size_t k = 0; k < kShapes.size(); ++k) {
      grads.put(kShapes[k].name + "/g@" + std::to_string(step), toTensor(g[k], kShapes[k].dims));
      want[k].grad = g[k];
    }
    stepInLaunchOrder(spec, want, step);
  }
  grads.save(dir + "/grads.safetensors");

  std::vector<std::string> args = baseArgs();
  append(args, {"--steps", "3", "--in", (dir + "/state.safetensors"), "--in",
                        (dir + "/grads.safetensors"), "--out",
                        (dir + "/out.safetensors")});
  Result r = runStep(args);
  ASSERT_EQ(r.status, 0) << r.output;
  expectOutput(dir + "/out.safetensors", want);
  st::File out = st::File::load(dir + "/out.safetensors");
  EXPECT_EQ(out.meta("qopt.last_step"), "3");
}

TEST_P(QoptStep, ASpikeIsStoredFiniteAndWarnedAbout) {
  // docs/numerics.md "Overflow": a step of gradients 1e10 N(0, 1) with an infinity, then one of
  // 1e-2: the reference's bytes, and under --quiet one warning line with the reference's counts
  // of saturated and non-finite groups (none for a kernel without quantized states).
  writeState(dir + "/state.safetensors", tensors);
  st::File grads;
  std::vector<ref::TensorBuffers> want = tensors;
  ref::NumericsCounts counts;
  for (int64_t step = 1; step <= 2; ++step) {
    std::vector<ref::Buffer> g = randomGrads(step == 1 ? 1e10f : 1e-2f);
    if (step == 1) {
      ref::TensorBuffers t = want[0];
      std::vector<float> v = g[0].toFloats();
      v[3] = std::numeric_limits<float>::infinity();
      ref::setGrad(spec, t, v);
      g[0] = t.grad;
    }
    for (size_t k = 0; k < kShapes.size(); ++k) {
      grads.put(kShapes[k].name + "/g@" + std::to_string(step), toTensor(g[k], kShapes[k].dims));
      want[k].grad = g[k];
    }
    stepInLaunchOrder(spec, want, step, &counts);
  }
  grads.save(dir + "/grads.safetensors");
  std::vector<std::string> args = baseArgs();
  append(args, {"--steps", "2", "--in", (dir + "/state.safetensors"), "--in",
                (dir + "/grads.safetensors"), "--out", (dir + "/out.safetensors")});
  Result r = runStep(args);
  ASSERT_EQ(r.status, 0) << r.output;
  expectOutput(dir + "/out.safetensors", want);
  std::string expected;
  if (counts.saturated || counts.nonfinite)
    expected = "qopt-step: warning: " + std::to_string(counts.saturated) +
               (counts.saturated == 1 ? " group" : " groups") +
               " saturated (a scale too large for its type) and " +
               std::to_string(counts.nonfinite) + (counts.nonfinite == 1 ? " group" : " groups") +
               " held NaN or infinity; their states were stored finite (docs/numerics.md, "
               "\"Overflow\")\n";
  EXPECT_EQ(r.output, expected);
  bool quantized = std::any_of(spec.states.begin(), spec.states.end(),
                               [](const ref::StateScheme &s) {
                                 return s.kind == ref::StateKind::Codebook ||
                                        s.kind == ref::StateKind::Group;
                               });
  EXPECT_EQ(counts.nonfinite > 0, quantized);
}

TEST_P(QoptStep, OneGradientForEveryStepFromALaterStepStart) {
  writeState(dir + "/state.safetensors", tensors);
  std::vector<ref::Buffer> g = randomGrads(1e-2f);
  st::File grads;
  std::vector<ref::TensorBuffers> want = tensors;
  for (size_t k = 0; k < kShapes.size(); ++k) {
    grads.put(kShapes[k].name + "/g", toTensor(g[k], kShapes[k].dims));
    want[k].grad = g[k];
  }
  grads.save(dir + "/grads.safetensors");
  stepInLaunchOrder(spec, want, 5);
  stepInLaunchOrder(spec, want, 6);

  std::vector<std::string> args = baseArgs();
  append(args, {"--step-start=5", "--steps=2", "--in", (dir + "/state.safetensors"),
                        "--in", (dir + "/grads.safetensors"), "--out",
                        (dir + "/out.safetensors")});
  Result r = runStep(args);
  ASSERT_EQ(r.status, 0) << r.output;
  expectOutput(dir + "/out.safetensors", want);
  EXPECT_EQ(st::File::load(dir + "/out.safetensors").meta("qopt.last_step"), "6");
}

TEST_P(QoptStep, InitMissingStateStartsFromTheZeroState) {
  // Only the parameter (and its error bits) in the file; the reference's
  // makeTensor states are the zero state.
  writeState(dir + "/params.safetensors", tensors, [](const std::string &stream) {
    return stream != "p" && stream != "p.ecc";
  });
  std::vector<ref::Buffer> g = randomGrads(1e-2f);
  st::File grads;
  std::vector<ref::TensorBuffers> want = tensors;
  for (size_t k = 0; k < kShapes.size(); ++k) {
    grads.put(kShapes[k].name + "/g", toTensor(g[k], kShapes[k].dims));
    want[k].grad = g[k];
  }
  grads.save(dir + "/grads.safetensors");
  stepInLaunchOrder(spec, want, 1);
  stepInLaunchOrder(spec, want, 2);

  std::vector<std::string> args = baseArgs();
  append(args, {"--steps=2", "--in", (dir + "/params.safetensors"), "--in",
                        (dir + "/grads.safetensors"), "--out",
                        (dir + "/out.safetensors")});
  Result without = runStep(args);
  EXPECT_EQ(without.status, 1);
  EXPECT_NE(without.output.find("pass --init-missing-state"), std::string::npos)
      << without.output;
  args.push_back("--init-missing-state");
  Result r = runStep(args);
  ASSERT_EQ(r.status, 0) << r.output;
  expectOutput(dir + "/out.safetensors", want);
}

TEST_P(QoptStep, TwoRunsGiveTheBytesOfOne) {
  writeState(dir + "/state.safetensors", tensors);
  st::File grads;
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<ref::Buffer> g = randomGrads(1e-2f);
    for (size_t k = 0; k < kShapes.size(); ++k)
      grads.put(kShapes[k].name + "/g@" + std::to_string(step), toTensor(g[k], kShapes[k].dims));
  }
  grads.save(dir + "/grads.safetensors");
  auto run = [&](const std::string &in, const std::string &out, int start, int steps) {
    std::vector<std::string> args = baseArgs();
    append(args, {"--step-start", std::to_string(start), "--steps",
                          std::to_string(steps), "--in", in, "--in",
                          (dir + "/grads.safetensors"), "--out", out});
    Result r = runStep(args);
    EXPECT_EQ(r.status, 0) << r.output;
  };
  run(dir + "/state.safetensors", dir + "/once.safetensors", 1, 3);
  run(dir + "/state.safetensors", dir + "/split.safetensors", 1, 2);
  // The output of the first run is the next run's input, and its own output.
  run(dir + "/split.safetensors", dir + "/split.safetensors", 3, 1);
  EXPECT_EQ(readBytes(dir + "/split.safetensors"), readBytes(dir + "/once.safetensors"));
}

TEST_P(QoptStep, CudaGivesTheBytesOfHost) {
  int32_t devices = 0;
  if (qopt_cuda_device_count(&devices) != QOPT_SUCCESS || devices == 0)
    GTEST_SKIP() << "no CUDA device: " << qopt_last_error();
  writeState(dir + "/state.safetensors", tensors);
  std::vector<ref::Buffer> g = randomGrads(1e-2f);
  st::File grads;
  for (size_t k = 0; k < kShapes.size(); ++k)
    grads.put(kShapes[k].name + "/g", toTensor(g[k], kShapes[k].dims));
  grads.save(dir + "/grads.safetensors");
  for (std::string backend : {"host", "cuda"}) {
    std::vector<std::string> args = baseArgs(backend);
    args.erase(args.begin() + 3, args.begin() + 5); // cuda: the shipped kernels
    if (backend == "host")
      args.insert(args.begin() + 3, {"--kernels", kernelDir()});
    append(args, {"--steps=3", "--in", (dir + "/state.safetensors"), "--in",
                          (dir + "/grads.safetensors"), "--out",
                          (dir + "/" + backend + ".safetensors")});
    Result r = runStep(args);
    ASSERT_EQ(r.status, 0) << backend << ": " << r.output;
  }
  EXPECT_EQ(readBytes(dir + "/cuda.safetensors"), readBytes(dir + "/host.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(Specs, QoptStep, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.spec;
                         });

TEST(QoptStepTables, BuiltInDynamicMapsAreTheReferences) {
  std::string dir = makeTempDir();
  Result r = runStep({"--kernel", "adamw8bit_block256", "--kernels", kernelDir(), "--quiet",
                      "--make-example", dir + "/ex.safetensors", "--tensor", "w=10",
                      "--table", "m.qmap=dynamic-signed", "--table", "v.qmap=dynamic-unsigned"});
  ASSERT_EQ(r.status, 0) << r.output;
  st::File f = st::File::load(dir + "/ex.safetensors");
  EXPECT_EQ(f.vec<float>("m.qmap", "F32"), ref::createDynamicMap(true));
  EXPECT_EQ(f.vec<float>("v.qmap", "F32"), ref::createDynamicMap(false));
  std::vector<float> s = f.vec<float>("m.qmap", "F32"), u = ref::createDynamicMap(true);
  EXPECT_EQ(std::memcmp(s.data(), u.data(), 1024), 0);

  // A table given as a file: the run's output carries it.
  st::File table;
  std::vector<float> custom = ref::createDynamicMap(false);
  table.put("v.qmap", st::Tensor::make<float>("F32", {256}, custom));
  table.save(dir + "/table.safetensors");
  r = runStep({"--kernel", "adamw8bit_block256", "--kernels", kernelDir(), "--quiet",
               "--table", "m.qmap=dynamic-signed", "--table",
               "v.qmap=" + dir + "/table.safetensors:v.qmap", "--in", dir + "/ex.safetensors",
               "--out", dir + "/out.safetensors"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(st::File::load(dir + "/out.safetensors").vec<float>("v.qmap", "F32"), custom);
  std::filesystem::remove_all(dir);
}

} // namespace

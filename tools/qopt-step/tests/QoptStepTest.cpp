//===- QoptStepTest.cpp - qopt-step on files vs the C++ reference ---------===//
//
// Runs the qopt-step binary (host backend, the shipped specs' host kernels of
// build/kernels/host) on safetensors files written here and compares every
// byte of every output stream with the C++ reference (test/reference), which
// steps copies of the same tensors: three steps with a gradient per step
// (<tensor>/g@<step>), one gradient reused from a later --step-start, a run
// split in two, state started by --init-missing-state, and the built-in
// dynamic codebooks. Then every error kind: a non-zero exit, a message naming
// the file, tensor or stream, and a pre-existing output file left
// byte-identical (no temporary file left behind). A CUDA run is compared
// with the host run where there is a GPU (skipped otherwise).
//
//===----------------------------------------------------------------------===//

#include "qopt/reference/Codebook.h"
#include "qopt/safetensors/SafeTensors.h"
#include "qopt/reference/Step.h"
#include "ShippedSpecCases.h"
#include "qopt/runtime.h"

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

extern char **environ;

namespace ref = qopt::ref;
namespace st = qopt::st;

namespace {

std::string kernelDir() {
  const char *dir = std::getenv("QOPT_TEST_KERNEL_DIR");
  return dir && *dir ? dir : QOPT_DEFAULT_KERNEL_DIR;
}

/// A fresh directory for one test's files.
std::string makeTempDir() {
  char tmpl[] = "/tmp/qopt_step_test_XXXXXX";
  char *d = ::mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        names.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Result {
  int status = -1;    ///< exit status
  std::string output; ///< stdout and stderr together
};

/// The binary under test ($QOPT_STEP_BINARY overrides the build's, e.g. in a
/// build tree copied to another machine).
std::string stepBinary() {
  const char *bin = std::getenv("QOPT_STEP_BINARY");
  return bin && *bin ? bin : QOPT_STEP_BINARY;
}

/// Runs the program `binary` with `args`, its output captured.
Result runProgram(const std::string &binary, const std::vector<std::string> &args) {
  std::string logPath = makeTempDir() + "/log";
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  Result r;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.output = std::string("posix_spawn failed: ") + std::strerror(rc);
    return r;
  }
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  r.output = readBytes(logPath);
  ::unlink(logPath.c_str());
  ::rmdir(logPath.substr(0, logPath.size() - 4).c_str());
  return r;
}

/// Runs qopt-step with `args`, its output captured.
Result runStep(const std::vector<std::string> &args) { return runProgram(stepBinary(), args); }

/// Appends `more` to `args` (strings, so that no pointer outlives its string).
void append(std::vector<std::string> &args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
}

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

//===--- Errors: a clear message, a non-zero exit, the output untouched -----===//

class QoptStepErrors : public ::testing::Test {
protected:
  void SetUp() override {
    dir = makeTempDir();
    // A valid FlashAdamW input: two tensors with state and gradient.
    Result r = runStep({"--kernel", "flash_adamw", "--kernels", kernelDir(), "--quiet",
                        "--make-example", dir + "/state.safetensors", "--tensor", "wte=300",
                        "--tensor", "b=40"});
    ASSERT_EQ(r.status, 0) << r.output;
    state = st::File::load(dir + "/state.safetensors");
    out = dir + "/out.safetensors";
    writeBytes(out, kSentinel);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  /// Writes `f` as `name` in the test directory; returns its path.
  std::string save(const std::string &name, const st::File &f) {
    f.save(dir + "/" + name);
    return dir + "/" + name;
  }

  /// Runs with the usual arguments plus `extra` and checks the failure.
  void expectFailure(const std::vector<std::string> &inputs, const std::vector<std::string> &extra,
                     const std::string &message, int status = 1,
                     const std::string &kernel = "flash_adamw") {
    std::vector<std::string> args = {"--kernel", kernel, "--kernels", kernelDir()};
    for (const std::string &in : inputs) {
      args.push_back("--in");
      args.push_back(in);
    }
    args.push_back("--out");
    args.push_back(out);
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> before = listDir(dir);
    Result r = runStep(args);
    EXPECT_EQ(r.status, status) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos)
        << "expected \"" << message << "\" in:\n"
        << r.output;
    EXPECT_EQ(r.output.rfind("qopt-step: error: ", 0), 0u) << r.output;
    EXPECT_EQ(readBytes(out), kSentinel) << "the output file changed";
    EXPECT_EQ(listDir(dir), before) << "files were left in the output directory";
  }

  /// The state file with tensor `name` replaced by `t` (or dropped).
  std::string edited(const std::string &name, const st::Tensor *t) {
    st::File f;
    for (const std::string &n : state.names())
      if (n != name)
        f.put(n, state.get(n));
    if (t)
      f.put(name, *t);
    return save("edited.safetensors", f);
  }

  const std::string kSentinel = "the previous output: any bytes\n";
  std::string dir, out;
  st::File state;
};

TEST_F(QoptStepErrors, UnreadableFile) {
  expectFailure({dir + "/no-such.safetensors"}, {},
                "safetensors '" + dir + "/no-such.safetensors': cannot open the file");
}

TEST_F(QoptStepErrors, NotASafetensorsFile) {
  writeBytes(dir + "/bad.safetensors", "this is not a safetensors file at all");
  expectFailure({dir + "/bad.safetensors"}, {}, "safetensors '" + dir + "/bad.safetensors'");
  writeBytes(dir + "/short.safetensors", "abc");
  expectFailure({dir + "/short.safetensors"}, {}, "shorter than the 8-byte header length");
}

TEST_F(QoptStepErrors, MissingTensor) {
  std::string in = edited("wte/m.scales", nullptr);
  expectFailure({in}, {}, "missing tensor 'wte/m.scales' (stream m.scales, state m");
  // With --init-missing-state, a state given in part is still an error.
  expectFailure({in}, {"--init-missing-state"}, "state m is partly given");
  // No gradient for a step.
  in = edited("b/g", nullptr);
  expectFailure({in}, {"--steps=2"}, "missing tensor 'b/g' (the gradient of kernel FlashAdamW) "
                                     "for step 1: give 'b/g' (used at every step) or 'b/g@1'");
  // No parameter for a group.
  in = edited("b/p", nullptr);
  expectFailure({in}, {}, "belongs to tensor 'b', which has no parameter 'b/p'");
}

TEST_F(QoptStepErrors, WrongDtype) {
  st::Tensor g = st::Tensor::make<float>("F32", {300}, std::vector<float>(300, 0.0f));
  std::string in = edited("wte/g", &g);
  expectFailure({in}, {}, in + ": tensor 'wte/g': dtype F32, but stream 'g' of kernel FlashAdamW "
                          "is bf16 (safetensors BF16)");
}

TEST_F(QoptStepErrors, WrongShape) {
  st::Tensor codes = state.get("wte/m.codes");
  codes.shape = {299};
  codes.data.resize(299);
  std::string in = edited("wte/m.codes", &codes);
  expectFailure({in}, {}, "tensor 'wte/m.codes': 299 elements (shape [299]), but stream "
                          "'m.codes' has one per element of the parameter");
  st::Tensor scales = state.get("b/m.scales");
  scales.shape = {1};
  scales.data.resize(2);
  in = edited("b/m.scales", &scales);
  expectFailure({in}, {}, "tensor 'b/m.scales': 1 elements (shape [1]), but stream 'm.scales' has "
                          "one per group of 32");
}

TEST_F(QoptStepErrors, UnknownStreamOrDuplicate) {
  st::Tensor codes = state.get("wte/m.codes");
  std::string in = edited("wte/m.code", &codes);
  expectFailure({in}, {}, "tensor 'wte/m.code': kernel FlashAdamW has no stream 'm.code'");
  expectFailure({dir + "/state.safetensors", dir + "/state.safetensors"}, {},
                "is in two inputs");
}

// A --hyper that cannot be taken is a command-line mistake: exit status 2, as
// docs/qopt-step.md says (lr=abc exited 1, issue #26). A NaN uniform is not.
TEST_F(QoptStepErrors, UnknownOrBadHyperparameter) {
  std::string in = dir + "/state.safetensors";
  expectFailure({in}, {"--hyper", "lrr=1e-3"},
                "--hyper lrr=1e-3: kernel FlashAdamW has no hyperparameter 'lrr' (it has lr, "
                "beta1, beta2, eps, weight_decay)",
                2);
  expectFailure({in}, {"--hyper", "lr=fast"}, "'fast' is not a decimal number", 2);
  expectFailure({in}, {"--hyper", "lr=abc"}, "--hyper lr=abc: 'abc' is not a decimal number", 2);
  expectFailure({in}, {"--hyper", "lr=0x10"}, "'0x10' is not a decimal number", 2);
  expectFailure({in}, {"--hyper", "lr=true"}, "'lr' is a number, not a flag", 2);
  expectFailure({in}, {"--hyper", "lr=1", "--hyper", "lr=2"}, "--hyper lr given twice", 2);
  expectFailure({in}, {"--hyper", "lr=nan"}, "is NaN", 1);
  expectFailure({in}, {"--hyper=nesterov=2"}, "--hyper nesterov=2: 'nesterov' is a flag", 2,
                "flash_sgd");
}

// 1e400 became inf and 1e-400 zero, silently; the DSL refuses both literals.
TEST_F(QoptStepErrors, HyperparameterOutOfFloat64Range) {
  std::string in = dir + "/state.safetensors";
  expectFailure({in}, {"--hyper", "lr=1e400"},
                "qopt-step: error: --hyper lr=1e400: '1e400' is too large for float64\n", 2);
  expectFailure({in}, {"--hyper", "lr=-1e400"}, "'-1e400' is too large for float64", 2);
  expectFailure({in}, {"--hyper", "lr=1e-400"},
                "qopt-step: error: --hyper lr=1e-400: '1e-400' is too small for float64: it "
                "rounds to 0\n",
                2);
}

TEST_F(QoptStepErrors, InputThatIsNotARegularFile) {
  expectFailure({"/dev/zero"}, {},
                "qopt-step: error: safetensors '/dev/zero': it is a character device, not a "
                "regular file\n");
  std::string fifo = dir + "/fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expectFailure({fifo}, {}, "safetensors '" + fifo + "': it is a FIFO, not a regular file\n");
  std::string sub = dir + "/sub.safetensors";
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  expectFailure({sub}, {}, "safetensors '" + sub + "': it is a directory, not a regular file\n");
}

/// A safetensors file of `header` (padded to 8 bytes) and `data`.
std::string rawSafetensors(std::string header, const std::string &data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + data;
}

// 2^64 - 1 was read as int64 -1: "negative dimension in shape [-1]".
TEST_F(QoptStepErrors, DimensionBeyondInt64) {
  std::string in = dir + "/huge.safetensors";
  writeBytes(in, rawSafetensors(R"({"w/p":{"dtype":"F32","shape":[18446744073709551615],)"
                                R"("data_offsets":[0,4]}})",
                                std::string(4, '\0')));
  expectFailure({in}, {},
                "safetensors '" + in + "': tensor 'w/p': dimension 18446744073709551615 is too "
                "large (the largest is 2^63 - 1)\n");
}

// A NUL in a tensor name ended the message there.
TEST_F(QoptStepErrors, ControlCharacterInATensorName) {
  std::string in = dir + "/nul.safetensors";
  writeBytes(in, rawSafetensors(R"({"w\u0000x/p":{"dtype":"F32","shape":[1],)"
                                R"("data_offsets":[0,4]}})",
                                std::string(4, '\0')));
  expectFailure({in}, {},
                "safetensors '" + in + "': tensor 'w\\x00x/p': a tensor name must not contain "
                "control characters\n");
}

// A shape whose bytes the file does not have is refused from the header
// alone, before anything is allocated: 2^40 floats in a file of 64 bytes.
TEST_F(QoptStepErrors, HeaderSizesBeyondTheFile) {
  std::string in = dir + "/big.safetensors";
  writeBytes(in, rawSafetensors(R"({"w/p":{"dtype":"F32","shape":[1099511627776],)"
                                R"("data_offsets":[0,4398046511104]}})",
                                std::string(4, '\0')));
  expectFailure({in}, {},
                "safetensors '" + in + "': tensor 'w/p': data_offsets [0, 4398046511104] lie "
                "outside the 4 data bytes\n");
  writeBytes(in, rawSafetensors(R"({"w/p":{"dtype":"F32","shape":[1099511627776],)"
                                R"("data_offsets":[0,4]}})",
                                std::string(4, '\0')));
  expectFailure({in}, {},
                "safetensors '" + in + "': tensor 'w/p': 4 bytes do not match dtype F32 and "
                "shape [1099511627776] (4398046511104 bytes)\n");
}

// Every step's uniforms were evaluated before the inputs were read:
// 10^8 steps ran for more than 10 s before a garbage header's error.
TEST_F(QoptStepErrors, InputsAreCheckedBeforeEveryStepsUniforms) {
  writeBytes(dir + "/bad.safetensors", "this is not a safetensors file at all");
  auto start = std::chrono::steady_clock::now();
  expectFailure({dir + "/bad.safetensors"}, {"--steps", "100000000"},
                "safetensors '" + dir + "/bad.safetensors'");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
}

TEST_F(QoptStepErrors, UnknownKernel) {
  expectFailure({dir + "/state.safetensors"}, {}, "unknown kernel 'flash_adamx'", 1, "flash_adamx");
  // A manifest without a host library, on the host backend: found only once
  // the inputs have been read.
  std::string fatbinManifest = kernelDir() + "/../fatbin/flash_adamw.manifest.json";
  if (std::ifstream(fatbinManifest))
    expectFailure({dir + "/state.safetensors"}, {}, "has no host implementation", 1,
                  fatbinManifest);
}

TEST_F(QoptStepErrors, BadTable) {
  std::string in = dir + "/state.safetensors";
  expectFailure({in}, {"--table", "m.qmap=dynamic-signed"},
                "--table m.qmap=dynamic-signed: kernel FlashAdamW takes no tables");
  st::File t;
  t.put("m.qmap", st::Tensor::make<float>("F32", {255}, std::vector<float>(255, 0.0f)));
  std::string table = save("table.safetensors", t);
  Result r = runStep({"--kernel", "adamw8bit_block256", "--kernels", kernelDir(), "--quiet",
                      "--make-example", dir + "/ex8.safetensors", "--tensor", "w=300",
                      "--no-state"});
  ASSERT_EQ(r.status, 0) << r.output;
  expectFailure({dir + "/ex8.safetensors"}, {"--init-missing-state"},
                "needs the codebook table 'm.qmap'", 1, "adamw8bit_block256");
  expectFailure({dir + "/ex8.safetensors"},
                {"--init-missing-state", "--table", "m.qmap=" + table, "--table",
                 "v.qmap=dynamic-unsigned"},
                "tensor 'm.qmap': 255 elements (shape [255]), a codebook table is 256 F32 values",
                1, "adamw8bit_block256");
}

TEST_F(QoptStepErrors, CommandLineMistakes) {
  std::string in = dir + "/state.safetensors";
  expectFailure({in}, {"--steps=-1"}, "--steps: -1 is below 0", 2);
  expectFailure({in}, {"--backend=tpu"}, "unknown backend 'tpu'", 2);
  expectFailure({in}, {"--frobnicate"}, "unknown option '--frobnicate'", 2);
}

TEST_F(QoptStepErrors, UnwritableOutputLeavesNothing) {
  // The output's directory does not exist: nothing is created anywhere.
  std::vector<std::string> before = listDir(dir);
  Result r = runStep({"--kernel", "flash_adamw", "--kernels", kernelDir(), "--in",
                      dir + "/state.safetensors", "--out", dir + "/missing/out.safetensors"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("cannot write '" + dir + "/missing/out.safetensors'"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(listDir(dir), before);
}

// A truncated libqopt_kernels.so was mapped by dlopen and killed qopt-step with
// SIGBUS at the first touch past its end. The copy of qopt-step finds a
// libqopt_kernels.so cut to its first 12000 bytes (of the runtime's ELF file)
// where it looks first, beside its build tree: the error names the file.
TEST(QoptStepKernels, TruncatedShippedLibraryIsRefused) {
  namespace fs = std::filesystem;
  fs::path built = fs::canonical(stepBinary()).parent_path();
  fs::path root = makeTempDir();
  fs::create_directories(root / "bin");
  fs::create_directories(root / "lib");
  fs::copy_file(built / "qopt-step", root / "bin" / "qopt-step");
  fs::create_directory_symlink(fs::canonical(built / ".." / "runtime"), root / "runtime");
  std::string elf = readBytes((built / ".." / "runtime" / "libqopt_runtime.so").string());
  ASSERT_GT(elf.size(), 12000u);
  std::string lib = (root / "lib" / "libqopt_kernels.so").string();
  writeBytes(lib, elf.substr(0, 12000));
  Result r = runProgram((root / "bin" / "qopt-step").string(),
                        {"--backend=cuda", "--kernel", "flash_adamw", "--in",
                         (root / "none.safetensors").string(), "--out",
                         (root / "out.safetensors").string()});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cannot load " + (root / "bin" / "..").string() +
                          "/lib/libqopt_kernels.so: the file is truncated or corrupt"),
            std::string::npos)
      << r.output;
  fs::remove_all(root);
}

} // namespace

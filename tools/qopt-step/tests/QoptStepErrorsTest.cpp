//===- QoptStepErrorsTest.cpp - qopt-step's errors ------------------------===//
//
// Every error kind of qopt-step (host backend): a non-zero exit, a message
// naming the file, tensor or stream, and a pre-existing output file left
// byte-identical with no temporary file left behind; and a truncated
// libqopt_kernels.so refused before it is mapped.
//
//===----------------------------------------------------------------------===//

#include "QoptStepTestUtil.h"

#include "qopt/safetensors/SafeTensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace st = qopt::st;
using namespace qopt::steptest;

namespace {

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

//===- TestUtil.h - Shared helpers of the runtime's tests -----------------===//
#ifndef QOPT_RUNTIME_TESTS_TESTUTIL_H
#define QOPT_RUNTIME_TESTS_TESTUTIL_H

#include "qopt/runtime.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>
#include <filesystem>
#include <unistd.h>

namespace qopt::test {

/// Directory of the running test executable (test data lives beside it).
inline std::string exeDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

/// A fresh temporary directory.
/// A new directory under $TMPDIR (or /tmp), removed when the test program
/// exits.
inline std::string makeTempDir() {
  static std::vector<std::string> made;
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit([] {
      for (const std::string &d : made) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    });
  }
  const char *base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") +
                     "/qopt_runtime_test_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char *d = ::mkdtemp(buf.data());
  if (!d)
    return "/tmp";
  made.push_back(d);
  return d;
}

inline void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline bool fileExists(const std::string &path) {
  return ::access(path.c_str(), R_OK) == 0;
}

/// The test kernel of kernels/qopt_test_sgd_f32.ptx: p -= u0 * g with
/// u0 = lr * (1 - beta^step); tiles of 1024.
inline const char *sgdManifestJson() {
  return R"({
  "format": "qopt-manifest", "version": 1,
  "optimizer": "TestSGD", "kernel": "qopt_test_sgd_f32", "mode": "strict", "arch": "sm_90",
  "param": {"name": "p", "dtype": "f32"},
  "grad": {"name": "g", "dtype": "f32"},
  "hypers": [{"name": "lr", "default": 0.5}, {"name": "beta", "default": 0.5}],
  "states": [],
  "streams": [{"name": "p", "role": "param", "dtype": "f32", "per": "element", "access": "read_write"},
              {"name": "g", "role": "grad", "dtype": "f32", "per": "element", "access": "read"}],
  "uniforms": [{"index": 0, "expr": ["mul", "lr", ["sub", 1.0, ["pow", "beta", "step"]]]}],
  "tables": [],
  "args": ["descriptors", "tile_map", "num_tiles", "uniforms"],
  "launch": {"threads_per_block": 128, "elements_per_thread": 8, "tile_elements": 1024,
             "descriptor_bytes": 32, "shared_bytes": 0, "suggested_blocks_per_sm": 2}
})";
}

/// The full FlashAdamW-style manifest of docs/abi.md with every stream.
inline const char *flashManifestJson() {
  return R"({
  "format": "qopt-manifest", "version": 1,
  "optimizer": "FlashAdamW", "kernel": "FlashAdamW_strict", "mode": "strict", "arch": "sm_90",
  "param": {"name": "p", "dtype": "bf16", "master": "ecc_int8"},
  "grad": {"name": "g", "dtype": "bf16"},
  "hypers": [{"name": "lr", "default": 0.001}, {"name": "beta1", "default": 0.9},
             {"name": "nesterov", "default": 0.0, "bool": true}],
  "states": [{"name": "m", "scheme": "group", "storage": "int8", "group": 32, "companding": "softsign",
              "scale_dtype": "f16", "rounding": "half_up", "scale_divisor": "absmax"},
             {"name": "m2", "scheme": "codebook", "block": 2048},
             {"name": "m3", "scheme": "plain", "dtype": "f32"}],
  "streams": [{"name": "p", "role": "param", "dtype": "bf16", "per": "element", "access": "read_write"},
              {"name": "p.ecc", "role": "error_bits", "dtype": "int8", "per": "element", "access": "read_write"},
              {"name": "g", "role": "grad", "dtype": "bf16", "per": "element", "access": "read"},
              {"name": "m.codes", "role": "state_codes", "dtype": "int8", "per": "element", "access": "read_write"},
              {"name": "m.scales", "role": "state_scales", "dtype": "f16", "per": "group", "group": 32,
               "access": "read_write"},
              {"name": "m2.codes", "role": "state_codes", "dtype": "uint8", "per": "element", "access": "read_write"},
              {"name": "m2.absmax", "role": "state_absmax", "dtype": "f32", "per": "block", "block": 2048,
               "access": "read_write"},
              {"name": "m3", "role": "state", "dtype": "f32", "per": "element", "access": "read_write"}],
  "uniforms": [{"index": 0, "expr": ["sub", 1.0, ["pow", "beta1", "step"]]}],
  "tables": [{"name": "m2.qmap", "dtype": "f32", "count": 256}],
  "args": ["descriptors", "tile_map", "num_tiles", "uniforms", "m2.qmap"],
  "launch": {"threads_per_block": 256, "elements_per_thread": 16, "tile_elements": 4096,
             "descriptor_bytes": 80, "shared_bytes": 0, "suggested_blocks_per_sm": 4,
             "waves": 2, "min_tiles_per_block": 64}
})";
}

/// Parses JSON text into a manifest; fails the test on error.
inline qopt_manifest *parseOrDie(const std::string &json,
                                 const char *source = "test.manifest.json") {
  qopt_manifest *m = nullptr;
  qopt_status s = qopt_manifest_parse(json.data(), json.size(), source, &m);
  EXPECT_EQ(s, QOPT_SUCCESS) << qopt_last_error();
  return m;
}

/// Makes the runtime's CUDA backend use the simulated driver beside the test
/// executable (libqopt_sim_cuda.so, through QOPT_CUDA_LIBRARY) and opens it
/// for the test's own calls into it (sim_reset, sim_count, ...); null, with
/// the reason on stderr, where it cannot be opened.
inline void *openSimulatedDriver() {
  std::string lib = exeDir() + "/libqopt_sim_cuda.so";
  ::setenv("QOPT_CUDA_LIBRARY", lib.c_str(), 1);
  void *h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    std::fprintf(stderr, "cannot load %s: %s\n", lib.c_str(), ::dlerror());
  return h;
}

/// What qopt_kernel_create said for one kernel of a registry.
struct KernelCreation {
  qopt_status status = QOPT_SUCCESS;
  std::string message; ///< qopt_last_error() where it failed, else ""
  bool kernelMade = false;
};

/// Creates `kernel` from `registry` on a fresh context of `backend` and
/// destroys what was made (kernel, context); the registry stays the
/// caller's. A context that cannot be created fails the test.
inline KernelCreation createKernel(qopt_backend backend,
                                   qopt_registry *registry,
                                   const std::string &kernel) {
  KernelCreation out;
  qopt_context *ctx = nullptr;
  EXPECT_EQ(qopt_context_create(backend, 0, &ctx), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_kernel *made = nullptr;
  out.status = qopt_kernel_create(ctx, registry, kernel.c_str(), &made);
  out.message = out.status == QOPT_SUCCESS ? "" : qopt_last_error();
  out.kernelMade = made != nullptr;
  if (made)
    qopt_kernel_destroy(made);
  qopt_context_destroy(ctx);
  return out;
}

/// True when a CUDA device is usable; otherwise `why` says what is missing.
inline bool haveGpu(std::string *why) {
  int32_t n = 0;
  qopt_status s = qopt_cuda_device_count(&n);
  if (s != QOPT_SUCCESS) {
    *why = std::string("no CUDA driver: ") + qopt_last_error();
    return false;
  }
  if (n == 0) {
    *why = "the CUDA driver reports no device";
    return false;
  }
  return true;
}

} // namespace qopt::test

#define QOPT_REQUIRE_GPU()                                                     \
  do {                                                                         \
    std::string qoptWhy_;                                                      \
    if (!::qopt::test::haveGpu(&qoptWhy_))                                     \
      GTEST_SKIP() << "GPU test skipped: " << qoptWhy_;                        \
  } while (0)

#endif // QOPT_RUNTIME_TESTS_TESTUTIL_H

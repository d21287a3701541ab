//===- GpuManifestTest.cpp - A GPU module's manifest against the given ----===//
//
// qopt-opt embeds in each PTX (and so each cubin and fatbin) the manifest it
// writes beside it, as the global `<entry>_manifest` (docs/abi.md, "The GPU
// module's manifest"); loading a module compares the two and refuses a
// manifest that differs, before any launch. QOPT_CUDA_LIBRARY points at
// libqopt_sim_cuda.so, whose modules serve the byte arrays their PTX
// declares. The PTX here is written by the test (the manifest's compact
// JSON as NVPTX writes a byte array) and, in the compiler's build, by
// qopt-opt itself (QOPT_GPU_MANIFEST_KERNEL_DIR).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <string>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

long (*simCount)(const char *) = nullptr;
void (*simReset)() = nullptr;

/// A PTX module with entry `entry` and, unless `symbol` is empty, the byte
/// array `symbol` holding `bytes` as NVPTX declares a constant i8 array (its
/// trailing zeros left to the declaration's size).
std::string ptxWith(const std::string &entry, const std::string &symbol,
                    const std::string &bytes) {
  std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\n";
  if (!symbol.empty()) {
    ptx += ".visible .global .align 1 .b8 " + symbol + "[" +
           std::to_string(bytes.size()) + "] = {";
    size_t listed = bytes.find_last_not_of('\0') + 1;
    for (size_t i = 0; i < listed; ++i)
      ptx += (i ? ", " : "") +
             std::to_string(static_cast<unsigned char>(bytes[i]));
    ptx += "};\n";
  }
  return ptx + ".visible .entry " + entry + "()\n{\n\tret;\n}\n";
}

/// `doc` as qopt-opt embeds it: compact JSON and its NUL.
std::string embedded(const json &doc) { return doc.dump() + std::string(1, '\0'); }

/// What loading the PTX `ptx` (as the file `dir`/k.ptx, listed by a
/// manifest file `dir`/edited.manifest.json holding `doc`) said.
struct Load {
  qopt_status status = QOPT_SUCCESS;
  std::string message;
  bool kernelMade = false;
  std::string dir;
};

Load load(const json &given, const std::string &ptx) {
  Load out;
  out.dir = makeTempDir();
  writeFile(out.dir + "/k.ptx", ptx);
  json doc = given;
  doc["binaries"] = json::array(
      {{{"format", "ptx"}, {"arch", "sm_90"}, {"path", "k.ptx"}}});
  writeFile(out.dir + "/edited.manifest.json", doc.dump(2));
  qopt_registry *r = nullptr;
  EXPECT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  EXPECT_EQ(qopt_registry_add_manifest_file(
                r, (out.dir + "/edited.manifest.json").c_str()),
            QOPT_SUCCESS)
      << qopt_last_error();
  KernelCreation made = createKernel(QOPT_BACKEND_CUDA, r,
                                     given["kernel"].get<std::string>());
  out.status = made.status;
  out.message = made.message;
  out.kernelMade = made.kernelMade;
  qopt_registry_destroy(r);
  return out;
}

void expectParts(const Load &l, std::initializer_list<std::string> parts) {
  for (const std::string &part : parts)
    EXPECT_NE(l.message.find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << l.message;
}

/// Loading the PTX compiled with `compiled` under the manifest `given` is
/// refused before any kernel exists, naming both files, `field` and both
/// values.
void expectRefused(const json &given, const json &compiled,
                   const std::string &field, const std::string &givenValue,
                   const std::string &compiledValue) {
  std::string entry = compiled["kernel"];
  Load l = load(given, ptxWith(entry, entry + "_manifest", embedded(compiled)));
  EXPECT_EQ(l.status, QOPT_ERROR_MANIFEST) << l.message;
  EXPECT_FALSE(l.kernelMade);
  expectParts(l, {l.dir + "/edited.manifest.json: does not match PTX " + l.dir +
                      "/k.ptx",
                  "(its '" + entry + "_manifest')",
                  "field '" + field + "' is " + givenValue + " in " + l.dir +
                      "/edited.manifest.json but " + compiledValue +
                      " in the module"});
}

json sgd() { return json::parse(sgdManifestJson()); }
json flash() { return json::parse(flashManifestJson()); }

TEST(GpuManifest, AModuleWithItsOwnManifestLoads) {
  simReset();
  json doc = flash();
  Load l = load(doc, ptxWith("FlashAdamW_strict", "FlashAdamW_strict_manifest",
                             embedded(doc)));
  EXPECT_EQ(l.status, QOPT_SUCCESS) << l.message;
  EXPECT_TRUE(l.kernelMade);
  EXPECT_EQ(simCount("cuModuleGetGlobal"), 1);
}

TEST(GpuManifest, AModuleWithoutItsManifestLoadsUnchecked) {
  // Binaries built before qopt-opt embedded the manifest.
  simReset();
  Load l = load(sgd(), ptxWith("qopt_test_sgd_f32", "", ""));
  EXPECT_EQ(l.status, QOPT_SUCCESS) << l.message;
  EXPECT_TRUE(l.kernelMade);
  EXPECT_EQ(simCount("cuModuleGetGlobal"), 1);
}

TEST(GpuManifest, AnEditedGroupSizeIsRefused) {
  // States and streams alike, so the reader finds the manifest consistent.
  json doc = flash();
  doc["states"][0]["group"] = 64;
  doc["streams"][4]["group"] = 64;
  expectRefused(doc, flash(), "states[0].group", "64", "32");
}

TEST(GpuManifest, AnEditedThreadsPerBlockIsRefused) {
  json doc = sgd();
  doc["launch"]["threads_per_block"] = 256;
  doc["launch"]["tile_elements"] = 2048;
  expectRefused(doc, sgd(), "launch.threads_per_block", "256", "128");
}

TEST(GpuManifest, TheSharedBytesAndTileClaimsAreCompared) {
  // The GPU code's own launch fields, which the host backend does not read.
  json doc = sgd();
  doc["launch"]["shared_bytes"] = 1024;
  expectRefused(doc, sgd(), "launch.shared_bytes", "1024", "0");

  json claims = sgd();
  claims["args"].push_back("work_counters");
  claims["launch"]["tile_claims"] = {{"tiles", 2}, {"static_eighths", 5}};
  json fewer = claims;
  fewer["launch"]["tile_claims"]["static_eighths"] = 6;
  expectRefused(fewer, claims, "launch.tile_claims.static_eighths", "6", "5");
  // Without claims, the kernel takes no work counters.
  expectRefused(sgd(), claims, "args", "4 entries", "5 entries");

  // A kernel with a producer warp hangs in a block without it.
  json producer = sgd();
  producer["version"] = 2;
  producer["launch"]["producer_warps"] = 1;
  expectRefused(sgd(), producer, "launch.producer_warps", "0", "1");
  expectRefused(producer, sgd(), "launch.producer_warps", "1", "0");
}

TEST(GpuManifest, AnEntryPointOfAnotherKernelIsRefused) {
  // A module renamed by hand with its manifest left as compiled.
  json doc = sgd();
  doc["entry"] = "other_sgd";
  json compiled = sgd();
  compiled["entry"] = "other_sgd";
  compiled["kernel"] = "other_sgd";
  Load l = load(doc, ptxWith("other_sgd", "other_sgd_manifest",
                             embedded(compiled)));
  EXPECT_EQ(l.status, QOPT_ERROR_MANIFEST) << l.message;
  expectParts(l, {"field 'kernel' is \"qopt_test_sgd_f32\"",
                  "but \"other_sgd\" in the module"});
}

TEST(GpuManifest, WhatMayDifferIsAccepted) {
  // Where the files are, the architecture, defaults the runtime alone
  // reads, the grid's size and fields the runtime does not read.
  json doc = flash();
  doc["hypers"][0]["default"] = 0.5;
  doc["hypers"][1].erase("default");
  doc["arch"] = "sm_80";
  doc["launch"]["waves"] = 1;
  doc["launch"]["suggested_blocks_per_sm"] = 2;
  doc["launch"]["min_tiles_per_block"] = 8;
  doc["comment"] = "moved and retuned by hand";
  doc["version"] = 2; // what version 2 adds is compared field by field
  json compiled = flash();
  compiled["binaries"] = json::array(
      {{{"format", "cubin"}, {"arch", "sm_90"}, {"path", "/elsewhere/k.cubin"}}});
  Load l = load(doc, ptxWith("FlashAdamW_strict", "FlashAdamW_strict_manifest",
                             embedded(compiled)));
  EXPECT_EQ(l.status, QOPT_SUCCESS) << l.message;
  EXPECT_TRUE(l.kernelMade);
}

TEST(GpuManifest, AnUnreadableManifestGlobalIsRefused) {
  json doc = sgd();
  // No NUL within the global.
  Load noNul = load(doc, ptxWith("qopt_test_sgd_f32", "qopt_test_sgd_f32_manifest",
                                 doc.dump()));
  EXPECT_EQ(noNul.status, QOPT_ERROR_MANIFEST) << noNul.message;
  expectParts(noNul, {"PTX " + noNul.dir + "/k.ptx of kernel 'qopt_test_sgd_f32'",
                      "its manifest global 'qopt_test_sgd_f32_manifest' (" +
                          std::to_string(doc.dump().size()) +
                          " bytes) is not NUL-terminated"});
  // Not a manifest.
  Load junk = load(doc, ptxWith("qopt_test_sgd_f32", "qopt_test_sgd_f32_manifest",
                                std::string("{\"format\": 1}") + '\0'));
  EXPECT_EQ(junk.status, QOPT_ERROR_MANIFEST) << junk.message;
  expectParts(junk, {"carries a manifest ('qopt_test_sgd_f32_manifest') the "
                     "runtime cannot read, so it cannot check " +
                         junk.dir + "/edited.manifest.json against it"});
}

TEST(GpuManifest, AnImageFromMemoryIsCheckedToo) {
  json doc = sgd();
  json compiled = sgd();
  compiled["launch"]["elements_per_thread"] = 16;
  compiled["launch"]["tile_elements"] = 2048;
  std::string ptx = ptxWith("qopt_test_sgd_f32", "qopt_test_sgd_f32_manifest",
                            embedded(compiled));
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS);
  qopt_manifest *m = parseOrDie(doc.dump(), "given.manifest.json");
  qopt_kernel *k = nullptr;
  EXPECT_EQ(qopt_kernel_create_from_image(ctx, m, QOPT_BINARY_PTX, ptx.c_str(),
                                          ptx.size() + 1, &k),
            QOPT_ERROR_MANIFEST);
  EXPECT_EQ(k, nullptr);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("given.manifest.json: does not match PTX <memory>"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("field 'launch.elements_per_thread' is 8 in "
                     "given.manifest.json but 16 in the module"),
            std::string::npos) << msg;
  qopt_manifest_destroy(m);
  qopt_context_destroy(ctx);
}

#ifdef QOPT_GPU_MANIFEST_KERNEL_DIR
/// The PTX and manifest qopt-opt wrote for flash_adamw.qopt in this build.
std::string compiledDir() { return QOPT_GPU_MANIFEST_KERNEL_DIR; }

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(GpuManifest, QoptOptsPtxCarriesTheManifestItWrote) {
  json doc = json::parse(readText(compiledDir() + "/flash_adamw.manifest.json"));
  std::string ptx = readText(compiledDir() + "/flash_adamw.ptx");
  simReset();
  Load same = load(doc, ptx);
  EXPECT_EQ(same.status, QOPT_SUCCESS) << same.message;
  EXPECT_EQ(simCount("cuModuleGetGlobal"), 1);

  json edited = doc;
  for (json &s : edited["states"])
    if (s.contains("group"))
      s["group"] = 64;
  for (json &s : edited["streams"])
    if (s.contains("group"))
      s["group"] = 64;
  Load l = load(edited, ptx);
  EXPECT_EQ(l.status, QOPT_ERROR_MANIFEST) << l.message;
  expectParts(l, {"field 'states[0].group' is 64 in " + l.dir +
                  "/edited.manifest.json but 32 in the module"});
}
#endif

} // namespace

int main(int argc, char **argv) {
  void *h = openSimulatedDriver();
  if (!h)
    return 1;
  simCount = reinterpret_cast<long (*)(const char *)>(::dlsym(h, "sim_count"));
  simReset = reinterpret_cast<void (*)()>(::dlsym(h, "sim_reset"));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

//===- HostManifestTest.cpp - A host library's manifest against the given -===//
//
// qopt-opt embeds in each host library the manifest it writes beside it
// (`<entry>_manifest`, docs/abi.md); qopt_kernel_create compares the two and
// refuses a manifest that differs, before any step. A real library of the
// build (flash_adamw, compiled by the qopt-opt of this build into
// QOPT_HOST_MANIFEST_KERNEL_DIR) is loaded with its manifest edited in memory
// as a stale manifest would be: each edit is one the manifest reader accepts
// on its own, and each stepped the library with the wrong layout before.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

std::string kernelDir() { return QOPT_HOST_MANIFEST_KERNEL_DIR; }

/// The manifest qopt-opt wrote with flash_adamw.so, its library made
/// absolute (as the colleague's reproduction had it).
json shippedManifest() {
  std::ifstream in(kernelDir() + "/flash_adamw.manifest.json");
  EXPECT_TRUE(in.good()) << kernelDir() << "/flash_adamw.manifest.json";
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str());
  doc["host"]["library"] =
      kernelDir() + "/" + doc["host"]["library"].get<std::string>();
  return doc;
}

/// What qopt_kernel_create said for `doc` on a host context.
struct Load {
  qopt_status status = QOPT_SUCCESS;
  std::string message;
  bool kernelMade = false;
  /// The manifest reader accepted `doc` (the refusal, if any, is the
  /// library's manifest's).
  bool parsed = false;
};

Load load(const json &doc) {
  Load out;
  std::string text = doc.dump();
  qopt_manifest *m = nullptr;
  if (qopt_manifest_parse(text.data(), text.size(), "edited.manifest.json",
                          &m) != QOPT_SUCCESS) {
    out.message = qopt_last_error();
    return out;
  }
  out.parsed = true;
  qopt_registry *r = nullptr;
  EXPECT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  EXPECT_EQ(qopt_registry_add_manifest(r, m, QOPT_BINARY_HOST, nullptr, 0),
            QOPT_SUCCESS)
      << qopt_last_error();
  KernelCreation made =
      createKernel(QOPT_BACKEND_HOST, r, doc["kernel"].get<std::string>());
  out.status = made.status;
  out.message = made.message;
  out.kernelMade = made.kernelMade;
  qopt_registry_destroy(r);
  qopt_manifest_destroy(m);
  return out;
}

/// `doc`'s load is refused before any kernel exists, naming `field` and
/// both values.
void expectRefused(const json &doc, const std::string &field,
                   const std::string &given, const std::string &embedded) {
  Load l = load(doc);
  ASSERT_TRUE(l.parsed) << "the reader refused the edit itself: " << l.message;
  EXPECT_EQ(l.status, QOPT_ERROR_MANIFEST) << l.message;
  // No kernel: nothing can be validated or stepped with this manifest.
  EXPECT_FALSE(l.kernelMade);
  for (const std::string &part :
       {std::string("edited.manifest.json: does not match host library "),
        kernelDir() + "/flash_adamw.so",
        std::string("FlashAdamW_host_manifest"),
        "field '" + field + "' is " + given + " in edited.manifest.json but " +
            embedded + " in the library"})
    EXPECT_NE(l.message.find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << l.message;
}

TEST(HostManifest, TheLibraryCarriesTheManifestAndAcceptsItsOwn) {
  Load l = load(shippedManifest());
  EXPECT_EQ(l.status, QOPT_SUCCESS) << l.message;
  EXPECT_TRUE(l.kernelMade);
}

TEST(HostManifest, AnEditedGroupSizeIsRefusedBeforeAnyStep) {
  // The colleague's reproduction: every "group": 32 made 64 (states and
  // streams alike, so the reader finds the manifest consistent) validated a
  // list and then crashed in FlashAdamW_host.
  json doc = shippedManifest();
  for (json &s : doc["states"])
    if (s.contains("group"))
      s["group"] = 64;
  for (json &s : doc["streams"])
    if (s.contains("group"))
      s["group"] = 64;
  expectRefused(doc, "states[0].group", "64", "32");
}

TEST(HostManifest, AStreamsGroupAloneIsTheReadersToRefuse) {
  // Inconsistent with its state: the manifest reader's own check.
  json doc = shippedManifest();
  doc["streams"][6]["group"] = 64; // v.scales
  Load l = load(doc);
  EXPECT_FALSE(l.parsed);
  EXPECT_NE(l.message.find("streams[6]"), std::string::npos) << l.message;
}

TEST(HostManifest, AStreamDtypeIsRefused) {
  json doc = shippedManifest();
  // The gradient as f16 (the stream and the "grad" entry alike): an f16
  // gradient read as bf16.
  doc["grad"]["dtype"] = "f16";
  doc["streams"][2]["dtype"] = "f16";
  expectRefused(doc, "grad.dtype", "\"f16\"", "\"bf16\"");
  // The stream alone.
  json only = shippedManifest();
  only["streams"][2]["dtype"] = "f16";
  Load l = load(only);
  if (l.parsed)
    expectRefused(only, "streams[2].dtype", "\"f16\"", "\"bf16\"");
  else
    EXPECT_NE(l.message.find("streams[2]"), std::string::npos) << l.message;
}

TEST(HostManifest, AHyperparameterNameIsRefused) {
  // beta1 renamed everywhere: the uniforms then read "b1", which the
  // library was not compiled with.
  json doc = shippedManifest();
  doc["hypers"][1]["name"] = "b1";
  std::string text = doc.dump();
  for (size_t at = text.find("\"beta1\""); at != std::string::npos;
       at = text.find("\"beta1\"", at))
    text.replace(at, 7, "\"b1\"");
  expectRefused(json::parse(text), "hypers[1].name", "\"b1\"", "\"beta1\"");
}

TEST(HostManifest, AUniformExpressionIsRefused) {
  json doc = shippedManifest();
  doc["uniforms"][4]["expr"] = json::array({"sub", 1, json::array({"pow", "beta1", "step"})});
  expectRefused(doc, "uniforms[4].expr",
                "[\"sub\",1,[\"pow\",\"beta1\",\"step\"]]",
                "[\"sub\",1,[\"pow\",\"beta2\",\"step\"]]");
}

TEST(HostManifest, ALaunchShapeIsRefused) {
  json doc = shippedManifest();
  int64_t threads = doc["launch"]["threads_per_block"].get<int64_t>();
  doc["launch"]["elements_per_thread"] = 16;
  doc["launch"]["tile_elements"] = threads * 16;
  expectRefused(doc, "launch.elements_per_thread", "16", "8");
}

TEST(HostManifest, AStreamLessIsRefused) {
  // A state dropped (its streams too): the descriptors would be 16 bytes
  // short of what the library reads.
  json doc = shippedManifest();
  doc["states"].erase(1);
  doc["streams"].erase(6);
  doc["streams"].erase(5);
  doc["launch"]["descriptor_bytes"] = 56;
  Load l = load(doc);
  if (!l.parsed)
    GTEST_SKIP() << "the reader refuses this edit itself: " << l.message;
  expectRefused(doc, "states", "1 entry", "2 entries");
}

TEST(HostManifest, WhatMayDifferIsAccepted) {
  // Where the files are, defaults the runtime alone reads, and fields the
  // runtime does not read.
  json doc = shippedManifest();
  doc["hypers"][0]["default"] = 0.5;
  doc["hypers"][3].erase("default");
  doc["launch"]["waves"] = 1; // the GPU's scheduling
  doc["launch"]["suggested_blocks_per_sm"] = 2;
  doc["version"] = 2;
  doc["launch"]["producer_warps"] = 1; // how the GPU's block is made up
  doc["comment"] = "moved and retuned by hand";
  Load l = load(doc);
  EXPECT_EQ(l.status, QOPT_SUCCESS) << l.message;
  EXPECT_TRUE(l.kernelMade);
}

// A manifest named without a directory ("flash_adamw.manifest.json" from the
// folder it is in) finds its library beside it: a bare "flash_adamw.so"
// given to dlopen was searched for on the library path instead.
TEST(HostManifest, AManifestInTheCurrentDirectoryFindsItsLibrary) {
  std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(kernelDir());
  qopt_manifest *m = nullptr;
  qopt_status parsed = qopt_manifest_load("flash_adamw.manifest.json", &m);
  std::string message = parsed == QOPT_SUCCESS ? "" : qopt_last_error();
  KernelCreation made;
  qopt_registry *r = nullptr;
  if (parsed == QOPT_SUCCESS && qopt_registry_create(&r) == QOPT_SUCCESS &&
      qopt_registry_add_manifest(r, m, QOPT_BINARY_HOST, nullptr, 0) == QOPT_SUCCESS)
    made = createKernel(QOPT_BACKEND_HOST, r, "FlashAdamW");
  std::filesystem::current_path(cwd);
  EXPECT_EQ(parsed, QOPT_SUCCESS) << message;
  EXPECT_EQ(made.status, QOPT_SUCCESS) << made.message;
  EXPECT_TRUE(made.kernelMade);
  qopt_registry_destroy(r);
  qopt_manifest_destroy(m);
}

TEST(HostManifest, ALibraryWithoutItsManifestIsAcceptedUnchecked) {
  // Libraries built before qopt-opt embedded the manifest (here: the
  // hand-written test kernels) are loaded as before.
  std::string lib = exeDir() + "/libqopt_test_host_kernels.so";
  ASSERT_TRUE(fileExists(lib)) << lib;
  json doc = json::parse(sgdManifestJson());
  doc["host"] = {{"library", lib}, {"symbol", "qopt_test_sgd_f32_host"}};
  Load l = load(doc);
  EXPECT_EQ(l.status, QOPT_SUCCESS) << l.message;
  EXPECT_TRUE(l.kernelMade);
}

} // namespace

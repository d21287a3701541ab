//===- RegistryTest.cpp - Kernel registries: directories, embedded kernels -===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

TEST(Registry, RefusedDirectoryAddsNothing) {
  // Two manifests of one kernel name in a directory, and a directory whose
  // kernel is already registered: each refused with nothing added.
  std::string dir = makeTempDir();
  json a = json::parse(sgdManifestJson());
  a["kernel"] = "alpha";
  json dup = json::parse(sgdManifestJson());
  dup["kernel"] = "twice";
  writeFile(dir + "/alpha.manifest.json", a.dump());
  writeFile(dir + "/b.manifest.json", dup.dump());
  writeFile(dir + "/c.manifest.json", dup.dump());
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  size_t added = 12345, n = 9;
  EXPECT_EQ(qopt_registry_add_directory(r, dir.c_str(), &added),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("kernel 'twice' is defined twice"),
            std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(added, 12345u);
  ASSERT_EQ(qopt_registry_count(r, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 0u);

  std::remove((dir + "/c.manifest.json").c_str());
  ASSERT_EQ(qopt_registry_add_manifest_file(r, (dir + "/alpha.manifest.json").c_str()),
            QOPT_SUCCESS);
  EXPECT_EQ(qopt_registry_add_directory(r, dir.c_str(), &added),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("kernel 'alpha' is defined twice"),
            std::string::npos)
      << qopt_last_error();
  ASSERT_EQ(qopt_registry_count(r, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 1u); // alpha alone: 'twice' was not added either
  qopt_registry_destroy(r);
}

TEST(Registry, AddsADirectoryInNameOrder) {
  std::string dir = makeTempDir();
  json a = json::parse(sgdManifestJson());
  a["kernel"] = "zeta";
  json b = json::parse(sgdManifestJson());
  b["kernel"] = "alpha";
  writeFile(dir + "/zeta.manifest.json", a.dump());
  writeFile(dir + "/alpha.manifest.json", b.dump());
  writeFile(dir + "/notes.json", "{}");
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  size_t added = 0;
  ASSERT_EQ(qopt_registry_add_directory(r, dir.c_str(), &added), QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(added, 2u);
  size_t n = 0;
  ASSERT_EQ(qopt_registry_count(r, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 2u);
  const char *name = nullptr;
  ASSERT_EQ(qopt_registry_kernel_name(r, 0, &name), QOPT_SUCCESS);
  EXPECT_STREQ(name, "alpha");
  ASSERT_EQ(qopt_registry_kernel_name(r, 1, &name), QOPT_SUCCESS);
  EXPECT_STREQ(name, "zeta");
  qopt_manifest *m = nullptr;
  ASSERT_EQ(qopt_registry_get_manifest(r, "zeta", &m), QOPT_SUCCESS);
  qopt_manifest_info info;
  qopt_manifest_get_info(m, &info);
  EXPECT_EQ(std::string(info.source), dir + "/zeta.manifest.json");
  qopt_manifest_destroy(m);

  EXPECT_EQ(qopt_registry_get_manifest(r, "beta", &m), QOPT_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(qopt_last_error()).find("no kernel 'beta' in the registry (it has: alpha, zeta)"),
            std::string::npos)
      << qopt_last_error();

  // The same kernel twice names both files.
  writeFile(dir + "/again.json", a.dump());
  EXPECT_EQ(qopt_registry_add_manifest_file(r, (dir + "/again.json").c_str()),
            QOPT_ERROR_INVALID_ARGUMENT);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("kernel 'zeta' is defined twice"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/zeta.manifest.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/again.json"), std::string::npos) << msg;
  qopt_registry_destroy(r);
}

TEST(Registry, EmbeddedKernelsParseWhenFirstUsed) {
  // Borrowed text: it must outlive the registry, as an embedded manifest does.
  json good = json::parse(sgdManifestJson());
  good["kernel"] = "Emb";
  const std::string goodText = good.dump();
  const std::string badText = "{\"kernel\": ";
  const std::string image = "not a binary";
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  ASSERT_EQ(qopt_registry_add_embedded(r, "Emb", goodText.data(), goodText.size(), "<emb>/good",
                                       QOPT_BINARY_PTX, image.data(), image.size()),
            QOPT_SUCCESS)
      << qopt_last_error();
  // Registered under the given name, nothing parsed yet: a malformed manifest
  // and one that names another kernel are accepted now...
  ASSERT_EQ(qopt_registry_add_embedded(r, "Bad", badText.data(), badText.size(), "<emb>/bad",
                                       QOPT_BINARY_PTX, nullptr, 0),
            QOPT_SUCCESS);
  ASSERT_EQ(qopt_registry_add_embedded(r, "Other", goodText.data(), goodText.size(),
                                       "<emb>/other", QOPT_BINARY_PTX, nullptr, 0),
            QOPT_SUCCESS);
  size_t n = 0;
  ASSERT_EQ(qopt_registry_count(r, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 3u);
  // ...and refused when first asked for, naming the source.
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_registry_get_manifest(r, "Bad", &m), QOPT_ERROR_MANIFEST);
  EXPECT_NE(std::string(qopt_last_error()).find("<emb>/bad"), std::string::npos)
      << qopt_last_error();
  EXPECT_EQ(qopt_registry_get_manifest(r, "Other", &m), QOPT_ERROR_MANIFEST);
  EXPECT_NE(std::string(qopt_last_error()).find("the manifest's kernel is 'Emb', but it was "
                                                "registered as 'Other'"),
            std::string::npos)
      << qopt_last_error();
  ASSERT_EQ(qopt_registry_get_manifest(r, "Emb", &m), QOPT_SUCCESS) << qopt_last_error();
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_STREQ(info.kernel, "Emb");
  EXPECT_STREQ(info.source, "<emb>/good");
  qopt_manifest_destroy(m);
  // Asked for again: the same, parsed once.
  ASSERT_EQ(qopt_registry_get_manifest(r, "Emb", &m), QOPT_SUCCESS);
  qopt_manifest_destroy(m);
  // A name already there is refused at once, naming both sources.
  EXPECT_EQ(qopt_registry_add_embedded(r, "Emb", goodText.data(), goodText.size(), "<emb>/again",
                                       QOPT_BINARY_PTX, nullptr, 0),
            QOPT_ERROR_INVALID_ARGUMENT);
  std::string msg = qopt_last_error();
  EXPECT_NE(msg.find("kernel 'Emb' is defined twice: <emb>/good and <emb>/again"),
            std::string::npos)
      << msg;
  // Bad arguments.
  EXPECT_EQ(qopt_registry_add_embedded(r, nullptr, goodText.data(), goodText.size(), "x",
                                       QOPT_BINARY_PTX, nullptr, 0),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_registry_add_embedded(r, "Y", nullptr, 0, "x", QOPT_BINARY_PTX, nullptr, 0),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_registry_add_embedded(r, "Z", goodText.data(), goodText.size(), "x",
                                       QOPT_BINARY_PTX, nullptr, 16),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("image is NULL but image_size is 16"),
            std::string::npos)
      << qopt_last_error();
  ASSERT_EQ(qopt_registry_count(r, &n), QOPT_SUCCESS);
  EXPECT_EQ(n, 3u);
  qopt_registry_destroy(r);
}

TEST(Registry, ListedBinaryMustExist) {
  std::string dir = makeTempDir();
  json a = json::parse(sgdManifestJson());
  a["binaries"] = {{{"format", "cubin"}, {"arch", "sm_90"}, {"path", "k.sm_90.cubin"}}};
  writeFile(dir + "/k.manifest.json", a.dump());
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  EXPECT_EQ(qopt_registry_add_manifest_file(r, (dir + "/k.manifest.json").c_str()),
            QOPT_ERROR_IO);
  EXPECT_NE(std::string(qopt_last_error()).find(dir + "/k.sm_90.cubin"), std::string::npos)
      << qopt_last_error();
  qopt_registry_destroy(r);
}

TEST(Registry, MissingDirectoryIsAnIoError) {
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  EXPECT_EQ(qopt_registry_add_directory(r, "/nonexistent/kernels", nullptr),
            QOPT_ERROR_IO);
  EXPECT_NE(std::string(qopt_last_error()).find("/nonexistent/kernels"), std::string::npos);
  qopt_registry_destroy(r);
}

} // namespace

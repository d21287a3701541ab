//===- SharedLibraryTest.cpp - libqopt_runtime.so as ctypes sees it -------===//
//
// Loads the shared library with dlopen and calls it through dlsym, as Python's
// ctypes does: the C API is exported, nothing else is, and errors come back
// as codes and messages (no exception crosses the boundary).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <dlfcn.h>

using namespace qopt::test;

namespace {

TEST(SharedLibrary, ExportsTheCApiOnly) {
  std::string path = exeDir() + "/../libqopt_runtime.so";
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using GetVersion = qopt_status (*)(int32_t *, int32_t *);
  using Parse = qopt_status (*)(const char *, size_t, const char *, qopt_manifest **);
  using LastError = const char *(*)();
  using StatusString = const char *(*)(qopt_status);
  auto getVersion = reinterpret_cast<GetVersion>(dlsym(h, "qopt_get_version"));
  auto parse = reinterpret_cast<Parse>(dlsym(h, "qopt_manifest_parse"));
  auto lastError = reinterpret_cast<LastError>(dlsym(h, "qopt_last_error"));
  auto statusString = reinterpret_cast<StatusString>(dlsym(h, "qopt_status_string"));
  ASSERT_TRUE(getVersion && parse && lastError && statusString);
  int32_t rv = 0, mv = 0;
  EXPECT_EQ(getVersion(&rv, &mv), QOPT_SUCCESS);
  EXPECT_EQ(rv, QOPT_RUNTIME_VERSION);
  EXPECT_EQ(mv, QOPT_MANIFEST_VERSION);
  qopt_manifest *m = nullptr;
  std::string bad = "{\"format\": \"qopt-manifest\", \"version\": 7}";
  EXPECT_EQ(parse(bad.data(), bad.size(), "py.json", &m), QOPT_ERROR_MANIFEST);
  EXPECT_STREQ(lastError(), "py.json: field 'version': unsupported version 7 (this "
                            "runtime reads versions 1 to 2)");
  EXPECT_STREQ(statusString(QOPT_ERROR_MANIFEST), "QOPT_ERROR_MANIFEST");
  // Internal C++ symbols stay hidden.
  EXPECT_EQ(dlsym(h, "_ZN4qopt2rt13parseManifestESt17basic_string_viewIcSt11char_traitsIcEERKNSt7__cxx1112basic_stringIcS3_SaIcEEE"),
            nullptr);
  dlclose(h);
}

} // namespace

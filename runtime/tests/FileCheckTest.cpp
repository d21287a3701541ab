//===- FileCheckTest.cpp - Files are checked before they are read or loaded ===//
//
// Issue #26: a truncated host kernel .so killed the process with SIGBUS in
// dlopen; a FIFO or /dev/zero given as a manifest blocked or read without
// bound. Each bad file gives QOPT_ERROR_IO naming it.
//
//===----------------------------------------------------------------------===//
#include "FileCheck.h"
#include "Error.h"
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <tuple>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The status and message of loading `path` as a manifest.
std::pair<qopt_status, std::string> loadManifest(const std::string &path) {
  qopt_manifest *m = nullptr;
  qopt_status s = qopt_manifest_load(path.c_str(), &m);
  if (m)
    qopt_manifest_destroy(m);
  return {s, qopt_last_error()};
}

TEST(FileCheck, ADirectoryIsNotAManifest) {
  std::string dir = makeTempDir();
  auto [s, msg] = loadManifest(dir);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot read " + dir + ": it is a directory, not a regular file");
}

TEST(FileCheck, DevZeroIsRefusedAtOnce) {
  auto [s, msg] = loadManifest("/dev/zero");
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot read /dev/zero: it is a character device, not a regular file");
}

TEST(FileCheck, AFifoWithNoWriterDoesNotBlock) {
  std::string fifo = makeTempDir() + "/m.manifest.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto [s, msg] = loadManifest(fifo);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot read " + fifo + ": it is a FIFO, not a regular file");
}

TEST(FileCheck, AMissingFileNamesItsReason) {
  std::string path = makeTempDir() + "/none.manifest.json";
  auto [s, msg] = loadManifest(path);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot open " + path + ": No such file or directory");
}

TEST(FileCheck, AFileThatShrinksWhileReadIsAnError) {
  std::string path = makeTempDir() + "/shrinks";
  writeFile(path, std::string(1000, 'x'));
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  // Opened and sized at 1000 bytes, then cut to 600 before the read.
  ASSERT_EQ(::ftruncate(fd, 600), 0);
  try {
    qopt::rt::readOpenFile(fd, 1000, path);
    ADD_FAILURE() << "a shrunk file was read";
  } catch (const qopt::rt::Error &e) {
    EXPECT_EQ(e.status(), QOPT_ERROR_IO);
    EXPECT_EQ(std::string(e.what()),
              "cannot read " + path +
                  ": the file shrank while it was read (it had 1000 bytes when opened)");
  }
  // And one that grew.
  try {
    qopt::rt::readOpenFile(fd, 500, path);
    ADD_FAILURE() << "a grown file was read";
  } catch (const qopt::rt::Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read " + path +
                  ": the file grew while it was read (it had 500 bytes when opened)");
  }
  EXPECT_EQ(qopt::rt::readOpenFile(fd, 600, path), std::string(600, 'x'));
  ::close(fd);
}

/// A registry of one manifest whose host library is `lib`, and the status
/// and message of creating its kernel on the host backend.
std::pair<qopt_status, std::string> createHostKernel(const std::string &lib) {
  std::string dir = makeTempDir();
  json j = json::parse(sgdManifestJson());
  j["host"] = {{"library", lib}, {"symbol", "qopt_test_sgd_f32_host"}};
  writeFile(dir + "/qopt_test_sgd_f32.manifest.json", j.dump());
  qopt_registry *r = nullptr;
  EXPECT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  EXPECT_EQ(qopt_registry_add_directory(r, dir.c_str(), nullptr), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_context *ctx = nullptr;
  EXPECT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx), QOPT_SUCCESS);
  qopt_kernel *kernel = nullptr;
  qopt_status s = qopt_kernel_create(ctx, r, "qopt_test_sgd_f32", &kernel);
  std::string msg = qopt_last_error();
  if (kernel)
    qopt_kernel_destroy(kernel);
  qopt_context_destroy(ctx);
  qopt_registry_destroy(r);
  return {s, msg};
}

std::string testLibrary() { return exeDir() + "/libqopt_test_host_kernels.so"; }

TEST(FileCheck, TheWholeHostLibraryLoads) {
  std::string copy = makeTempDir() + "/whole.so";
  writeFile(copy, readAll(testLibrary()));
  auto [s, msg] = createHostKernel(copy);
  EXPECT_EQ(s, QOPT_SUCCESS) << msg;
}

// `head -c 12000 x.so > y.so`: dlopen mapped the missing segments and the
// process died of SIGBUS. Its segments are checked against its size first.
TEST(FileCheck, ATruncatedHostLibraryIsRefusedBeforeDlopen) {
  std::string whole = readAll(testLibrary());
  ASSERT_GT(whole.size(), 12000u);
  std::string cut = makeTempDir() + "/cut.so";
  writeFile(cut, whole.substr(0, 12000));
  auto [s, msg] = createHostKernel(cut);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg.rfind("cannot load " + cut + ": the file is truncated or corrupt: its ELF ", 0), 0u)
      << msg;
  EXPECT_NE(msg.find(" but the file has 12000 bytes"), std::string::npos) << msg;
}

// Without its last byte, the segments are whole but the section header table
// (at the end of the file) is not.
TEST(FileCheck, AHostLibraryWithoutItsLastByteIsRefused) {
  std::string whole = readAll(testLibrary());
  std::string cut = makeTempDir() + "/short.so";
  writeFile(cut, whole.substr(0, whole.size() - 1));
  auto [s, msg] = createHostKernel(cut);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot load " + cut + ": the file is truncated or corrupt: its ELF "
                 "section headers end at byte " + std::to_string(whole.size()) +
                 " but the file has " + std::to_string(whole.size() - 1) + " bytes");
}

/// The test library with `patch` applied to its bytes, written as `name`.
std::string patchedLibrary(const std::string &name,
                           const std::function<void(std::string &)> &patch) {
  std::string bytes = readAll(testLibrary());
  patch(bytes);
  std::string path = makeTempDir() + "/" + name;
  writeFile(path, bytes);
  return path;
}

Elf64_Ehdr &header(std::string &bytes) {
  return *reinterpret_cast<Elf64_Ehdr *>(bytes.data());
}

// A corrupt header, headers or section past the end: each named, none
// reaches dlopen.
TEST(FileCheck, CorruptElfHeadersAreRefused) {
  std::string lib = readAll(testLibrary());
  ASSERT_EQ(header(lib).e_ident[EI_CLASS], ELFCLASS64);
  const std::string size = std::to_string(lib.size());

  std::string p = patchedLibrary("short.so", [](std::string &b) { b.resize(20); });
  auto [s, msg] = createHostKernel(p);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot load " + p + ": the file is truncated or corrupt: its ELF header "
                 "ends at byte 64 but the file has 20 bytes");

  p = patchedLibrary("phentsize.so", [](std::string &b) { header(b).e_phentsize = 1; });
  std::tie(s, msg) = createHostKernel(p);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot load " + p + ": corrupt ELF header (program header entries of 1 bytes)");

  p = patchedLibrary("shentsize.so", [](std::string &b) { header(b).e_shentsize = 3; });
  std::tie(s, msg) = createHostKernel(p);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot load " + p + ": corrupt ELF header (section header entries of 3 bytes)");

  p = patchedLibrary("phoff.so", [&](std::string &b) { header(b).e_phoff = lib.size(); });
  std::tie(s, msg) = createHostKernel(p);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg.rfind("cannot load " + p + ": the file is truncated or corrupt: its ELF program "
                      "headers end at byte ", 0), 0u)
      << msg;

  // The last section's data moved past the end of the file.
  p = patchedLibrary("section.so", [&](std::string &b) {
    Elf64_Ehdr &h = header(b);
    auto *sh = reinterpret_cast<Elf64_Shdr *>(b.data() + h.e_shoff);
    for (int i = h.e_shnum - 1; i > 0; --i)
      if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_size > 0) {
        sh[i].sh_offset = b.size();
        break;
      }
  });
  std::tie(s, msg) = createHostKernel(p);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg.rfind("cannot load " + p + ": the file is truncated or corrupt: its ELF section ", 0), 0u)
      << msg;
  EXPECT_NE(msg.find(" but the file has " + size + " bytes"), std::string::npos) << msg;
}

TEST(FileCheck, AHostLibraryThatIsAFifoIsRefused) {
  std::string fifo = makeTempDir() + "/fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto [s, msg] = createHostKernel(fifo);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg, "cannot read " + fifo + ": it is a FIFO, not a regular file");
}

TEST(FileCheck, AHostLibraryThatIsNotElfIsLeftToDlopen) {
  std::string junk = makeTempDir() + "/junk.so";
  writeFile(junk, std::string(4096, 'j'));
  auto [s, msg] = createHostKernel(junk);
  EXPECT_EQ(s, QOPT_ERROR_IO);
  EXPECT_EQ(msg.rfind("cannot load host library " + junk, 0), 0u) << msg;
}

} // namespace

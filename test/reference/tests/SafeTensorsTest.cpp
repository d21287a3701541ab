//===- SafeTensorsTest.cpp - safetensors reader / writer -------------------===//
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using qopt::st::Error;
using qopt::st::File;
using qopt::st::Tensor;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "qopt_st_" + std::to_string(::getpid()) + "_" + name;
}

void writeRaw(const std::string &path, const std::string &header, const std::string &data, int64_t lenOverride = -1) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = lenOverride >= 0 ? static_cast<uint64_t>(lenOverride) : header.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header << data;
}

/// Loads `path` and returns the Error message (fails the test if it loads).
std::string loadError(const std::string &path) {
  try {
    File::load(path);
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "loading " << path << " did not fail";
  return "";
}

} // namespace

TEST(SafeTensorsTest, RoundTripAllDtypesAndMetadata) {
  File f;
  f.put("a/f32", Tensor::make<float>("F32", {2, 3}, {1, 2, 3, 4, 5, 6.5f}));
  f.put("b16", Tensor::make<uint16_t>("BF16", {3}, {0x3f80, 0xbf80, 0x7fc0}));
  f.put("h", Tensor::make<uint16_t>("F16", {1}, {0x3c00}));
  f.put("i8", Tensor::make<int8_t>("I8", {4}, {-127, 0, 1, 127}));
  f.put("u8", Tensor::make<uint8_t>("U8", {2}, {0, 255}));
  f.put("i16", Tensor::make<int16_t>("I16", {2}, {-32767, 32767}));
  f.put("d", Tensor::make<double>("F64", {}, {0.125}));
  f.put("empty", Tensor::make<float>("F32", {0}, {}));
  f.metadata()["k"] = "{\"x\": 1}";
  const std::string path = tempPath("rt.safetensors");
  f.save(path);
  const File g = File::load(path);
  EXPECT_EQ(g.names(), f.names());
  for (const std::string &n : f.names()) {
    EXPECT_EQ(g.get(n).dtype, f.get(n).dtype) << n;
    EXPECT_EQ(g.get(n).shape, f.get(n).shape) << n;
    EXPECT_EQ(g.get(n).data, f.get(n).data) << n;
  }
  EXPECT_EQ(g.meta("k"), "{\"x\": 1}");
  EXPECT_EQ(g.vec<float>("a/f32", "F32")[5], 6.5f);
  EXPECT_EQ(g.vec<int16_t>("i16", "I16")[0], -32767);
  EXPECT_EQ(g.get("d").numel(), 1);
  EXPECT_TRUE(g.vec<float>("empty", "F32").empty());
  // the header is padded to 8 bytes
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= static_cast<uint64_t>(static_cast<uint8_t>(in.get())) << (8 * i);
  EXPECT_EQ(len % 8, 0u);
  std::remove(path.c_str());
}

TEST(SafeTensorsTest, ClearErrors) {
  const std::string missing = tempPath("does_not_exist.safetensors");
  EXPECT_NE(loadError(missing).find("cannot open"), std::string::npos);
  EXPECT_NE(loadError(missing).find(missing), std::string::npos) << "the message names the file";

  const std::string p = tempPath("bad.safetensors");
  {
    std::ofstream out(p, std::ios::binary);
    out << "abc";
  }
  EXPECT_NE(loadError(p).find("shorter than the 8-byte header length"), std::string::npos);
  writeRaw(p, "{}", "", 1000);
  EXPECT_NE(loadError(p).find("runs past the end"), std::string::npos);
  writeRaw(p, "{not json", "");
  EXPECT_NE(loadError(p).find("not valid JSON"), std::string::npos);
  writeRaw(p, "[1,2]", "");
  EXPECT_NE(loadError(p).find("not a JSON object"), std::string::npos);
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0'));
  EXPECT_NE(loadError(p).find("outside the 4 data bytes"), std::string::npos);
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", std::string(8, '\0'));
  EXPECT_NE(loadError(p).find("data_offsets [8, 4] end before they begin"), std::string::npos);
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  EXPECT_NE(loadError(p).find("do not match dtype F32 and shape [3]"), std::string::npos);
  writeRaw(p, R"({"x":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\0'));
  EXPECT_NE(loadError(p).find("unknown safetensors dtype 'Q7'"), std::string::npos);
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "");
  EXPECT_NE(loadError(p).find("negative dimension"), std::string::npos);
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[1]}})", std::string(4, '\0'));
  EXPECT_NE(loadError(p).find("needs dtype, shape and data_offsets"), std::string::npos);
  writeRaw(p,
           R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           std::string(8, '\0'));
  EXPECT_NE(loadError(p).find("overlap"), std::string::npos);
  writeRaw(p, R"({"__metadata__":{"a":1}})", "");
  EXPECT_NE(loadError(p).find("is not a string"), std::string::npos);

  writeRaw(p, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  const File f = File::load(p);
  try {
    f.get("y");
    ADD_FAILURE();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("no tensor named 'y'"), std::string::npos);
  }
  try {
    f.get("x", "BF16");
    ADD_FAILURE();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("has dtype F32, expected BF16"), std::string::npos);
  }
  try {
    f.get("x", "F32", {3});
    ADD_FAILURE();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("has shape [2], expected [3]"), std::string::npos);
  }
  EXPECT_THROW(f.vec<double>("x", "F32"), Error);
  EXPECT_THROW(f.meta("nope"), Error);
  EXPECT_THROW(Tensor::make<float>("F32", {3}, {1.0f}), Error);
  std::remove(p.c_str());
}

// Issue #26: the reader took any file (a FIFO blocked, /dev/zero read without
// bound), believed a header's sizes, and kept reading a file that changed.
TEST(SafeTensorsTest, OnlyRegularFiles) {
  EXPECT_EQ(loadError("/dev/zero"),
            "safetensors '/dev/zero': it is a character device, not a regular file");
  const std::string dir = tempPath("dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  EXPECT_EQ(loadError(dir), "safetensors '" + dir + "': it is a directory, not a regular file");
  ::rmdir(dir.c_str());
  const std::string fifo = tempPath("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(loadError(fifo), "safetensors '" + fifo + "': it is a FIFO, not a regular file");
  std::remove(fifo.c_str());
}

TEST(SafeTensorsTest, HeaderLongerThanTheFormatAllows) {
  // A sparse file of 100,000,100 bytes: the length fits in the file, but the
  // format's limit is 100,000,000.
  const std::string p = tempPath("long-header.safetensors");
  writeRaw(p, "", "", 100000001);
  ASSERT_EQ(::truncate(p.c_str(), 100000100), 0);
  EXPECT_EQ(loadError(p), "safetensors '" + p +
                              "': header length 100000001 is more than the format's 100000000 bytes");
  std::remove(p.c_str());
}

TEST(SafeTensorsTest, NamesAndDimensionsTheReaderRefuses) {
  const std::string p = tempPath("names.safetensors");
  writeRaw(p, R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  EXPECT_EQ(loadError(p), "safetensors '" + p + "': tensor '': empty tensor name");
  writeRaw(p, R"({"a\u0007b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           std::string(4, '\0'));
  EXPECT_EQ(loadError(p), "safetensors '" + p +
                              "': tensor 'a\\x07b': a tensor name must not contain control characters");
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}})",
           std::string(4, '\0'));
  EXPECT_EQ(loadError(p), "safetensors '" + p +
                              "': tensor 'x': dimension 9223372036854775808 is too large (the "
                              "largest is 2^63 - 1)");
  File f;
  EXPECT_THROW(f.put(std::string("a\0b", 3), Tensor::make<float>("F32", {1}, {1.0f})), Error);
  std::remove(p.c_str());
}

// A key given twice in one object is refused: at the top level, in a
// tensor's entry, and the empty key in __metadata__ (which the earlier check,
// using "" for "none found", let through).
TEST(SafeTensorsTest, RepeatedKeysAreRefused) {
  const std::string p = tempPath("repeated.safetensors");
  const std::string x = R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  writeRaw(p, "{" + x + "," + x + "}", std::string(4, '\0'));
  EXPECT_EQ(loadError(p), "safetensors '" + p + "': header gives the key 'x' twice in one object");
  writeRaw(p, R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"shape":[1]}})",
           std::string(4, '\0'));
  EXPECT_EQ(loadError(p),
            "safetensors '" + p + "': header gives the key 'shape' twice in one object");
  writeRaw(p, R"({"__metadata__":{"":"a","":"b"},)" + x + "}", std::string(4, '\0'));
  EXPECT_EQ(loadError(p), "safetensors '" + p + "': header gives the key '' twice in one object");
  // The same key in different objects is no repeat.
  writeRaw(p, R"({"__metadata__":{"x":"a"},)" + x + "}", std::string(4, '\0'));
  EXPECT_EQ(File::load(p).meta("x"), "a");
  std::remove(p.c_str());
}

// The check for repeated keys was quadratic in the number of tensors (the
// parser callback rescanned the header's object as each entry closed): 50,000
// one-element tensors took minutes to load. Now it takes about a second.
TEST(SafeTensorsTest, ManyTensorsLoadInLinearTime) {
  const int n = 50000;
  File f;
  for (int i = 0; i < n; ++i)
    f.put("t" + std::to_string(i), Tensor::make<float>("F32", {1}, {static_cast<float>(i)}));
  const std::string p = tempPath("many.safetensors");
  f.save(p);
  const auto start = std::chrono::steady_clock::now();
  const File g = File::load(p);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(g.names().size(), static_cast<size_t>(n));
  EXPECT_EQ(g.vec<float>("t0", "F32")[0], 0.0f);
  EXPECT_EQ(g.vec<float>("t49999", "F32")[0], 49999.0f);
  EXPECT_LT(seconds, 20.0) << "loading " << n << " tensors";
  std::remove(p.c_str());
}

TEST(SafeTensorsTest, AFileThatChangesWhileReadIsAnError) {
  const std::string p = tempPath("changes.safetensors");
  File f;
  f.put("x", Tensor::make<float>("F32", {4}, {1, 2, 3, 4}));
  f.save(p);
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(File::loadOpenFile(fd, size, p).vec<float>("x", "F32"),
            (std::vector<float>{1, 2, 3, 4}));
  // Cut to its last 8 bytes short after fstat: the tensor's bytes are gone.
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size - 8)), 0);
  try {
    File::loadOpenFile(fd, size, p);
    ADD_FAILURE() << "a file that shrank was read";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()), "safetensors '" + p + "': the file shrank while it was read (it had " +
                                         std::to_string(size) + " bytes when opened, and ends at byte " +
                                         std::to_string(size - 8) + ")");
  }
  // Longer than when it was opened.
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size + 5)), 0);
  try {
    File::loadOpenFile(fd, size, p);
    ADD_FAILURE() << "a file that grew was read";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()), "safetensors '" + p + "': the file grew while it was read (it had " +
                                         std::to_string(size) + " bytes when opened)");
  }
  ::close(fd);
  std::remove(p.c_str());
}

TEST(SafeTensorsTest, ReadsFilesWrittenByPython) {
  const File f = File::load(qopt::ref::test::goldenPath("dynamic_map.safetensors"));
  EXPECT_EQ(f.get("signed", "F32", {256}).numel(), 256);
  EXPECT_FALSE(f.meta("torch_cpu_capability").empty());
}

//===- qopt-safetensors-fuzzer.cpp - libFuzzer target for safetensors -----===//
//
// Feeds arbitrary bytes, as a file, to the safetensors reader of qopt-step
// (tools/safetensors). The bytes live in a memfd, a regular file in memory,
// opened by its /proc/self/fd path. Aborts when the reader breaks a promise:
// every failure is a qopt::st::Error with a message (no other exception, no
// allocation beyond the file's size: libFuzzer's -rss_limit_mb and
// -malloc_limit_mb catch that), and a file that loads is written back and
// reads again as the same tensors and metadata.
//
//===----------------------------------------------------------------------===//

#include "qopt/safetensors/SafeTensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace st = qopt::st;

namespace {

/// A memfd holding `size` bytes of `data`; its path for File::load.
struct MemFile {
  int fd = -1;
  std::string path;
  MemFile(const uint8_t *data, size_t size) {
    fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
    if (fd < 0)
      std::abort();
    for (size_t done = 0; done < size;) {
      ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0)
        std::abort();
      done += size_t(n);
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  ~MemFile() { ::close(fd); }
};

bool sameFiles(const st::File &a, const st::File &b) {
  if (a.names() != b.names() || a.metadata() != b.metadata())
    return false;
  for (const std::string &n : a.names()) {
    const st::Tensor &x = a.get(n), &y = b.get(n);
    if (x.dtype != y.dtype || x.shape != y.shape || x.data != y.data)
      return false;
  }
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MemFile in(data, size);
  st::File f;
  try {
    f = st::File::load(in.path);
  } catch (const st::Error &e) {
    if (!*e.what())
      std::abort();
    return 0;
  }
  MemFile out(nullptr, 0);
  try {
    f.save(out.path);
    if (!sameFiles(f, st::File::load(out.path)))
      std::abort();
  } catch (const st::Error &) {
    std::abort(); // What was read must write and read back.
  }
  return 0;
}

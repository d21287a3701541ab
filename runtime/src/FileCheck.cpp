//===- FileCheck.cpp - Files checked before they are read or loaded -------===//
#include "FileCheck.h"

#include "Error.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace qopt::rt {

namespace {

/// An open file descriptor, closed at the end of its scope.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }

private:
  int fd_;
};

/// What a file that is not a regular file is, for messages.
const char *describeType(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

/// Opens `path` without blocking (a FIFO with no writer would block open)
/// and checks that it is a regular file; returns the descriptor and size.
int openRegular(const std::string &path, uint64_t &size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    fail(QOPT_ERROR_IO, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(QOPT_ERROR_IO, "cannot read ", path, ": ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(QOPT_ERROR_IO, "cannot read ", path, ": it is ",
         describeType(st.st_mode), ", not a regular file");
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

/// Reads exactly `n` bytes at `offset`; false at an early end of file.
bool readAt(int fd, void *out, size_t n, uint64_t offset,
            const std::string &path) {
  auto *p = static_cast<char *>(out);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      fail(QOPT_ERROR_IO, "cannot read ", path, ": ", std::strerror(errno));
    }
    if (got == 0)
      return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

/// The ELF fields the check needs, from either class.
struct ElfLayout {
  uint64_t phoff = 0, shoff = 0;
  uint64_t phentsize = 0, shentsize = 0, phnum = 0, shnum = 0;
};

/// Fails unless [offset, offset + bytes) lies within `size`.
void requireWithin(const std::string &path, uint64_t size, uint64_t offset,
                   uint64_t bytes, const char *what, uint64_t index) {
  if (offset > size || bytes > size - offset)
    fail(QOPT_ERROR_IO, "cannot load ", path, ": the file is truncated or ",
         "corrupt: its ELF ", what, index == UINT64_MAX ? "" : " ",
         index == UINT64_MAX ? std::string() : std::to_string(index),
         what[std::strlen(what) - 1] == 's' ? " end" : " ends", " at byte ",
         offset > UINT64_MAX - bytes ? std::string("beyond 2^64")
                                     : std::to_string(offset + bytes),
         " but the file has ", size, " bytes");
}

template <typename Ehdr, typename Phdr, typename Shdr>
void checkElf(int fd, const std::string &path, uint64_t size) {
  Ehdr eh;
  requireWithin(path, size, 0, sizeof eh, "header", UINT64_MAX);
  if (!readAt(fd, &eh, sizeof eh, 0, path))
    fail(QOPT_ERROR_IO, "cannot read ", path, ": the file shrank while it was read");
  ElfLayout l{eh.e_phoff, eh.e_shoff, eh.e_phentsize,
              eh.e_shentsize, eh.e_phnum, eh.e_shnum};
  if (l.phnum > 0) {
    if (l.phentsize < sizeof(Phdr))
      fail(QOPT_ERROR_IO, "cannot load ", path,
           ": corrupt ELF header (program header entries of ", l.phentsize,
           " bytes)");
    requireWithin(path, size, l.phoff, l.phnum * l.phentsize,
                  "program headers", UINT64_MAX);
    for (uint64_t i = 0; i < l.phnum; ++i) {
      Phdr ph;
      if (!readAt(fd, &ph, sizeof ph, l.phoff + i * l.phentsize, path))
        fail(QOPT_ERROR_IO, "cannot read ", path,
             ": the file shrank while it was read");
      if (ph.p_type == PT_NULL)
        continue;
      requireWithin(path, size, ph.p_offset, ph.p_filesz, "segment", i);
    }
  }
  if (l.shoff != 0 && l.shnum > 0) {
    if (l.shentsize < sizeof(Shdr))
      fail(QOPT_ERROR_IO, "cannot load ", path,
           ": corrupt ELF header (section header entries of ", l.shentsize,
           " bytes)");
    requireWithin(path, size, l.shoff, l.shnum * l.shentsize,
                  "section headers", UINT64_MAX);
    for (uint64_t i = 0; i < l.shnum; ++i) {
      Shdr sh;
      if (!readAt(fd, &sh, sizeof sh, l.shoff + i * l.shentsize, path))
        fail(QOPT_ERROR_IO, "cannot read ", path,
             ": the file shrank while it was read");
      if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
        continue;
      requireWithin(path, size, sh.sh_offset, sh.sh_size, "section", i);
    }
  }
}

} // namespace

std::string readOpenFile(int fd, uint64_t size, const std::string &path) {
  if (size > SIZE_MAX / 2)
    fail(QOPT_ERROR_IO, "cannot read ", path, ": ", size, " bytes is too large");
  std::string data(static_cast<size_t>(size), '\0');
  if (!readAt(fd, data.data(), data.size(), 0, path))
    fail(QOPT_ERROR_IO, "cannot read ", path, ": the file shrank while it "
         "was read (it had ", size, " bytes when opened)");
  char extra;
  if (readAt(fd, &extra, 1, size, path))
    fail(QOPT_ERROR_IO, "cannot read ", path, ": the file grew while it was "
         "read (it had ", size, " bytes when opened)");
  return data;
}

std::string readRegularFile(const std::string &path) {
  uint64_t size = 0;
  Fd fd(openRegular(path, size));
  return readOpenFile(fd.get(), size, path);
}

void checkLoadableFile(const std::string &path) {
  if (path.find('/') == std::string::npos)
    return;
  uint64_t size = 0;
  Fd fd(openRegular(path, size));
  unsigned char ident[EI_NIDENT];
  if (size < EI_NIDENT || !readAt(fd.get(), ident, EI_NIDENT, 0, path) ||
      std::memcmp(ident, ELFMAG, SELFMAG) != 0)
    return; // Not ELF: dlopen says so.
  // Only this process's byte order: another one cannot be loaded anyway.
  const bool little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  if (ident[EI_DATA] != (little ? ELFDATA2LSB : ELFDATA2MSB))
    return;
  if (ident[EI_CLASS] == ELFCLASS64)
    checkElf<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr>(fd.get(), path, size);
  else if (ident[EI_CLASS] == ELFCLASS32)
    checkElf<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr>(fd.get(), path, size);
}

} // namespace qopt::rt

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

/// Checks an ELF header table (program or section headers, `table`): its
/// `num` entries of `entsize` bytes at `offset` lie in the file, and so do the
/// bytes each entry describes (`extent(entry, offset, bytes)` gives them, or
/// returns false for an entry that takes none, named `entry` with its index).
template <typename Entry, typename Extent>
void checkHeaderTable(int fd, const std::string &path, uint64_t size,
                      uint64_t offset, uint64_t num, uint64_t entsize,
                      const char *table, const char *entry, Extent extent) {
  if (entsize < sizeof(Entry))
    fail(QOPT_ERROR_IO, "cannot load ", path, ": corrupt ELF header (", table,
         " entries of ", entsize, " bytes)");
  std::string headers = std::string(table) + "s";
  requireWithin(path, size, offset, num * entsize, headers.c_str(), UINT64_MAX);
  for (uint64_t i = 0; i < num; ++i) {
    Entry e;
    if (!readAt(fd, &e, sizeof e, offset + i * entsize, path))
      fail(QOPT_ERROR_IO, "cannot read ", path,
           ": the file shrank while it was read");
    uint64_t at = 0, bytes = 0;
    if (extent(e, at, bytes))
      requireWithin(path, size, at, bytes, entry, i);
  }
}

template <typename Ehdr, typename Phdr, typename Shdr>
void checkElf(int fd, const std::string &path, uint64_t size) {
  Ehdr eh;
  requireWithin(path, size, 0, sizeof eh, "header", UINT64_MAX);
  if (!readAt(fd, &eh, sizeof eh, 0, path))
    fail(QOPT_ERROR_IO, "cannot read ", path, ": the file shrank while it was read");
  if (eh.e_phnum > 0)
    checkHeaderTable<Phdr>(fd, path, size, eh.e_phoff, eh.e_phnum,
                           eh.e_phentsize, "program header", "segment",
                           [](const Phdr &ph, uint64_t &at, uint64_t &bytes) {
                             at = ph.p_offset;
                             bytes = ph.p_filesz;
                             return ph.p_type != PT_NULL;
                           });
  if (eh.e_shoff != 0 && eh.e_shnum > 0)
    checkHeaderTable<Shdr>(fd, path, size, eh.e_shoff, eh.e_shnum,
                           eh.e_shentsize, "section header", "section",
                           [](const Shdr &sh, uint64_t &at, uint64_t &bytes) {
                             at = sh.sh_offset;
                             bytes = sh.sh_size;
                             return sh.sh_type != SHT_NOBITS &&
                                    sh.sh_type != SHT_NULL;
                           });
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

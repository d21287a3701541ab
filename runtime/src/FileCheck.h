//===- FileCheck.h - Files checked before they are read or loaded -*- C++ -*-===//
//
// Every file the runtime opens is checked before it is read or mapped: it must
// be a regular file (a FIFO, /dev/zero or a directory would block, read
// without bound or fail obscurely), a read stops at the size fstat gave and
// reports a file that shrank meanwhile, and a shared object must hold every
// byte its ELF headers say it has, because dlopen maps the segments and a
// truncated file kills the process with SIGBUS at the first touch past its end.
// Every failure throws Error(QOPT_ERROR_IO) naming the file.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_FILECHECK_H
#define QOPT_RUNTIME_SRC_FILECHECK_H

#include <cstdint>
#include <string>

namespace qopt::rt {

/// The whole of the regular file `path`, read up to the size it had when
/// opened. Throws Error(QOPT_ERROR_IO) when it cannot be opened, is not a
/// regular file, or shrank or grew while it was read.
std::string readRegularFile(const std::string &path);

/// The `size` bytes of the open regular file `fd` (named `path` in messages),
/// as readRegularFile reads them once it has checked the file; fails when the
/// file has fewer bytes now or more. (Tests shrink a file between the two.)
std::string readOpenFile(int fd, uint64_t size, const std::string &path);

/// Checks that `path`, about to be given to dlopen, is a regular file that
/// holds its ELF header, program headers, section headers and the bytes of
/// every segment and section they describe. A file that is not ELF at all is
/// left to dlopen, which refuses it cleanly. A name without '/' is searched
/// by dlopen (LD_LIBRARY_PATH, the cache) and is not checked here.
void checkLoadableFile(const std::string &path);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_FILECHECK_H

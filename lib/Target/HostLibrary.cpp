//===- HostLibrary.cpp - Host objects to shared libraries and manifests ---===//
//
// The runtime's host backend dlopens a shared object named by the manifest's
// "host" field. qopt-opt links its object with the system's C++ driver, which
// knows the platform's shared-library conventions. The code calls no library
// routine today; -lm keeps any math call LLVM might emit resolvable.
//
//===----------------------------------------------------------------------===//

#include "qopt/Target/Host.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::qopt;

namespace {
/// A temporary file removed when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  explicit TempFile(llvm::StringRef suffix) {
    int fd;
    if (!llvm::sys::fs::createTemporaryFile("qopt-host", suffix, fd, path))
      llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  }
  ~TempFile() { llvm::sys::fs::remove(path); }
};
} // namespace

FailureOr<std::string> mlir::qopt::linkHostLibrary(llvm::StringRef object,
                                                   std::string &error) {
  llvm::ErrorOr<std::string> driver = llvm::sys::findProgramByName("c++");
  if (!driver) {
    error = "no C++ compiler driver 'c++' on PATH to link the host library "
            "with (install g++ or clang++), or emit --emit=host-object and "
            "link it with your own toolchain";
    return failure();
  }
  TempFile in(".o"), out(".so"), log(".log");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in.path, ec);
    if (ec) {
      error = "cannot write a temporary object file: " + ec.message();
      return failure();
    }
    os << object;
  }
  llvm::SmallVector<llvm::StringRef> argv = {
      *driver, "-shared", "-o", out.path, in.path, "-lm"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(),
                                                log.path.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*driver, argv, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &execError);
  if (rc != 0) {
    error = *driver + " -shared failed";
    if (!execError.empty())
      error += ": " + execError;
    if (auto text = llvm::MemoryBuffer::getFile(log.path))
      if (!(*text)->getBuffer().empty())
        error += ":\n" + (*text)->getBuffer().str();
    return failure();
  }
  auto library = llvm::MemoryBuffer::getFile(out.path, /*IsText=*/false);
  if (!library) {
    error = "cannot read the linked library: " + library.getError().message();
    return failure();
  }
  return (*library)->getBuffer().str();
}

void mlir::qopt::makeHostManifest(llvm::json::Value &manifest,
                                  llvm::StringRef library) {
  llvm::json::Object &object = *manifest.getAsObject();
  // A host library runs on no GPU architecture.
  object.erase("arch");
  object["binary_format"] = "host";
  std::string kernel = object.getString("kernel").value_or("").str();
  object["host"] = llvm::json::Object{{"library", library.str()},
                                      {"symbol", kernel + "_host"}};
}

std::string mlir::qopt::getHostManifestSymbol(llvm::StringRef entry) {
  return (entry + "_manifest").str();
}

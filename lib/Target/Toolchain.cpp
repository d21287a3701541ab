//===- Toolchain.cpp - ptxas and fatbinary --------------------------------===//
//
// The CUDA toolkit's assembler and packager, run as programs. qopt-opt needs
// no toolkit for PTX; for cubin and fatbin it says plainly when one is missing.
//
//===----------------------------------------------------------------------===//

#include "qopt/Target/Target.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::qopt;

std::string mlir::qopt::findCudaProgram(llvm::StringRef name) {
  // QOPT_CUDA_PATH, when set, is the only place looked in.
  if (const char *root = std::getenv("QOPT_CUDA_PATH")) {
    llvm::SmallString<256> path(root);
    llvm::sys::path::append(path, "bin", name);
    return llvm::sys::fs::can_execute(path) ? std::string(path) : "";
  }
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char *root = std::getenv(var)) {
      llvm::SmallString<256> path(root);
      llvm::sys::path::append(path, "bin", name);
      if (llvm::sys::fs::can_execute(path))
        return std::string(path);
    }
  }
  if (auto found = llvm::sys::findProgramByName(name))
    return *found;
  if (auto found = llvm::sys::findProgramByName(name, {"/usr/local/cuda/bin"}))
    return *found;
  return "";
}

namespace {
/// A temporary file removed when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  explicit TempFile(llvm::StringRef suffix) {
    int fd;
    if (!llvm::sys::fs::createTemporaryFile("qopt", suffix, fd, path))
      llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  }
  ~TempFile() { llvm::sys::fs::remove(path); }
};
} // namespace

static bool writeFile(llvm::StringRef path, llvm::StringRef data) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return false;
  os << data;
  return true;
}

static std::string readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// Runs `program` with `args`; on failure `error` holds its stderr.
static bool runTool(const std::string &program,
                    llvm::ArrayRef<std::string> args, std::string &error) {
  TempFile log(".log");
  SmallVector<llvm::StringRef> argv = {program};
  for (const std::string &a : args)
    argv.push_back(a);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(),
                                                log.path.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(program, argv, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &execError);
  if (rc == 0)
    return true;
  error = llvm::sys::path::filename(program).str() + " failed";
  if (!execError.empty())
    error += ": " + execError;
  std::string out = readFile(log.path);
  if (!out.empty())
    error += ":\n" + out;
  return false;
}

FailureOr<std::string> mlir::qopt::assemblePTX(llvm::StringRef ptx,
                                               llvm::StringRef chip,
                                               std::string &error) {
  std::string ptxas = findCudaProgram("ptxas");
  if (ptxas.empty()) {
    error = "ptxas was not found (looked in $QOPT_CUDA_PATH/bin if set, else "
            "$CUDA_HOME/bin, $CUDA_PATH/bin, PATH and /usr/local/cuda/bin); "
            "install the CUDA toolkit or emit PTX, which the driver compiles "
            "at load time";
    return failure();
  }
  TempFile in(".ptx"), out(".cubin");
  if (!writeFile(in.path, ptx)) {
    error = "cannot write a temporary PTX file";
    return failure();
  }
  if (!runTool(ptxas, {"-arch=" + chip.str(), "-O3", in.path.str().str(), "-o",
                       out.path.str().str()},
               error))
    return failure();
  return readFile(out.path);
}

FailureOr<std::string> mlir::qopt::createFatbin(
    llvm::StringRef ptx, llvm::StringRef ptxChip,
    llvm::ArrayRef<std::pair<std::string, std::string>> cubins,
    std::string &error) {
  std::string fatbinary = findCudaProgram("fatbinary");
  if (fatbinary.empty()) {
    error = "fatbinary was not found (looked where ptxas is looked for); "
            "install the CUDA toolkit or emit PTX or cubin";
    return failure();
  }
  std::vector<std::unique_ptr<TempFile>> files;
  TempFile out(".fatbin");
  std::vector<std::string> args = {"--64", "--create=" + out.path.str().str()};
  auto smNumber = [](llvm::StringRef chip) {
    return chip.starts_with("sm_") ? chip.drop_front(3).str() : chip.str();
  };
  for (auto &[chip, cubin] : cubins) {
    files.push_back(std::make_unique<TempFile>(".cubin"));
    writeFile(files.back()->path, cubin);
    args.push_back("--image3=kind=elf,sm=" + smNumber(chip) +
                   ",file=" + files.back()->path.str().str());
  }
  files.push_back(std::make_unique<TempFile>(".ptx"));
  writeFile(files.back()->path, ptx);
  args.push_back("--image3=kind=ptx,sm=" + smNumber(ptxChip) +
                 ",file=" + files.back()->path.str().str());
  if (!runTool(fatbinary, args, error))
    return failure();
  return readFile(out.path);
}

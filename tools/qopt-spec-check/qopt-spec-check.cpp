//===- qopt-spec-check.cpp - Parse and check a qopt spec ------------------===//
//
// Runs the DSL frontend (lexer, parser, Sema) on one .qopt file and prints
// `ok`, or the diagnostics and exits with 1. With --dump it prints the
// checked syntax tree instead of `ok`. A test tool: qopt-opt is the driver.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Frontend.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

static llvm::cl::opt<std::string>
    inputFilename(llvm::cl::Positional, llvm::cl::desc("<spec.qopt>"),
                  llvm::cl::init("-"));

static llvm::cl::opt<bool>
    dumpAST("dump", llvm::cl::desc("Print the checked syntax tree"),
            llvm::cl::init(false));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "qopt spec checker: parses and checks a "
                                    ".qopt file\n");
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<mlir::qopt::frontend::Spec> spec =
      mlir::qopt::frontend::parseSpecFile(sourceMgr, inputFilename,
                                          llvm::errs());
  if (!spec)
    return 1;
  if (dumpAST)
    mlir::qopt::frontend::printSpec(*spec, llvm::outs());
  else
    llvm::outs() << "ok\n";
  return 0;
}

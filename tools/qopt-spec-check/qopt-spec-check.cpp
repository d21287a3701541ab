//===- qopt-spec-check.cpp - Parse and check a qopt spec ------------------===//
//
// Runs the DSL frontend (lexer, parser, Sema) on one .qopt file and prints
// `ok`, or the diagnostics and exits with 1. With --dump it prints the
// checked syntax tree instead, and with --mlir the qopt IR that MLIRGen emits
// (before any pass; --mlir-print-debuginfo adds the locations). A test tool:
// qopt-opt is the driver.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Frontend.h"
#include "qopt/Frontend/MLIRGen.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

static llvm::cl::opt<std::string> inputFilename(llvm::cl::Positional,
                                                llvm::cl::desc("<spec.qopt>"),
                                                llvm::cl::init("-"));

static llvm::cl::opt<bool>
    dumpAST("dump", llvm::cl::desc("Print the checked syntax tree"),
            llvm::cl::init(false));

static llvm::cl::opt<bool>
    emitMLIR("mlir", llvm::cl::desc("Print the qopt IR that MLIRGen emits"),
             llvm::cl::init(false));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
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
  if (emitMLIR) {
    mlir::MLIRContext context;
    mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::qopt::frontend::mlirGen(context, *spec);
    if (!module)
      return 1;
    module->print(llvm::outs());
  }
  if (!dumpAST && !emitMLIR)
    llvm::outs() << "ok\n";
  return 0;
}

//===- qopt-opt.cpp - The qopt compiler driver ----------------------------===//
//
// Two faces: with a .qopt spec or --emit, it compiles one optimizer to qopt
// IR, gpu IR, LLVM IR, PTX, cubin or fatbin (plus the kernel's manifest);
// otherwise it is an MlirOptMain driver with every qopt and upstream pass.
//
//===----------------------------------------------------------------------===//

#include "CompileOptions.h"

#include "qopt/Conversion/Passes.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"
#include "qopt/Schedule/Passes.h"
#include "qopt/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringRef.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::qopt::registerQoptTransformsPasses();
  mlir::qopt::registerQoptConversionPasses();
  mlir::qopt::registerQoptSchedulePasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::qopt::QoptDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);

  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg.ends_with(".qopt") || arg.starts_with("--emit") ||
        arg.starts_with("-emit"))
      return mlir::qopt::compileMain(argc, argv, registry);
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(
          argc, argv,
          "qopt optimizer compiler\n\n"
          "Compile a spec: qopt-opt spec.qopt --emit=qopt|gpu|llvm|ptx|cubin|"
          "fatbin|host-llvm|host-object|host-library [-o FILE] [--arch=sm_90] "
          "[--mode=strict|fast]\n"
          "(`qopt-opt spec.qopt --help` lists the compile options; the "
          "options below are those of the MLIR pass driver)\n",
          registry));
}

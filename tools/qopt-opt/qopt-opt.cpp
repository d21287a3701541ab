//===- qopt-opt.cpp - The qopt compiler driver ----------------------------===//
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"
#include "qopt/Transforms/Passes.h"
#include "qopt/Conversion/Passes.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::qopt::registerQoptTransformsPasses();
  mlir::qopt::registerQoptConversionPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::qopt::QoptDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "qopt optimizer compiler\n", registry));
}

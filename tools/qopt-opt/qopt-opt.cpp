//===- qopt-opt.cpp - The qopt compiler driver ----------------------------===//
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"
#include "qopt/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::qopt::registerQoptTransformsPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::qopt::QoptDialect>();
  mlir::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "qopt optimizer compiler\n", registry));
}

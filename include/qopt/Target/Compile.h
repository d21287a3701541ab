//===- Compile.h - qopt-opt's compile mode ----------------------*- C++ -*-===//
//
// Reads a .qopt spec (or qopt IR) and emits --emit=qopt|gpu|llvm|ptx|cubin|
// fatbin with -o, --arch and --mode, writing the manifest next to a binary.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TARGET_COMPILE_H
#define QOPT_TARGET_COMPILE_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::qopt {

/// Runs qopt-opt's compile mode; returns the process exit code.
int compileMain(int argc, char **argv, DialectRegistry &registry);

} // namespace mlir::qopt

#endif // QOPT_TARGET_COMPILE_H

//===- CompileOptions.h - qopt-opt's compile mode ---------------*- C++ -*-===//
//
// `qopt-opt spec.qopt --emit=qopt|gpu|llvm|ptx|cubin|fatbin|host-...`: the
// command line of the compile mode, which owns its flags.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TOOLS_QOPT_OPT_COMPILEOPTIONS_H
#define QOPT_TOOLS_QOPT_OPT_COMPILEOPTIONS_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::qopt {

/// Parses the compile mode's flags (the process's whole command line), checks
/// them and runs the compile; returns the process exit code.
int compileMain(int argc, char **argv, DialectRegistry &registry);

} // namespace mlir::qopt

#endif // QOPT_TOOLS_QOPT_OPT_COMPILEOPTIONS_H

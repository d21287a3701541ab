//===- Compile.h - From a spec to a binary and its manifest -----*- C++ -*-===//
//
// Reads a .qopt spec (or qopt IR) and emits qopt IR, gpu IR, LLVM IR, PTX,
// cubin, fatbin or host code, writing the manifest next to a binary. The
// command line that fills the request lives in tools/qopt-opt.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TARGET_COMPILE_H
#define QOPT_TARGET_COMPILE_H

#include "qopt/Target/Host.h"
#include "qopt/Target/Target.h"

#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace mlir::qopt {

/// What a compile emits.
enum class EmitKind {
  Qopt,        ///< qopt IR, uniforms outlined
  GPU,         ///< gpu dialect kernels
  LLVM,        ///< LLVM IR for NVPTX
  PTX,         ///< PTX assembly and its manifest
  Cubin,       ///< a cubin (ptxas) and its manifest
  Fatbin,      ///< sm_80 and sm_90 cubins and PTX (fatbinary), its manifest
  HostLLVM,    ///< optimized LLVM IR of the host function
  HostObject,  ///< a host object file (ELF, PIC)
  HostLibrary, ///< a host shared library (c++) and its manifest
};

/// One compile: the input, what to emit and where, the spec's variant and
/// how kernels and host code are generated. The flags were checked by the
/// driver (each field holds an accepted value).
struct CompileRequest {
  std::string inputFilename = "-";
  std::string outputFilename = "-";
  /// Where the manifest goes; empty: next to -o (<stem>.manifest.json).
  std::string manifestFilename;
  EmitKind emit = EmitKind::Qopt;
  /// qopt-retype-param's type (bf16, f16 or f32), empty for the spec's.
  std::string paramType;
  /// qopt-fuse-grad-scaling, and the kernel renamed <name>_scaled.
  bool gradScaling = false;
  /// qopt-set-overflow's policy (saturate or ieee), empty for the spec's.
  std::string overflow;
  KernelOptions kernel;
  HostOptions host;
};

/// Whether LLVM's NVPTX backend knows `chip`, sm_80 or newer (an optional
/// architecture-specific suffix, sm_90a, allowed).
bool isSupportedChip(llvm::StringRef chip);

/// The manifest's path for `request`: --manifest, or next to -o; empty when
/// the output is stdout.
std::string getManifestPath(const CompileRequest &request);

/// Runs `request`; reports every failure with its location and returns the
/// process exit code.
int compileSpec(const CompileRequest &request, DialectRegistry &registry);

} // namespace mlir::qopt

#endif // QOPT_TARGET_COMPILE_H

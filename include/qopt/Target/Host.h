//===- Host.h - From qopt IR to host objects and shared libraries -*- C++ -*-===//
//
// The host half of qopt-opt's back end: convert-qopt-to-host and the upstream
// passes down to the LLVM dialect, LLVM's optimizer and TargetMachine for the
// host triple (an ELF object), the system `c++ -shared` for the library the
// runtime dlopens, and the manifest's "host" field (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TARGET_HOST_H
#define QOPT_TARGET_HOST_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "qopt/Conversion/Passes.h"
#include "llvm/Support/JSON.h"
#include <string>

namespace mlir::qopt {

/// How host code is generated.
struct HostOptions {
  /// convert-qopt-to-host's options (the arithmetic mode).
  ConvertQoptToHostOptions lowering;
  unsigned optLevel = 2; ///< LLVM optimization level, 0 to 3.
  /// The CPU to generate code for: empty for the triple's baseline (portable
  /// objects; x86-64 is SSE2), "native" for this machine, or an LLVM CPU name.
  std::string cpu;
  /// The library's own ABI description (docs/abi.md, "The host library's
  /// manifest"): when `manifestSymbol` is set, the module gets an exported
  /// constant of that name holding `manifestJson` and a terminating NUL,
  /// which the runtime compares with the manifest it is given.
  std::string manifestSymbol;
  std::string manifestJson;
};

/// Adds convert-qopt-to-host and the upstream conversions to the LLVM dialect
/// (scf to cf, vector, arith and cf to LLVM, cast reconciliation).
void buildQoptToHostPipeline(OpPassManager &pm, const HostOptions &options);

/// Lowers `module` (qopt dialect, uniforms outlined, host plans attached:
/// the GPU kernel's tiles) to optimized LLVM IR for the host triple, as text.
/// The module is consumed.
FailureOr<std::string> translateToHostLLVMIR(ModuleOp module,
                                             const HostOptions &options);

/// Lowers `module` to a relocatable (PIC) object file for the host triple.
FailureOr<std::string> translateToHostObject(ModuleOp module,
                                             const HostOptions &options);

/// Links an object into a shared library with the system's `c++ -shared`
/// (found on PATH). On failure, `error` says what is missing or holds the
/// linker's message.
FailureOr<std::string> linkHostLibrary(llvm::StringRef object,
                                       std::string &error);

/// Turns a kernel manifest (buildManifest) into the host backend's: a "host"
/// field naming `library` (relative to the manifest) and `<kernel>_host`, and
/// no GPU architecture.
void makeHostManifest(llvm::json::Value &manifest, llvm::StringRef library);
/// The name of the constant that holds a host library's manifest: its entry
/// symbol (`<kernel>_host`) followed by `_manifest`.
std::string getHostManifestSymbol(llvm::StringRef entry);

} // namespace mlir::qopt

#endif // QOPT_TARGET_HOST_H

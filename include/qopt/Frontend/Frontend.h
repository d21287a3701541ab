//===- Frontend.h - Entry points of the qopt DSL frontend -------*- C++ -*-===//
//
// Lex, parse and check a .qopt spec in one call, either from a buffer of a
// caller's llvm::SourceMgr (so qopt-opt can report MLIR diagnostics through
// the same one) or from a string with the diagnostics collected (for tests
// and the fuzzer).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_FRONTEND_H
#define QOPT_FRONTEND_FRONTEND_H

#include "qopt/Frontend/AST.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir::qopt::frontend {

/// Parses and checks buffer `bufferId` of `sourceMgr`. Diagnostics are
/// printed with SourceMgr::PrintMessage: to llvm::errs(), or to the handler
/// installed with SourceMgr::setDiagHandler. Returns null when there was an
/// error. The spec's Loc::ptr values point into the buffer, so the caller
/// keeps `sourceMgr` alive while it uses them.
std::unique_ptr<Spec> parseSpec(llvm::SourceMgr &sourceMgr, unsigned bufferId);

/// The most bytes readInputFile reads: far above any spec or its MLIR, far
/// below what would exhaust memory (`/dev/zero` as input).
inline constexpr size_t kMaxInputFileBytes = size_t(64) << 20;

/// The contents of `path` ("-": stdin), read up to kMaxInputFileBytes from
/// any kind of file (a regular file, a pipe, a device), named `path`; null
/// with `error` set where it cannot be opened or read, or is larger.
std::unique_ptr<llvm::MemoryBuffer> readInputFile(llvm::StringRef path,
                                                  std::string &error);

/// Reads the file at `path` into `sourceMgr` (readInputFile) and parses and
/// checks it as parseSpec does; a file that cannot be read is reported to
/// `errs`.
std::unique_ptr<Spec> parseSpecFile(llvm::SourceMgr &sourceMgr,
                                    llvm::StringRef path,
                                    llvm::raw_ostream &errs);

/// One diagnostic, collected instead of printed.
struct SpecDiagnostic {
  enum class Kind { Error, Note };
  Kind kind = Kind::Error;
  unsigned line = 0;
  unsigned col = 0;
  std::string message;
  /// The whole text as parseSpec would print it: `file:line:col: error:
  /// message`, the source line and the caret line.
  std::string rendered;
};

/// The result of parseSpecString: the spec (null on error), the diagnostics
/// in the order they were reported, and the SourceMgr that owns the text the
/// spec's locations point into.
struct ParsedSpec {
  std::unique_ptr<llvm::SourceMgr> sourceMgr;
  std::unique_ptr<Spec> spec;
  std::vector<SpecDiagnostic> diagnostics;
};

/// Parses and checks `source` as a file named `filename`, printing nothing.
ParsedSpec parseSpecString(llvm::StringRef source,
                           llvm::StringRef filename = "<string>");

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_FRONTEND_H

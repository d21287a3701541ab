//===- Diagnostics.h - Locations and diagnostics of the DSL ----*- C++ -*-===//
//
// A location in a .qopt file and the small emitter that the lexer, the parser
// and Sema report through. Diagnostics go through llvm::SourceMgr, so they read
// `file:line:col: error: message`, then the source line and a caret.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_DIAGNOSTICS_H
#define QOPT_FRONTEND_DIAGNOSTICS_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

namespace mlir::qopt::frontend {

/// A position in a spec: the pointer into the SourceMgr buffer (for printing
/// diagnostics with the source line) and the 1-based line and column (for
/// FileLineColLoc, which must not need the SourceMgr). Columns count bytes,
/// as llvm::SourceMgr does.
struct Loc {
  llvm::SMLoc ptr;
  unsigned line = 0;
  unsigned col = 0;

  bool isValid() const { return ptr.isValid(); }
};

/// Reports errors and notes through a SourceMgr and counts the errors.
class DiagnosticEmitter {
public:
  explicit DiagnosticEmitter(llvm::SourceMgr &sourceMgr)
      : sourceMgr(sourceMgr) {}

  /// Prints `file:line:col: error: msg`, the source line and a caret.
  void error(Loc loc, const llvm::Twine &msg);
  /// Prints `file:line:col: note: msg`, the source line and a caret; notes
  /// follow the error they explain.
  void note(Loc loc, const llvm::Twine &msg);

  unsigned getNumErrors() const { return numErrors; }
  llvm::SourceMgr &getSourceMgr() { return sourceMgr; }

private:
  llvm::SourceMgr &sourceMgr;
  unsigned numErrors = 0;
};

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_DIAGNOSTICS_H

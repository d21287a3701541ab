//===- qopt-spec-fuzzer.cpp - libFuzzer target for the DSL frontend -------===//
//
// Feeds arbitrary bytes to the lexer, the parser and Sema, prints any spec
// that checks, and aborts when the frontend breaks one of its promises:
// a spec comes back exactly when no error was reported, and every diagnostic
// has a location. Built with QOPT_FUZZ_MLIRGEN, it also emits every spec that
// checks as qopt IR and aborts unless that IR verifies.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Frontend.h"

#ifdef QOPT_FUZZ_MLIRGEN
#include "qopt/Frontend/MLIRGen.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#endif

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir::qopt::frontend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef source(reinterpret_cast<const char *>(data), size);
  ParsedSpec parsed = parseSpecString(source, "fuzz.qopt");

  bool sawError = false;
  for (const SpecDiagnostic &diag : parsed.diagnostics) {
    if (diag.kind == SpecDiagnostic::Kind::Error)
      sawError = true;
    if (diag.line == 0 || diag.col == 0 || diag.message.empty() ||
        diag.rendered.empty())
      std::abort();
  }
  if (sawError == (parsed.spec != nullptr))
    std::abort();
  if (!parsed.spec)
    return 0;

  std::string text;
  llvm::raw_string_ostream os(text);
  printSpec(*parsed.spec, os);
  if (text.empty())
    std::abort();

#ifdef QOPT_FUZZ_MLIRGEN
  // A fresh context per input, so that the names of many inputs do not
  // accumulate in one.
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    llvm::errs() << diag << "\n";
    return mlir::success();
  });
  if (!mlirGen(context, *parsed.spec))
    std::abort(); // Sema accepted a spec whose IR does not verify.
#endif
  return 0;
}

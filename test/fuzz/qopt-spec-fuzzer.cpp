//===- qopt-spec-fuzzer.cpp - libFuzzer target for the DSL frontend -------===//
//
// Feeds arbitrary bytes to the lexer, the parser and Sema, prints any spec
// that checks, and aborts when the frontend breaks one of its promises:
// a spec comes back exactly when no error was reported, and every diagnostic
// has a location.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Frontend.h"

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

  if (parsed.spec) {
    std::string text;
    llvm::raw_string_ostream os(text);
    printSpec(*parsed.spec, os);
    if (text.empty())
      std::abort();
  }
  return 0;
}

//===- Frontend.cpp - Entry points of the qopt DSL frontend ---------------===//
//
// Lexer + Parser + Sema over one SourceMgr buffer.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Frontend.h"
#include "qopt/Frontend/Lexer.h"
#include "qopt/Frontend/Parser.h"
#include "qopt/Frontend/Sema.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir::qopt::frontend;

std::unique_ptr<Spec>
mlir::qopt::frontend::parseSpec(llvm::SourceMgr &sourceMgr, unsigned bufferId) {
  DiagnosticEmitter diags(sourceMgr);
  Lexer lexer(sourceMgr, bufferId, diags);
  std::unique_ptr<Spec> spec = Parser(lexer, diags).parseSpec();
  if (!spec || !checkSpec(*spec, diags))
    return nullptr;
  return spec;
}

std::unique_ptr<llvm::MemoryBuffer>
mlir::qopt::frontend::readInputFile(llvm::StringRef path, std::string &error) {
  llvm::Expected<llvm::sys::fs::file_t> file =
      path == "-" ? llvm::sys::fs::getStdinHandle()
                  : llvm::sys::fs::openNativeFileForRead(path);
  if (!file) {
    error = "cannot read '" + path.str() +
            "': " + llvm::toString(file.takeError());
    return nullptr;
  }
  // Read in blocks to one past the limit: a stream (pipe, device) has no
  // size to ask for first.
  std::string text;
  char block[1 << 16];
  while (text.size() <= kMaxInputFileBytes) {
    llvm::Expected<size_t> got =
        llvm::sys::fs::readNativeFile(*file, llvm::MutableArrayRef(block));
    if (!got) {
      error = "cannot read '" + path.str() +
              "': " + llvm::toString(got.takeError());
      break;
    }
    if (*got == 0)
      break;
    text.append(block, *got);
  }
  if (path != "-")
    llvm::sys::fs::closeFile(*file);
  if (!error.empty())
    return nullptr;
  if (text.size() > kMaxInputFileBytes) {
    error = "'" + (path == "-" ? std::string("<stdin>") : path.str()) +
            "' is larger than " +
            std::to_string(kMaxInputFileBytes >> 20) + " MiB";
    return nullptr;
  }
  // Lone-CR line ends (old Mac files) as \n: the diagnostics' line numbers
  // count \n.
  if (text.find('\n') == std::string::npos)
    std::replace(text.begin(), text.end(), '\r', '\n');
  return llvm::MemoryBuffer::getMemBufferCopy(text,
                                              path == "-" ? "<stdin>" : path);
}

std::unique_ptr<Spec> mlir::qopt::frontend::parseSpecFile(
    llvm::SourceMgr &sourceMgr, llvm::StringRef path, llvm::raw_ostream &errs) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = readInputFile(path, error);
  if (!buffer) {
    errs << "error: " << error << "\n";
    return nullptr;
  }
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSpec(sourceMgr, bufferId);
}

ParsedSpec mlir::qopt::frontend::parseSpecString(llvm::StringRef source,
                                                 llvm::StringRef filename) {
  ParsedSpec result;
  result.sourceMgr = std::make_unique<llvm::SourceMgr>();
  unsigned bufferId = result.sourceMgr->AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, filename), llvm::SMLoc());

  struct Context {
    std::vector<SpecDiagnostic> *out;
  } context{&result.diagnostics};
  result.sourceMgr->setDiagHandler(
      [](const llvm::SMDiagnostic &d, void *ctx) {
        SpecDiagnostic diag;
        diag.kind = d.getKind() == llvm::SourceMgr::DK_Note
                        ? SpecDiagnostic::Kind::Note
                        : SpecDiagnostic::Kind::Error;
        diag.line = d.getLineNo();
        // SMDiagnostic columns are 0-based; ours, like the printed text, are
        // 1-based.
        diag.col = d.getColumnNo() + 1;
        diag.message = d.getMessage().str();
        llvm::raw_string_ostream os(diag.rendered);
        d.print(/*ProgName=*/nullptr, os, /*ShowColors=*/false);
        static_cast<Context *>(ctx)->out->push_back(std::move(diag));
      },
      &context);
  result.spec = parseSpec(*result.sourceMgr, bufferId);
  result.sourceMgr->setDiagHandler(nullptr, nullptr);
  return result;
}

//===- Lexer.h - Tokens of the qopt DSL -------------------------*- C++ -*-===//
//
// Splits a .qopt buffer into tokens, each stamped with its location. The
// lexer never reads past the end of the buffer, whatever bytes it holds.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_LEXER_H
#define QOPT_FRONTEND_LEXER_H

#include "qopt/Frontend/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

namespace mlir::qopt::frontend {

/// The kinds of token. Words such as `f32`, `group`, `ecc` or `sqrt` are
/// identifiers that the parser recognizes by spelling where the grammar
/// expects them; only the words below are reserved.
enum class TokenKind {
  // Markers.
  Eof,
  Error, ///< A malformed token; the lexer has already reported it.

  // Names and literals.
  Identifier,
  Number, ///< Decimal: DIGIT+ ('.' DIGIT+)? ([eE] [+-]? DIGIT+)?

  // Reserved words.
  KwOptimizer,
  KwHyper,
  KwParam,
  KwGrad,
  KwState,
  KwUpdate,
  KwLet,
  KwTrue,
  KwFalse,
  KwStep,

  // Punctuation and operators.
  LBrace,       ///< {
  RBrace,       ///< }
  LParen,       ///< (
  RParen,       ///< )
  Less,         ///< <
  LessEqual,    ///< <=
  Greater,      ///< >
  GreaterEqual, ///< >=
  EqualEqual,   ///< ==
  NotEqual,     ///< !=
  Equal,        ///< =
  Semicolon,    ///< ;
  Colon,        ///< :
  Comma,        ///< ,
  Plus,         ///< +
  Minus,        ///< -
  Star,         ///< *
  StarStar,     ///< **
  Slash,        ///< /
  Bang,         ///< !
  AmpAmp,       ///< &&
  PipePipe,     ///< ||
  Question,     ///< ?
};

/// How a token kind is written, for diagnostics: `'{'`, `'optimizer'`, `a
/// name`, `a number`, `end of file`.
llvm::StringRef describeTokenKind(TokenKind kind);

/// One token: its kind, its text in the buffer and where it starts.
struct Token {
  TokenKind kind = TokenKind::Eof;
  llvm::StringRef spelling;
  Loc loc;

  bool is(TokenKind k) const { return kind == k; }
  bool isNot(TokenKind k) const { return kind != k; }
  /// True for an identifier spelled `word`.
  bool isWord(llvm::StringRef word) const {
    return kind == TokenKind::Identifier && spelling == word;
  }
  /// True for the reserved words (`optimizer` ... `step`).
  bool isKeyword() const {
    return kind >= TokenKind::KwOptimizer && kind <= TokenKind::KwStep;
  }
};

/// Produces the tokens of one SourceMgr buffer, one at a time. Comments run
/// from `//` to the end of the line. A byte that starts no token is reported
/// and yields TokenKind::Error; after Eof or Error, lex() keeps returning the
/// same kind.
class Lexer {
public:
  Lexer(llvm::SourceMgr &sourceMgr, unsigned bufferId,
        DiagnosticEmitter &diags);

  /// Returns the next token.
  Token lex();

  /// The location of `ptr`, a pointer into this lexer's buffer.
  Loc getLoc(const char *ptr) const;

  /// The buffer's identifier: the path of the file it was read from.
  llvm::StringRef getBufferName() const;

  /// The location of the end of the buffer.
  Loc getEofLoc() const { return getLoc(bufferEnd); }

private:
  Token makeToken(TokenKind kind, const char *start);
  Token lexIdentifier(const char *start);
  Token lexNumber(const char *start);
  Token lexError(const char *start, const llvm::Twine &msg);
  void skipWhitespaceAndComments();

  llvm::SourceMgr &sourceMgr;
  unsigned bufferId;
  DiagnosticEmitter &diags;
  const char *bufferStart;
  const char *bufferEnd;
  const char *curPtr;
  /// Line and start of the line of curPtr, updated as newlines are passed.
  unsigned curLine = 1;
  const char *curLineStart;
  bool stopped = false;
  TokenKind stopKind = TokenKind::Eof;
};

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_LEXER_H

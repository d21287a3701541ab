//===- Lexer.cpp - Tokens of the qopt DSL ---------------------------------===//
//
// The lexer and the diagnostic emitter.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Lexer.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir::qopt::frontend;

//===----------------------------------------------------------------------===//
// DiagnosticEmitter
//===----------------------------------------------------------------------===//

void DiagnosticEmitter::error(Loc loc, const llvm::Twine &msg) {
  ++numErrors;
  sourceMgr.PrintMessage(loc.ptr, llvm::SourceMgr::DK_Error, msg);
}

void DiagnosticEmitter::note(Loc loc, const llvm::Twine &msg) {
  sourceMgr.PrintMessage(loc.ptr, llvm::SourceMgr::DK_Note, msg);
}

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

llvm::StringRef mlir::qopt::frontend::describeTokenKind(TokenKind kind) {
  switch (kind) {
  case TokenKind::Eof:
    return "end of file";
  case TokenKind::Error:
    return "an invalid token";
  case TokenKind::Identifier:
    return "a name";
  case TokenKind::Number:
    return "a number";
  case TokenKind::KwOptimizer:
    return "'optimizer'";
  case TokenKind::KwHyper:
    return "'hyper'";
  case TokenKind::KwParam:
    return "'param'";
  case TokenKind::KwGrad:
    return "'grad'";
  case TokenKind::KwState:
    return "'state'";
  case TokenKind::KwUpdate:
    return "'update'";
  case TokenKind::KwLet:
    return "'let'";
  case TokenKind::KwTrue:
    return "'true'";
  case TokenKind::KwFalse:
    return "'false'";
  case TokenKind::KwStep:
    return "'step'";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::Less:
    return "'<'";
  case TokenKind::LessEqual:
    return "'<='";
  case TokenKind::Greater:
    return "'>'";
  case TokenKind::GreaterEqual:
    return "'>='";
  case TokenKind::EqualEqual:
    return "'=='";
  case TokenKind::NotEqual:
    return "'!='";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Semicolon:
    return "';'";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::StarStar:
    return "'**'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::Bang:
    return "'!'";
  case TokenKind::AmpAmp:
    return "'&&'";
  case TokenKind::PipePipe:
    return "'||'";
  case TokenKind::Question:
    return "'?'";
  }
  return "a token";
}

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

static bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool isDigit(char c) { return c >= '0' && c <= '9'; }
static bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

Lexer::Lexer(llvm::SourceMgr &sourceMgr, unsigned bufferId,
             DiagnosticEmitter &diags)
    : sourceMgr(sourceMgr), bufferId(bufferId), diags(diags) {
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(bufferId);
  bufferStart = buffer->getBufferStart();
  bufferEnd = buffer->getBufferEnd();
  curPtr = bufferStart;
  curLineStart = bufferStart;
  // A UTF-8 byte order mark is not part of the spec. Columns still count it,
  // as SourceMgr does.
  if (llvm::StringRef(bufferStart, bufferEnd - bufferStart)
          .starts_with("\xEF\xBB\xBF"))
    curPtr += 3;
}

llvm::StringRef Lexer::getBufferName() const {
  return sourceMgr.getMemoryBuffer(bufferId)->getBufferIdentifier();
}

Loc Lexer::getLoc(const char *ptr) const {
  Loc loc;
  loc.ptr = llvm::SMLoc::getFromPointer(ptr);
  if (ptr >= curLineStart) {
    // Tokens never span a newline, so a pointer at or after the start of the
    // current line is on it.
    loc.line = curLine;
    loc.col = static_cast<unsigned>(ptr - curLineStart) + 1;
    return loc;
  }
  auto [line, col] = sourceMgr.getLineAndColumn(loc.ptr, bufferId);
  loc.line = line;
  loc.col = col;
  return loc;
}

void Lexer::skipWhitespaceAndComments() {
  while (curPtr != bufferEnd) {
    char c = *curPtr;
    if (c == '\n') {
      ++curPtr;
      ++curLine;
      curLineStart = curPtr;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++curPtr;
    } else if (c == '/' && curPtr + 1 != bufferEnd && curPtr[1] == '/') {
      // A comment ends at the line's end, written \n, \r\n or a lone \r
      // (old Mac files), so that it never takes the lines after it.
      while (curPtr != bufferEnd && *curPtr != '\n' && *curPtr != '\r')
        ++curPtr;
    } else {
      return;
    }
  }
}

Token Lexer::makeToken(TokenKind kind, const char *start) {
  Token t;
  t.kind = kind;
  t.spelling = llvm::StringRef(start, curPtr - start);
  t.loc = getLoc(start);
  return t;
}

Token Lexer::lexError(const char *start, const llvm::Twine &msg) {
  diags.error(getLoc(start), msg);
  stopped = true;
  stopKind = TokenKind::Error;
  return makeToken(TokenKind::Error, start);
}

Token Lexer::lex() {
  if (stopped) {
    Token t;
    t.kind = stopKind;
    t.loc = getLoc(curPtr);
    t.spelling = llvm::StringRef(curPtr, 0);
    return t;
  }
  skipWhitespaceAndComments();
  const char *start = curPtr;
  if (curPtr == bufferEnd) {
    stopped = true;
    stopKind = TokenKind::Eof;
    return makeToken(TokenKind::Eof, start);
  }

  char c = *curPtr++;
  auto next = [&](char expected) {
    if (curPtr != bufferEnd && *curPtr == expected) {
      ++curPtr;
      return true;
    }
    return false;
  };

  if (isIdentStart(c))
    return lexIdentifier(start);
  if (isDigit(c))
    return lexNumber(start);

  switch (c) {
  case '{':
    return makeToken(TokenKind::LBrace, start);
  case '}':
    return makeToken(TokenKind::RBrace, start);
  case '(':
    return makeToken(TokenKind::LParen, start);
  case ')':
    return makeToken(TokenKind::RParen, start);
  case ';':
    return makeToken(TokenKind::Semicolon, start);
  case ':':
    return makeToken(TokenKind::Colon, start);
  case ',':
    return makeToken(TokenKind::Comma, start);
  case '+':
    return makeToken(TokenKind::Plus, start);
  case '-':
    return makeToken(TokenKind::Minus, start);
  case '/':
    return makeToken(TokenKind::Slash, start);
  case '?':
    return makeToken(TokenKind::Question, start);
  case '*':
    return makeToken(next('*') ? TokenKind::StarStar : TokenKind::Star, start);
  case '<':
    return makeToken(next('=') ? TokenKind::LessEqual : TokenKind::Less, start);
  case '>':
    return makeToken(next('=') ? TokenKind::GreaterEqual : TokenKind::Greater,
                     start);
  case '=':
    return makeToken(next('=') ? TokenKind::EqualEqual : TokenKind::Equal,
                     start);
  case '!':
    return makeToken(next('=') ? TokenKind::NotEqual : TokenKind::Bang, start);
  case '&':
    if (next('&'))
      return makeToken(TokenKind::AmpAmp, start);
    return lexError(start, "unexpected character '&'; did you mean '&&'?");
  case '|':
    if (next('|'))
      return makeToken(TokenKind::PipePipe, start);
    return lexError(start, "unexpected character '|'; did you mean '||'?");
  case '.':
    if (curPtr != bufferEnd && isDigit(*curPtr))
      return lexError(start,
                      "a number must start with a digit; write 0 before '.'");
    break;
  default:
    break;
  }

  std::string shown;
  if (c >= 0x20 && c < 0x7f && c != '\'')
    shown = std::string("'") + c + "'";
  else
    shown = llvm::formatv("0x{0:x-2}", static_cast<unsigned char>(c)).str();
  // A non-ASCII character is named by its code point (names are ASCII
  // letters, digits and '_'); a byte that starts no UTF-8 sequence by its
  // value.
  auto *seq = reinterpret_cast<const llvm::UTF8 *>(start);
  llvm::UTF32 codePoint = 0;
  if (static_cast<unsigned char>(c) >= 0x80 &&
      llvm::convertUTF8Sequence(
          &seq, reinterpret_cast<const llvm::UTF8 *>(bufferEnd), &codePoint,
          llvm::strictConversion) == llvm::conversionOK)
    return lexError(start,
                    llvm::formatv("unexpected character U+{0:X-4} '{1}'; names "
                                  "are ASCII letters, digits and '_'",
                                  static_cast<unsigned>(codePoint),
                                  llvm::StringRef(start, seq - reinterpret_cast<
                                                      const llvm::UTF8 *>(start)))
                        .str());
  return lexError(start, "unexpected character " + shown);
}

Token Lexer::lexIdentifier(const char *start) {
  while (curPtr != bufferEnd && isIdentChar(*curPtr))
    ++curPtr;
  llvm::StringRef spelling(start, curPtr - start);
  TokenKind kind = llvm::StringSwitch<TokenKind>(spelling)
                       .Case("optimizer", TokenKind::KwOptimizer)
                       .Case("hyper", TokenKind::KwHyper)
                       .Case("param", TokenKind::KwParam)
                       .Case("grad", TokenKind::KwGrad)
                       .Case("state", TokenKind::KwState)
                       .Case("update", TokenKind::KwUpdate)
                       .Case("let", TokenKind::KwLet)
                       .Case("true", TokenKind::KwTrue)
                       .Case("false", TokenKind::KwFalse)
                       .Case("step", TokenKind::KwStep)
                       .Default(TokenKind::Identifier);
  return makeToken(kind, start);
}

/// NUMBER ::= DIGIT+ ('.' DIGIT+)? ([eE] [+-]? DIGIT+)?
Token Lexer::lexNumber(const char *start) {
  while (curPtr != bufferEnd && isDigit(*curPtr))
    ++curPtr;
  if (curPtr != bufferEnd && *curPtr == '.') {
    ++curPtr;
    if (curPtr == bufferEnd || !isDigit(*curPtr))
      return lexError(curPtr - 1, "expected a digit after '.' in a number");
    while (curPtr != bufferEnd && isDigit(*curPtr))
      ++curPtr;
  }
  if (curPtr != bufferEnd && (*curPtr == 'e' || *curPtr == 'E')) {
    const char *expStart = curPtr;
    ++curPtr;
    if (curPtr != bufferEnd && (*curPtr == '+' || *curPtr == '-'))
      ++curPtr;
    if (curPtr == bufferEnd || !isDigit(*curPtr))
      return lexError(expStart, "expected a digit in the exponent of a number");
    while (curPtr != bufferEnd && isDigit(*curPtr))
      ++curPtr;
  }
  // `1x` or `2.5e3abc` is one malformed token, not a number and a name.
  if (curPtr != bufferEnd && (isIdentChar(*curPtr) || *curPtr == '.'))
    return lexError(curPtr, "unexpected character '" + llvm::Twine(*curPtr) +
                                "' after a number");
  return makeToken(TokenKind::Number, start);
}

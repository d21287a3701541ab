//===- Parser.h - Recursive-descent parser of the qopt DSL ------*- C++ -*-===//
//
// Builds a Spec from the tokens of one buffer. The grammar is in docs/dsl.md;
// each parse function states the rule it implements. The parser stops at the
// first syntax error, which it reports with its location.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_PARSER_H
#define QOPT_FRONTEND_PARSER_H

#include "qopt/Frontend/AST.h"
#include "qopt/Frontend/Lexer.h"

#include <memory>

namespace mlir::qopt::frontend {

/// Parses one spec. Usage: `Parser(lexer, diags).parseSpec()`.
class Parser {
public:
  /// How deeply expressions may nest (parentheses, unary operators, `?:`,
  /// calls) and how tall an expression tree may grow. The bounds keep the
  /// parser's recursion, Sema's walks and the tree's destruction far from
  /// the end of the stack on any input.
  static constexpr unsigned kMaxNesting = 256;
  static constexpr unsigned kMaxDepth = 1024;

  Parser(Lexer &lexer, DiagnosticEmitter &diags);

  /// Parses the whole buffer: one spec followed by the end of the file.
  /// Returns null after reporting the first syntax error.
  std::unique_ptr<Spec> parseSpec();

private:
  // Declarations.
  bool parseHyper(Spec &spec);
  bool parseParam(Spec &spec);
  bool parseGrad(Spec &spec);
  bool parseState(Spec &spec);
  bool parseFloatType(FloatType &type, llvm::StringRef what);
  bool parseMaster(ParamDecl &param);
  bool parseScheme(StateScheme &scheme);
  bool parseGroupOption(StateScheme &scheme, unsigned &seenOptions);
  bool parseOverflowOption(StateScheme &scheme);
  bool parseSize(uint64_t &value, Loc &loc, llvm::StringRef what);
  bool parseUpdate(Spec &spec);
  bool parseStmt(Spec &spec);

  // Expressions.
  ExprPtr parseExpr();
  ExprPtr parseSelect();
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseCmp();
  ExprPtr parseSum();
  ExprPtr parseTerm();
  ExprPtr parseUnary();
  ExprPtr parsePower();
  ExprPtr parsePrimary();
  ExprPtr parseNumber();
  ExprPtr makeBinary(BinaryOp op, Loc opLoc, ExprPtr lhs, ExprPtr rhs);
  /// Checks the height of `e`'s tree against kMaxDepth; null after an error.
  ExprPtr checkDepth(ExprPtr e);

  // Tokens.
  void consume() { tok = lexer.lex(); }
  bool consumeIf(TokenKind kind);
  /// Consumes a token of `kind`, or reports `expected <kind> <context>`.
  bool expect(TokenKind kind, llvm::StringRef context);
  /// Consumes a name (not a reserved word) into `name` and `loc`.
  bool expectName(std::string &name, Loc &loc, llvm::StringRef what);
  /// Consumes the identifier `word`, or reports `expected '<word>' ...`.
  bool expectWord(llvm::StringRef word, llvm::StringRef context);
  /// Reports `msg` at `loc` unless an error (the parser's or the lexer's) was
  /// already reported, so that only the first error of a parse is shown.
  /// Returns true when it reported, so that the caller may add a note.
  bool errorAt(Loc loc, const llvm::Twine &msg);
  /// errorAt() the current token; always returns false.
  bool errorHere(const llvm::Twine &msg);
  /// Converts a NUMBER token to the nearest float64; false after an error.
  bool convertNumber(const Token &numberTok, double &value);
  /// `'x'`, `end of file`, or a description of the current token.
  std::string describeCurrent() const;

  Lexer &lexer;
  DiagnosticEmitter &diags;
  Token tok;
  unsigned initialErrors;
  unsigned nesting = 0;
  bool failed = false;
};

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_PARSER_H

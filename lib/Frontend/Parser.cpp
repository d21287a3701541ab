//===- Parser.cpp - Recursive-descent parser of the qopt DSL --------------===//
//
// One function per grammar rule of docs/dsl.md (a state's scheme and its
// options in ParseScheme.cpp). Every function captures the location of its
// first token before consuming it, returns null (or false) after reporting an
// error, and never reports a second one: the parse stops at the first syntax
// error.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Parser.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"

#include <algorithm>

using namespace mlir::qopt::frontend;

namespace {
/// Counts one level of expression nesting for as long as it lives.
class NestingGuard {
public:
  explicit NestingGuard(unsigned &nesting) : nesting(nesting) { ++nesting; }
  ~NestingGuard() { --nesting; }
  NestingGuard(const NestingGuard &) = delete;
  NestingGuard &operator=(const NestingGuard &) = delete;

private:
  unsigned &nesting;
};
} // namespace

Parser::Parser(Lexer &lexer, DiagnosticEmitter &diags)
    : lexer(lexer), diags(diags), initialErrors(diags.getNumErrors()) {
  consume();
}

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

/// `'spelling'`, shortened to its first characters and `...` when it is long,
/// so that a 100000-digit number does not make a 100000-character message.
static std::string quote(llvm::StringRef spelling) {
  constexpr size_t kMaxShown = 40;
  if (spelling.size() <= kMaxShown)
    return ("'" + spelling + "'").str();
  return ("'" + spelling.take_front(kMaxShown - 3) + "...'").str();
}

std::string Parser::describeCurrent() const {
  switch (tok.kind) {
  case TokenKind::Identifier:
  case TokenKind::Number:
    return quote(tok.spelling);
  default:
    return describeTokenKind(tok.kind).str();
  }
}

bool Parser::errorAt(Loc loc, const llvm::Twine &msg) {
  bool report = !failed && diags.getNumErrors() == initialErrors;
  if (report)
    diags.error(loc, msg);
  failed = true;
  return report;
}

bool Parser::errorHere(const llvm::Twine &msg) {
  errorAt(tok.loc, msg);
  return false;
}

bool Parser::consumeIf(TokenKind kind) {
  if (tok.isNot(kind))
    return false;
  consume();
  return true;
}

bool Parser::expect(TokenKind kind, llvm::StringRef context) {
  if (consumeIf(kind))
    return true;
  return errorHere("expected " + describeTokenKind(kind) + " " + context +
                   ", found " + describeCurrent());
}

bool Parser::expectName(std::string &name, Loc &loc, llvm::StringRef what) {
  if (tok.is(TokenKind::Identifier)) {
    name = tok.spelling.str();
    loc = tok.loc;
    consume();
    return true;
  }
  if (tok.isKeyword())
    return errorHere("'" + tok.spelling +
                     "' is a reserved word and cannot name " + what);
  return errorHere("expected the name of " + what + ", found " +
                   describeCurrent());
}

bool Parser::expectWord(llvm::StringRef word, llvm::StringRef context) {
  if (tok.isWord(word)) {
    consume();
    return true;
  }
  return errorHere("expected '" + word + "' " + context + ", found " +
                   describeCurrent());
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

/// spec ::= 'optimizer' IDENT '{' decl* update '}'
/// decl ::= hyper | param | grad | state
std::unique_ptr<Spec> Parser::parseSpec() {
  auto spec = std::make_unique<Spec>();
  spec->filename = lexer.getBufferName().str();
  if (!expect(TokenKind::KwOptimizer, "at the start of the spec") ||
      !expectName(spec->name, spec->loc, "the optimizer") ||
      !expect(TokenKind::LBrace, "after the optimizer's name"))
    return nullptr;

  // Declarations, up to the update block.
  while (tok.isNot(TokenKind::KwUpdate)) {
    bool ok;
    switch (tok.kind) {
    case TokenKind::KwHyper:
      ok = parseHyper(*spec);
      break;
    case TokenKind::KwParam:
      ok = parseParam(*spec);
      break;
    case TokenKind::KwGrad:
      ok = parseGrad(*spec);
      break;
    case TokenKind::KwState:
      ok = parseState(*spec);
      break;
    case TokenKind::RBrace:
      ok = errorHere("missing 'update' block: the spec ends without one");
      break;
    default:
      ok = errorHere("expected a declaration ('hyper', 'param', 'grad' or "
                     "'state') or the 'update' block, found " +
                     describeCurrent());
      break;
    }
    if (!ok)
      return nullptr;
  }

  if (!parseUpdate(*spec))
    return nullptr;

  switch (tok.kind) {
  case TokenKind::KwHyper:
  case TokenKind::KwParam:
  case TokenKind::KwGrad:
  case TokenKind::KwState:
    errorHere("declarations must come before the 'update' block");
    return nullptr;
  case TokenKind::KwUpdate:
    errorHere("a second 'update' block; a spec has exactly one");
    return nullptr;
  default:
    break;
  }
  spec->endLoc = tok.loc;
  if (!expect(TokenKind::RBrace, "at the end of the spec") ||
      !expect(TokenKind::Eof, "after the spec"))
    return nullptr;
  if (failed || diags.getNumErrors() != initialErrors)
    return nullptr;
  return spec;
}

/// Converts the spelling of a NUMBER token to the nearest float64. Reports a
/// literal that overflows, or that underflows to zero, and returns false.
bool Parser::convertNumber(const Token &numberTok, double &value) {
  // APFloat's conversion needs stack in proportion to the digits (tens of
  // thousands overflow it); a float64 is written exactly in at most 767
  // significant digits, so a literal past this bound says nothing more.
  constexpr size_t kMaxNumberLength = 1024;
  if (numberTok.spelling.size() > kMaxNumberLength) {
    errorAt(numberTok.loc,
            "number " + quote(numberTok.spelling.substr(0, 24).str() + "...") +
                " is " + std::to_string(numberTok.spelling.size()) +
                " characters long (at most " +
                std::to_string(kMaxNumberLength) + ")");
    return false;
  }
  llvm::APFloat f(llvm::APFloat::IEEEdouble());
  auto status = f.convertFromString(numberTok.spelling,
                                    llvm::APFloat::rmNearestTiesToEven);
  if (!status) {
    llvm::consumeError(status.takeError());
    errorAt(numberTok.loc, "invalid number " + quote(numberTok.spelling));
    return false;
  }
  if (*status & llvm::APFloat::opOverflow) {
    errorAt(numberTok.loc, "number " + quote(numberTok.spelling) +
                               " is too large for float64");
    return false;
  }
  if (f.isZero() && (*status & llvm::APFloat::opUnderflow)) {
    errorAt(numberTok.loc, "number " + quote(numberTok.spelling) +
                               " is too small for float64: it rounds to 0");
    return false;
  }
  value = f.convertToDouble();
  return true;
}

/// hyper ::= 'hyper' IDENT '=' (NUMBER | '-' NUMBER | 'true' | 'false') ';'
bool Parser::parseHyper(Spec &spec) {
  consume(); // 'hyper'
  HyperDecl hyper;
  if (!expectName(hyper.name, hyper.loc, "a hyperparameter") ||
      !expect(TokenKind::Equal, "after the hyperparameter's name"))
    return false;

  if (tok.is(TokenKind::KwTrue) || tok.is(TokenKind::KwFalse)) {
    hyper.isBool = true;
    hyper.defaultValue = tok.is(TokenKind::KwTrue) ? 1.0 : 0.0;
    consume();
  } else {
    bool negative = consumeIf(TokenKind::Minus);
    if (tok.isNot(TokenKind::Number))
      return errorHere("expected a number, 'true' or 'false' as the default "
                       "of hyperparameter '" +
                       hyper.name + "', found " + describeCurrent());
    if (!convertNumber(tok, hyper.defaultValue))
      return false;
    if (negative)
      hyper.defaultValue = -hyper.defaultValue;
    consume();
  }
  if (!expect(TokenKind::Semicolon, "after the hyperparameter's default"))
    return false;
  spec.hypers.push_back(std::move(hyper));
  return true;
}

/// float-type ::= 'f32' | 'bf16' | 'f16'
bool Parser::parseFloatType(FloatType &type, llvm::StringRef what) {
  if (tok.isWord("f32"))
    type = FloatType::F32;
  else if (tok.isWord("bf16"))
    type = FloatType::BF16;
  else if (tok.isWord("f16"))
    type = FloatType::F16;
  else
    return errorHere("expected the type of " + what +
                     " (f32, bf16 or f16), found " + describeCurrent());
  consume();
  return true;
}

/// master ::= 'none' | 'ecc' '<' ('i8' | 'i16') '>' | 'stochastic' '<' IDENT '>'
///            | 'kahan' '<' 'bf16' '>'
bool Parser::parseMaster(ParamDecl &param) {
  param.masterLoc = tok.loc;
  if (tok.isWord("none")) {
    consume();
    param.master = MasterFormat::None;
    return true;
  }
  if (tok.isWord("stochastic")) {
    consume();
    param.master = MasterFormat::Stochastic;
    return expect(TokenKind::Less, "after 'stochastic'") &&
           expectName(param.seedName, param.seedLoc,
                      "the seed's hyperparameter") &&
           expect(TokenKind::Greater, "after the seed's hyperparameter");
  }
  if (tok.isWord("kahan")) {
    consume();
    param.master = MasterFormat::KahanBF16;
    if (!expect(TokenKind::Less, "after 'kahan'"))
      return false;
    if (!tok.isWord("bf16"))
      return errorHere("expected the compensation's type ('bf16'), found " +
                       describeCurrent());
    consume();
    return expect(TokenKind::Greater, "after the compensation's type");
  }
  if (!tok.isWord("ecc"))
    return errorHere("expected a master format ('none', 'ecc<i8>', "
                     "'ecc<i16>', 'stochastic<seed>' or 'kahan<bf16>'), found " +
                     describeCurrent());
  consume();
  if (!expect(TokenKind::Less, "after 'ecc'"))
    return false;
  if (tok.isWord("i8"))
    param.master = MasterFormat::EccI8;
  else if (tok.isWord("i16"))
    param.master = MasterFormat::EccI16;
  else
    return errorHere("expected the width of the error bits ('i8' or 'i16'), "
                     "found " +
                     describeCurrent());
  consume();
  return expect(TokenKind::Greater, "after the width of the error bits");
}

/// param ::= 'param' IDENT ':' float-type (',' 'master' '=' master)? ';'
bool Parser::parseParam(Spec &spec) {
  consume(); // 'param'
  ParamDecl param;
  if (!expectName(param.name, param.loc, "the parameter"))
    return false;
  if (spec.param) {
    if (errorAt(param.loc, "a second 'param' declaration; a spec has exactly "
                           "one parameter"))
      diags.note(spec.param->loc, "the parameter is declared here");
    return false;
  }
  if (!expect(TokenKind::Colon, "after the parameter's name") ||
      !parseFloatType(param.dtype, "the parameter"))
    return false;
  if (consumeIf(TokenKind::Comma)) {
    if (!expectWord("master", "after ','") ||
        !expect(TokenKind::Equal, "after 'master'") || !parseMaster(param))
      return false;
  }
  if (!expect(TokenKind::Semicolon, "after the parameter's declaration"))
    return false;
  spec.param = std::move(param);
  return true;
}

/// grad ::= 'grad' IDENT ':' float-type ';'
bool Parser::parseGrad(Spec &spec) {
  consume(); // 'grad'
  GradDecl grad;
  if (!expectName(grad.name, grad.loc, "the gradient"))
    return false;
  if (spec.grad) {
    if (errorAt(grad.loc, "a second 'grad' declaration; a spec has exactly "
                          "one gradient"))
      diags.note(spec.grad->loc, "the gradient is declared here");
    return false;
  }
  if (!expect(TokenKind::Colon, "after the gradient's name") ||
      !parseFloatType(grad.dtype, "the gradient") ||
      !expect(TokenKind::Semicolon, "after the gradient's declaration"))
    return false;
  spec.grad = std::move(grad);
  return true;
}

/// state ::= 'state' IDENT ':' scheme ';'
bool Parser::parseState(Spec &spec) {
  consume(); // 'state'
  StateDecl state;
  if (!expectName(state.name, state.loc, "a state") ||
      !expect(TokenKind::Colon, "after the state's name") ||
      !parseScheme(state.scheme) ||
      !expect(TokenKind::Semicolon, "after the state's scheme"))
    return false;
  spec.states.push_back(std::move(state));
  return true;
}

/// INT ::= DIGIT+ (a NUMBER token with digits only)
bool Parser::parseSize(uint64_t &value, Loc &loc, llvm::StringRef what) {
  loc = tok.loc;
  if (tok.isNot(TokenKind::Number))
    return errorHere("expected " + what + " (an integer), found " +
                     describeCurrent());
  if (!llvm::all_of(tok.spelling, llvm::isDigit))
    return errorHere(what + " must be an integer, found " +
                     quote(tok.spelling));
  if (tok.spelling.getAsInteger(10, value))
    return errorHere(what + " " + quote(tok.spelling) + " is too large");
  consume();
  return true;
}

/// update ::= 'update' '{' stmt* '}'
bool Parser::parseUpdate(Spec &spec) {
  spec.updateLoc = tok.loc;
  consume(); // 'update'
  if (!expect(TokenKind::LBrace, "after 'update'"))
    return false;
  while (!consumeIf(TokenKind::RBrace)) {
    if (tok.is(TokenKind::Eof))
      return errorHere("expected '}' at the end of the update block, found "
                       "end of file");
    if (!parseStmt(spec))
      return false;
  }
  return true;
}

/// stmt ::= 'let' IDENT '=' expr ';' | IDENT '=' expr ';'
bool Parser::parseStmt(Spec &spec) {
  Stmt stmt;
  if (consumeIf(TokenKind::KwLet)) {
    stmt.kind = Stmt::Kind::Let;
    if (!expectName(stmt.name, stmt.loc, "a let"))
      return false;
  } else if (tok.is(TokenKind::Identifier) || tok.is(TokenKind::KwStep)) {
    // `step = ...` parses; Sema reports that `step` cannot be assigned.
    stmt.kind = Stmt::Kind::Assign;
    stmt.name = tok.spelling.str();
    stmt.loc = tok.loc;
    consume();
  } else {
    return errorHere("expected a statement ('let' or an assignment), found " +
                     describeCurrent());
  }
  if (!expect(TokenKind::Equal, "after '" + stmt.name + "'"))
    return false;
  stmt.value = parseExpr();
  if (!stmt.value ||
      !expect(TokenKind::Semicolon, "at the end of the statement"))
    return false;
  spec.statements.push_back(std::move(stmt));
  return true;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ExprPtr Parser::checkDepth(ExprPtr e) {
  if (e->getDepth() > kMaxDepth) {
    errorAt(e->getLoc(), "expression is too large: its tree is deeper than " +
                             llvm::Twine(kMaxDepth) + " levels");
    return nullptr;
  }
  return e;
}

ExprPtr Parser::makeBinary(BinaryOp op, Loc opLoc, ExprPtr lhs, ExprPtr rhs) {
  unsigned depth = 1 + std::max(lhs->getDepth(), rhs->getDepth());
  Loc loc = lhs->getLoc();
  auto e = std::make_unique<BinaryExpr>(loc, op, opLoc, std::move(lhs),
                                        std::move(rhs));
  e->setDepth(depth);
  return checkDepth(std::move(e));
}

/// expr ::= select
ExprPtr Parser::parseExpr() {
  NestingGuard guard(nesting);
  if (nesting > kMaxNesting) {
    errorHere("expression is nested too deeply (more than " +
              llvm::Twine(kMaxNesting) + " levels)");
    return nullptr;
  }
  return parseSelect();
}

/// select ::= or ('?' expr ':' expr)?
ExprPtr Parser::parseSelect() {
  ExprPtr cond = parseOr();
  if (!cond || tok.isNot(TokenKind::Question))
    return cond;
  Loc questionLoc = tok.loc;
  consume();
  ExprPtr trueValue = parseExpr();
  if (!trueValue || !expect(TokenKind::Colon, "in a '?:' expression"))
    return nullptr;
  ExprPtr falseValue = parseExpr();
  if (!falseValue)
    return nullptr;
  unsigned depth = 1 + std::max({cond->getDepth(), trueValue->getDepth(),
                                 falseValue->getDepth()});
  Loc loc = cond->getLoc();
  std::vector<ExprPtr> args;
  args.push_back(std::move(cond));
  args.push_back(std::move(trueValue));
  args.push_back(std::move(falseValue));
  auto e = std::make_unique<CallExpr>(loc, "select", questionLoc,
                                      std::move(args), /*isTernary=*/true);
  e->setDepth(depth);
  return checkDepth(std::move(e));
}

/// or ::= and ('||' and)*
ExprPtr Parser::parseOr() {
  ExprPtr lhs = parseAnd();
  while (lhs && tok.is(TokenKind::PipePipe)) {
    Loc opLoc = tok.loc;
    consume();
    ExprPtr rhs = parseAnd();
    if (!rhs)
      return nullptr;
    lhs = makeBinary(BinaryOp::Or, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

/// and ::= cmp ('&&' cmp)*
ExprPtr Parser::parseAnd() {
  ExprPtr lhs = parseCmp();
  while (lhs && tok.is(TokenKind::AmpAmp)) {
    Loc opLoc = tok.loc;
    consume();
    ExprPtr rhs = parseCmp();
    if (!rhs)
      return nullptr;
    lhs = makeBinary(BinaryOp::And, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

/// The comparison operator of `kind`, if it is one.
static std::optional<BinaryOp> getComparison(TokenKind kind) {
  switch (kind) {
  case TokenKind::Less:
    return BinaryOp::Lt;
  case TokenKind::LessEqual:
    return BinaryOp::Le;
  case TokenKind::Greater:
    return BinaryOp::Gt;
  case TokenKind::GreaterEqual:
    return BinaryOp::Ge;
  case TokenKind::EqualEqual:
    return BinaryOp::Eq;
  case TokenKind::NotEqual:
    return BinaryOp::Ne;
  default:
    return std::nullopt;
  }
}

/// cmp ::= sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?
ExprPtr Parser::parseCmp() {
  ExprPtr lhs = parseSum();
  if (!lhs)
    return nullptr;
  std::optional<BinaryOp> op = getComparison(tok.kind);
  if (!op)
    return lhs;
  Loc opLoc = tok.loc;
  consume();
  ExprPtr rhs = parseSum();
  if (!rhs)
    return nullptr;
  if (getComparison(tok.kind)) {
    errorHere("comparisons cannot be chained; combine them with '&&'");
    return nullptr;
  }
  return makeBinary(*op, opLoc, std::move(lhs), std::move(rhs));
}

/// sum ::= term (('+' | '-') term)*
ExprPtr Parser::parseSum() {
  ExprPtr lhs = parseTerm();
  while (lhs && (tok.is(TokenKind::Plus) || tok.is(TokenKind::Minus))) {
    BinaryOp op = tok.is(TokenKind::Plus) ? BinaryOp::Add : BinaryOp::Sub;
    Loc opLoc = tok.loc;
    consume();
    ExprPtr rhs = parseTerm();
    if (!rhs)
      return nullptr;
    lhs = makeBinary(op, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

/// term ::= unary (('*' | '/') unary)*
ExprPtr Parser::parseTerm() {
  ExprPtr lhs = parseUnary();
  while (lhs && (tok.is(TokenKind::Star) || tok.is(TokenKind::Slash))) {
    BinaryOp op = tok.is(TokenKind::Star) ? BinaryOp::Mul : BinaryOp::Div;
    Loc opLoc = tok.loc;
    consume();
    ExprPtr rhs = parseUnary();
    if (!rhs)
      return nullptr;
    lhs = makeBinary(op, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

/// unary ::= ('-' | '!') unary | power
ExprPtr Parser::parseUnary() {
  if (tok.isNot(TokenKind::Minus) && tok.isNot(TokenKind::Bang))
    return parsePower();
  NestingGuard guard(nesting);
  if (nesting > kMaxNesting) {
    errorHere("expression is nested too deeply (more than " +
              llvm::Twine(kMaxNesting) + " levels)");
    return nullptr;
  }
  UnaryOp op = tok.is(TokenKind::Minus) ? UnaryOp::Neg : UnaryOp::Not;
  Loc loc = tok.loc;
  consume();
  ExprPtr operand = parseUnary();
  if (!operand)
    return nullptr;
  unsigned depth = 1 + operand->getDepth();
  auto e = std::make_unique<UnaryExpr>(loc, op, std::move(operand));
  e->setDepth(depth);
  return checkDepth(std::move(e));
}

/// power ::= primary ('**' unary)?          (right associative)
ExprPtr Parser::parsePower() {
  ExprPtr base = parsePrimary();
  if (!base || tok.isNot(TokenKind::StarStar))
    return base;
  Loc opLoc = tok.loc;
  consume();
  // The exponent recurses (`a ** b ** c` is `a ** (b ** c)`), so a chain of
  // `**` nests as deeply as parentheses do and counts toward the same limit.
  NestingGuard guard(nesting);
  if (nesting > kMaxNesting) {
    errorHere("expression is nested too deeply (more than " +
              llvm::Twine(kMaxNesting) + " levels)");
    return nullptr;
  }
  ExprPtr exponent = parseUnary();
  if (!exponent)
    return nullptr;
  return makeBinary(BinaryOp::Pow, opLoc, std::move(base), std::move(exponent));
}

/// primary ::= NUMBER | 'true' | 'false' | 'step' | IDENT
///           | IDENT '(' (expr (',' expr)*)? ')' | '(' expr ')'
ExprPtr Parser::parsePrimary() {
  Loc loc = tok.loc;
  switch (tok.kind) {
  case TokenKind::Number: {
    double value;
    if (!convertNumber(tok, value))
      return nullptr;
    consume();
    return std::make_unique<NumberExpr>(loc, value);
  }
  case TokenKind::KwTrue:
  case TokenKind::KwFalse: {
    bool value = tok.is(TokenKind::KwTrue);
    consume();
    return std::make_unique<BoolExpr>(loc, value);
  }
  case TokenKind::KwStep:
    consume();
    return std::make_unique<StepExpr>(loc);
  case TokenKind::LParen: {
    consume();
    ExprPtr inner = parseExpr();
    if (!inner || !expect(TokenKind::RParen, "to close '('"))
      return nullptr;
    // `(a + b) * c` starts at the parenthesis; diagnostics point there.
    inner->setLoc(loc);
    return inner;
  }
  case TokenKind::Identifier: {
    std::string name = tok.spelling.str();
    consume();
    if (tok.isNot(TokenKind::LParen))
      return std::make_unique<NameExpr>(loc, std::move(name));
    // A call. An empty argument list parses; Sema reports the arity.
    Loc parenLoc = tok.loc;
    consume();
    std::vector<ExprPtr> args;
    unsigned depth = 1;
    if (tok.isNot(TokenKind::RParen)) {
      do {
        ExprPtr arg = parseExpr();
        if (!arg)
          return nullptr;
        depth = std::max(depth, 1 + arg->getDepth());
        args.push_back(std::move(arg));
      } while (consumeIf(TokenKind::Comma));
    }
    if (!expect(TokenKind::RParen, "after the arguments of '" + name + "'"))
      return nullptr;
    auto e = std::make_unique<CallExpr>(loc, std::move(name), parenLoc,
                                        std::move(args), /*isTernary=*/false);
    e->setDepth(depth);
    return checkDepth(std::move(e));
  }
  default:
    errorHere("expected an expression, found " + describeCurrent());
    return nullptr;
  }
}

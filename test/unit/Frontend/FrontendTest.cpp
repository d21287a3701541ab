//===- FrontendTest.cpp - Unit tests of the qopt DSL frontend -------------===//
//
// Drives the frontend through its C++ API: parseSpecString's collected
// diagnostics, the AST and Sema's annotations, the lexer's tokens, and
// MLIRGen's module.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Frontend.h"
#include "qopt/Frontend/Lexer.h"
#include "qopt/Frontend/MLIRGen.h"

#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

using namespace mlir::qopt::frontend;

namespace {

const char *const kFlashAdamW = R"(optimizer FlashAdamW {
  hyper lr = 1e-3;
  hyper beta1 = 0.9;
  hyper beta2 = 0.999;
  hyper eps = 1e-8;
  hyper weight_decay = 0.01;
  hyper amsgrad = false;
  param p : bf16, master = ecc<i8>;
  grad g : bf16;
  state m : group<i8, 32, softsign>;
  state v : group<u8, 32, sqrt>;
  update {
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    let bc1 = 1 - beta1 ** step;
    let bc2 = 1 - beta2 ** step;
    let denom = sqrt(v / bc2) + eps;
    p = p * (1 - lr * weight_decay) - (lr / bc1) * m / denom;
  }
}
)";

/// The statement of `spec` that defines or assigns `name`.
const Stmt &findStmt(const Spec &spec, llvm::StringRef name) {
  for (const Stmt &stmt : spec.statements)
    if (stmt.name == name)
      return stmt;
  ADD_FAILURE() << "no statement for " << name.str();
  return spec.statements.front();
}

TEST(FrontendTest, ParsesDeclarations) {
  ParsedSpec parsed = parseSpecString(kFlashAdamW, "flash.qopt");
  ASSERT_TRUE(parsed.spec) << parsed.diagnostics.front().rendered;
  EXPECT_TRUE(parsed.diagnostics.empty());
  const Spec &spec = *parsed.spec;

  EXPECT_EQ(spec.filename, "flash.qopt");
  EXPECT_EQ(spec.name, "FlashAdamW");
  EXPECT_EQ(spec.loc.line, 1u);
  EXPECT_EQ(spec.loc.col, 11u);

  ASSERT_EQ(spec.hypers.size(), 6u);
  EXPECT_EQ(spec.hypers[0].name, "lr");
  EXPECT_EQ(spec.hypers[0].defaultValue, 1e-3);
  EXPECT_FALSE(spec.hypers[0].isBool);
  EXPECT_EQ(spec.hypers[0].loc.line, 2u);
  EXPECT_EQ(spec.hypers[0].loc.col, 9u);
  EXPECT_TRUE(spec.hypers[5].isBool);
  EXPECT_EQ(spec.hypers[5].defaultValue, 0.0);

  ASSERT_TRUE(spec.param && spec.grad);
  EXPECT_EQ(spec.param->name, "p");
  EXPECT_EQ(spec.param->dtype, FloatType::BF16);
  EXPECT_EQ(spec.param->master, MasterFormat::EccI8);
  EXPECT_EQ(spec.grad->dtype, FloatType::BF16);

  ASSERT_EQ(spec.states.size(), 2u);
  const StateScheme &m = spec.states[0].scheme;
  EXPECT_EQ(m.kind, SchemeKind::Group);
  EXPECT_TRUE(m.isSigned);
  EXPECT_EQ(m.groupSize, 32u);
  EXPECT_EQ(m.companding, Companding::Softsign);
  EXPECT_EQ(m.scaleType, FloatType::F16);
  EXPECT_EQ(m.rounding, Rounding::HalfUp);
  EXPECT_EQ(m.divisor, ScaleDivisor::Absmax);
  EXPECT_FALSE(spec.states[1].scheme.isSigned);
  EXPECT_EQ(spec.states[1].scheme.companding, Companding::Sqrt);
  EXPECT_EQ(spec.statements.size(), 6u);
}

TEST(FrontendTest, ClassifiesExpressions) {
  ParsedSpec parsed = parseSpecString(kFlashAdamW);
  ASSERT_TRUE(parsed.spec);
  const Spec &spec = *parsed.spec;

  const Expr &bc1 = *findStmt(spec, "bc1").value;
  EXPECT_EQ(bc1.getType(), ValueType::Number);
  EXPECT_TRUE(bc1.isUniform());

  // sqrt(v / bc2) + eps: per-element, and `v` is the value assigned above.
  const Expr &denom = *findStmt(spec, "denom").value;
  EXPECT_TRUE(denom.isPerElement());
  const auto &add = llvm::cast<BinaryExpr>(denom);
  EXPECT_EQ(add.getOp(), BinaryOp::Add);
  EXPECT_TRUE(add.getRHS().isUniform());
  const auto &sqrt = llvm::cast<CallExpr>(add.getLHS());
  EXPECT_EQ(sqrt.getBuiltin(), Builtin::Sqrt);
  const auto &div = llvm::cast<BinaryExpr>(sqrt.getArg(0));
  const auto &v = llvm::cast<NameExpr>(div.getLHS());
  EXPECT_EQ(v.getRefKind(), RefKind::State);
  EXPECT_EQ(v.getRefIndex(), 1u);
  EXPECT_TRUE(v.readsAssignedValue());

  // m = beta1 * m + ...: reads the stored state.
  const Stmt &assignM = findStmt(spec, "m");
  EXPECT_EQ(assignM.targetKind, RefKind::State);
  EXPECT_EQ(assignM.targetIndex, 0u);
  const auto &sum = llvm::cast<BinaryExpr>(*assignM.value);
  const auto &product = llvm::cast<BinaryExpr>(sum.getLHS());
  EXPECT_FALSE(llvm::cast<NameExpr>(product.getRHS()).readsAssignedValue());

  EXPECT_EQ(findStmt(spec, "p").targetKind, RefKind::Param);
}

TEST(FrontendTest, CollectsEveryRuleError) {
  ParsedSpec parsed = parseSpecString(R"(optimizer O {
  param p : f32;
  grad g : f32;
  state m : group<u8, 48, softsign>;
  update {
    g = 1;
    p = p - 2 ** g;
  }
}
)",
                                      "bad.qopt");
  EXPECT_FALSE(parsed.spec);
  ASSERT_EQ(parsed.diagnostics.size(), 6u);

  const SpecDiagnostic &size = parsed.diagnostics[0];
  EXPECT_EQ(size.kind, SpecDiagnostic::Kind::Error);
  EXPECT_EQ(size.line, 4u);
  EXPECT_EQ(size.col, 23u);
  EXPECT_EQ(size.message, "the group size must be a power of two between 2 "
                          "and 4096 (a divisor of the 4096-element tile), "
                          "found 48");
  EXPECT_EQ(size.rendered,
            "bad.qopt:4:23: error: the group size must be a power of two "
            "between 2 and 4096 (a divisor of the 4096-element tile), found "
            "48\n"
            "  state m : group<u8, 48, softsign>;\n"
            "                      ^\n");

  EXPECT_EQ(parsed.diagnostics[1].line, 4u);
  EXPECT_EQ(parsed.diagnostics[1].col, 27u);
  EXPECT_EQ(parsed.diagnostics[2].message,
            "cannot assign the gradient 'g': the gradient is read-only");
  // The note points at the declaration.
  EXPECT_EQ(parsed.diagnostics[3].kind, SpecDiagnostic::Kind::Note);
  EXPECT_EQ(parsed.diagnostics[3].line, 3u);
  EXPECT_EQ(parsed.diagnostics[4].message,
            "a per-element exponent is not supported; the exponent of '**' "
            "must be uniform");
  EXPECT_EQ(parsed.diagnostics[5].message,
            "state 'm' is never assigned in the update block");
}

TEST(FrontendTest, StopsAtTheFirstSyntaxError) {
  ParsedSpec parsed = parseSpecString("optimizer O { param p : f32 grad g }");
  EXPECT_FALSE(parsed.spec);
  ASSERT_EQ(parsed.diagnostics.size(), 1u);
  EXPECT_EQ(parsed.diagnostics[0].col, 29u);
  EXPECT_EQ(parsed.diagnostics[0].message,
            "expected ';' after the parameter's declaration, found 'grad'");
}

TEST(FrontendTest, ParseSpecReportsThroughTheSourceMgr) {
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy("optimizer O { update { } }",
                                           "empty.qopt"),
      llvm::SMLoc());
  std::vector<std::string> messages;
  sourceMgr.setDiagHandler(
      [](const llvm::SMDiagnostic &d, void *ctx) {
        static_cast<std::vector<std::string> *>(ctx)->push_back(
            d.getMessage().str());
      },
      &messages);
  EXPECT_FALSE(parseSpec(sourceMgr, bufferId));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0], "optimizer 'O' has no 'param' declaration; declare "
                         "the parameter with 'param <name> : <type>;'");
}

TEST(FrontendTest, LexesWithLocations) {
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy("let x = 2.5e-3 ** y; // c\n"
                                           "  a<=b != !c && d || e ?",
                                           "lex.qopt"),
      llvm::SMLoc());
  DiagnosticEmitter diags(sourceMgr);
  Lexer lexer(sourceMgr, bufferId, diags);
  std::vector<Token> tokens;
  for (Token t = lexer.lex(); t.isNot(TokenKind::Eof); t = lexer.lex())
    tokens.push_back(t);
  std::vector<TokenKind> kinds;
  for (const Token &t : tokens)
    kinds.push_back(t.kind);
  std::vector<TokenKind> expected = {
      TokenKind::KwLet,      TokenKind::Identifier, TokenKind::Equal,
      TokenKind::Number,     TokenKind::StarStar,   TokenKind::Identifier,
      TokenKind::Semicolon,  TokenKind::Identifier, TokenKind::LessEqual,
      TokenKind::Identifier, TokenKind::NotEqual,   TokenKind::Bang,
      TokenKind::Identifier, TokenKind::AmpAmp,     TokenKind::Identifier,
      TokenKind::PipePipe,   TokenKind::Identifier, TokenKind::Question};
  EXPECT_EQ(kinds, expected);
  EXPECT_EQ(tokens[3].spelling, "2.5e-3");
  EXPECT_EQ(tokens[3].loc.line, 1u);
  EXPECT_EQ(tokens[3].loc.col, 9u);
  EXPECT_EQ(tokens[7].spelling, "a");
  EXPECT_EQ(tokens[7].loc.line, 2u);
  EXPECT_EQ(tokens[7].loc.col, 3u);
  EXPECT_EQ(diags.getNumErrors(), 0u);
}

TEST(FrontendTest, NeverCrashesOnBytes) {
  // Embedded NULs, bytes above 0x7f, an unterminated spec.
  const char bytes[] = "optimizer \0\xff { param";
  ParsedSpec parsed =
      parseSpecString(llvm::StringRef(bytes, sizeof(bytes) - 1));
  EXPECT_FALSE(parsed.spec);
  ASSERT_EQ(parsed.diagnostics.size(), 1u);
  EXPECT_EQ(parsed.diagnostics[0].message, "unexpected character 0x00");
}

TEST(MLIRGenTest, EmitsAVerifiedOptimizer) {
  ParsedSpec parsed = parseSpecString(kFlashAdamW, "flash.qopt");
  ASSERT_TRUE(parsed.spec);
  mlir::MLIRContext context;
  std::vector<std::string> errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors.push_back(d.str());
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = mlirGen(context, *parsed.spec);
  ASSERT_TRUE(module);
  EXPECT_TRUE(errors.empty());

  auto optimizers = llvm::to_vector(module->getOps<mlir::qopt::OptimizerOp>());
  ASSERT_EQ(optimizers.size(), 1u);
  mlir::qopt::OptimizerOp optimizer = optimizers.front();
  EXPECT_EQ(optimizer.getSymName(), "FlashAdamW");
  EXPECT_EQ(mlir::qopt::getHypers(optimizer).size(), 6u);
  EXPECT_EQ(mlir::qopt::getStates(optimizer).size(), 2u);

  auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(optimizer.getLoc());
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getFilename(), "flash.qopt");
  EXPECT_EQ(loc.getLine(), 1u);
  EXPECT_EQ(loc.getColumn(), 11u);

  unsigned stores = 0;
  optimizer.getUpdate().walk([&](mlir::Operation *op) {
    if (llvm::isa<mlir::qopt::StoreStateOp, mlir::qopt::StoreParamOp>(op))
      ++stores;
  });
  EXPECT_EQ(stores, 3u);
}

} // namespace

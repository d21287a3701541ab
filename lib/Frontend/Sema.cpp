//===- Sema.cpp - Semantic checks of a qopt spec --------------------------===//
//
// Walks the declarations, then the update statements in order, keeping track
// of which states and whether the parameter have been assigned so far. Every
// rule of docs/dsl.md that the grammar does not enforce is checked here.
//
//===----------------------------------------------------------------------===//

#include "SemaChecker.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir::qopt::frontend;
using namespace mlir::qopt::frontend::sema;

/// How a declaration of `kind` is named in diagnostics.
llvm::StringRef sema::describeRefKind(RefKind kind) {
  switch (kind) {
  case RefKind::Hyper:
    return "a hyperparameter";
  case RefKind::Param:
    return "the parameter";
  case RefKind::Grad:
    return "the gradient";
  case RefKind::State:
    return "a state";
  case RefKind::Let:
    return "a let";
  case RefKind::Unresolved:
    break;
  }
  return "a name";
}

std::string sema::formatNumber(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+inf" : "-inf";
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  return buffer;
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

void SemaChecker::declare(llvm::StringRef name, RefKind kind, unsigned index,
                          Loc loc) {
  auto [it, inserted] = symbols.try_emplace(name, Symbol{kind, index, loc});
  if (inserted)
    return;
  error(loc, "'" + name + "' is already declared as " +
                 describeRefKind(it->second.kind));
  diags.note(it->second.loc, "the previous declaration is here");
}

void SemaChecker::checkDeclarations() {
  // The name becomes the kernel's PTX entry and host symbol: a PTX identifier
  // starting with '_' needs another character after it.
  if (spec.name == "_")
    error(spec.loc, "optimizer name '_' cannot name a kernel (PTX needs a "
                    "letter or digit after a leading '_'); choose another name");
  // PTX predefines the identifier WARP_SZ (PTX ISA, "Identifiers"): ptxas
  // refuses an entry of that name.
  if (spec.name == "WARP_SZ")
    error(spec.loc, "optimizer name 'WARP_SZ' cannot name a kernel (PTX "
                    "predefines it); choose another name");
  // ptxas 13.0 refuses an entry named A7 ("Inconsistent redefinition of
  // variable 'A7'", then a segmentation fault); of every name of one or two
  // characters it is the only one (2026-12-05).
  if (spec.name == "A7")
    error(spec.loc, "optimizer name 'A7' cannot name a kernel (ptxas refuses "
                    "an entry of that name); choose another name");
  if (!spec.param)
    error(spec.loc, "optimizer '" + spec.name +
                        "' has no 'param' declaration; declare the parameter "
                        "with 'param <name> : <type>;'");
  if (!spec.grad)
    error(spec.loc, "optimizer '" + spec.name +
                        "' has no 'grad' declaration; declare the gradient "
                        "with 'grad <name> : <type>;'");

  // Declare in source order, so that the second of two equal names is the
  // one reported.
  struct Decl {
    llvm::StringRef name;
    RefKind kind;
    unsigned index;
    Loc loc;
  };
  std::vector<Decl> decls;
  for (auto [i, hyper] : llvm::enumerate(spec.hypers))
    decls.push_back({hyper.name, RefKind::Hyper, unsigned(i), hyper.loc});
  if (spec.param)
    decls.push_back({spec.param->name, RefKind::Param, 0, spec.param->loc});
  if (spec.grad)
    decls.push_back({spec.grad->name, RefKind::Grad, 0, spec.grad->loc});
  for (auto [i, state] : llvm::enumerate(spec.states))
    decls.push_back({state.name, RefKind::State, unsigned(i), state.loc});
  std::stable_sort(decls.begin(), decls.end(),
                   [](const Decl &a, const Decl &b) {
                     return a.loc.ptr.getPointer() < b.loc.ptr.getPointer();
                   });
  for (const Decl &d : decls)
    declare(d.name, d.kind, d.index, d.loc);

  if (spec.param && spec.param->master != MasterFormat::None &&
      spec.param->master != MasterFormat::Stochastic &&
      spec.param->master != MasterFormat::KahanBF16 &&
      spec.param->dtype == FloatType::F32)
    error(spec.param->masterLoc,
          "error-correction bits need a 16-bit parameter (bf16 or f16); an "
          "f32 parameter is its own master weight");
  if (spec.param && spec.param->master == MasterFormat::Stochastic)
    checkStochasticMaster(*spec.param);
  if (spec.param && spec.param->master == MasterFormat::KahanBF16 &&
      spec.param->dtype != FloatType::BF16)
    error(spec.param->masterLoc,
          "a Kahan compensation needs a bf16 parameter, found " +
              stringifyFloatType(spec.param->dtype));

  for (const StateDecl &state : spec.states)
    checkScheme(state);
}

void SemaChecker::checkStochasticMaster(const ParamDecl &param) {
  const HyperDecl *seed = nullptr;
  for (const HyperDecl &hyper : spec.hypers)
    if (hyper.name == param.seedName)
      seed = &hyper;
  // The seed reaches the kernel as a float32 uniform: an integer below 2^24
  // is exact there.
  if (!seed)
    error(param.seedLoc, "'" + param.seedName +
                             "' is not a hyperparameter; stochastic<...> "
                             "names the hyperparameter of its seed");
  else if (seed->isBool || !(seed->defaultValue >= 0) ||
           seed->defaultValue >= 16777216.0 ||
           seed->defaultValue != std::floor(seed->defaultValue))
    error(seed->loc, "the seed '" + seed->name +
                         "' must default to an integer in [0, 2^24)");
  if (param.dtype != FloatType::BF16)
    error(param.masterLoc,
          "stochastic rounding needs a bf16 parameter, found " +
              stringifyFloatType(param.dtype));
}

void SemaChecker::checkScheme(const StateDecl &state) {
  const StateScheme &scheme = state.scheme;
  switch (scheme.kind) {
  case SchemeKind::Plain:
    return;
  case SchemeKind::Codebook:
    if (!llvm::isPowerOf2_64(scheme.blockSize) || scheme.blockSize < 32 ||
        scheme.blockSize > kTileElements)
      error(scheme.sizeLoc, "the codebook block size must be a power of two "
                            "between 32 and " +
                                llvm::Twine(kTileElements) + ", found " +
                                llvm::Twine(scheme.blockSize));
    return;
  case SchemeKind::Group:
    // A power of two in [2, 4096] is exactly a divisor of the 4096-element
    // tile other than 1.
    if (!llvm::isPowerOf2_64(scheme.groupSize) || scheme.groupSize < 2 ||
        scheme.groupSize > kTileElements)
      error(scheme.sizeLoc,
            "the group size must be a power of two between 2 and " +
                llvm::Twine(kTileElements) + " (a divisor of the " +
                llvm::Twine(kTileElements) + "-element tile), found " +
                llvm::Twine(scheme.groupSize));
    std::string si = "i" + std::to_string(scheme.bits),
                un = "u" + std::to_string(scheme.bits);
    if (scheme.isSigned && scheme.companding == Companding::Sqrt)
      error(scheme.compandingLoc,
            "'sqrt' companding needs an unsigned group (" + un +
                "); a signed group (" + si + ") uses 'softsign' or 'linear'");
    if (!scheme.isSigned && scheme.companding == Companding::Softsign)
      error(scheme.compandingLoc,
            "'softsign' companding needs a signed group (" + si +
                "); an unsigned group (" + un + ") uses 'sqrt' or 'linear'");
    if ((scheme.companding == Companding::Dynamic ||
         scheme.companding == Companding::NonZero) &&
        scheme.roundingLoc.isValid())
      error(scheme.roundingLoc,
            "a table scheme ('dynamic', 'nonzero') takes the nearest entry "
            "(the lower one on a tie); 'round' does not apply to it");
    if (scheme.companding == Companding::Dynamic &&
        (!scheme.isSigned || scheme.bits != 4))
      error(scheme.compandingLoc,
            "'dynamic' (torchao's 4-bit map) needs a signed 4-bit group (i4)");
    if (scheme.companding == Companding::NonZero &&
        (scheme.isSigned || scheme.bits != 4))
      error(scheme.compandingLoc, "'nonzero' (torchao's (k + 1) / 16 map) "
                                  "needs an unsigned 4-bit group (u4)");
    return;
  }
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

bool SemaChecker::run() {
  checkDeclarations();
  stateAssignedAt.assign(spec.states.size(), Loc());
  stateReadsReduction.assign(spec.states.size(), false);

  for (auto [i, stmt] : llvm::enumerate(spec.statements))
    if (stmt.isLet())
      allLets.try_emplace(stmt.name, stmt.loc);

  for (auto [i, stmt] : llvm::enumerate(spec.statements))
    checkStatement(stmt, i);

  if (spec.param && !paramAssignedAt.isValid())
    error(spec.param->loc, "the parameter '" + spec.param->name +
                               "' is never assigned in the update block");
  for (auto [i, state] : llvm::enumerate(spec.states)) {
    // A duplicate state name resolves to the first declaration; the
    // duplicate was reported already.
    auto it = symbols.find(state.name);
    if (it == symbols.end() || it->second.kind != RefKind::State ||
        it->second.index != i)
      continue;
    if (!stateAssignedAt[i].isValid())
      error(state.loc,
            "state '" + state.name + "' is never assigned in the update block");
  }
  return !failed;
}

void SemaChecker::checkStatement(Stmt &stmt, unsigned index) {
  // The value is checked first: it reads the names as they are before the
  // statement (the old state, the parameter before its assignment).
  checkExpr(*stmt.value);
  if (!stmt.isLet()) {
    checkAssignment(stmt);
    return;
  }

  auto [it, inserted] =
      symbols.try_emplace(stmt.name, Symbol{RefKind::Let, index, stmt.loc});
  if (inserted)
    return;
  if (it->second.kind == RefKind::Let) {
    error(stmt.loc, "let '" + stmt.name +
                        "' is defined twice; a let is "
                        "defined once");
    diags.note(it->second.loc, "the first definition is here");
  } else {
    error(stmt.loc, "'" + stmt.name + "' is already declared as " +
                        describeRefKind(it->second.kind));
    diags.note(it->second.loc, "the previous declaration is here");
  }
}

void SemaChecker::checkAssignment(Stmt &stmt) {
  if (stmt.name == "step") {
    error(stmt.loc, "cannot assign 'step': it is the step count, which the "
                    "runtime sets");
    return;
  }
  auto it = symbols.find(stmt.name);
  if (it == symbols.end()) {
    error(stmt.loc, "unknown name '" + stmt.name + "'");
    return;
  }
  const Symbol &symbol = it->second;
  switch (symbol.kind) {
  case RefKind::Hyper:
    error(stmt.loc, "cannot assign the hyperparameter '" + stmt.name +
                        "': hyperparameters are read-only");
    diags.note(symbol.loc, "'" + stmt.name + "' is declared here");
    return;
  case RefKind::Grad:
    error(stmt.loc, "cannot assign the gradient '" + stmt.name +
                        "': the gradient is read-only");
    diags.note(symbol.loc, "'" + stmt.name + "' is declared here");
    return;
  case RefKind::Let:
    error(stmt.loc, "cannot assign '" + stmt.name +
                        "': it is a let, which is defined once");
    diags.note(symbol.loc, "'" + stmt.name + "' is defined here");
    return;
  case RefKind::Param:
    if (paramAssignedAt.isValid()) {
      error(stmt.loc, "the parameter '" + stmt.name +
                          "' is assigned twice; it is assigned exactly once");
      diags.note(paramAssignedAt, "the first assignment is here");
      return;
    }
    paramAssignedAt = stmt.loc;
    break;
  case RefKind::State: {
    Loc &assignedAt = stateAssignedAt[symbol.index];
    if (assignedAt.isValid()) {
      error(stmt.loc, "state '" + stmt.name +
                          "' is assigned twice; a state is assigned exactly "
                          "once");
      diags.note(assignedAt, "the first assignment is here");
      return;
    }
    assignedAt = stmt.loc;
    stateReadsReduction[symbol.index] = stmt.value->readsReduction();
    break;
  }
  case RefKind::Unresolved:
    return;
  }
  stmt.targetKind = symbol.kind;
  stmt.targetIndex = symbol.index;
  if (requireNumber(*stmt.value))
    checkRoundsToF32(*stmt.value, /*perElement=*/true);
}

bool mlir::qopt::frontend::checkSpec(Spec &spec, DiagnosticEmitter &diags) {
  return SemaChecker(spec, diags).run();
}

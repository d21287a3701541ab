//===- AST.h - The syntax tree of a qopt spec -------------------*- C++ -*-===//
//
// One optimizer spec: its hyperparameters, parameter, gradient, states with
// their storage schemes, and the update statements as expression trees. The
// parser builds it; Sema fills in the resolved names and the type and
// variability (uniform or per-element) of every expression. Every node has a
// location.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_FRONTEND_AST_H
#define QOPT_FRONTEND_AST_H

#include "qopt/Frontend/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir::qopt::frontend {

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

/// A float storage type of the parameter, the gradient or a plain state.
enum class FloatType { F32, BF16, F16 };

/// How the float32 master weight is kept beside a 16-bit parameter.
enum class MasterFormat { None, EccI8, EccI16, Stochastic, KahanBF16 };

/// The storage scheme family of a state.
enum class SchemeKind { Plain, Codebook, Group };

/// The companding function of a group scheme.
/// `Dynamic` and `NonZero` are 4-bit tables (torchao's signed dynamic map and
/// its unsigned (k + 1) / 16 map), only for 4-bit groups.
enum class Companding { Linear, Softsign, Sqrt, Dynamic, NonZero };

/// How a group scheme rounds a scaled value to an integer code.
enum class Rounding { HalfUp, HalfEven };

/// Which scale a group scheme divides by when it quantizes.
enum class ScaleDivisor { Absmax, StoredScale };

/// What a quantized state stores when a scale does not fit its type:
/// saturate to the largest finite value (the default), or IEEE's infinity.
enum class Overflow { Saturate, Ieee };

/// `f32`, `bf16`, `f16`.
llvm::StringRef stringifyFloatType(FloatType type);
/// `none`, `ecc<i8>`, `ecc<i16>`, `stochastic`, `kahan<bf16>`.
llvm::StringRef stringifyMasterFormat(MasterFormat master);
/// `linear`, `softsign`, `sqrt`, `dynamic`, `nonzero`.
llvm::StringRef stringifyCompanding(Companding companding);
/// `half_up`, `half_even`.
llvm::StringRef stringifyRounding(Rounding rounding);
/// `absmax`, `stored_scale`.
llvm::StringRef stringifyScaleDivisor(ScaleDivisor divisor);
/// `saturate`, `ieee`.
llvm::StringRef stringifyOverflow(Overflow overflow);

/// The number of elements in one tile. Every group and block size must divide
/// it (docs/abi.md), so groups and blocks never straddle two tiles.
constexpr uint64_t kTileElements = 4096;

/// `hyper lr = 1e-3;` or `hyper nesterov = false;`: a launch-uniform scalar
/// given by the trainer at each step, with its default.
struct HyperDecl {
  std::string name;
  /// The default value; 0.0 or 1.0 for a bool.
  double defaultValue = 0.0;
  bool isBool = false;
  Loc loc; ///< The name.
};

/// `param p : bf16, master = ecc<i8>;`
struct ParamDecl {
  std::string name;
  FloatType dtype = FloatType::F32;
  MasterFormat master = MasterFormat::None;
  /// `master = stochastic<seed>`: the hyperparameter that keys the rounding.
  std::string seedName;
  Loc loc;       ///< The name.
  Loc masterLoc; ///< The master format, when one is written.
  Loc seedLoc;   ///< The seed's name, when one is written.
};

/// `grad g : bf16;`
struct GradDecl {
  std::string name;
  FloatType dtype = FloatType::F32;
  Loc loc; ///< The name.
};

/// The storage scheme of one state. Only the fields of `kind` are meaningful;
/// the group options hold their defaults unless written.
struct StateScheme {
  SchemeKind kind = SchemeKind::Plain;
  /// Plain: the storage type (f32 or bf16).
  FloatType plainType = FloatType::F32;
  /// Codebook: elements per float32 absmax block.
  uint64_t blockSize = 0;
  /// Group: signed codes (`i8`, `i4`) or unsigned codes (`u8`, `u4`).
  bool isSigned = true;
  /// Group: bits per code, 8 or 4 (two codes per byte).
  unsigned bits = 8;
  /// Group: elements per scale.
  uint64_t groupSize = 0;
  Companding companding = Companding::Linear;
  FloatType scaleType = FloatType::F16;
  Rounding rounding = Rounding::HalfUp;
  ScaleDivisor divisor = ScaleDivisor::Absmax;
  /// Group and codebook: the overflow policy.
  Overflow overflow = Overflow::Saturate;

  Loc loc;           ///< The scheme's first word.
  Loc sizeLoc;       ///< The block or group size.
  Loc compandingLoc; ///< The companding option, when one is written.
  Loc scaleLoc;      ///< The `scale` option, when one is written.
  Loc roundingLoc;   ///< The `round` option, when one is written.
};

/// `state m : group<i8, 32, softsign>;`
struct StateDecl {
  std::string name;
  StateScheme scheme;
  Loc loc; ///< The name.
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

/// Whether an expression is a number or a boolean. Unknown before Sema and
/// for an expression that holds an error.
enum class ValueType { Unknown, Number, Bool };

/// Uniform values depend only on literals, hyperparameters and `step` and are
/// evaluated once per launch on the host in float64; per-tensor values are
/// the reductions (`sum mean max norm rms`, `max` of one argument) and float32
/// expressions of them and uniforms, the same for every element of one
/// tensor; per-element values depend on the gradient, the parameter or a
/// state and are float32. The order is the join's: a value has the largest
/// variability of its operands.
enum class Variability { Uniform, Tensor, PerElement };

/// The base of all expressions. Uses LLVM-style RTTI: isa<>, cast<>,
/// dyn_cast<> on getKind().
class Expr {
public:
  enum class Kind { Number, Bool, Step, Name, Unary, Binary, Call };

  Expr(Kind kind, Loc loc) : kind(kind), loc(loc) {}
  virtual ~Expr();
  Expr(const Expr &) = delete;
  Expr &operator=(const Expr &) = delete;

  Kind getKind() const { return kind; }
  /// Where the expression starts: its first token, including an opening
  /// parenthesis around it.
  Loc getLoc() const { return loc; }
  void setLoc(Loc l) { loc = l; }

  /// The height of the tree rooted here (1 for a leaf). The parser bounds it
  /// so that recursive walks over the tree cannot exhaust the stack.
  unsigned getDepth() const { return depth; }
  void setDepth(unsigned d) { depth = d; }

  /// Set by Sema.
  ValueType getType() const { return type; }
  Variability getVariability() const { return variability; }
  bool isUniform() const { return variability == Variability::Uniform; }
  bool isPerElement() const { return variability == Variability::PerElement; }
  bool isTensor() const { return variability == Variability::Tensor; }
  void setType(ValueType t) { type = t; }
  void setVariability(Variability v) { variability = v; }
  /// Set by Sema: the value reads a reduction's result (directly, through a
  /// `let` or through a state assigned from one).
  bool readsReduction() const { return reduction; }
  void setReadsReduction(bool r) { reduction = r; }

private:
  const Kind kind;
  Loc loc;
  unsigned depth = 1;
  ValueType type = ValueType::Unknown;
  Variability variability = Variability::Uniform;
  bool reduction = false;
};

using ExprPtr = std::unique_ptr<Expr>;

/// A decimal literal, e.g. `1e-3`, held as the float64 nearest to it.
class NumberExpr : public Expr {
public:
  NumberExpr(Loc loc, double value) : Expr(Kind::Number, loc), value(value) {}
  double getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Number; }

private:
  double value;
};

/// `true` or `false`.
class BoolExpr : public Expr {
public:
  BoolExpr(Loc loc, bool value) : Expr(Kind::Bool, loc), value(value) {}
  bool getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Bool; }

private:
  bool value;
};

/// `step`: the 1-based count of the step being taken.
class StepExpr : public Expr {
public:
  explicit StepExpr(Loc loc) : Expr(Kind::Step, loc) {}
  static bool classof(const Expr *e) { return e->getKind() == Kind::Step; }
};

/// What a name refers to, once Sema has resolved it.
enum class RefKind { Unresolved, Hyper, Param, Grad, State, Let };

/// A use of a declared name or a `let`.
class NameExpr : public Expr {
public:
  NameExpr(Loc loc, std::string name)
      : Expr(Kind::Name, loc), name(std::move(name)) {}
  llvm::StringRef getName() const { return name; }

  /// Set by Sema. The index is into Spec::hypers for a hyperparameter, into
  /// Spec::states for a state and into Spec::statements for a `let`.
  RefKind getRefKind() const { return refKind; }
  unsigned getRefIndex() const { return refIndex; }
  void resolve(RefKind kind, unsigned index) {
    refKind = kind;
    refIndex = index;
  }
  /// For a state: true when the read follows the state's assignment, so it
  /// reads the new float32 value rather than the dequantized stored one.
  bool readsAssignedValue() const { return assignedValue; }
  void setReadsAssignedValue(bool v) { assignedValue = v; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }

private:
  std::string name;
  RefKind refKind = RefKind::Unresolved;
  unsigned refIndex = 0;
  bool assignedValue = false;
};

enum class UnaryOp { Neg, Not };

/// `-x` or `!c`.
class UnaryExpr : public Expr {
public:
  UnaryExpr(Loc loc, UnaryOp op, ExprPtr operand)
      : Expr(Kind::Unary, loc), op(op), operand(std::move(operand)) {}
  UnaryOp getOp() const { return op; }
  Expr &getOperand() const { return *operand; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Unary; }

private:
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or
};

/// `lhs op rhs`. The expression's location is the start of `lhs`; the
/// operator's is getOpLoc().
class BinaryExpr : public Expr {
public:
  BinaryExpr(Loc loc, BinaryOp op, Loc opLoc, ExprPtr lhs, ExprPtr rhs)
      : Expr(Kind::Binary, loc), op(op), opLoc(opLoc), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  BinaryOp getOp() const { return op; }
  Loc getOpLoc() const { return opLoc; }
  Expr &getLHS() const { return *lhs; }
  Expr &getRHS() const { return *rhs; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }

private:
  BinaryOp op;
  Loc opLoc;
  ExprPtr lhs, rhs;
};

/// The builtin functions. Unknown until Sema resolves the callee's name.
enum class Builtin {
  Unknown,
  Sqrt,
  Abs,
  Sign,
  Min,
  Max,
  Select,
  Exp,
  Log,
  Tanh,
  Atan2,
  // Per-tensor reductions of one per-element argument (docs/dsl.md,
  // "Reductions"); `max` of one argument is MaxOf.
  Sum,
  MaxOf,
  Norm,
  Rms,
  Mean,
  // Whole-step reductions over every tensor of the step (docs/dsl.md,
  // "Whole-step reductions").
  GlobalSum,
  GlobalMax,
  GlobalNorm
};

/// True for the whole-step reductions.
inline bool isStepReduction(Builtin b) {
  return b == Builtin::GlobalSum || b == Builtin::GlobalMax ||
         b == Builtin::GlobalNorm;
}

/// True for the per-tensor and the whole-step reductions.
inline bool isReduction(Builtin b) {
  return b == Builtin::Sum || b == Builtin::MaxOf || b == Builtin::Norm ||
         b == Builtin::Rms || b == Builtin::Mean || isStepReduction(b);
}

/// A builtin call `f(a, ...)`, or `c ? a : b`, which is `select(c, a, b)`.
/// For a call the location is the callee's name and getOpLoc() is the `(`;
/// for `?:` the location is the start of the condition and getOpLoc() is the
/// `?`.
class CallExpr : public Expr {
public:
  CallExpr(Loc loc, std::string callee, Loc opLoc, std::vector<ExprPtr> args,
           bool isTernary)
      : Expr(Kind::Call, loc), callee(std::move(callee)), opLoc(opLoc),
        args(std::move(args)), ternary(isTernary) {}
  llvm::StringRef getCallee() const { return callee; }
  Loc getOpLoc() const { return opLoc; }
  unsigned getNumArgs() const { return args.size(); }
  Expr &getArg(unsigned i) const { return *args[i]; }
  /// True for `c ? a : b`.
  bool isTernary() const { return ternary; }

  /// Set by Sema.
  Builtin getBuiltin() const { return builtin; }
  void setBuiltin(Builtin b) { builtin = b; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }

private:
  std::string callee;
  Loc opLoc;
  std::vector<ExprPtr> args;
  bool ternary;
  Builtin builtin = Builtin::Unknown;
};

/// `add`, `sub`, ... as in the manifest's uniform expression trees.
llvm::StringRef stringifyBinaryOp(BinaryOp op);
/// `neg`, `not`.
llvm::StringRef stringifyUnaryOp(UnaryOp op);
/// `sqrt`, `abs`, `sign`, `min`, `max`, `select`, `exp`, `log`, `tanh`,
/// `atan2`; empty for Unknown.
llvm::StringRef stringifyBuiltin(Builtin builtin);
/// The builtin spelled `name`, or Builtin::Unknown.
Builtin symbolizeBuiltin(llvm::StringRef name);
/// The number of arguments `builtin` takes.
unsigned getBuiltinArity(Builtin builtin);

//===----------------------------------------------------------------------===//
// Statements and the spec
//===----------------------------------------------------------------------===//

/// `let x = value;` or `target = value;` in the update block.
struct Stmt {
  enum class Kind { Let, Assign };

  Kind kind = Kind::Let;
  /// The defined or assigned name (`step` when a statement assigns `step`).
  std::string name;
  ExprPtr value;
  Loc loc; ///< The name.

  /// Set by Sema for an assignment: RefKind::Param, or RefKind::State with
  /// the index into Spec::states.
  RefKind targetKind = RefKind::Unresolved;
  unsigned targetIndex = 0;

  bool isLet() const { return kind == Kind::Let; }
};

/// One optimizer spec: `optimizer Name { decl* update }`.
struct Spec {
  /// The buffer's name in the SourceMgr (the path of the file).
  std::string filename;
  std::string name;
  Loc loc; ///< The optimizer's name.

  std::vector<HyperDecl> hypers;
  std::optional<ParamDecl> param;
  std::optional<GradDecl> grad;
  /// In declaration order, which is the order of their streams (abi.md).
  std::vector<StateDecl> states;

  /// The `update` keyword; invalid when the spec has no update block.
  Loc updateLoc;
  std::vector<Stmt> statements;
  /// The closing `}` of the spec.
  Loc endLoc;
};

/// Prints `spec` as indented text, one declaration or statement per line,
/// expressions as `(op operand...)` trees. After Sema each `let` and
/// assignment shows its type and variability, the largest uniform subtrees
/// of a per-element expression are wrapped in `uniform(...)` (where float64
/// meets float32), and a state read after its assignment is written `m'`.
void printSpec(const Spec &spec, llvm::raw_ostream &os);

} // namespace mlir::qopt::frontend

#endif // QOPT_FRONTEND_AST_H

//===- LaneMath.h - Arithmetic on f32 lanes ---------------------*- C++ -*-===//
//
// The builder every lowering emits per-element arithmetic with: scalar or
// vector f32 lanes, the mode's fast-math flags, correctly rounded division
// and square root, and the guarded IEEE sequences (ptxas's fast path under
// one range check per thread) as a layer over the plain operations, with the
// range facts (LaneFacts) that make a guard's check redundant.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CODEGEN_LANEMATH_H
#define QOPT_CODEGEN_LANEMATH_H

#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::qopt {

/// What the guarded division and square root know of f32 lane vectors
/// without looking at them: range facts that make a guard's own range check
/// redundant. Each fact holds where its condition (an i1 scalar, or null for
/// always) holds; where it does not, the guard takes the IEEE instruction,
/// which is always right. Hand-rolled rather than upstream's integer-range
/// inference (InferIntRangeInterface), which bounds integers only, not f32
/// lanes under a runtime condition.
struct LaneFacts {
  /// Every lane in [lo, hi] (no NaN).
  struct Bounds {
    double lo, hi;
    Value cond;
  };
  /// Every lane nonnegative or NaN (-0 included).
  llvm::DenseMap<Value, Value> nonnegative;
  llvm::DenseMap<Value, Bounds> bounds;
  /// value = uniform * base, lane by lane (the uniform a broadcast scalar).
  llvm::DenseMap<Value, std::pair<Value, Value>> scaled;
  /// Whether the kernel has registers to spare for what costs registers: a
  /// guarded division checks a scaled numerator's range through its base
  /// (guardedDiv). The GPU plan's scaled_range_checks.
  bool registersToSpare = false;
  /// Whether a division by lane divisors tries the all-zero shortcut in its
  /// fallback (zeroOrIEEE) too, as square roots and divisions by a uniform or
  /// block value always do: its shortcut also looks at the divisor's lanes
  /// (their facts' condition may have failed with the dividend's). The GPU
  /// plan's zero_shortcut_lane_divisors.
  bool zeroShortcutLaneDivisors = false;
  /// reciprocalOfUniform's results, placed where their divisor is defined:
  /// kept across tile bodies (clear() leaves them).
  llvm::DenseMap<Value, Value> reciprocals;
  /// quotients[q] = {x, u}: q = RN(x / u) lane by lane, u a uniform scalar.
  llvm::DenseMap<Value, std::pair<Value, Value>> quotients;
  /// roots[x] = {w, u}: w = sqrt.rn(x / u) lane by lane, u a uniform scalar
  /// (Adam's sqrt(v / bc2)), or w = sqrt.rn(x) where u is null.
  llvm::DenseMap<Value, std::pair<Value, Value>> roots;
  /// sqrt.rn of uniform scalars (broadcast to the lanes), placed where they
  /// are defined: kept across tile bodies, as the reciprocals.
  llvm::DenseMap<Value, Value> uniformRoots;
  /// Lane vectors whose maximum of magnitudes the kernel takes anyway (a
  /// codebook state's absmax): a guard checks their magnitudes, the same
  /// tree, which CSE shares.
  llvm::DenseSet<Value> magnitudeMaxima;
  void clear() {
    nonnegative.clear();
    magnitudeMaxima.clear();
    bounds.clear();
    scaled.clear();
    quotients.clear();
    roots.clear();
  }
};

/// Builds arithmetic on scalars or vectors of f32 lanes, with the fast-math
/// flags of the kernel's mode.
class LaneMath {
public:
  /// What the lanes run on: it picks the square root intrinsic and how 16-bit
  /// floats convert (the host converts with integer operations, exactly as
  /// the reference does, so that no compiler-rt routine is needed).
  enum class Target { NVVM, Host };

  LaneMath(OpBuilder &b, Location loc, bool fast,
           Target target = Target::NVVM)
      : b(b), loc(loc), fast(fast), target(target) {}

  OpBuilder &builder() { return b; }
  Location location() { return loc; }
  bool isFast() const { return fast; }
  Target getTarget() const { return target; }

  /// A float constant shaped like `like` (scalar or vector of f32/i32 lanes).
  Value constF(Value like, double value);
  Value constI(Type type, int64_t value);
  Value add(Value a, Value c);
  Value sub(Value a, Value c);
  Value mul(Value a, Value c);
  Value div(Value a, Value c);
  /// a / u for lanes `a` and a scalar u by ptxas's div.rn.f32 fast path, u's
  /// reciprocal once: r = fma(fma(-u, r0, 1), r0, r0), q0 = a * r, q =
  /// fma(r, fma(-u, q0, a), q0). It is RN(a / u) where |a| and |u| lie in
  /// [2^-60, 2^60] (guardedDiv's domain), which the caller ensures or does
  /// not need; no check here.
  Value divByUniformUnchecked(Value a, Value u);
  /// The scalar a broadcast lane vector was built from, if it is one.
  static Value uniformOf(Value v);
  /// IEEE square root (sqrt.rn; llvm.sqrt on the host), or the approximate
  /// one in fast mode.
  Value sqrt(Value a);
  Value abs(Value a);
  Value floor(Value a);
  Value roundEven(Value a);
  /// `a < c ? c : a`, i.e. std::max(a, c) with a NaN in `a` kept.
  Value maxKeepNaN(Value a, Value c);
  /// IEEE 754-2008 maxNum / minNum: a NaN operand gives the other one.
  Value maxNum(Value a, Value c);
  Value minNum(Value a, Value c);
  /// IEEE 754-2019 maximum: NaN-propagating (torch.amax).
  Value maximum(Value a, Value c);
  /// The maximum (minimum) over the lanes of `v` (of |v| where
  /// `magnitude`): a pairwise tree of arith.maximumf (minimumf),
  /// NaN-propagating.
  Value laneMaximum(Value v, bool magnitude = false);
  Value laneMinimum(Value v, bool magnitude = false);
  /// a * b + c rounded once (llvm.intr.fma, fma.rn.f32 on the GPU).
  Value fma(Value a, Value b, Value c);
  Value select(Value cond, Value a, Value c);
  Value cmp(arith::CmpFPredicate pred, Value a, Value c);
  /// 2^e for an i32 (vector) exponent in the normal range, built from bits.
  Value exp2i(Value e);
  /// copysign(magnitude, sign) (llvm.copysign; copysign.f32 on the GPU).
  Value copySign(Value magnitude, Value sign);
  /// A call of the LLVM intrinsic `name` on `operands`, of `operands[0]`'s
  /// type unless `result` is given.
  Value intrinsic(StringRef name, ValueRange operands, Type result = {});
  /// Applies a per-lane intrinsic that has no vector form; the lanes of the
  /// result have `a`'s element type unless `resultElement` is given.
  Value perLane(Value a, llvm::function_ref<Value(Value)> fn,
                Type resultElement = {});

  /// A strict LaneMath whose div and sqrt are the NVVM approximate
  /// intrinsics (div.approx.f32, sqrt.approx.f32) and whose other operations
  /// stay IEEE: distinct operations, so CSE never merges them with the IEEE
  /// ones (as it would arith ops that differ only in fast-math flags).
  static LaneMath approximate(OpBuilder &b, Location loc) {
    LaneMath m(b, loc, /*fast=*/false, Target::NVVM);
    m.approxIntrinsics = true;
    return m;
  }

  /// This LaneMath with guarded IEEE division and square root where `enable`
  /// (strict NVVM only; elsewhere, and on scalars, div and sqrt stay as they
  /// are): on f32 vectors, div and sqrt emit the instruction sequence ptxas
  /// gives div.rn.f32 / sqrt.rn.f32 on their fast path (MUFU.RCP or
  /// MUFU.RSQ, then FMA corrections; for a divisor broadcast from a scalar
  /// the reciprocal once), with its range check done once for the thread's
  /// lanes instead of per lane: |a| and |c| in [2^-60, 2^60] for a / c, a in
  /// [2^-100, 2^100] for sqrt(a). The lanes take div.rn / sqrt.rn otherwise.
  /// Same bits as div.rn / sqrt.rn: the sequences are ptxas's own (FCHK's
  /// exact condition is undocumented; the domain here keeps far from the
  /// exponent limits), and test/gpu/GuardedIEEETest.cpp runs them on an H200
  /// against the hardware's instructions: every sqrt input of the domain,
  /// every numerator for 40 uniform divisors, 2 x 0xF0000000 random lane
  /// pairs. Not for arithmetic on 8-bit codes, which
  /// qopt-tabulate-codes turns into tables.
  LaneMath guarded(bool enable = true) const {
    LaneMath m = *this;
    m.guardIEEE = enable && target == Target::NVVM && !fast &&
                  !approxIntrinsics;
    return m;
  }
  bool isGuarded() const { return guardIEEE; }
  /// Range facts for the guards (strict NVVM, guarded): mul, add, div and
  /// sqrt record what they prove, and a guard whose operand has bounds
  /// inside its domain checks the facts' condition instead of the lanes.
  void setFacts(LaneFacts *f) { facts = f; }
  /// Records the facts of result = a * c / a + c (also called for the
  /// update's arith ops, which vectorizeUpdateOp clones).
  void recordMul(Value a, Value c, Value result);
  void recordAdd(Value a, Value c, Value result);
  /// sqrt(x) lane by lane as root * scale, from a square root the guarded
  /// arithmetic already computed (LaneFacts::roots): root = sqrt.rn(x / u)
  /// and scale = sqrt.rn(u) (computed once, where the uniform u is defined),
  /// within 2.5 units of 2^-24 of sqrt(x) relatively where `cond` holds (u
  /// in [2^-40, 1], so that x / u is subnormal only where x is, and then
  /// loses at most 2^-75 of sqrt(x); an x / u that overflows gives an
  /// infinite root, which fails the codes' check); or root = sqrt.rn(x),
  /// scale and cond null (within one unit). None where no such root is
  /// known (among them every root outside guarded IEEE arithmetic).
  struct KnownRoot {
    Value root, scale, cond;
  };
  std::optional<KnownRoot> knownRoot(Value x);

  /// This LaneMath (strict NVVM) with div and sqrt of f32 scalars as inline
  /// div.rn / sqrt.rn PTX, which LLVM cannot hoist out of a rarely taken
  /// branch (it speculates plain fdiv and the NVVM intrinsics).
  LaneMath opaque() const {
    LaneMath m = *this;
    m.opaqueScalarIEEE = target == Target::NVVM && !fast && !approxIntrinsics;
    return m;
  }

  /// The fast-math flags of a division by `divisor`: fast mode's, but
  /// reciprocals (arcp) only where the divisor is a constant or one value for
  /// every lane (a broadcast: a launch- or group-uniform value), as docs/dsl.md
  /// "Fast mode" says. A per-element divisor keeps its own division: LLVM
  /// would share one reciprocal among its divisions, and 1 / d overflows to
  /// inf for a subnormal d where x / d is finite. Strict mode: none.
  arith::FastMathFlagsAttr divisionFlags(Value divisor);

private:
  arith::FastMathFlagsAttr flags();
  OpBuilder &b;
  Location loc;
  bool fast;
  Target target;
  bool approxIntrinsics = false;
  bool guardIEEE = false;
  bool opaqueScalarIEEE = false;
  LaneFacts *facts = nullptr;
  Value andCond(Value a, Value c);
  /// The condition under which `v` is nonnegative (or NaN), if known: a
  /// null Value where it always is.
  std::optional<Value> nonnegCond(Value v);
  Value guardedDiv(Value a, Value c);
  /// ptxas's reciprocal of c: fma(fma(-c, r0, 1), r0, r0), r0 =
  /// rcp.approx.ftz(c) (lane by lane for a vector).
  Value reciprocal(Value c);
  /// reciprocal(u) of a scalar u, computed where u is defined.
  Value reciprocalOfUniform(Value u);
  /// fma(r, fma(-c, q0, a), q0): q0 = a * r corrected by its remainder.
  Value correctedQuotient(Value a, Value c, Value r, Value q0);
  Value guardedSqrt(Value a);
  /// Whether every lane of `v` (|v| where `magnitude`) lies in [lo, hi]:
  /// the lanes' minimum and maximum, each compared once (NaN fails).
  Value lanesWithin(Value v, double lo, double hi, bool magnitude);
  /// One IEEE PTX instruction on f32 scalars, opaque to LLVM.
  Value opaqueIEEE(StringRef ptx, ValueRange operands);
  /// `fastValue` where `ok`, else `ieee()` (emitted in the else region).
  Value guardedResult(Value ok, Value fastValue,
                      llvm::function_ref<Value()> ieee);
  /// The same with the `ok` result, of type `type`, built in its own region.
  Value guardedResult(Value ok, llvm::function_ref<Value()> fast,
                      llvm::function_ref<Value()> ieee, Type type);
  /// In a guard's fallback: `zeroResult()` (built in its own branch) where
  /// every lane of `a` is +-0 (and the condition `alsoOk` builds, if any,
  /// holds), else `ieee()`: the exact result of an all-zero thread (a
  /// gradient's zero rows) without its lanes' IEEE instructions. Where the
  /// lanes have facts (guarded strict kernels).
  Value zeroOrIEEE(Value a, llvm::function_ref<Value()> zeroResult,
                   llvm::function_ref<Value()> alsoOk,
                   llvm::function_ref<Value()> ieee);
};

/// One PTX instruction as inline assembly, opaque to LLVM (which neither
/// folds nor moves it across a branch): `result` from `operands` under the
/// constraint string `constraints` ("=f,f,f", "=l,l").
Value inlinePtx(OpBuilder &b, Location loc, Type result, ValueRange operands,
                StringRef ptx, StringRef constraints);
/// The same for an instruction (or braced block) that synchronizes through
/// memory (mbarrier, atom, fences): side effects and a memory clobber, so
/// that neither LLVM nor ptxas moves memory accesses across it. `result`
/// null for none (the null Value is returned).
Value syncPtx(OpBuilder &b, Location loc, Type result, ValueRange operands,
              StringRef ptx, StringRef constraints);

} // namespace mlir::qopt

#endif // QOPT_CODEGEN_LANEMATH_H

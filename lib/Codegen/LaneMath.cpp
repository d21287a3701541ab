//===- LaneMath.cpp - Arithmetic on f32 lanes -----------------------------===//
//
// LaneMath: constants, the plain and correctly rounded operations, lane
// reductions, inline PTX, and the guarded IEEE division and square root over
// them. Intrinsics that the GPU-to-NVVM conversion would turn into libdevice
// calls (sqrt, fabs, floor) are emitted as llvm.call_intrinsic so that
// strict mode gets sqrt.rn and no library is needed.
//
//===----------------------------------------------------------------------===//

#include "CodecSupport.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::qopt;

static Attribute splat(Type type, Attribute scalar) {
  if (auto vec = dyn_cast<VectorType>(type))
    return DenseElementsAttr::get(vec, scalar);
  return scalar;
}

arith::FastMathFlagsAttr LaneMath::flags() {
  auto f = fast ? arith::FastMathFlags::contract | arith::FastMathFlags::afn |
                      arith::FastMathFlags::arcp
                : arith::FastMathFlags::none;
  return arith::FastMathFlagsAttr::get(b.getContext(), f);
}

arith::FastMathFlagsAttr LaneMath::divisionFlags(Value divisor) {
  Operation *def = divisor.getDefiningOp();
  if (!fast || (def && isa<arith::ConstantOp, vector::BroadcastOp>(def)))
    return flags();
  return arith::FastMathFlagsAttr::get(
      b.getContext(), arith::FastMathFlags::contract | arith::FastMathFlags::afn);
}

Value LaneMath::constF(Value like, double value) {
  Type type = withElement(like.getType(), b.getF32Type());
  return arith::ConstantOp::create(
      b, loc, cast<TypedAttr>(splat(type, b.getF32FloatAttr(value))));
}

Value LaneMath::constI(Type type, int64_t value) {
  Type elem = getElementTypeOrSelf(type);
  return arith::ConstantOp::create(
      b, loc, cast<TypedAttr>(splat(type, b.getIntegerAttr(elem, value))));
}

/// f32 lanes: the guarded sequences are the f32 instructions'.
static bool isF32Vector(Value v) {
  auto vec = dyn_cast<VectorType>(v.getType());
  return vec && vec.getElementType().isF32();
}

Value LaneMath::add(Value a, Value c) {
  Value r = arith::AddFOp::create(b, loc, a, c, flags());
  recordAdd(a, c, r);
  return r;
}
Value LaneMath::sub(Value a, Value c) {
  return arith::SubFOp::create(b, loc, a, c, flags());
}
Value LaneMath::mul(Value a, Value c) {
  Value r = arith::MulFOp::create(b, loc, a, c, flags());
  recordMul(a, c, r);
  return r;
}

Value LaneMath::uniformOf(Value v) {
  if (auto broadcast = v.getDefiningOp<vector::BroadcastOp>())
    if (broadcast.getSource().getType().isF32())
      return broadcast.getSource();
  return {};
}

Value LaneMath::andCond(Value a, Value c) {
  if (!a)
    return c;
  if (!c)
    return a;
  return arith::AndIOp::create(b, loc, a, c);
}

std::optional<Value> LaneMath::nonnegCond(Value v) {
  auto it = facts->nonnegative.find(v);
  if (it == facts->nonnegative.end())
    return std::nullopt;
  return it->second;
}

// The facts are about IEEE results (what every guarded sequence returns):
// x * x >= 0 or NaN; u * x keeps x's sign where u >= 0, and (u * x) * x
// >= 0 where u >= 0; sums and products of nonnegatives stay nonnegative. A
// condition on a uniform u is one scalar compare (NaN fails it).
void LaneMath::recordMul(Value a, Value c, Value result) {
  if (!facts || !isF32Vector(result))
    return;
  auto uniformAtLeast = [&](Value u, double lo) {
    return cmp(arith::CmpFPredicate::OGE, u, constF(u, lo));
  };
  if (a == c) {
    facts->nonnegative[result] = Value();
    return;
  }
  for (auto [x, y] : {std::pair(a, c), std::pair(c, a)}) {
    if (Value u = uniformOf(x)) {
      facts->scaled[result] = {y, u};
      if (std::optional<Value> k = nonnegCond(y))
        facts->nonnegative[result] = andCond(*k, uniformAtLeast(u, 0.0));
      return;
    }
    auto s = facts->scaled.find(x);
    if (s != facts->scaled.end() && s->second.first == y) {
      facts->nonnegative[result] = uniformAtLeast(s->second.second, 0.0);
      return;
    }
  }
  std::optional<Value> ka = nonnegCond(a), kc = nonnegCond(c);
  if (ka && kc)
    facts->nonnegative[result] = andCond(*ka, *kc);
}

void LaneMath::recordAdd(Value a, Value c, Value result) {
  if (!facts || !isF32Vector(result))
    return;
  std::optional<Value> ka = nonnegCond(a), kc = nonnegCond(c);
  if (ka && kc)
    facts->nonnegative[result] = andCond(*ka, *kc);
  // x in [lo, hi] plus a uniform u in [0, 2^40]: in [lo, (hi + 2^40)
  // rounded up] (RN is monotone; the margin covers the sum's rounding).
  for (auto [x, y] : {std::pair(a, c), std::pair(c, a)}) {
    Value u = uniformOf(y);
    auto bx = facts->bounds.find(x);
    if (!u || bx == facts->bounds.end())
      continue;
    Value uOk = arith::AndIOp::create(
        b, loc, cmp(arith::CmpFPredicate::OGE, u, constF(u, 0.0)),
        cmp(arith::CmpFPredicate::OLE, u, constF(u, 0x1p40)));
    LaneFacts::Bounds bounds = bx->second;
    facts->bounds[result] = {bounds.lo, (bounds.hi + 0x1p40) * (1 + 0x1p-20),
                             andCond(bounds.cond, uOk)};
    return;
  }
}

Value LaneMath::div(Value a, Value c) {
  if (guardIEEE && isF32Vector(a))
    return guardedDiv(a, c);
  if (opaqueScalarIEEE && a.getType().isF32())
    return opaqueIEEE("div.rn.f32 $0, $1, $2;", {a, c});
  if (!approxIntrinsics)
    return arith::DivFOp::create(b, loc, a, c, divisionFlags(c));
  auto approxDiv = [&](Value x, Value y) {
    return intrinsic("llvm.nvvm.div.approx.ftz.f", {x, y});
  };
  auto vec = dyn_cast<VectorType>(a.getType());
  if (!vec)
    return approxDiv(a, c);
  Value result = a;
  for (int64_t i = 0, e = vec.getNumElements(); i < e; ++i)
    result = vector::InsertOp::create(
        b, loc,
        approxDiv(vector::ExtractOp::create(b, loc, a, i),
                  vector::ExtractOp::create(b, loc, c, i)),
        result, i);
  return result;
}

Value LaneMath::perLane(Value a, llvm::function_ref<Value(Value)> fn,
                        Type resultElement) {
  auto vec = dyn_cast<VectorType>(a.getType());
  if (!vec)
    return fn(a);
  Value result = a;
  if (resultElement && resultElement != vec.getElementType())
    result = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(VectorType::get(vec.getShape(), resultElement)));
  for (int64_t i = 0, e = vec.getNumElements(); i < e; ++i) {
    Value lane = vector::ExtractOp::create(b, loc, a, i);
    result = vector::InsertOp::create(b, loc, fn(lane), result, i);
  }
  return result;
}

Value LaneMath::intrinsic(StringRef name, ValueRange operands, Type result) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, result ? result : operands.front().getType(),
             b.getStringAttr(name), operands)
      .getResult(0);
}

Value LaneMath::copySign(Value magnitude, Value sign) {
  return intrinsic("llvm.copysign", {magnitude, sign});
}

Value LaneMath::sqrt(Value a) {
  // x86 sqrtss/sqrtps are correctly rounded; fast mode adds no estimate.
  if (target == Target::Host)
    return intrinsic("llvm.sqrt", a);
  if (guardIEEE && isF32Vector(a))
    return guardedSqrt(a);
  if (opaqueScalarIEEE && a.getType().isF32())
    return opaqueIEEE("sqrt.rn.f32 $0, $1;", {a});
  // sqrt.rn.f32 in strict mode; libdevice's __nv_sqrtf would give
  // sqrt.approx unless __CUDA_PREC_SQRT is set, so call the intrinsic.
  StringRef name = approxIntrinsics ? "llvm.nvvm.sqrt.approx.ftz.f"
                   : fast           ? "llvm.nvvm.sqrt.approx.f"
                                    : "llvm.nvvm.sqrt.rn.f";
  return perLane(a, [&](Value lane) { return intrinsic(name, lane); });
}

/// The lanes of `v` (|v| where `magnitude`) combined pairwise, a tree of
/// depth log2(lanes) instead of a chain: the same value for an associative
/// and commutative `combine` (IEEE maximum and minimum are), and a shorter
/// dependency path for the warp scheduler to wait on.
static Value reduceLanesPairwise(LaneMath &m, Value v, bool magnitude,
                                 llvm::function_ref<Value(Value, Value)> combine) {
  OpBuilder &b = m.builder();
  SmallVector<Value> level;
  for (int64_t i = 0, e = cast<VectorType>(v.getType()).getNumElements(); i < e;
       ++i) {
    Value x = vector::ExtractOp::create(b, m.location(), v, i);
    level.push_back(magnitude ? m.abs(x) : x);
  }
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t k = 0; k + 1 < level.size(); k += 2)
      next.push_back(combine(level[k], level[k + 1]));
    if (level.size() % 2)
      next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

Value LaneMath::laneMaximum(Value v, bool magnitude) {
  return reduceLanesPairwise(*this, v, magnitude,
                             [&](Value x, Value y) { return maximum(x, y); });
}
Value LaneMath::laneMinimum(Value v, bool magnitude) {
  return reduceLanesPairwise(*this, v, magnitude, [&](Value x, Value y) {
    return arith::MinimumFOp::create(b, loc, x, y).getResult();
  });
}
Value LaneMath::fma(Value a, Value c, Value d) {
  return LLVM::FMAOp::create(b, loc, a, c, d);
}
Value LaneMath::lanesWithin(Value v, double lo, double hi, bool magnitude) {
  Value mn = laneMinimum(v, magnitude);
  Value mx = laneMaximum(v, magnitude);
  Value aboveLo = cmp(arith::CmpFPredicate::OGE, mn, constF(mn, lo));
  Value belowHi = cmp(arith::CmpFPredicate::OLE, mx, constF(mx, hi));
  return arith::AndIOp::create(b, loc, aboveLo, belowHi);
}

Value LaneMath::opaqueIEEE(StringRef ptx, ValueRange operands) {
  // Inline PTX is a call LLVM may not speculate: as plain fdiv (or the NVVM
  // intrinsics) the fallback's few operations were hoisted above the branch
  // and run on every thread, the guard then only costing registers.
  std::string constraints = "=f";
  for (size_t i = 0; i < operands.size(); ++i)
    constraints += ",f";
  return inlinePtx(b, loc, b.getF32Type(), operands, ptx, constraints);
}

static LLVM::InlineAsmOp createInlineAsm(OpBuilder &b, Location loc,
                                          Type result, ValueRange operands,
                                          StringRef ptx, StringRef constraints,
                                          bool sideEffects) {
  return LLVM::InlineAsmOp::create(
      b, loc, result ? TypeRange{result} : TypeRange{}, operands, ptx,
      constraints, sideEffects, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
      ArrayAttr());
}

Value mlir::qopt::inlinePtx(OpBuilder &b, Location loc, Type result,
                            ValueRange operands, StringRef ptx,
                            StringRef constraints) {
  return createInlineAsm(b, loc, result, operands, ptx, constraints,
                         /*sideEffects=*/false)
      .getResult(0);
}

Value mlir::qopt::syncPtx(OpBuilder &b, Location loc, Type result,
                          ValueRange operands, StringRef ptx,
                          StringRef constraints) {
  std::string clobbered = constraints.str();
  clobbered += clobbered.empty() ? "~{memory}" : ",~{memory}";
  auto op = createInlineAsm(b, loc, result, operands, ptx, clobbered,
                            /*sideEffects=*/true);
  return result ? op.getResult(0) : Value();
}

Value LaneMath::guardedResult(Value ok, Value fastValue,
                              llvm::function_ref<Value()> ieee) {
  return guardedResult(ok, [&] { return fastValue; }, ieee, fastValue.getType());
}

Value LaneMath::guardedResult(Value ok, llvm::function_ref<Value()> fast,
                              llvm::function_ref<Value()> ieee, Type type) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, ok,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, loc, fast());
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc, ieee());
  return ifOp.getResult(0);
}

Value LaneMath::zeroOrIEEE(Value a, llvm::function_ref<Value()> zeroResult,
                           llvm::function_ref<Value()> alsoOk,
                           llvm::function_ref<Value()> ieee) {
  if (!facts)
    return ieee();
  // max|a| == 0 exactly when every lane is +-0 (a NaN lane makes it NaN).
  Value zero = constF(vector::ExtractOp::create(b, loc, a, 0), 0.0);
  Value maxMagnitude = laneMaximum(abs(a));
  Value allZero = cmp(arith::CmpFPredicate::OEQ, maxMagnitude, zero);
  if (Value also = alsoOk())
    allZero = arith::AndIOp::create(b, loc, allZero, also);
  return guardedResult(allZero, zeroResult, ieee, a.getType());
}

Value LaneMath::reciprocal(Value c) {
  Value r0 = isa<VectorType>(c.getType())
                 ? perLane(c, [&](Value x) {
                     return intrinsic("llvm.nvvm.rcp.approx.ftz.f", x);
                   })
                 : intrinsic("llvm.nvvm.rcp.approx.ftz.f", c);
  Value e = fma(arith::NegFOp::create(b, loc, c), r0, constF(r0, 1.0));
  return fma(e, r0, r0);
}

Value LaneMath::reciprocalOfUniform(Value u) {
  // Where u is defined (a launch uniform: before the tile loop), not in the
  // tile body: LLVM does not hoist the rcp.approx intrinsic out of the loop's
  // conditional tile bodies. Once per u: both tile bodies divide by it.
  // docs/tuning.md#uniform-reciprocals
  if (facts)
    if (Value known = facts->reciprocals.lookup(u))
      return known;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(u);
  Value r = reciprocal(u);
  if (facts)
    facts->reciprocals[u] = r;
  return r;
}

Value LaneMath::correctedQuotient(Value a, Value c, Value r, Value q0) {
  Value rem = fma(arith::NegFOp::create(b, loc, c), q0, a);
  return fma(r, rem, q0);
}

Value LaneMath::divByUniformUnchecked(Value a, Value u) {
  Value r = vector::BroadcastOp::create(b, loc, a.getType(), reciprocalOfUniform(u));
  Value lanes = vector::BroadcastOp::create(b, loc, a.getType(), u);
  return correctedQuotient(a, lanes, r, arith::MulFOp::create(b, loc, a, r));
}

Value LaneMath::guardedDiv(Value a, Value c) {
  // ptxas's div.rn.f32 fast path: r0 = MUFU.RCP(c); r = fma(fma(-c, r0, 1),
  // r0, r0); q0 = a * r; q = fma(r, fma(-c, q0, a), q0), taken where FCHK
  // passes. Within the guard, the operands and q are normal with exponents
  // far from the limits: r and q0 are normal and the remainder is exact.
  Value uniform = uniformOf(c);
  // A dividend known nonnegative is checked as it is, not its magnitude
  // (a >= 2^-60 is the stronger condition): its maximum is then the same
  // tree as a sqrt state's absmax of it (Adam's v / bc2), which CSE shares.
  // One whose magnitudes' maximum is taken anyway (a codebook state's
  // absmax) is checked through its magnitudes, for the same reason.
  bool knownNonneg = facts && facts->nonnegative.count(a) &&
                     !facts->magnitudeMaxima.count(a);
  Value r, ok;
  auto scaled = facts ? facts->scaled.find(a) : decltype(facts->scaled.end())();
  if (facts && facts->registersToSpare && scaled != facts->scaled.end()) {
    // a = u * x lane by lane, u uniform: |a| = RN(|u| |x|) and RN is
    // monotone, so |a| lies in [RN(|u| min|x|), RN(|u| max|x|)] (a NaN lane
    // or u makes a bound NaN, which fails). max|x| is the same tree as a
    // signed state's absmax of x (Adam's (lr / bc1) * m), which CSE shares.
    auto [x, u] = scaled->second;
    Value mn = laneMinimum(x, /*magnitude=*/true);
    Value mx = laneMaximum(abs(x));
    Value au = abs(u);
    // One statement each, so that the ops' order is not the C++ compiler's
    // order of evaluating arguments.
    Value hiBound = constF(mx, 0x1p60);
    Value hiOk = cmp(arith::CmpFPredicate::OLE,
                     arith::MulFOp::create(b, loc, au, mx), hiBound);
    Value loBound = constF(mn, 0x1p-60);
    Value loOk = cmp(arith::CmpFPredicate::OGE,
                     arith::MulFOp::create(b, loc, au, mn), loBound);
    ok = arith::AndIOp::create(b, loc, loOk, hiOk);
  } else {
    ok = lanesWithin(a, 0x1p-60, 0x1p60, /*magnitude=*/!knownNonneg);
  }
  // The divisor's range as checked here; null where its facts' condition
  // stands for it.
  Value divisorInRange;
  if (uniform) {
    // The divisor is the same for every lane: its reciprocal and its range
    // once.
    r = vector::BroadcastOp::create(b, loc, c.getType(),
                                    reciprocalOfUniform(uniform));
    Value mag = abs(uniform);
    divisorInRange = arith::AndIOp::create(
        b, loc, cmp(arith::CmpFPredicate::OGE, mag, constF(mag, 0x1p-60)),
        cmp(arith::CmpFPredicate::OLE, mag, constF(mag, 0x1p60)));
    ok = arith::AndIOp::create(b, loc, ok, divisorInRange);
  } else {
    r = reciprocal(c);
    // A divisor whose bounds lie in the domain needs no look at its lanes:
    // the facts' condition stands for the check (sqrt(v / bc2) + eps).
    const LaneFacts::Bounds *bc = nullptr;
    if (facts) {
      auto it = facts->bounds.find(c);
      if (it != facts->bounds.end() && it->second.lo >= 0x1p-60 &&
          it->second.hi <= 0x1p60)
        bc = &it->second;
    }
    if (bc) {
      ok = andCond(ok, bc->cond);
    } else {
      divisorInRange = lanesWithin(c, 0x1p-60, 0x1p60, true);
      ok = arith::AndIOp::create(b, loc, ok, divisorInRange);
    }
  }
  Value q0 = arith::MulFOp::create(b, loc, a, r);
  Value q = correctedQuotient(a, c, r, q0);
  Value result = guardedResult(ok, q, [&] {
    // A thread whose dividends are all zero (a gradient's zero rows, states
    // that start at zero) gets a * c: for c in [2^-60, 2^60] (finite,
    // nonzero) that is div.rn's zero, signed as a's sign times c's. (The
    // correction would take -0 / c to +0.) Computed here rather than taken
    // from the fast path's a * r, which would then live across the branch:
    // eight more registers where the tile holds the most. A divisor whose
    // facts stood for its check has its lanes looked at here, where their
    // condition may have failed with the dividend's.
    auto divisorOk = [&]() -> Value {
      return divisorInRange ? divisorInRange
                            : lanesWithin(c, 0x1p-60, 0x1p60, true);
    };
    auto signedZero = [&] { return arith::MulFOp::create(b, loc, a, c).getResult(); };
    auto ieee = [&] {
      Value result = a;
      for (int64_t i = 0, e = cast<VectorType>(a.getType()).getNumElements();
           i < e; ++i)
        result = vector::InsertOp::create(
            b, loc,
            opaqueIEEE("div.rn.f32 $0, $1, $2;",
                       {vector::ExtractOp::create(b, loc, a, i),
                        vector::ExtractOp::create(b, loc, c, i)}),
            result, i);
      return result;
    };
    if (!uniform && facts && !facts->zeroShortcutLaneDivisors)
      return ieee();
    return zeroOrIEEE(a, signedZero, divisorOk, ieee);
  });
  if (facts && uniform)
    facts->quotients[result] = {a, uniform};
  // a >= 0 with |a| in [2^-60, 2^60] (the check passed), over a uniform u in
  // [2^-40, 1] (a bias correction): the quotient lies in [2^-60, 2^100].
  if (facts && uniform)
    if (std::optional<Value> k = nonnegCond(a)) {
      Value uOk = arith::AndIOp::create(
          b, loc, cmp(arith::CmpFPredicate::OGE, uniform, constF(uniform, 0x1p-40)),
          cmp(arith::CmpFPredicate::OLE, uniform, constF(uniform, 1.0)));
      facts->bounds[result] = {0x1p-60, 0x1p100,
                               andCond(andCond(ok, *k), uOk)};
    }
  return result;
}

Value LaneMath::guardedSqrt(Value a) {
  // ptxas's sqrt.rn.f32 fast path (taken for a in [2^-101, FLT_MAX]):
  // y = MUFU.RSQ(a); s0 = a * y; h = y * 0.5; s = fma(fma(-s0, s0, a), h, s0).
  Value y = perLane(a, [&](Value lane) {
    return intrinsic("llvm.nvvm.rsqrt.approx.ftz.f", lane);
  });
  Value s0 = arith::MulFOp::create(b, loc, a, y);
  Value h = arith::MulFOp::create(b, loc, y, constF(y, 0.5));
  Value s = fma(fma(arith::NegFOp::create(b, loc, s0), s0, a), h, s0);
  // Bounds inside the domain stand for the check (their condition, one
  // predicate); the root's bounds follow them.
  std::optional<LaneFacts::Bounds> ba;
  if (facts) {
    auto it = facts->bounds.find(a);
    if (it != facts->bounds.end())
      ba = it->second;
  }
  bool known = ba.has_value();
  Value ok;
  if (known && ba->lo >= 0x1p-100 && ba->hi <= 0x1p100)
    ok = ba->cond ? ba->cond
                  : Value(arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
  else
    ok = lanesWithin(a, 0x1p-100, 0x1p100, /*magnitude=*/false);
  Value result = guardedResult(ok, s, [&] {
    // All lanes zero: sqrt.rn(+-0) = +-0 (the fast path would give NaN).
    return zeroOrIEEE(a, [&] { return a; }, [] { return Value(); }, [&] {
      return perLane(a, [&](Value lane) {
        return opaqueIEEE("sqrt.rn.f32 $0, $1;", {lane});
      });
    });
  });
  if (known)
    facts->bounds[result] = {std::sqrt(ba->lo) * (1 - 0x1p-20),
                             std::sqrt(ba->hi) * (1 + 0x1p-20), ba->cond};
  // Both paths give sqrt.rn(a): a root the sqrt codes can take (knownRoot).
  if (facts) {
    auto q = facts->quotients.find(a);
    if (q != facts->quotients.end())
      facts->roots.try_emplace(q->second.first, result, q->second.second);
    else
      facts->roots.try_emplace(a, result, Value());
  }
  return result;
}

std::optional<LaneMath::KnownRoot> LaneMath::knownRoot(Value x) {
  if (!facts)
    return std::nullopt;
  auto it = facts->roots.find(x);
  if (it == facts->roots.end())
    return std::nullopt;
  auto [root, u] = it->second;
  if (!u)
    return KnownRoot{root, Value(), Value()};
  Value &scale = facts->uniformRoots[u];
  if (!scale) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(u);
    scale = intrinsic("llvm.nvvm.sqrt.rn.f", u);
  }
  // One statement each, so that the ops' order is not the C++ compiler's
  // order of evaluating arguments.
  Value atLeast = cmp(arith::CmpFPredicate::OGE, u, constF(u, 0x1p-40));
  Value atMost = cmp(arith::CmpFPredicate::OLE, u, constF(u, 1.0));
  return KnownRoot{root, scale, arith::AndIOp::create(b, loc, atLeast, atMost)};
}

Value LaneMath::abs(Value a) { return intrinsic("llvm.fabs", a); }

/// On the host, floor and roundeven of |a| < 2^23 in SSE2 integer and float
/// operations (exact), the result signed as `a`; larger, infinite and NaN
/// values are their own result. Baseline x86-64 has no roundps, and LLVM
/// would call floorf/roundevenf once per lane.
static Value hostRound(LaneMath &m, Value a, bool even) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Value small = m.cmp(arith::CmpFPredicate::OLT, m.abs(a), m.constF(a, 0x1p23));
  Value r;
  if (even) {
    // Adding and subtracting 2^23 rounds |a| to an integer, nearest even.
    Value big = m.constF(a, 0x1p23);
    r = arith::SubFOp::create(b, loc,
                              arith::AddFOp::create(b, loc, m.abs(a), big), big);
  } else {
    // Truncate, then one less where that went up (a negative fraction).
    Type i32 = withElement(a.getType(), b.getI32Type());
    Value safe = m.select(small, a, m.constF(a, 0.0));
    Value t = arith::SIToFPOp::create(
        b, loc, a.getType(), arith::FPToSIOp::create(b, loc, i32, safe));
    r = m.select(m.cmp(arith::CmpFPredicate::OGT, t, a),
                 arith::SubFOp::create(b, loc, t, m.constF(t, 1.0)), t);
  }
  return m.select(small, m.copySign(r, a), a);
}

Value LaneMath::floor(Value a) {
  if (target == Target::Host)
    return hostRound(*this, a, /*even=*/false);
  return intrinsic("llvm.floor", a);
}
Value LaneMath::roundEven(Value a) {
  if (target == Target::Host)
    return hostRound(*this, a, /*even=*/true);
  return intrinsic("llvm.roundeven", a);
}

Value LaneMath::cmp(arith::CmpFPredicate pred, Value a, Value c) {
  return arith::CmpFOp::create(b, loc, pred, a, c);
}

Value LaneMath::select(Value cond, Value a, Value c) {
  return arith::SelectOp::create(b, loc, cond, a, c);
}

Value LaneMath::maxKeepNaN(Value a, Value c) {
  return select(cmp(arith::CmpFPredicate::OLT, a, c), c, a);
}

// llvm.maxnum / llvm.minnum, not arith.maxnumf: convert-gpu-to-nvvm maps a
// scalar arith.maxnumf to libdevice's __nv_fmaxf, which is not linked.
Value LaneMath::maxNum(Value a, Value c) {
  return intrinsic("llvm.maxnum", {a, c});
}
Value LaneMath::minNum(Value a, Value c) {
  return intrinsic("llvm.minnum", {a, c});
}

Value LaneMath::maximum(Value a, Value c) {
  return arith::MaximumFOp::create(b, loc, a, c);
}

Value LaneMath::exp2i(Value e) {
  Type i32 = e.getType();
  Value biased = arith::AddIOp::create(b, loc, e, constI(i32, 127));
  Value bits = arith::ShLIOp::create(b, loc, biased, constI(i32, 23));
  return arith::BitcastOp::create(b, loc,
                                  withElement(i32, b.getF32Type()), bits);
}

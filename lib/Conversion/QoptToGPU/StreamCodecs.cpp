//===- StreamCodecs.cpp - Per-element codecs of qopt streams --------------===//
//
// The arithmetic of numerics.md §2 and §3 on f32 lanes, in the reference's
// order of operations. Intrinsics that the GPU-to-NVVM conversion would turn
// into libdevice calls (sqrt, fabs, floor) are emitted as llvm.call_intrinsic
// so that strict mode gets sqrt.rn and no library is needed.
//
//===----------------------------------------------------------------------===//

#include "StreamCodecs.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::qopt;

/// `like`'s shape with element type `elem`.
static Type withElement(Type like, Type elem) {
  if (auto vec = dyn_cast<VectorType>(like))
    return VectorType::get(vec.getShape(), elem);
  return elem;
}

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
    return arith::DivFOp::create(b, loc, a, c, flags());
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
  // conditional tile bodies (H200: codebook kernels +0.5 to 1%). Once per u:
  // both tile bodies divide by it.
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

/// `x` reinterpreted as integers of the same width.
static Value bitsOf(LaneMath &m, Value x, unsigned width) {
  OpBuilder &b = m.builder();
  return arith::BitcastOp::create(
      b, m.location(), withElement(x.getType(), b.getIntegerType(width)), x);
}

/// A bf16 (lanes) widened to f32 from its bits: the pattern shifted up.
/// An even number of lanes is taken as the 32-bit words that hold them in
/// pairs: the even lane is the word shifted up, the odd lane the word with
/// its low half cleared. One operation per lane; per lane, LLVM extracts the
/// odd half first (a PRMT) and shifts it, and a packed bf16 about to be
/// stored is taken apart into halves and put back together (two PRMT).
static Value widenBf16Bits(LaneMath &m, Value stored) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(stored.getType(), b.getI32Type());
  auto lanes = dyn_cast<VectorType>(stored.getType());
  if (lanes && lanes.getRank() == 1 && lanes.getNumElements() % 2 == 0) {
    int64_t n = lanes.getNumElements();
    auto wordsType = VectorType::get({n / 2}, b.getI32Type());
    Value words = vector::BitCastOp::create(b, loc, wordsType, stored);
    Value even = arith::ShLIOp::create(b, loc, words, m.constI(wordsType, 16));
    Value odd = arith::AndIOp::create(
        b, loc, words,
        m.constI(wordsType, static_cast<int32_t>(0xFFFF0000u)));
    SmallVector<int64_t> interleave;
    for (int64_t i = 0; i < n / 2; ++i) {
      interleave.push_back(i);
      interleave.push_back(n / 2 + i);
    }
    Value bits = vector::ShuffleOp::create(b, loc, even, odd, interleave);
    return arith::BitcastOp::create(
        b, loc, withElement(stored.getType(), b.getF32Type()), bits);
  }
  return arith::BitcastOp::create(
      b, loc, withElement(stored.getType(), b.getF32Type()),
      arith::ShLIOp::create(
          b, loc, arith::ExtUIOp::create(b, loc, i32, bitsOf(m, stored, 16)),
          m.constI(i32, 16)));
}

/// Exact bf16/f16 -> f32 from the bits, with no subnormal f32 operand (so a
/// caller's flush-to-zero mode cannot change it).
static Value widenHost(LaneMath &m, Value stored) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(stored.getType(), b.getI32Type());
  Type f32 = withElement(stored.getType(), b.getF32Type());
  Value h = arith::ExtUIOp::create(b, loc, i32, bitsOf(m, stored, 16));
  // i32 constants of their bit patterns (262 << 23 does not fit a signed
  // int); the subtraction below wraps to the intended pattern.
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  if (getElementTypeOrSelf(stored.getType()).isBF16())
    return widenBf16Bits(m, stored);
  Value sign = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, h, c(0x8000)), c(16));
  Value exp = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, h, c(10)), c(0x1f));
  Value mant = arith::AndIOp::create(b, loc, h, c(0x3ff));
  Value mant23 = arith::ShLIOp::create(b, loc, mant, c(13));
  // Normal: rebias the exponent; inf/NaN: all-ones exponent, same payload.
  Value normal = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, exp, c(112)),
                            c(23)),
      mant23);
  Value special = arith::OrIOp::create(b, loc, mant23, c(0x7f800000));
  // Zero and subnormal: mant * 2^-24, both factors and the product normal.
  Value tiny = arith::BitcastOp::create(
      b, loc, i32,
      arith::MulFOp::create(b, loc, arith::UIToFPOp::create(b, loc, f32, mant),
                            m.constF(mant, 0x1p-24)));
  auto eq = [&](Value a, int64_t v) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, a, c(v));
  };
  Value magnitude = arith::SelectOp::create(
      b, loc, eq(exp, 0), tiny,
      arith::SelectOp::create(b, loc, eq(exp, 0x1f), special, normal));
  return arith::BitcastOp::create(
      b, loc, f32, arith::OrIOp::create(b, loc, magnitude, sign));
}

/// f32 -> bf16/f16 rounded to nearest even from the bits, as the reference's
/// floatToBf16Bits / floatToF16Bits.
static Value narrowHost(LaneMath &m, Value x, Type storage) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x.getType(), b.getI32Type());
  Type i16 = withElement(x.getType(), b.getI16Type());
  // i32 constants of their bit patterns (262 << 23 does not fit a signed
  // int); the subtraction below wraps to the intended pattern.
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  auto cmp = [&](arith::CmpIPredicate p, Value a, int64_t v) {
    return arith::CmpIOp::create(b, loc, p, a, c(v));
  };
  auto sel = [&](Value cond, Value a, Value e) {
    return arith::SelectOp::create(b, loc, cond, a, e);
  };
  using P = arith::CmpIPredicate;
  Value u = bitsOf(m, x, 32);
  Value a = arith::AndIOp::create(b, loc, u, c(0x7fffffff));
  Value isNaN = cmp(P::ugt, a, 0x7f800000);
  Value h;
  if (storage.isBF16()) {
    // u + 0x7fff + lsb, then the high half; a carry is the next binade.
    Value lsb = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, u, c(16)), c(1));
    Value rounded = arith::ShRUIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, arith::AddIOp::create(b, loc, u, c(0x7fff)),
                              lsb),
        c(16));
    h = sel(isNaN, c(0x7fc0), rounded);
  } else {
    Value sign = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, u, c(16)), c(0x8000));
    // Normal f16: rebias, round the 13 dropped bits to nearest even.
    Value lsb = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, a, c(13)), c(1));
    Value normal = arith::SubIOp::create(
        b, loc,
        arith::ShRUIOp::create(
            b, loc,
            arith::AddIOp::create(b, loc, arith::AddIOp::create(b, loc, a, c(0xfff)),
                                  lsb),
            c(13)),
        c(112 << 10));
    // Below 2^-14: adding 0.5 rounds |x| to a multiple of 2^-24 (the f16
    // subnormal unit) in the current rounding mode, nearest even.
    Value half = m.constF(x, 0.5);
    Value sum = arith::AddFOp::create(
        b, loc, arith::BitcastOp::create(b, loc, x.getType(), a), half);
    Value tiny = arith::SubIOp::create(b, loc, bitsOf(m, sum, 32),
                                       c(0x3f000000));
    Value magnitude =
        sel(isNaN, c(0x7e00),
            sel(cmp(P::uge, a, 0x477ff000), c(0x7c00),
                sel(cmp(P::uge, a, 0x38800000), normal, tiny)));
    h = arith::OrIOp::create(b, loc, magnitude, sign);
  }
  return arith::BitcastOp::create(b, loc, withElement(x.getType(), storage),
                                  arith::TruncIOp::create(b, loc, i16, h));
}

Value mlir::qopt::widenToF32(LaneMath &m, Value stored) {
  OpBuilder &b = m.builder();
  Type elem = getElementTypeOrSelf(stored.getType());
  if (elem.isF32())
    return stored;
  if (m.getTarget() == LaneMath::Target::Host)
    return widenHost(m, stored);
  // As the bits, not cvt.f32.bf16: see widenBf16Bits.
  if (elem.isBF16())
    return widenBf16Bits(m, stored);
  return arith::ExtFOp::create(
      b, m.location(), withElement(stored.getType(), b.getF32Type()), stored);
}

Value mlir::qopt::narrowFromF32(LaneMath &m, Value x, Type storage) {
  if (storage.isF32())
    return x;
  if (m.getTarget() == LaneMath::Target::Host)
    return narrowHost(m, x, storage);
  // arith.truncf rounds to nearest even: cvt.rn.bf16.f32 / cvt.rn.f16.f32.
  return arith::TruncFOp::create(m.builder(), m.location(),
                                 withElement(x.getType(), storage), x);
}

Value mlir::qopt::unscaleGrad(LaneMath &m, Value g, Value inv,
                              Type gradType) {
  return widenToF32(m, narrowFromF32(m, m.mul(g, inv), gradType));
}

FailureOr<Value> mlir::qopt::getSkipFlag(OptimizerOp optimizer,
                                         ArrayRef<Value> uniforms,
                                         LaneMath &m) {
  OpBuilder &b = m.builder();
  Value skip;
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    auto skipIf = dyn_cast<SkipIfOp>(op);
    if (!skipIf)
      continue;
    Value flag;
    Operation *def = skipIf.getFlag().getDefiningOp();
    if (auto uniform = dyn_cast_or_null<UniformOp>(def)) {
      if (uniform.getIndex() >= uniforms.size())
        return uniform.emitOpError("reads uniform ")
               << uniform.getIndex() << " but the optimizer yields only "
               << uniforms.size();
      flag = uniforms[uniform.getIndex()];
    } else if (auto constant = dyn_cast_or_null<arith::ConstantOp>(def)) {
      flag = arith::ConstantOp::create(b, m.location(), constant.getValue());
    } else {
      return skipIf.emitOpError("needs a launch-uniform flag (a qopt.uniform "
                                "or a constant); run qopt-outline-uniforms "
                                "first");
    }
    // Nonzero, NaN included, skips.
    Value set = arith::CmpFOp::create(b, m.location(),
                                      arith::CmpFPredicate::UNE, flag,
                                      m.constF(flag, 0.0));
    skip = skip ? arith::OrIOp::create(b, m.location(), skip, set) : set;
  }
  return skip;
}

namespace {
/// The format constants of numerics.md §3.
struct SplitFormat {
  int mbits, bias, expMask, nmax, rhoWidth;
};
} // namespace

static SplitFormat getSplitFormat(Type x16, MasterFormat master) {
  bool bf16 = getElementTypeOrSelf(x16).isBF16();
  int rhoWidth = master == MasterFormat::ecc_i8 ? 8 : 16;
  return {bf16 ? 7 : 10, bf16 ? 127 : 15, bf16 ? 0xFF : 0x1F,
          rhoWidth == 8 ? 127 : 32767, rhoWidth};
}

/// max(|x16f|, 2^(1 - bias)): the widened x16 with the exponent numerics.md
/// §3 takes for it (1 - bias for zero and subnormals) in its f32 exponent
/// field. A NaN x16 gives 2^(1 - bias) (maxnum), an infinite one keeps the
/// field of all ones.
static Value exponentFloor(LaneMath &m, Value x16f, const SplitFormat &f) {
  return m.maxNum(m.abs(x16f), m.constF(x16f, std::ldexp(1.0, 1 - f.bias)));
}

/// The f32 exponent field of `x` alone, as f32 bits: 2^E for a normal x.
static Value exponentPower(LaneMath &m, Value x) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x.getType(), b.getI32Type());
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  return arith::BitcastOp::create(
      b, loc, x.getType(),
      arith::AndIOp::create(b, loc, bits, m.constI(i32, 0x7F800000)));
}

Value mlir::qopt::reconstructMaster(LaneMath &m, Value x16, Value rho,
                                    MasterFormat master) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  SplitFormat f = getSplitFormat(x16.getType(), master);
  Type f32 = withElement(x16.getType(), b.getF32Type());
  Value x16f = widenToF32(m, x16);
  // numerics.md §3: x32 = f32(x16) + ((rho / Nmax) * 2^h') * 2^(l - h'),
  // l = E - mbits - 1, E the exponent of x16 (1 - bias for zero and
  // subnormals). Both products of that form are exact but the last, so it
  // equals one rounding of (rho / Nmax) * 2^l, computed here as
  // ((rho / Nmax) * 2^-(mbits + 1)) * 2^E: the first product depends on rho
  // alone (a table under qopt-tabulate-codes) and is exact (a normal float
  // times a power of two), 2^E is the exponent field of |x16| clamped to
  // [2^(1 - bias), 2^bias]. (At an infinite or NaN x16 the clamp only
  // changes a finite addend of a non-finite sum.) Checked against the
  // reference for every x16 and rho: test/host/EccExhaustiveTest.cpp.
  Value clamped = m.minNum(exponentFloor(m, x16f, f),
                           m.constF(x16f, std::ldexp(1.0, f.bias)));
  Value rhoF = arith::SIToFPOp::create(b, loc, f32, rho);
  Value frac = m.mul(m.div(rhoF, m.constF(rhoF, f.nmax)),
                     m.constF(rhoF, std::ldexp(1.0, -(f.mbits + 1))));
  return m.add(x16f, m.mul(frac, exponentPower(m, clamped)));
}

/// numerics.md §3's encode for a bf16 x16 and int8 rho in integer
/// arithmetic, exactly: with a = |x32| and b = |f32(x16)| as bit patterns,
/// D = a - b counts the error e in ulps of the lower of the two binades (bf16
/// rounding moves x32 within its binade or up to the next power of two, and
/// f32 subnormals continue the lowest binade's spacing), and that ulp is
/// 2^-15 of half an ULP of x16 (2^-16 when x16 rounded up to the power of two
/// above a normal x32). So en = e * 2^-l = +-|D| * 2^-15 (or 2^-16), |en| <= 1
/// needs no clamp, s = en * 127 and |s| + 0.5 are exact in f32, and
/// floor(|s| + 0.5) = (|D| * 254 + 2^15) >> 16 (|D| * 127 + 2^15 at the power
/// of two). rho takes the sign of e (x32's sign, flipped where D < 0) and is
/// 0 where x16 is infinite or NaN.
static Value splitMasterBf16I8(LaneMath &m, Value x32, Value x16) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x16.getType(), b.getI32Type());
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  using P = arith::CmpIPredicate;
  auto cmp = [&](P p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  };
  Value u = bitsOf(m, x32, 32);
  Value a = arith::AndIOp::create(b, loc, u, c(0x7FFFFFFF));
  Value h = arith::ExtUIOp::create(b, loc, i32, bitsOf(m, x16, 16));
  Value bb = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, h, c(0x7FFF)), c(16));
  Value d = arith::SubIOp::create(b, loc, a, bb);
  Value negD = cmp(P::slt, d, c(0));
  Value mag = arith::SelectOp::create(
      b, loc, negD, arith::SubIOp::create(b, loc, c(0), d), d);
  // x16 rounded up to the power of two above a normal x32's binade.
  Value nextBinade = arith::AndIOp::create(
      b, loc, cmp(P::sgt, bb, arith::OrIOp::create(b, loc, a, c(0x7FFFFF))),
      cmp(P::sge, a, c(0x800000)));
  Value mult = arith::SelectOp::create(b, loc, nextBinade, c(127), c(254));
  Value r = arith::ShRUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, mag, mult),
                            c(0x8000)),
      c(16));
  Value negative = cmp(P::slt, arith::XOrIOp::create(b, loc, u, d), c(0));
  Value rho = arith::SelectOp::create(
      b, loc, negative, arith::SubIOp::create(b, loc, c(0), r), r);
  rho = arith::SelectOp::create(b, loc, cmp(P::sge, bb, c(0x7F800000)), c(0),
                                rho);
  return arith::TruncIOp::create(
      b, loc, withElement(x16.getType(), b.getIntegerType(8)), rho);
}

/// numerics.md §3's encode on the GPU, in six float operations and no
/// branch: en * Nmax = (e * 2^(1 - E)) * (Nmax * 2^mbits) with 2^-l =
/// 2^(mbits + 1 - E) split so that 2^(1 - E) is a normal float for every E of
/// a finite x16 (E in [1 - bias, bias]: 2^(1 - E) in [2^(1 - bias), 2^bias]).
/// e = x32 - f32(x16) is exact, and so is e * 2^(1 - E): where E <= 1 the
/// factor is at least 1 (e is a multiple of the f32 subnormal step at
/// least); where E > 1, x16 is normal, x32 lies in binade E or E - 1, e is a
/// multiple of 2^(E - 24) and the product a multiple of 2^-23. The product
/// with the constant rounds once, as the reference's s = en * Nmax does
/// (|en| <= 1 after round-to-nearest-even: the clamp changes nothing).
/// 2^(1 - E) is the complement of the exponent field of max(|x16|, 2^(1 -
/// bias)): its field 255 - (E + 127). An infinite x16 gives the field 0, so s
/// is inf * 0 = NaN; a NaN x16 gives a NaN e; the saturating conversion
/// takes NaN to rho 0, the reference's value there. trunc(RN(s + copysign(
/// 0.5, s))) equals the reference's copysign(floor(RN(|s| + 0.5)), s), RN
/// being symmetric: ties go away from zero (|s| <= Nmax, no saturation).
/// (bf16 with int8 rho, where s is exact: cvt.rni(s), see below.)
/// Checked against the reference on every float32 for the four formats: on
/// the GPU by test/host/EccExhaustiveTest.cpp, and as C++ float arithmetic.
/// (The host keeps the integer and two-step forms below: they have no
/// subnormal operands, so a caller's flush-to-zero mode cannot change them.)
static Value splitMasterNVVM(LaneMath &m, Value x32, Value x16,
                             const SplitFormat &f) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type i32 = withElement(x16.getType(), b.getI32Type());
  // A bf16 is widened from its bits (widenToF32): as fpext of the fptrunc,
  // LLVM rounds each lane alone (F2F, a quarter-rate conversion) instead of
  // pairs (F2FP.PACK_AB), which the store needs anyway.
  Value x16f = widenToF32(m, x16);
  Value e = m.sub(x32, x16f);
  Value floorBits = arith::BitcastOp::create(b, loc, i32, exponentFloor(m, x16f, f));
  Value scale = arith::BitcastOp::create(
      b, loc, x32.getType(),
      arith::AndIOp::create(
          b, loc,
          arith::XOrIOp::create(b, loc, floorBits, m.constI(i32, -1)),
          m.constI(i32, 0x7F800000)));
  // t = RN(s + copysign(0.5, s)) with s = (e * 2^(1-E)) * Nmax * 2^mbits,
  // the first product exact: one FMA, rounded once instead of twice. The
  // rounding direction's integer is the same (EccExhaustiveTest: every
  // float32, every format).
  Value p = m.mul(e, scale);
  Value k = m.constF(p, f.nmax * std::ldexp(1.0, f.mbits));
  // bf16 and int8 rho: s = p * k is exact (p is a multiple of 2^-23 of
  // magnitude at most 2^-7 + 2^-23, 17 significant bits at most; k = 127 *
  // 2^7 has 7), so the reference's copysign(floor(|s| + 0.5), s) is s
  // rounded to the nearest integer, ties away from zero. cvt.rni rounds ties
  // to even instead: the same where the tie's integer above is even, and the
  // only ties s reaches (s = 127 * j * 2^-16) are +-63.5, which go to +-64
  // both ways. (For f16, s reaches k + 0.5 for every k.) One FMUL before the
  // conversion, where the copysign and FMA before cvt.rzi took two. Checked
  // on every float32: EccExhaustiveTest on the GPU, and the same arithmetic
  // as C++ floats against the reference.
  // Otherwise cvt.rzi of RN(s + copysign(0.5, s)). Both conversions saturate
  // and take NaN (an infinite or NaN x16) to 0 (PTX ISA; llvm.fptosi.sat
  // would add the saturation and NaN selects around it).
  bool exactProduct = f.rhoWidth == 8 && f.mbits == 7;
  Value t = exactProduct ? m.mul(p, k)
                         : m.fma(p, k, m.copySign(m.constF(p, 0.5), p));
  StringRef toInt = exactProduct ? "llvm.nvvm.f2i.rn" : "llvm.nvvm.f2i.rz";
  Value rho = m.perLane(
      t, [&](Value lane) { return m.intrinsic(toInt, {lane}, b.getI32Type()); },
      b.getI32Type());
  return arith::TruncIOp::create(
      b, loc, withElement(x16.getType(), b.getIntegerType(f.rhoWidth)), rho);
}

Value mlir::qopt::splitMaster(LaneMath &m, Value x32, Value x16,
                              MasterFormat master) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  SplitFormat f = getSplitFormat(x16.getType(), master);
  if (m.getTarget() == LaneMath::Target::NVVM)
    return splitMasterNVVM(m, x32, x16, f);
  if (getElementTypeOrSelf(x16.getType()).isBF16() && f.rhoWidth == 8)
    return splitMasterBf16I8(m, x32, x16);
  Type i32 = withElement(x16.getType(), b.getI32Type());
  Type f32 = withElement(x16.getType(), b.getF32Type());
  Value x16f = widenToF32(m, x16);
  Value e = m.sub(x32, x16f);
  // numerics.md §3: en = (e * 2^h) * 2^(-l - h), h = floor(-l / 2): both
  // products are exact (e is a multiple of 2^(E - 24) and |e| <= 2^l), so en
  // is e * 2^-l exactly, computed here as (e * p1) * p2 with p1 * p2 = 2^-l,
  // p1 = 2^(mbits + 1 - E1), E1 = max(E, mbits + 1 - 127) so that p1 stays a
  // normal float, and p2 = 2^(E1 - E) (1 but for a bf16 below 2^-119); both
  // products exact again. E is clamped below at 1 - bias as numerics.md says.
  // i32 constants of their bit patterns (262 << 23 does not fit a signed
  // int); the subtraction below wraps to the intended pattern.
  auto c = [&](int64_t v) {
    return m.constI(i32, static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  Value expBits = arith::AndIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, x16f), c(0x7F800000));
  Value clampedE = arith::MaxSIOp::create(b, loc, expBits, c((128 - f.bias) << 23));
  Value e1 = arith::MaxSIOp::create(b, loc, clampedE, c((f.mbits + 1) << 23));
  Value p1 = arith::BitcastOp::create(
      b, loc, f32, arith::SubIOp::create(b, loc, c((254 + f.mbits + 1) << 23), e1));
  Value p2 = arith::BitcastOp::create(
      b, loc, f32,
      arith::AddIOp::create(b, loc, c(127 << 23),
                            arith::SubIOp::create(b, loc, e1, clampedE)));
  Value en = m.mul(m.mul(e, p1), p2);
  // s = clamp(en, -1, 1) * Nmax; rho = copysign(floor(|s| + 0.5), s)
  Value one = m.constF(en, 1.0), minusOne = m.constF(en, -1.0);
  Value clamped = m.select(m.cmp(arith::CmpFPredicate::OLT, en, minusOne),
                           minusOne,
                           m.select(m.cmp(arith::CmpFPredicate::OGT, en, one),
                                    one, en));
  Value s = m.mul(clamped, m.constF(en, f.nmax));
  Value r = m.floor(m.add(m.abs(s), m.constF(s, 0.5)));
  Value zero = m.constF(s, 0.0);
  r = m.select(m.cmp(arith::CmpFPredicate::OLT, s, zero),
               arith::NegFOp::create(b, loc, r), r);
  // A non-finite error (x16 infinite or NaN) keeps no correction.
  Value inf = m.constF(e, std::numeric_limits<double>::infinity());
  r = m.select(m.cmp(arith::CmpFPredicate::UEQ, m.abs(e), inf), zero, r);
  Value ri = arith::FPToSIOp::create(b, loc, i32, r);
  return arith::TruncIOp::create(
      b, loc, withElement(x16.getType(), b.getIntegerType(f.rhoWidth)), ri);
}

static double codeRange(GroupSchemeAttr scheme) {
  return scheme.getStorage().isSigned() ? 127.0 : 255.0;
}

Value mlir::qopt::dequantizeGroup(LaneMath &m, GroupSchemeAttr scheme,
                                  Value codes, Value scale) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Type f32 = withElement(codes.getType(), b.getF32Type());
  Value q = scheme.getStorage().isSigned()
                ? Value(arith::SIToFPOp::create(b, loc, f32, codes))
                : Value(arith::UIToFPOp::create(b, loc, f32, codes));
  Value z = m.div(q, m.constF(q, codeRange(scheme)));
  switch (scheme.getCompanding()) {
  case Companding::softsign: {
    // y = z / (2 - |z|); m = y * s
    Value y = m.div(z, m.sub(m.constF(z, 2.0), m.abs(z)));
    return m.mul(y, scale);
  }
  case Companding::sqrt: {
    // u = (q / 255) * s; v = u * u
    Value u = m.mul(z, scale);
    return m.mul(u, u);
  }
  case Companding::linear:
    return m.mul(z, scale);
  }
  llvm_unreachable("unknown companding");
}

Value mlir::qopt::groupMagnitude(LaneMath &m, GroupSchemeAttr scheme,
                                 Value x) {
  if (scheme.getCompanding() == Companding::sqrt)
    return m.sqrt(x);
  if (scheme.getStorage().isSigned())
    return m.abs(x);
  return x;
}

Value mlir::qopt::groupStoredScale(LaneMath &m, GroupSchemeAttr scheme,
                                   Value absmax) {
  Value s = absmax;
  // The authors' kernel floors the scale at 1e-12 and stores that; seed 003
  // stores the absmax itself.
  if (scheme.getDivisor() == ScaleDivisor::absmax)
    s = m.maxKeepNaN(absmax, m.constF(absmax, 1e-12));
  return narrowFromF32(m, s, scheme.getScale());
}

/// The divisor of a group's quantization: max(absmax, 1e-12) (the authors'
/// kernel) or the stored scale with 0 taken as 1 (seed 003).
static Value quantizationDivisor(LaneMath &m, GroupSchemeAttr scheme,
                                 Value absmax, Value storedScale) {
  if (scheme.getDivisor() == ScaleDivisor::absmax)
    return m.maxKeepNaN(absmax, m.constF(absmax, 1e-12));
  Value zero = m.constF(storedScale, 0.0);
  return m.select(m.cmp(arith::CmpFPredicate::OEQ, storedScale, zero),
                  m.constF(storedScale, 1.0), storedScale);
}

/// t, the value whose rounding is the code: 127 * softsign(x / s),
/// 255 * sqrt(x) / s, ... (numerics.md §2), in `m`'s arithmetic.
static Value codeArgument(LaneMath &m, GroupSchemeAttr scheme, Value x,
                          Value divisor) {
  double range = codeRange(scheme);
  if (scheme.getDivisor() == ScaleDivisor::absmax) {
    // Authors: signed: 127 * z with z = softsign(m/s); unsigned: 255 * u / s.
    if (scheme.getStorage().isSigned()) {
      Value z = m.div(x, divisor);
      if (scheme.getCompanding() == Companding::softsign)
        z = m.div(m.mul(m.constF(z, 2.0), z),
                  m.add(m.constF(z, 1.0), m.abs(z)));
      return m.mul(m.constF(z, range), z);
    }
    Value u = scheme.getCompanding() == Companding::sqrt ? m.sqrt(x) : x;
    return m.div(m.mul(m.constF(u, range), u), divisor);
  }
  // Seed 003: y = g / safe, softsign 2y / (1 + |y|), then y * 127 (or * 255).
  Value u = scheme.getCompanding() == Companding::sqrt ? m.sqrt(x) : x;
  Value y = m.div(u, divisor);
  if (scheme.getCompanding() == Companding::softsign)
    y = m.div(m.mul(m.constF(y, 2.0), y), m.add(m.constF(y, 1.0), m.abs(y)));
  return m.mul(y, m.constF(y, range));
}

/// codeArgument's t in real arithmetic as a product p * k left unrounded,
/// computed with fewer operations by `approx` (LaneMath::approximate) for
/// checkedRoundCode: softsign's 2y / (1 + |y|), y = u / divisor, as
/// (u / (divisor + |u|)) * 2 range; the others' u / divisor * range as u *
/// (range / divisor), the quotient once per thread. u is x, or its square
/// root for sqrt companding; `divisor` is a broadcast scalar. A square root
/// the update computed (`root`, LaneMath::knownRoot) stands for the
/// approximate one: u = root * scale, the scale folded into the quotient
/// (range / divisor) * scale, once per thread. `quotient` is range /
/// divisor itself (null for softsign).
namespace {
struct CodeArgument {
  Value p, k, quotient;
};
} // namespace
static CodeArgument
approximateCodeArgument(LaneMath &approx, GroupSchemeAttr scheme, Value x,
                        Value divisor,
                        const std::optional<LaneMath::KnownRoot> &root) {
  OpBuilder &b = approx.builder();
  Location loc = approx.location();
  double range = codeRange(scheme);
  Value u = x;
  if (scheme.getCompanding() == Companding::sqrt)
    u = root ? root->root : approx.sqrt(x);
  if (scheme.getCompanding() == Companding::softsign)
    return {approx.div(u, approx.add(divisor, approx.abs(u))),
            approx.constF(u, 2 * range), Value()};
  Value d = vector::ExtractOp::create(b, loc, divisor, 0);
  Value quotient = approx.div(approx.constF(d, range), d);
  Value k = quotient;
  if (root && root->scale)
    k = arith::MulFOp::create(b, loc, k, root->scale);
  return {u, vector::BroadcastOp::create(b, loc, u.getType(), k), quotient};
}

/// The code before clamping: floor(t + 0.5) or roundeven(t).
static Value roundCode(LaneMath &m, GroupSchemeAttr scheme, Value t) {
  return scheme.getRounding() == Rounding::half_up
             ? m.floor(m.add(t, m.constF(t, 0.5)))
             : m.roundEven(t);
}

/// The code clamped to the scheme's range [lo, hi], NaN taken as 0.
static Value clampCode(LaneMath &m, GroupSchemeAttr scheme, Value q) {
  double range = codeRange(scheme);
  Value lo = m.constF(q, scheme.getStorage().isSigned() ? -range : 0.0);
  Value hi = m.constF(q, range);
  q = m.select(m.cmp(arith::CmpFPredicate::OLT, q, lo), lo,
               m.select(m.cmp(arith::CmpFPredicate::OGT, q, hi), hi, q));
  return m.select(m.cmp(arith::CmpFPredicate::UNO, q, q), m.constF(q, 0.0), q);
}

/// 1.5 * 2^23: an integer code q in (-2^22, 2^22) plus this is exact, and the
/// low bits of the sum's pattern are q in two's complement.
static constexpr double kCodeBias = 0x1.8p23;

/// q + kCodeBias for an integer-valued code q (exact).
static Value biasCode(LaneMath &m, Value q) {
  return m.add(q, m.constF(q, kCodeBias));
}

/// clampCode(roundCode(codeArgument(...))) in IEEE arithmetic, plus
/// kCodeBias (the code is the low byte of the sum's pattern), computed
/// through the approximate chain where that is provably the same integer.
///
/// Every chain of codeArgument and approximateCodeArgument is products,
/// quotients and square roots of its operands plus one sum of non-negative
/// terms (1 + |y| or divisor + |u|): no cancellation, and softsign's
/// relative condition number is at most 1, so each rounding adds its
/// relative error to t's. In units of 2^-24: the IEEE chain rounds at most 4
/// times (softsign: y, 1 + |y|, the quotient, the product by 127; sqrt: the
/// root, the product by 255, the quotient), the approximate one at most 6
/// (div.approx.ftz.f32 within 2 ulp, 4 units, for divisors in [2^-126,
/// 2^126]; sqrt.approx.ftz.f32 within 2^-23, 2 units; the IEEE sum, 1; its
/// last product p * k is not rounded): softsign 4 + 5 (the sum, the
/// quotient), sqrt 3 + 6 (the root, range / divisor). (The divisor + |u| is
/// within div.approx's range as |u| <= 2 divisor: the divisor is the
/// group's absmax, or its stored scale, which is within a factor of 2 of
/// it; the divisor is checked to lie in [2^-40, 2^100].)
/// With |t| < 128 (softsign) and |t| < 256 (sqrt) that is E < 6.9e-5 and
/// E < 1.38e-4. Flushing a subnormal operand or quotient to zero moves t by
/// less than 255 * sqrt(2^-126) / 2^-40 < 3.1e-5 when the divisor is at
/// least 2^-40 (the authors' divisor is at least 1e-12 > 2^-40): E < 1.69e-4.
/// A sqrt code whose root the update computed (LaneMath::knownRoot) takes u
/// = root * scale in place of sqrt.approx: sqrt.rn(x) is within 1 unit;
/// sqrt.rn(RN(x / w)) * sqrt.rn(w), for a uniform w in [2^-40, 1], within
/// 1.5 + 1 and the product (range / divisor) * sqrt.rn(w) 1 more, so sqrt
/// 3 + 7.5 (E < 1.61e-4); x / w is subnormal only where x is, and then
/// moves sqrt(x) by at most sqrt(2^-150) = 2^-75, t by less than 255 *
/// 2^-75 / 2^-40 < 7.5e-9, inside the flush bound above: E < 1.92e-4. A w
/// outside [2^-40, 1] fails the thread's check, and the lanes' own checks
/// then take the sqrt.approx chain.
///
/// With q' the integer nearest t' = p * k (RN(p * k + kCodeBias) -
/// kCodeBias, the first an FMA: the sum lies in [2^23, 2^24), where floats
/// are the integers), d = RN(p * k - q') (an FMA) is within 2^-26 of t' - q'
/// where |d| < 1/2. Where |d| < 1/2 - 2^-12, t' + 0.5 lies in (q' + 2^-12 -
/// 2^-26, q' + 1 - 2^-12 + 2^-26); t + 0.5 within E of it and u = RN(t + 0.5)
/// within 2^-16 more, and E + 2^-16 + 2^-26 < 2^-12 (at most 2.08e-4, with
/// a known root, against 2.44e-4),
/// so floor(u) = q' (and, away from half integers, roundeven(t) = q'). A
/// tie, t' a half integer, gives |d| = 1/2 and fails.
/// Where also |t' - c| < R, c and R the centre and half width of
/// [lo - 1/2, hi + 1/2], q' is in [lo, hi] and needs no clamp (and the |t|
/// bounds above hold); with the absmax as divisor that holds by itself (see
/// below), with seed 003's stored scale it is checked. Each condition is one
/// maximum per thread: max |d| and max |t' - c| over the lanes (a NaN lane
/// makes both NaN and fails them). Where the thread's check or the divisor's
/// range fails, each lane
/// checks itself, and a lane that fails takes the IEEE chain and its clamp.
static Value checkedRoundCode(LaneMath &m, GroupSchemeAttr scheme, Value x,
                              Value divisor) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  LaneMath approx = LaneMath::approximate(b, loc);
  std::optional<LaneMath::KnownRoot> root;
  if (scheme.getCompanding() == Companding::sqrt)
    root = m.knownRoot(x);
  auto [p, k, quotient] =
      approximateCodeArgument(approx, scheme, x, divisor, root);
  double range = codeRange(scheme);
  double lo = scheme.getStorage().isSigned() ? -range : 0.0;
  double centre = (lo + range) / 2, halfWidth = (range - lo + 1) / 2;
  // For t' = p * k: the nearest integer as RN(t' + kCodeBias) - kCodeBias
  // (one FMA, not FRND on the quarter-rate conversion pipe; the biased sum
  // is the code, quantizeGroup; floor(t' + 0.5) is the same integer where
  // the check below passes), t' less it, and t' less the range's centre.
  struct Terms {
    Value biased, distance, offCentre;
  };
  auto termsOf = [&](Value p, Value k) {
    auto fma = [&](Value addend) { return m.fma(p, k, addend); };
    Value biased = fma(m.constF(p, kCodeBias));
    Value q = m.sub(biased, m.constF(biased, kCodeBias));
    return Terms{biased, fma(arith::NegFOp::create(b, loc, q)),
                 fma(m.constF(p, -centre))};
  };
  auto [biased, distance, offCentre] = termsOf(p, k);
  auto lanes = cast<VectorType>(p.getType()).getNumElements();
  auto cmpConst = [&](arith::CmpFPredicate p, Value v, double c) {
    return m.cmp(p, v, m.constF(v, c));
  };
  Value clearOfBoundary =
      cmpConst(arith::CmpFPredicate::OLT,
               m.laneMaximum(distance, /*magnitude=*/true), 0.5 - 0x1p-12);
  // With the absmax as divisor the range needs no check: |x| <= absmax <=
  // divisor (the sqrt codes' divisor is sqrt.rn of the largest v), so
  // |t'| <= range * (1 + 2^-20) < range + 1/2 for both chains (their errors
  // above), and a NaN lane fails the boundary check. (Lanes past a partial
  // tile's end take no part in the absmax; their codes are not stored.)
  Value all = clearOfBoundary;
  if (scheme.getDivisor() != ScaleDivisor::absmax) {
    Value inRange = cmpConst(arith::CmpFPredicate::OLT,
                             m.laneMaximum(offCentre, /*magnitude=*/true),
                             halfWidth);
    all = arith::AndIOp::create(b, loc, all, inRange);
  }
  // The divisor is the same for all lanes: its range is checked once, for
  // the thread here and for each lane's own check in the fallback.
  Value absDivisor = m.abs(vector::ExtractOp::create(b, loc, divisor, 0));
  Value belowHi = cmpConst(arith::CmpFPredicate::OLE, absDivisor, 0x1p100);
  all = arith::AndIOp::create(b, loc, all, belowHi);
  Value aboveLo = cmpConst(arith::CmpFPredicate::OGE, absDivisor, 0x1p-40);
  all = arith::AndIOp::create(b, loc, all, aboveLo);
  Value divisorOk = arith::AndIOp::create(b, loc, belowHi, aboveLo);
  // A known root's uniform out of its range fails every thread's check; the
  // lanes' own checks below then take the sqrt.approx chain instead.
  if (root && root->cond)
    all = arith::AndIOp::create(b, loc, all, root->cond);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{p.getType()}, all,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, loc, biased);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  // Some lane failed: each lane keeps its checked code or takes the IEEE
  // chain alone, so that a warp pays for the lanes that fail and not for
  // all of them (ncu on the H200: the sqrt codes of repeated bf16 gradients
  // fall on exact half integers, ties, and some lane of 256 does in most
  // warps). Scalar div.rn / sqrt.rn as inline PTX: LLVM would hoist the
  // short chain above the branch.
  LaneMath ieee = m.guarded(false).opaque();
  if (lanes > 8) {
    // 16 lanes: all of them take the IEEE chain. (A per-lane fallback, in
    // chunks of a quarter of the lanes, took FlashLion from 106 to 126
    // registers; the loop below is not measured at 16 lanes.)
    LaneMath plain = m.guarded(false);
    scf::YieldOp::create(
        b, loc,
        biasCode(plain, clampCode(plain, scheme,
                                  roundCode(plain, scheme,
                                            codeArgument(plain, scheme, x, divisor)))));
    b.setInsertionPointAfter(ifOp);
    return ifOp.getResult(0);
  }
  // One lane at a time: a mask of the failing lanes, and a loop that gives
  // the lowest one the IEEE chain. A warp runs it as often as its thread
  // with the most failing lanes (usually once), whatever lanes they are:
  // the main job's FlashAdamW 0.816 -> 0.773 ms against a fallback per
  // quarter of the lanes (bench/NOTES.md).
  Type i32 = b.getI32Type();
  auto ci = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  if (root && root->cond) {
    // Where the known root's uniform lies outside [2^-40, 1], the lanes are
    // checked on the sqrt.approx chain (the codes' own, without the root):
    // a launch with such a uniform then costs the per-lane checks, not the
    // IEEE chain on every lane. sqrt.approx as inline PTX, which LLVM cannot
    // hoist above the branch into the fast path.
    Value k0 = vector::BroadcastOp::create(b, loc, p.getType(), quotient);
    Value u0 = m.perLane(x, [&](Value lane) {
      return inlinePtx(b, loc, b.getF32Type(), lane,
                       "sqrt.approx.ftz.f32 $0, $1;", "=f,f");
    });
    Terms t0 = termsOf(u0, k0);
    biased = m.select(root->cond, biased, t0.biased);
    distance = m.select(root->cond, distance, t0.distance);
    offCentre = m.select(root->cond, offCentre, t0.offCentre);
  }
  Value laneOk = arith::AndIOp::create(
      b, loc,
      m.cmp(arith::CmpFPredicate::OLT, m.abs(distance),
            m.constF(distance, 0.5 - 0x1p-12)),
      m.cmp(arith::CmpFPredicate::OLT, m.abs(offCentre),
            m.constF(offCentre, halfWidth)));
  Value mask = ci(0);
  for (int64_t i = 0; i < lanes; ++i) {
    Value ok = arith::AndIOp::create(
        b, loc, divisorOk, vector::ExtractOp::create(b, loc, laneOk, i));
    mask = arith::OrIOp::create(
        b, loc, mask,
        arith::SelectOp::create(b, loc, ok, ci(0), ci(int64_t(1) << i)));
  }
  auto loopOp = scf::WhileOp::create(b, loc, TypeRange{i32, p.getType()},
                                     ValueRange{mask, biased});
  {
    OpBuilder::InsertionGuard loopGuard(b);
    Block *before = b.createBlock(&loopOp.getBefore(), {}, {i32, p.getType()},
                                  {loc, loc});
    Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                       before->getArgument(0), ci(0));
    scf::ConditionOp::create(b, loc, more, before->getArguments());
    Block *after = b.createBlock(&loopOp.getAfter(), {}, {i32, p.getType()},
                                 {loc, loc});
    Value bits = after->getArgument(0), cur = after->getArgument(1);
    Value lane = LLVM::CountTrailingZerosOp::create(b, loc, i32, bits, false);
    Value xi = vector::ExtractOp::create(b, loc, x, 0);
    for (int64_t k = 1; k < lanes; ++k)
      xi = arith::SelectOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, ci(k)),
          vector::ExtractOp::create(b, loc, x, k), xi);
    Value di = vector::ExtractOp::create(b, loc, divisor, 0);
    Value code = biasCode(
        ieee, clampCode(ieee, scheme,
                        roundCode(ieee, scheme, codeArgument(ieee, scheme, xi, di))));
    SmallVector<int32_t> iota;
    for (int64_t k = 0; k < lanes; ++k)
      iota.push_back(static_cast<int32_t>(k));
    auto vecI32 = VectorType::get({lanes}, i32);
    Value hit = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vecI32, ArrayRef<int32_t>(iota))),
        vector::BroadcastOp::create(b, loc, vecI32, lane));
    Value next = arith::SelectOp::create(
        b, loc, hit, vector::BroadcastOp::create(b, loc, p.getType(), code), cur);
    Value rest = arith::AndIOp::create(
        b, loc, bits, arith::SubIOp::create(b, loc, bits, ci(1)));
    scf::YieldOp::create(b, loc, ValueRange{rest, next});
  }
  scf::YieldOp::create(b, loc, loopOp.getResult(1));
  b.setInsertionPointAfter(ifOp);
  return ifOp.getResult(0);
}

Value mlir::qopt::quantizeGroup(LaneMath &m, GroupSchemeAttr scheme, Value x,
                                Value absmax, Value storedScale,
                                bool checkedRounding) {
  OpBuilder &b = m.builder();
  Location loc = m.location();
  Value divisor = quantizationDivisor(m, scheme, absmax, storedScale);
  Type i32 = withElement(x.getType(), b.getI32Type());
  Type i8 = withElement(x.getType(), b.getI8Type());
  // Linear codes have one IEEE division: the check costs more than it saves
  // (measured on the H200, bench/NOTES.md).
  if (checkedRounding && !m.isFast() &&
      m.getTarget() == LaneMath::Target::NVVM &&
      isa<VectorType>(x.getType()) &&
      scheme.getCompanding() != Companding::linear)
    return arith::TruncIOp::create(
        b, loc, i8,
        arith::BitcastOp::create(b, loc, i32,
                                 checkedRoundCode(m, scheme, x, divisor)));
  Value q = clampCode(m, scheme, roundCode(m, scheme, codeArgument(m, scheme, x, divisor)));
  // On the GPU the code from the biased sum's bits (an FADD), not a
  // conversion (F2I, quarter rate); the host converts.
  Value qi = m.getTarget() == LaneMath::Target::NVVM
                 ? Value(arith::BitcastOp::create(b, loc, i32, biasCode(m, q)))
                 : Value(arith::FPToSIOp::create(b, loc, i32, q));
  return arith::TruncIOp::create(b, loc, i8, qi);
}

FailureOr<Value> mlir::qopt::vectorizeUpdateOp(LaneMath &m, Operation *op,
                                               IRMapping &mapping,
                                               int64_t lanes) {
  OpBuilder &b = m.builder();
  Location loc = op->getLoc();
  auto lanesOf = [&](Type t) -> Type { return VectorType::get({lanes}, t); };
  if (auto constant = dyn_cast<arith::ConstantOp>(op))
    return Value(arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(cast<ShapedType>(lanesOf(constant.getType())),
                               constant.getValue())));
  auto operand = [&](unsigned i) { return mapping.lookup(op->getOperand(i)); };
  if (isa<math::SqrtOp>(op))
    return m.sqrt(operand(0));
  if (isa<arith::DivFOp>(op) && m.isGuarded())
    return m.div(operand(0), operand(1));
  if (isa<math::AbsFOp>(op))
    return m.abs(operand(0));
  if (isa<math::FloorOp>(op))
    return m.floor(operand(0));
  if (isa<math::CopySignOp>(op))
    return m.copySign(operand(0), operand(1));
  if (op->getDialect()->getNamespace() != "arith")
    return op->emitOpError("is not supported in a per-element expression");
  OperationState state(loc, op->getName());
  for (Value v : op->getOperands())
    state.addOperands(mapping.lookup(v));
  for (Type t : op->getResultTypes())
    state.addTypes(lanesOf(t));
  state.addAttributes(op->getAttrs());
  if (m.isFast() && op->hasAttr("fastmath"))
    state.attributes.set("fastmath",
                         arith::FastMathFlagsAttr::get(
                             b.getContext(), arith::FastMathFlags::contract |
                                                 arith::FastMathFlags::afn |
                                                 arith::FastMathFlags::arcp));
  Value result = b.create(state)->getResult(0);
  if (isa<arith::MulFOp>(op))
    m.recordMul(operand(0), operand(1), result);
  else if (isa<arith::AddFOp>(op))
    m.recordAdd(operand(0), operand(1), result);
  return result;
}

//===- CodebookCodes.cpp - Codebook codes ---------------------------------===//
//
// Each codebook state's qmap, midpoints and bucket table in shared memory,
// filled once per block, and the code of a normalized value by its bucket or
// by the binary search of all midpoints.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::qopt;

void KernelEmitter::emitCodebookTable(KernelContext &kernel, int64_t k,
                                      int stateIndex, Value dynamicBase,
                                      int64_t bucketsOffset) {
  std::string qname = kernel.prefix + "_qmap" + std::to_string(stateIndex);
  std::string mname = kernel.prefix + "_mid" + std::to_string(stateIndex);
  std::string fname = kernel.prefix + "_bucketsfit" + std::to_string(stateIndex);
  Value qmap = sharedArray(kernel.module, qname, 256);
  // 255 midpoints and 8 of +inf after them, read by the bucketed search.
  Value mid = sharedArray(kernel.module, mname, 255 + kMidPadding);
  kernel.qmapShared[stateIndex] = qmap;
  kernel.midShared[stateIndex] = mid;
  if (codebookBuckets) {
    kernel.bucketShared[stateIndex] =
        gep(dynamicBase, b.getI8Type(),
            constI64(bucketsOffset +
                     int64_t(k) * CodebookBuckets::kBytesPerState));
    kernel.bucketsFitShared[stateIndex] =
        sharedArray(kernel.module, fname, 1, i32());
  }
  Value table = kernel.entry->getArgument(4 + k);
  // Whether no entry is below zero (a NaN or -0 entry allowed: the range
  // facts' "nonnegative" includes them), for the dequantized state's
  // range facts (emitLoadState): each thread's entries, then the
  // barrier's and-reduction over the block.
  Value trueFlag =
      arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  auto fill = scf::ForOp::create(b, loc, kernel.tid, constI64(256),
                                 constI64(threads), ValueRange{trueFlag});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fill.getBody());
    Value i = fill.getInductionVar();
    Value e = load(f32(), gep(table, f32(), i), 4);
    LLVM::StoreOp::create(b, loc, e, gep(qmap, f32(), i), 4);
    Value belowZero = math.cmp(arith::CmpFPredicate::OLT, e, math.constF(e, 0.0));
    Value notBelow = arith::XOrIOp::create(b, loc, belowZero, trueFlag);
    scf::YieldOp::create(
        b, loc,
        ValueRange{arith::AndIOp::create(b, loc, fill.getRegionIterArgs()[0],
                                         notBelow)});
  }
  Value allNotBelow = NVVM::BarrierOp::create(
      b, loc, i32(), Value(), Value(),
      NVVM::BarrierReductionAttr::get(b.getContext(),
                                      NVVM::BarrierReduction::AND),
      arith::ExtUIOp::create(b, loc, i32(), fill.getResult(0))).getRes();
  kernel.qmapNonnegative[stateIndex] = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne, allNotBelow, constI32(0));
  auto mids = scf::ForOp::create(b, loc, kernel.tid, constI64(255),
                                 constI64(threads));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(mids.getBody()->getTerminator());
    Value i = mids.getInductionVar();
    Value next = arith::AddIOp::create(b, loc, i, constI64(1));
    Value lo = load(f32(), gep(qmap, f32(), i), 4);
    Value hi = load(f32(), gep(qmap, f32(), next), 4);
    // mid[k] = (qmap[k] + qmap[k+1]) * 0.5, as seed 000 computes it.
    LLVM::StoreOp::create(
        b, loc, math.mul(math.add(lo, hi), math.constF(lo, 0.5)),
        gep(mid, f32(), i), 4);
  }
  auto pad = scf::ForOp::create(b, loc, kernel.tid, constI64(kMidPadding),
                                constI64(threads));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(pad.getBody()->getTerminator());
    Value i = arith::AddIOp::create(b, loc, pad.getInductionVar(),
                                    constI64(255));
    LLVM::StoreOp::create(
        b, loc, arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity())),
        gep(mid, f32(), i), 4);
  }
  if (codebookBuckets) {
    // The fits flag set before the barrier that starts the fill.
    Value fits = kernel.bucketsFitShared[stateIndex];
    auto first = ifZero(kernel.tid);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      LLVM::StoreOp::create(b, loc, constI32(1), fits, 4);
    }
    gpu::BarrierOp::create(b, loc);
    // One scratch array for every state: a barrier separates a state's
    // fill from the next state's midpoints.
    if (!kernel.bucketOfShared)
      kernel.bucketOfShared =
          sharedArray(kernel.module, kernel.prefix + "_bucketof",
                      255 + kMidPadding, i32());
    fillBuckets(kernel, mid, kernel.bucketShared[stateIndex], fits,
                kernel.bucketOfShared);
  }
}

Value KernelEmitter::searchMidpoints(Value mids, Value x, Value pos,
                                     int64_t firstStep,
                                     arith::CmpFPredicate pred) {
  for (int64_t step = firstStep; step >= 1; step /= 2) {
    Value candidate = arith::AddIOp::create(b, loc, pos, constI32(step));
    Value mid = load(f32(), gep(mids, f32(), arith::SubIOp::create(
                                               b, loc, candidate, constI32(1))),
                     4);
    Value below = arith::CmpFOp::create(b, loc, pred, mid, x);
    pos = arith::SelectOp::create(b, loc, below, candidate, pos);
  }
  return pos;
}

void KernelEmitter::fillBuckets(const KernelContext &kernel, Value mids,
                                Value buckets, Value fits, Value bucketOf) {
  // Buckets in ascending order of c: v < kBucketsPerSign is the negative
  // bucket k = kBucketsPerSign - 1 - v, the rest the positive k = v -
  // kBucketsPerSign; the table holds the positive k at k, the negative at
  // kBucketsPerSign + k. For ascending midpoints of magnitude above kMagLo,
  // "mid < the lowest c of bucket v" is "mid's bucket < v", so a bucket's
  // entry counts the midpoints whose bucket is below it. Two passes:
  //  1. one thread per midpoint j: its bucket in that order goes to
  //     `bucketOf` (-1 below bucket 0, kBuckets above the last; +0 and -0
  //     in the two buckets of k = 0), and a midpoint inside the buckets
  //     writes its bucket's entry itself: j << 16 plus its offset.
  //  2. each thread fills a run of kBuckets / threads buckets with one
  //     integer cursor over `bucketOf` (the first midpoint whose bucket is
  //     not below the current one, and that bucket), started by one binary
  //     search of the midpoints: a bucket the cursor's midpoint lies in is
  //     pass 1's and moves the cursor on; the others get the count. The
  //     loop is branch free: it reads no midpoint (docs/tuning.md#bucket-fill).
  // A block size that does not divide kBuckets leaves the last runs short
  // or empty. Midpoints that do not ascend (or a NaN), two in one bucket,
  // or one of magnitude <= kMagLo (where the lookup's clamp would misplace
  // c) clear `fits` (every such thread stores the same 0; the barrier after
  // the fill publishes it), and the codes take the full search: the table
  // is then not read, and some of it not written.
  fillMidpointBuckets(kernel, mids, buckets, fits, bucketOf);
  fillBucketRuns(kernel, mids, buckets, fits, bucketOf);
}

void KernelEmitter::fillMidpointBuckets(const KernelContext &kernel,
                                        Value mids, Value buckets, Value fits,
                                        Value bucketOf) {
  auto bits = [&](Value f) { return arith::BitcastOp::create(b, loc, i32(), f); };
  auto clearFits = [&](Value when) {
    auto clear = scf::IfOp::create(b, loc, TypeRange{}, when, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&clear.getThenRegion().front());
    LLVM::StoreOp::create(b, loc, constI32(0), fits, 4);
  };
  // A midpoint's bucket: {its place in ascending order of c (beyond: -1 or
  // kBuckets), whether it lies inside, its table index}.
  struct MidBucket {
    Value order, inside, index, mag, negative;
  };
  auto bucketOfMid = [&](Value mid) {
    Value pattern = bits(mid);
    Value mag = arith::AndIOp::create(b, loc, pattern, constI32(INT32_MAX));
    Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           pattern, constI32(0));
    Value k = arith::ShRUIOp::create(
        b, loc,
        arith::SubIOp::create(
            b, loc, arith::MaxUIOp::create(b, loc, mag, constI32(kMagLo)),
            constI32(kMagLo)),
        constI32(16));
    Value ordered = arith::SelectOp::create(
        b, loc, negative,
        arith::SubIOp::create(b, loc, constI32(kBucketsPerSign - 1), k),
        arith::AddIOp::create(b, loc, k, constI32(kBucketsPerSign)));
    Value beyond = arith::SelectOp::create(b, loc, negative, constI32(-1),
                                           constI32(kBuckets));
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, mag,
                                         constI32(kMagHi));
    Value index = arith::SelectOp::create(
        b, loc, negative, arith::AddIOp::create(b, loc, k, constI32(kBucketsPerSign)),
        k);
    return MidBucket{arith::SelectOp::create(b, loc, inside, ordered, beyond),
                     inside, index, mag, negative};
  };
  {
    // Pass 1: bucketOf[j] for j < 255, the padding past it above every
    // bucket.
    auto each = scf::ForOp::create(b, loc, kernel.tid,
                                   constI64(255 + kMidPadding),
                                   constI64(threads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(each.getBody()->getTerminator());
    Value j = each.getInductionVar();
    Value isMid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j,
                                        constI64(255));
    auto ifMid = scf::IfOp::create(b, loc, TypeRange{i32()}, isMid, true);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifMid.getThenRegion().front());
      Value mid = load(f32(), gep(mids, f32(), j), 4);
      Value next = load(f32(), gep(mids, f32(), arith::AddIOp::create(
                                                    b, loc, j, constI64(1))),
                        4);
      // mids[255] is +inf padding; a NaN compares false.
      clearFits(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT, mid, next));
      MidBucket own = bucketOfMid(mid);
      MidBucket after = bucketOfMid(next);
      auto write = scf::IfOp::create(b, loc, TypeRange{}, own.inside, false);
      {
        // c lies above the midpoint where c's low 16 bits exceed its: for a
        // positive bucket where low(c) + 0xFFFF - low(mid) carries into bit
        // 16, for a negative one (the bits complemented) where 0xFFFF -
        // low(c) + low(mid) does.
        OpBuilder::InsertionGuard body(b);
        b.setInsertionPointToStart(&write.getThenRegion().front());
        Value midLow = arith::AndIOp::create(b, loc, own.mag, constI32(0xFFFF));
        Value complement = arith::SubIOp::create(b, loc, constI32(0xFFFF), midLow);
        Value offset = arith::SelectOp::create(b, loc, own.negative, midLow, complement);
        Value count = arith::ShLIOp::create(
            b, loc, arith::TruncIOp::create(b, loc, i32(), j), constI32(16));
        LLVM::StoreOp::create(b, loc, arith::AddIOp::create(b, loc, count, offset),
                              gep(buckets, i32(), own.index), 4);
        // (One op per statement: the IR's order is not the C++ compiler's
        // order of evaluating arguments.)
        Value two = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          after.order, own.order);
        Value tiny = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule,
                                           own.mag, constI32(kMagLo));
        clearFits(arith::OrIOp::create(b, loc, two, tiny));
      }
      scf::YieldOp::create(b, loc, ValueRange{own.order});
      b.setInsertionPointToStart(&ifMid.getElseRegion().front());
      scf::YieldOp::create(b, loc, ValueRange{constI32(INT32_MAX)});
    }
    LLVM::StoreOp::create(b, loc, ifMid.getResult(0), gep(bucketOf, i32(), j), 4);
  }
  gpu::BarrierOp::create(b, loc);
}

void KernelEmitter::fillBucketRuns(const KernelContext &kernel, Value mids,
                                   Value buckets, Value fits, Value bucketOf) {
  int64_t perThread = (kBuckets + threads - 1) / threads;
  // Pass 2. The run's first bucket (clamped to the last for the search of
  // a run past the end) and its lowest c (bounds as the lookup's: k = 0
  // holds every magnitude up to kMagLo + 0xFFFF, the last only 1.0).
  Value runFirst = arith::TruncIOp::create(
      b, loc, i32(),
      arith::MulIOp::create(b, loc, kernel.tid, constI64(perThread)));
  Value first = arith::MinUIOp::create(b, loc, runFirst, constI32(kBuckets - 1));
  Value firstNegative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              first, constI32(kBucketsPerSign));
  Value firstK = arith::SelectOp::create(
      b, loc, firstNegative,
      arith::SubIOp::create(b, loc, constI32(kBucketsPerSign - 1), first),
      arith::SubIOp::create(b, loc, first, constI32(kBucketsPerSign)));
  Value firstStart = arith::AddIOp::create(
      b, loc, constI32(kMagLo), arith::ShLIOp::create(b, loc, firstK, constI32(16)));
  Value firstMagLo = arith::SelectOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, firstK, constI32(0)),
      constI32(0), firstStart);
  Value firstMagHi = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, firstStart, constI32(0xFFFF)),
      constI32(kMagHi));
  Value firstLo = arith::BitcastOp::create(
      b, loc, f32(),
      arith::SelectOp::create(
          b, loc, firstNegative,
          arith::OrIOp::create(b, loc, firstMagHi, constI32(INT32_MIN)), firstMagLo));
  Value startBelow =
      searchMidpoints(mids, firstLo, constI32(0), 128, arith::CmpFPredicate::OLT);
  auto fill = scf::ForOp::create(
      b, loc, constI64(0), constI64(perThread), constI64(1),
      ValueRange{startBelow, load(i32(), gep(bucketOf, i32(), startBelow), 4)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(fill.getBody());
  Value below = fill.getRegionIterArgs()[0];
  Value belowBucket = fill.getRegionIterArgs()[1];
  Value v = arith::AddIOp::create(
      b, loc, runFirst, arith::TruncIOp::create(b, loc, i32(), fill.getInductionVar()));
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, v,
                                        constI32(kBuckets));
  Value cursorHere = arith::AndIOp::create(
      b, loc, inRange,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, belowBucket, v));
  Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, v,
                                         constI32(kBucketsPerSign));
  Value index = arith::SelectOp::create(
      b, loc, negative, arith::SubIOp::create(b, loc, constI32(kBuckets - 1), v),
      arith::SubIOp::create(b, loc, v, constI32(kBucketsPerSign)));
  Value countOnly = arith::AndIOp::create(
      b, loc, inRange,
      arith::XOrIOp::create(b, loc, cursorHere,
                            arith::ConstantOp::create(b, loc, b.getBoolAttr(true))));
  auto store = scf::IfOp::create(b, loc, TypeRange{}, countOnly, false);
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    LLVM::StoreOp::create(b, loc,
                          arith::ShLIOp::create(b, loc, below, constI32(16)),
                          gep(buckets, i32(), index), 4);
  }
  // Past the cursor's midpoint: the next one and its bucket (bucketOf's
  // padding keeps the index within it).
  Value nextBelow = arith::AddIOp::create(
      b, loc, below, arith::ExtUIOp::create(b, loc, i32(), cursorHere));
  Value nextBucket = arith::SelectOp::create(
      b, loc, cursorHere, load(i32(), gep(bucketOf, i32(), nextBelow), 4),
      belowBucket);
  scf::YieldOp::create(b, loc, ValueRange{nextBelow, nextBucket});
}

Value KernelEmitter::codebookCodes(const TileContext &tile, int stateIndex,
                                   Value value, Value divisor, Value absmax) {
  // Seed 000's code is the number of midpoints strictly below c
  // (torch.bucketize, right=False; a NaN c gets the last code). Where the
  // qmap's buckets fit (at most one midpoint each, none of magnitude <=
  // kMagLo) and the block's absmax is finite (so |c| <= 1, no NaN), c's
  // bucket entry gives the count in integer operations; else the 8-step
  // search over all midpoints.
  //
  // On the bucket path c is div.rn's fast-path sequence without a look at
  // the lanes (divByUniformUnchecked), for a divisor d in [2^-30, 2^60]:
  // where |x| >= 2^-60 it is guardedDiv's domain (|x| <= d), so c is
  // RN(x / d); where |x| < 2^-60, both RN(x / d) and the sequence's result
  // are below 2^-28 in magnitude (|q0| <= 2^-30 (1 + 2^-21), |r * rem| <=
  // 2^30 * 2^-59), and every c within kMagLo of 0, of either sign, has the
  // same code: no midpoint lies there.
  auto exactNormalized = [&] {
    return guardedMath.div(
        value, vector::BroadcastOp::create(b, loc, lanesOf(f32()), divisor));
  };
  const KernelContext &kernel = tile.kernel;
  const LaneFacts &facts = kernel.facts;
  Value mids = kernel.midShared.lookup(stateIndex);
  Value buckets = kernel.bucketShared.lookup(stateIndex);
  VectorType codeType = lanesOf(b.getI8Type());
  auto fullSearch = [&](Value normalized) {
    Value codes = arith::ConstantOp::create(b, loc, b.getZeroAttr(codeType));
    for (int64_t i = 0; i < lanes; ++i) {
      Value c = vector::ExtractOp::create(b, loc, normalized, i);
      // !(mid >= c): a NaN c takes the last code, as torch.bucketize does.
      Value pos = searchMidpoints(mids, c, constI32(0), 128,
                                  arith::CmpFPredicate::ULT);
      codes = vector::InsertOp::create(
          b, loc, arith::TruncIOp::create(b, loc, b.getI8Type(), pos), codes, i);
    }
    return codes;
  };
  if (!codebookBuckets)
    return fullSearch(exactNormalized());
  // d in [2^-30, 2^60] (d >= 1e-30 > 0), and absmax < inf (not NaN).
  Value belowMax = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE,
                                         divisor, math.constF(divisor, 0x1p60));
  Value aboveMin = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE,
                                         divisor, math.constF(divisor, 0x1p-30));
  Value divisorOk = arith::AndIOp::create(b, loc, aboveMin, belowMax);
  // A saturated absmax (overflow = saturate) is finite already: NaN became
  // 0 and +inf the largest float32, both outside the divisor's range. The
  // plan's early_saturation_counts leaves the check out then.
  Value inRange = divisorOk;
  if (!plan.getEarlySaturationCounts() ||
      cast<CodebookSchemeAttr>(states[stateIndex].getScheme()).getOverflow() !=
          Overflow::saturate) {
    Value finite = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OLT, absmax,
        math.constF(absmax, std::numeric_limits<double>::infinity()));
    inRange = arith::AndIOp::create(b, loc, finite, divisorOk);
  }
  auto ifOp = scf::IfOp::create(
      b, loc, TypeRange{codeType},
      arith::AndIOp::create(b, loc, kernel.bucketsFit.lookup(stateIndex),
                            inRange),
      /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value normalized = math.divByUniformUnchecked(value, divisor);
  // A state known nonnegative (Adam's v with an unsigned map, where the
  // facts' condition holds) has every c >= 0 or -0, whose code is +0's
  // (no midpoint lies between them): the positive buckets alone, with no
  // look at c's sign (two instructions a lane fewer).
  auto nonneg = facts.nonnegative.find(value);
  if (nonneg == facts.nonnegative.end() || !nonneg->second) {
    bool always = nonneg != facts.nonnegative.end();
    scf::YieldOp::create(b, loc,
                         bucketCodes(tile, buckets, normalized, always));
  } else {
    auto signs = scf::IfOp::create(b, loc, TypeRange{codeType}, nonneg->second,
                                   /*withElseRegion=*/true);
    b.setInsertionPointToStart(&signs.getThenRegion().front());
    scf::YieldOp::create(b, loc, bucketCodes(tile, buckets, normalized, true));
    b.setInsertionPointToStart(&signs.getElseRegion().front());
    scf::YieldOp::create(b, loc,
                         bucketCodes(tile, buckets, normalized, false));
    b.setInsertionPointAfter(signs);
    scf::YieldOp::create(b, loc, signs.getResult(0));
  }
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc, fullSearch(exactNormalized()));
  b.setInsertionPointAfter(ifOp);
  return ifOp.getResult(0);
}

Value KernelEmitter::bucketCodes(const TileContext &tile, Value buckets,
                                 Value normalized, bool nonnegative) {
  VectorType codeType = lanesOf(b.getI8Type());
  Value codes = arith::ConstantOp::create(b, loc, b.getZeroAttr(codeType));
  SmallVector<Value> sums; // entry + low: the code in bits 16..23
  for (int64_t i = 0; i < lanes; ++i) {
    Value c = vector::ExtractOp::create(b, loc, normalized, i);
    // |c| clamped below to kMagLo (bucket 0 of its sign; no midpoint lies
    // below it); a partial tile's unused lanes (any value) also above to 1.
    // (llvm.maxnum/minnum: a NaN lane is clamped too; a nonnegative c needs
    // no |c|: the clamp takes -0 to kMagLo.)
    Value mag = math.intrinsic(
        "llvm.maxnum",
        {nonnegative ? c : math.abs(c),
         math.constF(c, llvm::bit_cast<float>(uint32_t(kMagLo)))});
    if (!tile.isFull())
      mag = math.intrinsic("llvm.minnum", {mag, math.constF(c, 1.0)});
    Value magBits = arith::BitcastOp::create(b, loc, i32(), mag);
    // The table holds the positive buckets first (fillBuckets); a negative
    // c's are kBucketsPerSign on.
    Value step = arith::ShRUIOp::create(b, loc, magBits, constI32(16));
    Value sign;
    if (!nonnegative) {
      sign = arith::ShRSIOp::create(
          b, loc, arith::BitcastOp::create(b, loc, i32(), c), constI32(31));
      step = arith::AddIOp::create(
          b, loc, step, arith::AndIOp::create(b, loc, sign, constI32(kBucketsPerSign)));
    }
    Value bucket = arith::AddIOp::create(b, loc, step, constI32(-(kMagLo >> 16)));
    Value entry = load(i32(), gep(buckets, i32(), bucket), 4);
    Value low = arith::AndIOp::create(
        b, loc, sign ? arith::XOrIOp::create(b, loc, magBits, sign) : magBits,
        constI32(0xFFFF));
    sums.push_back(arith::AddIOp::create(b, loc, entry, low));
  }
  if (lanes % 4 == 0) {
    // Each code is byte 2 of its sum: four lanes' bytes into a word by three
    // prmt (byte selectors 2 and 6, then the two low halves), no shifts.
    SmallVector<Value> words;
    for (int64_t i = 0; i < lanes; i += 4) {
      auto pair = [&](Value lo, Value hi) {
        return math.intrinsic("llvm.nvvm.prmt", {lo, hi, constI32(0x62)}, i32());
      };
      words.push_back(math.intrinsic(
          "llvm.nvvm.prmt",
          {pair(sums[i], sums[i + 1]), pair(sums[i + 2], sums[i + 3]),
           constI32(0x5410)},
          i32()));
    }
    codes = vector::BitCastOp::create(
        b, loc, codeType,
        vector::FromElementsOp::create(
            b, loc, VectorType::get({lanes / 4}, i32()), words));
  } else {
    for (int64_t i = 0; i < lanes; ++i)
      codes = vector::InsertOp::create(
          b, loc,
          arith::TruncIOp::create(
              b, loc, b.getI8Type(),
              arith::ShRUIOp::create(b, loc, sums[i], constI32(16))),
          codes, i);
  }
  return codes;
}

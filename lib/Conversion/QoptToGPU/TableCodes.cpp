//===- TableCodes.cpp - 4-bit table codes ---------------------------------===//
//
// numerics.md §2's 4-bit tables (`dynamic`, `nonzero`) on the GPU: the
// `dynamic` table's entries and its code buckets in shared memory, stored
// once per block, and the codes of a group, through one reciprocal of the
// group's divisor and the buckets where that is exact.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::qopt;

void KernelEmitter::emitCodeTables(KernelContext &kernel) {
  for (auto [i, state] : llvm::enumerate(states)) {
    auto group = dyn_cast<GroupSchemeAttr>(state.getScheme());
    if (!group || !isCodeTable(group.getCompanding()) ||
        isArithmeticTable(group.getCompanding()))
      continue;
    // The entries are looked up by code, one shared load a lane, where a
    // tree of selects takes about 19 instructions. bench/NOTES.md#q4speed
    ArrayRef<float> entries = getCodeTable(group.getCompanding());
    Value table = sharedArray(kernel.module,
                              kernel.prefix + "_codetable" + std::to_string(i),
                              entries.size());
    // (tableCodes reads the buckets only on its guarded path.)
    const CodeTableBuckets *buckets =
        codebookBuckets && guardedMath.isGuarded()
            ? getCodeTableBuckets(group.getCompanding())
            : nullptr;
    Value bucketTable;
    if (buckets)
      bucketTable = sharedArray(
          kernel.module, kernel.prefix + "_codebuckets" + std::to_string(i),
          int64_t(buckets->entries.size()), i32());
    // Thread 0 stores both before the kernel's first barrier.
    auto first = ifZero(kernel.tid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    for (auto [k, e] : llvm::enumerate(entries))
      LLVM::StoreOp::create(
          b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(e)),
          gep(table, f32(), constI64(k)), 4);
    if (buckets) {
      for (auto [k, e] : llvm::enumerate(buckets->entries))
        LLVM::StoreOp::create(b, loc, constI32(int32_t(e)),
                              gep(bucketTable, i32(), constI64(k)), 4);
      kernel.codeBucketsShared[i] = bucketTable;
    }
    kernel.codeTableShared[i] = table;
  }
}

Value KernelEmitter::tableCodes(const TileContext &tile, int stateIndex,
                                GroupSchemeAttr group, Value value,
                                Value absmax, Value rawAbsmax,
                                Value storedScale) {
  auto lanesOfScalar = [&](Value s) {
    return vector::BroadcastOp::create(b, loc, lanesOf(f32()), s).getResult();
  };
  auto ieeeCodes = [&] {
    return quantizeGroup(guardedMath, group, value, lanesOfScalar(absmax),
                         lanesOfScalar(storedScale), checkedRounding);
  };
  // --guarded-ieee=false keeps one div.rn a lane (the checked-rounding
  // suite's reference kernels), --codebook-buckets=false the search.
  if (group.getDivisor() != ScaleDivisor::absmax || !guardedMath.isGuarded())
    return ieeeCodes();
  // c = x / d, d = max(absmax, 1e-12), by div.rn's fast-path sequence with
  // d's reciprocal once, where d lies in [2^-30, 2^60] and the group's own
  // absmax is at most d (not saturated below it; not NaN), so that |x| <= d
  // in every lane of the tensor: where |x| >= 2^-60 that is guardedDiv's
  // domain and c = RN(x / d); where |x| < 2^-60 both RN(x / d) and the
  // sequence's result lie below 2^-28 in magnitude, where every c has the
  // table's code of 0 (no midpoint lies there; getCodeTableBuckets checks
  // it for the buckets, and the (k + 1) / 16 table's code is 0 up to
  // 1.5 / 16). Elsewhere the guarded IEEE chain (quantizeGroup).
  Value d = math.maxKeepNaN(absmax, math.constF(absmax, 1e-12));
  Value ok = arith::AndIOp::create(
      b, loc,
      arith::AndIOp::create(
          b, loc,
          math.cmp(arith::CmpFPredicate::OGE, d, math.constF(d, 0x1p-30)),
          math.cmp(arith::CmpFPredicate::OLE, d, math.constF(d, 0x1p60))),
      math.cmp(arith::CmpFPredicate::OLE, rawAbsmax, d));
  VectorType codeType = lanesOf(b.getI8Type());
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{codeType}, ok,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value c = math.divByUniformUnchecked(value, d);
  const CodeTableBuckets *buckets = getCodeTableBuckets(group.getCompanding());
  Value table = codebookBuckets
                    ? tile.kernel.codeBucketsShared.lookup(stateIndex)
                    : Value();
  // A full tile's lanes all hold the tensor's elements: |c| <= 1 in each
  // (or NaN), so the clamps to 1 go.
  scf::YieldOp::create(b, loc,
                       buckets && table
                           ? bucketTableCodes(table, *buckets, c, tile.isFull())
                           : tableCodeOfQuotient(math, group, c, tile.isFull()));
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc, ieeeCodes());
  b.setInsertionPointAfter(ifOp);
  return ifOp.getResult(0);
}

Value KernelEmitter::bucketTableCodes(Value table,
                                      const CodeTableBuckets &buckets, Value c,
                                      bool withinOne) {
  // CodeTableBuckets::code, lane by lane. bits(2^e) has no low kShift bits,
  // so the bucket is bits(|c|) >> kShift less a constant, which the shared
  // load's address takes.
  constexpr int kShift = CodeTableBuckets::kShift;
  VectorType codeType = lanesOf(b.getI8Type());
  Value codes = arith::ConstantOp::create(b, loc, b.getZeroAttr(codeType));
  Value magLo = math.constF(vector::ExtractOp::create(b, loc, c, 0),
                            llvm::bit_cast<float>(buckets.magLo));
  Value one = math.constF(magLo, 1.0);
  for (int64_t i = 0; i < lanes; ++i) {
    Value ci = vector::ExtractOp::create(b, loc, c, i);
    // llvm.maxnum first: a NaN lane clamps to 2^e. Above 1 only where a
    // lane may lie outside the tensor.
    Value mag = math.intrinsic("llvm.maxnum", {math.abs(ci), magLo});
    if (!withinOne)
      mag = math.intrinsic("llvm.minnum", {mag, one});
    Value magBits = arith::BitcastOp::create(b, loc, i32(), mag);
    Value sign = arith::ShRSIOp::create(
        b, loc, arith::BitcastOp::create(b, loc, i32(), ci), constI32(31));
    Value index = arith::AddIOp::create(
        b, loc,
        arith::AddIOp::create(
            b, loc, arith::ShRUIOp::create(b, loc, magBits, constI32(kShift)),
            arith::AndIOp::create(b, loc, sign, constI32(buckets.perSign))),
        constI32(-int32_t(buckets.magLo >> kShift)));
    Value entry = load(i32(), gep(table, i32(), index), 4);
    Value low = arith::AndIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, magBits, sign),
        constI32((int32_t(1) << kShift) - 1));
    Value code = arith::ShRUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, entry, low), constI32(kShift));
    codes = vector::InsertOp::create(
        b, loc, arith::TruncIOp::create(b, loc, b.getI8Type(), code), codes, i);
  }
  return codes;
}

Value KernelEmitter::tableEntriesFromShared(Value table, Value packed) {
  // Lane k's code is nibble k of the packed bytes (docs/abi.md "Packed 4-bit
  // codes"): in the 32-bit word k / 8 it is bits 4 (k % 8) up, so its entry's
  // byte offset, 4 code, is the word shifted right by 4 (k % 8) - 2 (left by
  // 2 for the first) and masked to 0x3C: two operations a lane where the
  // bytes' unpacking, widening and scaling took four.
  Value entries =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(lanesOf(f32())));
  if (lanes % 8 != 0) {
    // Fewer lanes than a word's nibbles: each code unpacked, then its entry.
    Value codes = unpackNibbles(math, packed, /*isSigned=*/false);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      Value code = arith::ExtUIOp::create(
          b, loc, i64(), vector::ExtractOp::create(b, loc, codes, lane));
      entries = vector::InsertOp::create(
          b, loc, load(f32(), gep(table, f32(), code), 4), entries, lane);
    }
    return entries;
  }
  Value words = vector::BitCastOp::create(
      b, loc, VectorType::get({lanes / 8}, i32()), packed);
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value word = vector::ExtractOp::create(b, loc, words, lane / 8);
    int64_t shift = 4 * (lane % 8) - 2;
    Value moved =
        shift < 0 ? arith::ShLIOp::create(b, loc, word, constI32(-shift)).getResult()
                  : arith::ShRUIOp::create(b, loc, word, constI32(shift)).getResult();
    Value offset = arith::AndIOp::create(b, loc, moved, constI32(0x3C));
    Value entry = load(f32(), gep(table, b.getI8Type(), offset), 4);
    entries = vector::InsertOp::create(b, loc, entry, entries, lane);
  }
  return entries;
}

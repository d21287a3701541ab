//===- UpdateBody.cpp - One tile's update ---------------------------------===//
//
// The update of one tile: its loads, the update's arithmetic as vector ops
// of the lanes, the quantization and stores of states and the parameter.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include <map>

using namespace mlir;
using namespace mlir::qopt;

FailureOr<Value> KernelEmitter::emitLoadState(TileContext &tile, int index) {
  Attribute scheme = states[index].getScheme();
  if (isa<PlainSchemeAttr>(scheme))
    return widenToF32(math,
                      loadElements(tile, streamIndex(StreamRole::State, index)));
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    unsigned codesStream = streamIndex(StreamRole::StateCodes, index);
    Value packed = isPacked(group) ? loadPackedBytes(tile, codesStream) : Value();
    // A table in shared memory is indexed by the packed bytes themselves;
    // otherwise the codes: a table's nibble is an index, other 4-bit codes
    // are two's complement where the storage is signed.
    Value table = tile.kernel.codeTableShared.lookup(index);
    Value codes;
    if (!table)
      codes = packed ? unpackNibbles(math, packed,
                                     group.getStorage().isSigned() &&
                                         !isCodeTable(group.getCompanding()))
                     : loadElements(tile, codesStream);
    Value scale = loadPerGroup(tile, streamIndex(StreamRole::StateScales, index),
                               group.getGroupSize());
    Value scaleLanes = vector::BroadcastOp::create(b, loc, lanesOf(f32()), scale);
    if (!isCodeTable(group.getCompanding()))
      return dequantizeGroup(math, group, codes, scaleLanes);
    // entry = table[code] (from shared memory where the kernel holds the
    // table), then entry * scale, as dequantizeTable.
    Value entries = table ? tableEntriesFromShared(table, packed)
                          : tableEntries(math, group, codes);
    // A table of nonnegative entries ((k + 1) / 16: Adam's v in AdamW4bit)
    // makes the state nonnegative where its scale is, as a codebook's
    // unsigned qmap does: the guards of sqrt(v / bc2) and of the division
    // by it then skip their looks at the lanes.
    if (guardedMath.isGuarded() && hasNonnegativeEntries(group.getCompanding()))
      tile.kernel.facts.nonnegative[entries] = Value();
    return math.mul(entries, scaleLanes);
  }
  auto codebook = cast<CodebookSchemeAttr>(scheme);
  Value codes = loadElements(tile, streamIndex(StreamRole::StateCodes, index));
  Value absmax = loadPerGroup(tile, streamIndex(StreamRole::StateAbsmax, index),
                              codebook.getBlock());
  // x = qmap[code] * absmax (seed 000), the table read from shared memory.
  Value table = tile.kernel.qmapShared.lookup(index);
  Value entries = arith::ConstantOp::create(b, loc, b.getZeroAttr(lanesOf(f32())));
  for (int64_t i = 0; i < lanes; ++i) {
    Value code = vector::ExtractOp::create(b, loc, codes, i);
    Value idx = arith::ExtUIOp::create(b, loc, i32(), code);
    Value entry = load(f32(), gep(table, f32(), idx), 4);
    entries = vector::InsertOp::create(b, loc, entry, entries, i);
  }
  // Entries none of which is below zero: the state is nonnegative where the
  // block's absmax is (recordMul's fact), as Adam's v with bitsandbytes'
  // unsigned map, which spares the guards of sqrt(v / bc2) and of the
  // division by it their looks at the lanes.
  if (Value nonneg = tile.kernel.qmapNonnegative.lookup(index);
      nonneg && guardedMath.isGuarded())
    tile.kernel.facts.nonnegative[entries] = nonneg;
  Value absmaxLanes = vector::BroadcastOp::create(b, loc, lanesOf(f32()), absmax);
  return math.mul(entries, absmaxLanes);
}

LogicalResult KernelEmitter::emitStoreState(TileContext &tile, int index,
                                            Value value) {
  LaneFacts &facts = tile.kernel.facts;
  Attribute scheme = states[index].getScheme();
  Value zeros = math.constF(value, 0.0);
  if (auto plain = dyn_cast<PlainSchemeAttr>(scheme)) {
    storeElements(tile, streamIndex(StreamRole::State, index),
                  narrowFromF32(math, value, plain.getStorage()));
    return success();
  }
  if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    // Lanes past the end of the tensor take no part in the absmax.
    Value absmax;
    if (group.getCompanding() == Companding::sqrt) {
      // max_i sqrt(v_i) = sqrt(max_i v_i): sqrt.rn is monotone on [-0, inf]
      // and NaN below -0, so a negative v becomes NaN before the maximum.
      // One square root per thread instead of one per lane.
      auto lanesMax = [&](bool known) {
        Value domain = value;
        if (!known)
          domain = math.select(
              math.cmp(arith::CmpFPredicate::OLT, value, zeros),
              math.constF(value, std::numeric_limits<double>::quiet_NaN()),
              value);
        return math.laneMaximum(math.select(tile.laneMask, domain, zeros));
      };
      // Where the range facts know v is nonnegative (Adam's v with beta2 and
      // 1 - beta2 >= 0: a uniform condition), no lane needs the select.
      Value lanesMaxValue;
      auto nonneg = facts.nonnegative.find(value);
      if (nonneg != facts.nonnegative.end() && nonneg->second) {
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32()}, nonneg->second,
                                      /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifOp.getThenRegion().front());
        scf::YieldOp::create(b, loc, lanesMax(true));
        b.setInsertionPointToStart(&ifOp.getElseRegion().front());
        scf::YieldOp::create(b, loc, lanesMax(false));
        lanesMaxValue = ifOp.getResult(0);
      } else {
        lanesMaxValue = lanesMax(nonneg != facts.nonnegative.end());
      }
      Value maxValue =
          reduceGroupMax(tile, lanesMaxValue, group.getGroupSize());
      absmax = math.sqrt(maxValue);
    } else {
      Value magnitude =
          math.select(tile.laneMask, groupMagnitude(math, group, value), zeros);
      absmax = reduceGroupMax(tile, math.laneMaximum(magnitude),
                              group.getGroupSize());
    }
    Value rawAbsmax = absmax;
    absmax = saturateGroupAbsmax(math, group, absmax);
    Value stored = groupStoredScale(math, group, absmax);
    Value storedF32 = widenToF32(math, stored);
    Value codes =
        isCodeTable(group.getCompanding())
            ? tableCodes(tile, index, group, value, absmax, rawAbsmax,
                         storedF32)
            : quantizeGroup(
                  guardedMath, group, value,
                  vector::BroadcastOp::create(b, loc, lanesOf(f32()), absmax),
                  vector::BroadcastOp::create(b, loc, lanesOf(f32()), storedF32),
                  checkedRounding);
    if (isPacked(group))
      codes = packNibbles(math, codes, tile.isFull() ? Value() : tile.laneMask);
    storeElements(tile, streamIndex(StreamRole::StateCodes, index), codes);
    storePerGroup(tile, streamIndex(StreamRole::StateScales, index),
                  group.getGroupSize(), stored, [&] {
                    countSaturation(math, group, rawAbsmax,
                                    tile.kernel.numericsCounters);
                  });
    return success();
  }
  auto codebook = cast<CodebookSchemeAttr>(scheme);
  // Seed 000: absmax over the block; c = x / max(absmax, 1e-30); the code is
  // the number of midpoints strictly below c (torch.bucketize, right=False).
  // With early counts a block is counted where its absmax is known: a block
  // reduced across warps with the tile's others (TileUpdate::beginStores).
  bool early = plan.getEarlySaturationCounts();
  Value absmax = tile.codebookAbsmax.lookup(index);
  if (!absmax) {
    absmax = reduceGroupMax(tile, lanesAbsMax(tile, value), codebook.getBlock(),
                            /*magnitudes=*/true);
    if (early)
      countSaturatedGroups(tile, codebook.getBlock(), {{codebook, absmax}});
  }
  Value rawAbsmax = absmax;
  absmax = saturateCodebookAbsmax(math, codebook, absmax);
  Value divisor = math.maxKeepNaN(absmax, math.constF(absmax, 1e-30));
  Value codes = codebookCodes(tile, index, value, divisor, absmax);
  storeElements(tile, streamIndex(StreamRole::StateCodes, index), codes);
  storePerGroup(tile, streamIndex(StreamRole::StateAbsmax, index),
                codebook.getBlock(), absmax, [&] {
                  if (!early)
                    countSaturation(math, codebook, rawAbsmax,
                                    tile.kernel.numericsCounters);
                });
  return success();
}

LogicalResult KernelEmitter::emitTile(TileContext &tile) {
  // Each tile body (full, partial) starts afresh; the two share the block
  // reduction slots, as only one of them runs per tile.
  LaneFacts &facts = tile.kernel.facts;
  facts.clear();
  // The guards' choices that cost registers, as the plan makes them.
  facts.registersToSpare = plan.getScaledRangeChecks();
  facts.zeroShortcutLaneDivisors = plan.getZeroShortcutLaneDivisors();
  if (guardedMath.isGuarded()) {
    math.setFacts(&facts);
    guardedMath.setFacts(&facts);
  }
  if (phase == KernelPhase::Reduce)
    return emitChunkPartials(tile);

  // Every element stream the update reads, loaded up front (the scales and
  // absmax are loaded where used) unless the loop carried it in.
  SmallVector<unsigned> reads;
  for (unsigned stream : getReadStreams(optimizer))
    if (streams[stream].perElements == 1 && !tile.preloaded.count(stream))
      reads.push_back(stream);
  preloadElements(tile, reads);
  // The update's values stored into codebook states, whose absmax (the
  // maximum of magnitudes) the tile computes; and per state whose block
  // spans warps (it has slots) the value, whose maxima a split barrier posts
  // as soon as all such values are lowered (TileUpdate::noteLowered).
  llvm::DenseSet<Value> codebookStored;
  SmallVector<std::pair<int, Value>> crossWarpStored;
  for (Operation &op : optimizer.getUpdate().getBody().front()) {
    auto store = dyn_cast<StoreStateOp>(op);
    if (!store)
      continue;
    auto index = llvm::find_if(states, [&](StateOp state) {
      return state.getSymName() == store.getState();
    });
    if (index == states.end() ||
        !isa<CodebookSchemeAttr>(index->getScheme()))
      continue;
    codebookStored.insert(store.getValue());
    int stateIndex = static_cast<int>(index - states.begin());
    if (tile.kernel.codebookSlots.count(stateIndex))
      crossWarpStored.push_back({stateIndex, store.getValue()});
  }
  TileUpdate target(*this, tile, codebookStored, crossWarpStored);
  if (failed(lowerUpdate(target, lanes)))
    return failure();
  flushStores(tile);
  return success();
}

void KernelEmitter::TileUpdate::noteLowered(Operation &op,
                                            IRMapping &mapping) {
  bool stored = false;
  for (Value result : op.getResults())
    if (codebookStored.count(result)) {
      tile.kernel.facts.magnitudeMaxima.insert(mapping.lookup(result));
      stored = true;
    }
  if (!stored || posted || !tile.kernel.absmaxArrivals ||
      crossWarpStored.empty())
    return;
  SmallVector<std::pair<int, Value>> lanesMax;
  for (auto [index, value] : crossWarpStored) {
    Value lanes = mapping.lookupOrNull(value);
    if (!lanes)
      return;
    lanesMax.push_back({index, e.lanesAbsMax(tile, lanes)});
  }
  e.postCodebookMaxima(tile, lanesMax);
  posted = true;
}

LogicalResult KernelEmitter::TileUpdate::beginStores(
    ArrayRef<UpdateStore> stores) {
  SmallVector<std::pair<int, Value>> lanesMax;
  SmallVector<int> indices;
  for (const UpdateStore &store : stores)
    if (store.state >= 0 && tile.kernel.codebookSlots.count(store.state)) {
      e.loc = store.op->getLoc();
      indices.push_back(store.state);
      if (!posted)
        lanesMax.push_back({store.state, e.lanesAbsMax(tile, store.value)});
    }
  if (indices.empty())
    return success();
  if (!posted)
    e.postCodebookMaxima(tile, lanesMax);
  e.readCodebookAbsmaxes(tile, indices);
  if (!e.plan.getEarlySaturationCounts())
    return success();
  // Their saturation counts, one branch per block size, before any state's
  // codes: a raw absmax lives no longer than its saturation.
  std::map<int64_t, SmallVector<std::pair<Attribute, Value>>> byBlock;
  for (int index : indices) {
    auto codebook = cast<CodebookSchemeAttr>(e.states[index].getScheme());
    byBlock[codebook.getBlock()].push_back(
        {codebook, tile.codebookAbsmax.lookup(index)});
  }
  for (auto &[block, raw] : byBlock)
    e.countSaturatedGroups(tile, block, raw);
  return success();
}

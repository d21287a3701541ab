//===- StreamCodecs.h - Per-element codecs of qopt streams ------*- C++ -*-===//
//
// Emits, on vectors of float32 lanes, the arithmetic that turns stored values
// into float32 and back, shared by the GPU and host lowerings:
// FloatCodecs.cpp (bf16/fp16 widening and rounding), MasterWeights.cpp (the
// error-correction split of the master weight), GroupQuantization.cpp (group
// (companded) quantization and checked rounding), Overflow.cpp (the
// overflow policy of quantized states: saturated scales and the numerics
// counters) and UpdateVectorizer.cpp (the update's arith/math ops on lanes,
// the skip flag). Each function
// follows the formulas of numerics.md in their order of operations; strict
// mode adds no fast-math flags.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CODEGEN_STREAMCODECS_H
#define QOPT_CODEGEN_STREAMCODECS_H

#include "qopt/Codegen/LaneMath.h"
#include <cstdint>
#include <vector>

namespace mlir::qopt {

/// Rebuilds one arith/math operation of a qopt.update on vectors of `lanes`
/// lanes (f32, or i1 for comparisons), its operands taken from `mapping`, with
/// the mode's fast-math flags. Fails, with a located error, on an operation
/// the lanes cannot run.
FailureOr<Value> vectorizeUpdateOp(LaneMath &m, Operation *op,
                                   IRMapping &mapping, int64_t lanes);
/// Whether vectorizeUpdateOp rebuilds `op` (an arith op, or one of the math
/// ops it lowers).
bool isVectorizableUpdateOp(Operation *op);

/// Widens a stored parameter, gradient or plain state (bf16, f16, f32) to f32.
Value widenToF32(LaneMath &m, Value stored);
/// Rounds f32 lanes to `storage` (bf16/f16: nearest even; f32: as is). On
/// the host a NaN becomes 0x7fc0 in bf16 and keeps only its sign in f16
/// (0x7e00 | sign), as the reference and PyTorch store it.
Value narrowFromF32(LaneMath &m, Value x, Type storage);

/// The gradient `g` (f32 lanes, widened from `gradType`) times the inverse
/// loss scale `inv`, rounded back to `gradType` and widened again: what
/// GradScaler.unscale_ stores in the gradient (qopt.load_grad unscale).
Value unscaleGrad(LaneMath &m, Value g, Value inv, Type gradType);

/// The launch-uniform condition of the update's qopt.skip_if ops (their
/// flags are qopt.uniform reads, or constants): an i1 scalar that is true
/// when any flag is nonzero, or null when the update has none. `uniforms`
/// holds the f32 values of the uniforms table, read at the function's entry.
/// Fails, with a located error, on a flag that is not launch-uniform.
FailureOr<Value> getSkipFlag(OptimizerOp optimizer, ArrayRef<Value> uniforms,
                             LaneMath &m);

/// numerics.md §3: the float32 master weight from the 16-bit value `x16` and
/// its error bits `rho` (si8/si16 lanes).
Value reconstructMaster(LaneMath &m, Value x16, Value rho, MasterFormat master);
/// numerics.md §3: the error bits of `x32` beside `x16 = round(x32)`, as
/// si8/si16 lanes. A non-finite error (x16 infinite or NaN) gives rho = 0.
Value splitMaster(LaneMath &m, Value x32, Value x16, MasterFormat master);

/// numerics.md §2: dequantize group codes (si8/ui8 lanes) with the group's
/// stored scale (f32 lanes, already widened).
Value dequantizeGroup(LaneMath &m, GroupSchemeAttr scheme, Value codes,
                      Value scale);
/// The value a group scheme takes its absmax over (sqrt(v) for sqrt companding).
Value groupMagnitude(LaneMath &m, GroupSchemeAttr scheme, Value x);
/// The scale stored for a group whose absmax is `absmax` (f32, scalar).
Value groupStoredScale(LaneMath &m, GroupSchemeAttr scheme, Value absmax);
/// numerics.md §2: quantize `x` given the group's absmax (broadcast f32 lanes,
/// saturateGroupAbsmax's under overflow = saturate) and the stored scale
/// widened back to f32; returns i8 lanes. Under overflow = saturate a value
/// beyond the divisor takes the extreme code (an infinite one too) and a NaN
/// code 0; for finite values these are the codes of ieee.
/// `checkedRounding` (strict NVVM vectors only): round through approximate
/// division and square root where a margin proves the code equal to the IEEE
/// chain's, the IEEE chain elsewhere (same codes, bit for bit).
Value quantizeGroup(LaneMath &m, GroupSchemeAttr scheme, Value x,
                    Value absmax, Value storedScale,
                    bool checkedRounding = false);

/// PackedCodes.cpp: the 16 float32 entries, ascending, of a 4-bit table
/// (`dynamic`, `nonzero`; empty for a companding), and whether it is one.
ArrayRef<float> getCodeTable(Companding companding);
bool isCodeTable(Companding companding);
/// Whether the table's entries and codes are computed arithmetically (the
/// (k + 1) / 16 table) rather than looked up.
bool isArithmeticTable(Companding companding);
/// A table scheme's x = table[code] * scale (codes: i8 lanes holding the
/// index 0..15; scale: f32 lanes), and table[code] alone (f32 lanes, exact).
Value dequantizeTable(LaneMath &m, GroupSchemeAttr scheme, Value codes,
                      Value scale);
Value tableEntries(LaneMath &m, GroupSchemeAttr scheme, Value codes);
/// Whether no entry of the table has its sign bit set (`nonzero`'s).
bool hasNonnegativeEntries(Companding companding);
/// A table scheme's code (i8 lanes): the number of midpoints of the table
/// strictly below x / divisor; a NaN takes the entry nearest 0.
Value quantizeTable(LaneMath &m, GroupSchemeAttr scheme, Value x,
                    Value divisor);
/// A 4-bit table's code from the quotient c = x / divisor (i8 lanes):
/// quantizeTable after its division. `withinOne`: every lane's c is NaN or
/// in [-1, 1] (the clamps above 1 are left out).
Value tableCodeOfQuotient(LaneMath &m, GroupSchemeAttr scheme, Value c,
                          bool withinOne = false);

/// A 4-bit table's codes looked up by the bits of c (the GPU's search for a
/// table that is not computed arithmetically). |c|, clamped to [2^e, 1]
/// with 2^e below every midpoint's magnitude (a NaN to 2^e), falls in
/// bucket (bits(|c|) - bits(2^e)) >> kShift, kShift mantissa bits of
/// magnitude a bucket, and no bucket holds two midpoints. Entry k of the
/// positive half (c's sign bit clear) is (n << kShift) + (2^kShift - 1 - o)
/// and of the negative half, at perSign + k, (n << kShift) + o, where n
/// counts the midpoints strictly below every c of the bucket and o is the
/// low kShift bits of the bucket's midpoint magnitude (0 and no o without
/// one); the code is the entry plus the low kShift bits of bits(|c|),
/// complemented for a negative c, shifted right by kShift: the carry is
/// whether c lies above the bucket's midpoint. bench/NOTES.md#q4buckets
struct CodeTableBuckets {
  static constexpr int kShift = 20;
  uint32_t magLo = 0;   // bits(2^e)
  int64_t perSign = 0;  // buckets of one sign: 2^e up to 1.0
  std::vector<uint32_t> entries; // positive, then negative
  /// The code of one float32 c, as the lookup computes it (for the tests).
  int64_t code(float c) const;
};
/// The table's buckets, or null where the table is computed arithmetically
/// or some bucket would hold two midpoints.
const CodeTableBuckets *getCodeTableBuckets(Companding companding);

/// docs/abi.md "Packed 4-bit codes": the bytes' mask of a vector of lanes
/// (lane 2j's bit for byte j), the codes (i8 lanes, sign-extended where
/// `isSigned`) of `bytes` (i8, half as many), and the bytes of `codes` with
/// the lanes outside `laneMask` (null: none) stored as 0.
Value packedByteMask(OpBuilder &b, Location loc, Value laneMask);
Value unpackNibbles(LaneMath &m, Value bytes, bool isSigned);
Value packNibbles(LaneMath &m, Value codes, Value laneMask);

/// Philox.cpp, numerics.md "Stochastic rounding": `x` (f32 lanes) rounded
/// to bf16 lanes stochastically, keyed by `seed` and `step` (f32 lanes of a
/// launch uniform, integers below 2^24) and lane 0's global element index
/// `globalIndex` (i64 scalar, a multiple of the lanes; lane k is element
/// globalIndex + k).
Value stochasticRoundBF16(LaneMath &m, Value x, Value seed, Value step,
                          Value globalIndex);

/// docs/numerics.md "Overflow": a group's absmax (f32 scalar) as its scheme
/// stores and divides by it. Under overflow = saturate an absmax that is NaN
/// or at least the smallest float32 the scale type rounds to infinity
/// (65520 for f16; +inf for f32) becomes the type's largest finite value
/// (65504; 3.40282347e38); with sqrt companding and an f32 scale, whose
/// dequantized value is the scale's square, the bound is 2^64 and the value
/// 2^64 (1 - 2^-24). Otherwise, and under ieee, it is `absmax`.
Value saturateGroupAbsmax(LaneMath &m, GroupSchemeAttr scheme, Value absmax);
/// The same for a codebook block's float32 absmax: under overflow =
/// saturate a NaN absmax becomes 0 (the block restarts from zero) and +inf
/// the largest finite float32; otherwise it is `absmax`.
Value saturateCodebookAbsmax(LaneMath &m, CodebookSchemeAttr scheme,
                             Value absmax);
/// Counts one group or block of a saturating `scheme` (GroupSchemeAttr or
/// CodebookSchemeAttr) whose absmax before saturation is `absmax` (f32
/// scalar): where it saturated, adds 1 to `counters`[NumericsCounter] (an
/// LLVM pointer to kNumNumericsCounters int64 values; nothing where it is
/// null) by an atomic add, in a branch the usual group does not take.
/// Emits nothing for a plain or ieee scheme or a null `counters` value.
void countSaturation(LaneMath &m, Attribute scheme, Value absmax,
                     Value counters);

} // namespace mlir::qopt

#endif // QOPT_CODEGEN_STREAMCODECS_H

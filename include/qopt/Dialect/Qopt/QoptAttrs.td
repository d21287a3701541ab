//===- QoptAttrs.td - qopt state schemes and enums ---------*- tablegen -*-===//
//
// The storage scheme of each optimizer state and the master-weight format of
// the parameter. numerics.md fixes what each scheme computes.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTATTRS_TD
#define QOPT_DIALECT_QOPT_QOPTATTRS_TD

include "qopt/Dialect/Qopt/QoptDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Qopt_MasterFormat : I32EnumAttr<"MasterFormat",
    "how the float32 master weight is kept beside a 16-bit parameter", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"ecc_i8", 1>,
      I32EnumAttrCase<"ecc_i16", 2>,
      I32EnumAttrCase<"stochastic", 3>,
      I32EnumAttrCase<"kahan_bf16", 4>]> {
  let cppNamespace = "::mlir::qopt";
  let genSpecializedAttr = 0;
}

def Qopt_Companding : I32EnumAttr<"Companding",
    "the companding function of a group's codes, or its 4-bit table", [
      I32EnumAttrCase<"linear", 0>,
      I32EnumAttrCase<"softsign", 1>,
      I32EnumAttrCase<"sqrt", 2>,
      I32EnumAttrCase<"dynamic", 3>,
      I32EnumAttrCase<"nonzero", 4>]> {
  let cppNamespace = "::mlir::qopt";
  let genSpecializedAttr = 0;
}

def Qopt_Rounding : I32EnumAttr<"Rounding",
    "how a scaled value is rounded to an integer code", [
      I32EnumAttrCase<"half_up", 0>,
      I32EnumAttrCase<"half_even", 1>]> {
  let cppNamespace = "::mlir::qopt";
  let genSpecializedAttr = 0;
}

def Qopt_ScaleDivisor : I32EnumAttr<"ScaleDivisor",
    "which scale a group's values are divided by when quantized", [
      I32EnumAttrCase<"absmax", 0>,
      I32EnumAttrCase<"stored_scale", 1>]> {
  let cppNamespace = "::mlir::qopt";
  let genSpecializedAttr = 0;
}

def Qopt_Overflow : I32EnumAttr<"Overflow",
    "what a quantized state stores when a scale does not fit its storage type", [
      I32EnumAttrCase<"saturate", 0>,
      I32EnumAttrCase<"ieee", 1>]> {
  let cppNamespace = "::mlir::qopt";
  let genSpecializedAttr = 0;
}

def Qopt_ReductionKind : I32EnumAttr<"ReductionKind",
    "a per-tensor reduction of qopt.reduce (docs/numerics.md, Reductions)", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"max", 1>,
      I32EnumAttrCase<"norm", 2>,
      I32EnumAttrCase<"rms", 3>,
      I32EnumAttrCase<"mean", 4>]> {
  let cppNamespace = "::mlir::qopt";
  let genSpecializedAttr = 0;
}

def Qopt_MasterFormatAttr : EnumAttr<Qopt_Dialect, Qopt_MasterFormat, "master">;
def Qopt_ReductionKindAttr
    : EnumAttr<Qopt_Dialect, Qopt_ReductionKind, "reduction">;

class Qopt_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Qopt_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Qopt_PlainSchemeAttr : Qopt_Attr<"PlainScheme", "plain"> {
  let summary = "a state stored unquantized, as f32 or bf16";
  let description = [{
    `#qopt.plain<storage = bf16>` stores each element rounded to nearest even.
  }];
  let parameters = (ins "::mlir::FloatType":$storage);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Qopt_CodebookSchemeAttr : Qopt_Attr<"CodebookScheme", "codebook"> {
  let summary = "blockwise 8-bit codes into a 256-entry run-time table (seed 000)";
  let description = [{
    `#qopt.codebook<block = 2048>`: a uint8 code per element, a float32 absmax
    per block of `block` elements and a 256-entry ascending float32 table
    (`qmap`) given at launch. Requantization takes the nearest table entry by
    midpoints, the lower code on a tie. `overflow` (default `saturate`,
    elided): a block whose absmax is NaN or infinite stores the largest
    finite float32 as its absmax and codes relative to it, NaN elements the
    code of 0 (docs/numerics.md, "Overflow"); `ieee` stores the absmax as
    it is (seed 000).
  }];
  let parameters = (ins "int64_t":$block,
    DefaultValuedParameter<"::mlir::qopt::Overflow",
                           "::mlir::qopt::Overflow::saturate">:$overflow);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Qopt_GroupSchemeAttr : Qopt_Attr<"GroupScheme", "group"> {
  let summary = "group-wise 8- or 4-bit codes with optional companding (FlashOptim)";
  let description = [{
    `#qopt.group<storage = si8, group_size = 32, companding = softsign,
    scale = f16, rounding = half_up, divisor = absmax>`: one scale per group of
    `group_size` consecutive elements, stored as `scale`; codes are si8 in
    [-127, 127] or ui8 in [0, 255], si4 in [-7, 7] or ui4 in [0, 15] (two
    codes a byte, the even element's in the low nibble). `dynamic` (si4) and
    `nonzero` (ui4) are 16-entry tables instead of a companding: the code is
    the index of the nearest entry to x / divisor (docs/numerics.md). `overflow` (default `saturate`, elided):
    a group whose scale does not fit `scale` (absmax at or above the value
    that rounds to infinity, or NaN) stores the type's largest finite value
    and its codes clamped against it, NaN elements code 0
    (docs/numerics.md, "Overflow"); `ieee` stores the rounded scale as it is
    (the authors' kernel: infinity).
  }];
  let parameters = (ins
    "::mlir::IntegerType":$storage,
    "int64_t":$group_size,
    EnumParameter<Qopt_Companding>:$companding,
    "::mlir::FloatType":$scale,
    EnumParameter<Qopt_Rounding>:$rounding,
    EnumParameter<Qopt_ScaleDivisor>:$divisor,
    DefaultValuedParameter<"::mlir::qopt::Overflow",
                           "::mlir::qopt::Overflow::saturate">:$overflow);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Qopt_StateSchemeAttr : AnyAttrOf<[Qopt_PlainSchemeAttr,
                                      Qopt_CodebookSchemeAttr,
                                      Qopt_GroupSchemeAttr]>;

def Qopt_KernelPlanAttr : Qopt_Attr<"KernelPlan", "kernel_plan"> {
  let summary = "the launch plan of an optimizer's kernel (qopt-plan-kernel)";
  let description = [{
    Attached to a `qopt.optimizer` as `qopt.kernel_plan` by
    `qopt-plan-kernel`, the one place that chooses it (lib/Schedule). The GPU
    and host lowerings and the manifest writer read it and derive nothing:

    ```mlir
    qopt.optimizer @FlashAdamW ... attributes {qopt.kernel_plan =
        #qopt.kernel_plan<threads = 512, lanes = 8, stages = 4,
        shared_bytes = 131072, codebook_buckets = true, bulk_copy = false,
        run_pointers = true, invariant_descriptors = false,
        l2_prefetch_tiles = 0, l2_prefetch_lines = false,
        register_prefetch = false, claim_tiles = 0,
        claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true,
        scaled_range_checks = true, early_saturation_counts = false,
        split_absmax_barrier = false,
        waves = 4, min_tiles_per_block = 128,
        suggested_blocks_per_sm = 1>} { ... }
    ```

    `threads` x `lanes` elements make a tile. `stages` tiles are copied ahead
    into dynamic shared memory (0: none; the layout is getTileStaging's),
    `shared_bytes` is the dynamic shared memory of a block (the stages, then
    with `codebook_buckets` one bucket table per codebook state). With
    `run_pointers` a full tile addresses its streams from thread pointers
    that the run's loop carries (which a staged kernel's copies need);
    without, from the run's descriptor, whose loads are marked invariant
    with `invariant_descriptors`. A kernel has L2 fetch the read streams of
    the full tile `l2_prefetch_tiles` on (0: none; at most 1024): thread 0 by
    one bulk prefetch per stream, or with `l2_prefetch_lines` each thread its
    own lanes' bytes (prefetch.global.L2), which a staged kernel's must be.
    With `register_prefetch` an unstaged kernel's loop carries the next full
    tile's read streams (not packed 4-bit codes), loaded into registers
    before the current tile's work (a software pipeline of one tile).
    Past each block's static range of
    `claim_static_eighths` / 8 of the tiles, tiles are claimed `claim_tiles`
    at a time (0: none, no work counters). `min_blocks_per_sm` bounds the
    registers (`nvvm.minctasm`, 0: none). Guarded IEEE division tries the
    all-zero shortcut for lane divisors too with
    `zero_shortcut_lane_divisors`, and checks a scaled numerator's range
    through its base with `scaled_range_checks`. With
    `early_saturation_counts` a saturating codebook block is counted where
    its absmax is reduced (not where it is stored), and the code search takes
    the saturated absmax as finite. With `split_absmax_barrier` the codebook
    blocks that span warps exchange their warps' maxima through an mbarrier
    (sm_90): each thread arrives once the tile's stored states are computed
    and waits before their codes, not at one bar.sync. With `producer_warp`
    (with `bulk_copy`) the block holds one warp more than `threads`, which
    issues every bulk copy of the stages; the `threads` threads wait for a
    stage's copies and count themselves done with it on a second mbarrier
    per stage (the manifest's `launch.producer_warps`). `waves`,
    `min_tiles_per_block` and `suggested_blocks_per_sm` are the manifest's
    launch fields.
  }];
  let parameters = (ins
    "int64_t":$threads,
    "int64_t":$lanes,
    "int64_t":$stages,
    "int64_t":$shared_bytes,
    "bool":$codebook_buckets,
    "bool":$bulk_copy,
    "bool":$run_pointers,
    "bool":$invariant_descriptors,
    "int64_t":$l2_prefetch_tiles,
    "bool":$l2_prefetch_lines,
    "bool":$register_prefetch,
    "int64_t":$claim_tiles,
    "int64_t":$claim_static_eighths,
    "int64_t":$min_blocks_per_sm,
    "bool":$zero_shortcut_lane_divisors,
    "bool":$scaled_range_checks,
    "bool":$early_saturation_counts,
    "bool":$split_absmax_barrier,
    "int64_t":$waves,
    "int64_t":$min_tiles_per_block,
    "int64_t":$suggested_blocks_per_sm,
    DefaultValuedParameter<"bool", "false">:$producer_warp);
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// Elements per tile.
    int64_t getTile() const { return getThreads() * getLanes(); }
  }];
}

#endif // QOPT_DIALECT_QOPT_QOPTATTRS_TD

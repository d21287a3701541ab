//===- Passes.td - qopt conversions ------------------------*- tablegen -*-===//
#ifndef QOPT_CONVERSION_PASSES_TD
#define QOPT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertQoptToGPU : Pass<"convert-qopt-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower each qopt.optimizer to one multi-tensor GPU kernel";
  let description = [{
    Turns each `qopt.optimizer` (after `qopt-outline-uniforms` and
    `qopt-plan-kernel`, whose `#qopt.kernel_plan` it follows) into a
    `gpu.module @<name>_kernels` holding one `gpu.func @<name>` kernel with the
    calling convention of docs/abi.md: a persistent grid-stride loop over the
    tiles of a list of tensors; each thread owns the plan's `lanes`
    consecutive elements, read and written with 16-byte vector accesses (masked
    in a partial last tile); group absmax by warp shuffles, block absmax
    through shared memory; bf16/fp16 rounding to nearest even.

    `mode=strict` keeps one IEEE rounding per operation in source order (no
    contraction, `div.rn`, `sqrt.rn`); `mode=fast` allows contraction into FMA
    and approximate division and square root.
  }];
  let options = [
    Option<"mode", "mode", "::mlir::qopt::ArithMode",
           /*default=*/"::mlir::qopt::ArithMode::Strict", "Arithmetic mode",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::ArithMode::Strict, "strict",
                        "bit-exact with the reference"),
             clEnumValN(::mlir::qopt::ArithMode::Fast, "fast",
                        "contraction, approximate division and square root"))}]>,
    Option<"checkedRounding", "checked-rounding", "bool", /*default=*/"true",
           "Strict mode: round quantization codes through approximate "
           "division and square root where a margin proves them equal to "
           "the IEEE result, the IEEE chain elsewhere (exact)">,
    Option<"guardedIeee", "guarded-ieee", "bool", /*default=*/"true",
           "Strict mode: the update's div.rn and sqrt.rn (and the codebook "
           "normalization) as ptxas's fast-path instruction sequence, its "
           "range check once per thread, div.rn/sqrt.rn for a thread with a "
           "lane outside it (exact)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ConvertQoptToHost : Pass<"convert-qopt-to-host", "::mlir::ModuleOp"> {
  let summary = "Lower each qopt.optimizer to one multi-tensor host function";
  let description = [{
    Turns each `qopt.optimizer` (after `qopt-outline-uniforms` and
    `qopt-plan-kernel target=host`) into an
    `llvm.func @<name>_host` with the runtime's `qopt_host_kernel_fn`
    signature (docs/abi.md): descriptors, tile map, tile count, uniforms, the
    array of codebook tables, and the tile range `[tile_begin, tile_end)` it
    processes. The descriptors and tiles are the GPU kernel's: the tile is
    the plan's `threads * lanes` elements, as the manifest's `launch` says.

    Each tile runs in two phases on vectors of the plan's `lanes` f32 lanes
    (masked in a partial last chunk). Phase 1 computes the update chunk by chunk, stores the parameter and plain states
    and keeps each group or codebook state's new values in a tile-sized stack
    buffer. Phase 2 takes, per group or block, the NaN-propagating absmax of
    the buffered values (a NaN absmax is stored as the quiet NaN 0x7fc00000,
    as the reference's), then quantizes and stores codes and scale. Every
    per-element operation, its order and its NaN rule are the GPU kernel's
    (lib/Codegen), with bf16/f16 conversions done on the bits.

    `mode=strict` adds no fast-math flags: one IEEE rounding per operation,
    `llvm.sqrt` (correctly rounded); `mode=fast` marks the update's arithmetic
    `contract afn arcp`.

    ```mlir
    llvm.func @FlashAdamW_host(%descs: !llvm.ptr, %tile_map: !llvm.ptr,
        %num_tiles: i64, %uniforms: !llvm.ptr, %tables: !llvm.ptr,
        %tile_begin: i64, %tile_end: i64)
    ```
  }];
  let options = [
    Option<"mode", "mode", "::mlir::qopt::ArithMode",
           /*default=*/"::mlir::qopt::ArithMode::Strict", "Arithmetic mode",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::ArithMode::Strict, "strict",
                        "bit-exact with the reference"),
             clEnumValN(::mlir::qopt::ArithMode::Fast, "fast",
                        "contraction, approximate division and square root"))}]>,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

#endif // QOPT_CONVERSION_PASSES_TD

//===- Passes.td - qopt conversions ------------------------*- tablegen -*-===//
#ifndef QOPT_CONVERSION_PASSES_TD
#define QOPT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertQoptToGPU : Pass<"convert-qopt-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower each qopt.optimizer to one multi-tensor GPU kernel";
  let description = [{
    Turns each `qopt.optimizer` (after `qopt-outline-uniforms`) into a
    `gpu.module @<name>_kernels` holding one `gpu.func @<name>` kernel with the
    calling convention of docs/abi.md: a persistent grid-stride loop over the
    tiles of a list of tensors; each thread owns `elements-per-thread`
    consecutive elements, read and written with 16-byte vector accesses (masked
    in a partial last tile); group absmax by warp shuffles, block absmax
    through shared memory; bf16/fp16 rounding to nearest even.

    `mode=strict` keeps one IEEE rounding per operation in source order (no
    contraction, `div.rn`, `sqrt.rn`); `mode=fast` allows contraction into FMA
    and approximate division and square root.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"strict\"",
           "Arithmetic mode: strict (bit-exact with the reference) or fast">,
    Option<"threadsPerBlock", "threads-per-block", "int64_t", /*default=*/"0",
           "Threads per block (0: chosen, see getThreadsPerBlock)">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t",
           /*default=*/"0", "Consecutive elements each thread owns per tile (0: chosen, "
           "see getElementsPerThread)">,
    Option<"codebookBuckets", "codebook-buckets", "bool", /*default=*/"true",
           "Codebook codes from one u32 entry of a table of 2 x 3073 buckets "
           "of normalized values in dynamic shared memory (exact; the 8-step "
           "search where a bucket holds more than one midpoint)">,
    Option<"l2Prefetch", "l2-prefetch", "bool", /*default=*/"true",
           "Unstaged kernels: thread 0 prefetches a later full tile's read "
           "streams into L2 (cp.async.bulk.prefetch, sm_90 and newer; "
           "getL2PrefetchTiles says how far, 0 for none)">,
    Option<"checkedRounding", "checked-rounding", "bool", /*default=*/"true",
           "Strict mode: round quantization codes through approximate "
           "division and square root where a margin proves them equal to "
           "the IEEE result, the IEEE chain elsewhere (exact)">,
    Option<"guardedIeee", "guarded-ieee", "bool", /*default=*/"true",
           "Strict mode: the update's div.rn and sqrt.rn (and the codebook "
           "normalization) as ptxas's fast-path instruction sequence, its "
           "range check once per thread, div.rn/sqrt.rn for a thread with a "
           "lane outside it (exact)">,
    Option<"bulkCopy", "bulk-copy", "bool", /*default=*/"false",
           "Staged kernels (sm_90 and newer): fill the stages with bulk "
           "copies (cp.async.bulk, the tensor memory accelerator) of each "
           "stream's whole tile, completing a barrier per stage, instead of "
           "each thread's cp.async of its own bytes; thread 0 issues a run's "
           "first tiles, the last warp to finish reading a stage its next "
           "one (same results, the same shared memory; H200: 13 to 18% "
           "slower, docs/dsl.md)">,
    Option<"tileClaims", "tile-claims", "int64_t", /*default=*/"-1",
           "Tiles past each block's static range claimed this many at a time "
           "from the launch's work counters (an extra kernel argument, "
           "docs/abi.md): -1 for getTileClaims' choice, 0 for none; never "
           "for staged kernels">,
    Option<"tileClaimsStaticEighths", "tile-claims-static-eighths", "int64_t",
           /*default=*/"0",
           "Where the kernel claims: the eighths of the tiles each block "
           "steps in its static range (1 to 8; 0 for getTileClaims' choice, "
           "5 with tile-claims > 0)">,
    Option<"asyncCopy", "async-copy", "::mlir::qopt::AsyncCopy",
           /*default=*/"::mlir::qopt::AsyncCopy::Auto",
           "Copy each full tile's read streams into dynamic shared memory one "
           "or more tiles ahead with cp.async (2 to 4 stages, getTileStaging; the "
           "manifest's launch.shared_bytes), so that its loads are in flight "
           "while the tile before it computes (auto: useAsyncCopy's choice)",
           [{::llvm::cl::values(
             clEnumValN(::mlir::qopt::AsyncCopy::Auto, "auto",
                        "the measured best for the update (useAsyncCopy)"),
             clEnumValN(::mlir::qopt::AsyncCopy::On, "on", "always"),
             clEnumValN(::mlir::qopt::AsyncCopy::Off, "off", "never"))}]>,
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
    Turns each `qopt.optimizer` (after `qopt-outline-uniforms`) into an
    `llvm.func @<name>_host` with the runtime's `qopt_host_kernel_fn`
    signature (docs/abi.md): descriptors, tile map, tile count, uniforms, the
    array of codebook tables, and the tile range `[tile_begin, tile_end)` it
    processes. The descriptors and tiles are the GPU kernel's: the tile is
    `threads-per-block * min(elements-per-thread, smallest group)` elements,
    as the manifest's `launch` says.

    Each tile runs in two phases on vectors of `min(elements-per-thread,
    smallest group)` f32 lanes (masked in a partial last chunk). Phase 1
    computes the update chunk by chunk, stores the parameter and plain states
    and keeps each group or codebook state's new values in a tile-sized stack
    buffer. Phase 2 takes, per group or block, the NaN-propagating absmax of
    the buffered values (a NaN absmax is stored as the quiet NaN 0x7fc00000,
    as the reference's), then quantizes and stores codes and scale. Every
    per-element operation, its order and its NaN rule are the GPU kernel's
    (StreamCodecs.h), with bf16/f16 conversions done on the bits.

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
    Option<"mode", "mode", "std::string", /*default=*/"\"strict\"",
           "Arithmetic mode: strict (bit-exact with the reference) or fast">,
    Option<"threadsPerBlock", "threads-per-block", "int64_t", /*default=*/"0",
           "The GPU kernel's threads per block (0: chosen, see "
           "getThreadsPerBlock); fixes the tile with elements-per-thread">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t",
           /*default=*/"0", "Vector lanes (at most the smallest group; 0: as the GPU "
           "kernel, see getElementsPerThread)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

#endif // QOPT_CONVERSION_PASSES_TD

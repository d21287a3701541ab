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
    Option<"threadsPerBlock", "threads-per-block", "int64_t", /*default=*/"256",
           "Threads per block">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t",
           /*default=*/"16", "Consecutive elements each thread owns per tile">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // QOPT_CONVERSION_PASSES_TD

//===- Passes.td - qopt transformations --------------------*- tablegen -*-===//
#ifndef QOPT_TRANSFORMS_PASSES_TD
#define QOPT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def OutlineUniforms : Pass<"qopt-outline-uniforms", "::mlir::ModuleOp"> {
  let summary = "Move launch-uniform scalar computations to a qopt.uniforms region";
  let description = [{
    Values of an update that depend only on hyperparameters, the step and
    literals are computed in float64 (or as booleans) once per launch, on the
    host, and rounded to float32 once where they meet a per-element value. This
    pass moves every such computation into a `qopt.uniforms` region, yields
    each value that a per-element operation uses, and reads it in the update as
    `qopt.uniform N : f32`.

    Before:
    ```mlir
    %b1 = qopt.hyper_value @beta1 : f64
    %s = qopt.step_count : f64
    %p = math.powf %b1, %s : f64
    %f = arith.truncf %p : f64 to f32
    %x = arith.mulf %f, %m : f32
    ```
    After:
    ```mlir
    qopt.uniforms {
      %b1 = qopt.hyper_value @beta1 : f64
      %s = qopt.step_count : f64
      %p = math.powf %b1, %s : f64
      qopt.yield %p : f64
    }
    qopt.update {
      %f = qopt.uniform 0 : f32
      %x = arith.mulf %f, %m : f32
    }
    ```
    A boolean uniform used per element is yielded as i1 and read back as
    `qopt.uniform N : f32` compared unequal to zero.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::qopt::QoptDialect"];
}

def TabulateCodes : Pass<"qopt-tabulate-codes", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Evaluate the float arithmetic of an 8-bit code once per code";
  let description = [{
    An exact strength reduction for dequantization. Wherever a kernel turns
    an 8-bit integer (a state code or int8 error bits) into f32 with
    `arith.sitofp`/`arith.uitofp` and then applies arithmetic whose other
    operands are constants (`q / 127`, the inverse softsign
    `z / (2 - |z|)`, ...), the result depends on the 8-bit code alone. The
    pass evaluates that arithmetic at compile time for all 256 codes, with
    IEEE single precision and round-to-nearest-even, one rounding per
    operation as the kernel would, and replaces it with a lookup in a 256-entry
    table that each block copies into shared memory once. The values are bit
    for bit those the kernel computed; the divisions disappear.

    ```mlir
    %q = arith.sitofp %codes : vector<16xi8> to vector<16xf32>
    %z = arith.divf %q, %c127 : vector<16xf32>
    ```
    becomes sixteen loads from `@__qopt_table0` indexed by the unsigned code.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // QOPT_TRANSFORMS_PASSES_TD

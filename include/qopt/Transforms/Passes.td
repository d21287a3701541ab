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

def ExactUniformDivision
    : Pass<"qopt-exact-uniform-division", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Divide by a lane-uniform value through its reciprocal, exactly";
  let description = [{
    An exact strength reduction for `arith.divf %x, %b` where `%b` is a
    vector broadcast of one scalar `s` (a group's scale, a block's absmax, a
    launch-uniform scalar). With `r = 1/s` computed once, each lane takes
    `q0 = x * r`, one fused correction `q1 = fma(fma(-q0, s, x), r, q0)`, and
    checks `|fma(-q1, s, x)| < |s| * ulp(q1) / 2` (a quarter ulp when `q1` is a
    power of two). Rounding is monotonic, so a remainder that rounds below
    that bound proves `q1` is the correctly rounded quotient. A lane with
    `x == 0` takes `q0`, which has IEEE's sign (and NaN for `s == 0`). If any
    lane of the vector fails the check (a tie, a result near the subnormal
    range, a non-finite value), the whole vector takes the IEEE division.
    The result is therefore `div.rn` bit for bit, with one division per
    vector instead of one per lane.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // QOPT_TRANSFORMS_PASSES_TD

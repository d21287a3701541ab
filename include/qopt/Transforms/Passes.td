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

#endif // QOPT_TRANSFORMS_PASSES_TD

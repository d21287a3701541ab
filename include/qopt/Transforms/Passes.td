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

def RetypeParam : Pass<"qopt-retype-param", "::mlir::ModuleOp"> {
  let summary = "Give a spec's parameter and gradient another float type";
  let description = [{
    One spec, several kernels: sets the parameter's and the gradient's
    storage type of every `qopt.optimizer` to `type` (`bf16`, `f16` or `f32`).
    An f32 parameter is its own master weight, so its error-correction bits
    (`master ecc_i8` / `ecc_i16`) are dropped; a 16-bit parameter keeps them
    (numerics.md §3: mbits 7 for bf16, 10 for f16). The update does not
    change: it reads and writes float32 values whatever the storage type.
    When either type changes, the optimizer (and so the kernel, its registry
    key and its host symbol) is renamed `<name>_<type>`.

    ```mlir
    qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16
    ```
    with `type=f32` becomes
    ```mlir
    qopt.optimizer @FlashAdamW_f32 param "p" : f32 master none grad "g" : f32
    ```
  }];
  let options = [
    Option<"type", "type", "std::string", /*default=*/"\"\"",
           "The parameter and gradient type: bf16, f16 or f32">
  ];
}

def SetOverflow : Pass<"qopt-set-overflow", "::mlir::ModuleOp"> {
  let summary = "Give every quantized state one overflow policy";
  let description = [{
    Sets the `overflow` parameter of every `#qopt.group` and `#qopt.codebook`
    state scheme of every `qopt.optimizer` to `policy` (`saturate` or
    `ieee`), whatever the spec wrote (qopt-opt --overflow). `ieee` keeps the
    authors' behaviour, an infinite float16 scale, for bit-exact comparisons
    with them; `saturate` keeps every stored state finite and counts the
    groups it saturated (docs/numerics.md, "Overflow"). Plain states and the
    kernel's name do not change.

    ```mlir
    qopt.state @m : #qopt.group<storage = si8, group_size = 32,
        companding = softsign, scale = f16, rounding = half_up,
        divisor = absmax>
    ```
    with `policy=ieee` becomes
    ```mlir
    qopt.state @m : #qopt.group<storage = si8, group_size = 32,
        companding = softsign, scale = f16, rounding = half_up,
        divisor = absmax, overflow = ieee>
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "The overflow policy: saturate or ieee">
  ];
}

def FuseGradScaling : Pass<"qopt-fuse-grad-scaling", "::mlir::ModuleOp"> {
  let summary = "Unscale the gradient and skip a step with non-finite gradients, in the kernel";
  let description = [{
    What `torch.amp.GradScaler` needs from a fused optimizer step. Adds two
    hyperparameters to every `qopt.optimizer`: `grad_scale` (default 1, the
    loss scale the gradients carry) and `found_inf` (default 0, nonzero when
    any gradient of the step is not finite). Every `qopt.load_grad` becomes
    `qopt.load_grad unscale %inv` with `%inv = f32(1 / grad_scale)` computed
    in float64 and rounded once, as GradScaler computes its inverse scale, and
    a `qopt.skip_if` of `f32(found_inf)` makes the whole step a no-op when it
    is set. Both are launch-uniform, so `qopt-outline-uniforms` moves them to
    the uniforms table: the trainer's device tensors can be written there
    without a host synchronization.

    Runs before `qopt-outline-uniforms`. A spec that already declares
    `grad_scale` or `found_inf`, or already has a `qopt.skip_if`, is an
    error.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::qopt::QoptDialect"];
}

#endif // QOPT_TRANSFORMS_PASSES_TD

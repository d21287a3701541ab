//===- QoptOps.td - qopt operations ------------------------*- tablegen -*-===//
//
// The structure of one optimizer step: declarations (optimizer, hyperparameter,
// state), the update region, and the loads and stores that connect the update's
// float32 arithmetic to the quantized streams.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTOPS_TD
#define QOPT_DIALECT_QOPT_QOPTOPS_TD

include "qopt/Dialect/Qopt/QoptDialect.td"
include "qopt/Dialect/Qopt/QoptAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

def Qopt_OptimizerOp : Qopt_Op<"optimizer", [
    Symbol, SymbolTable, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "one optimizer: its parameter, gradient, states and update";
  let description = [{
    The body holds `qopt.hyper` and `qopt.state` declarations, at most one
    `qopt.uniforms` region (after `qopt-outline-uniforms`) and exactly one
    `qopt.update`. The parameter may keep its float32 master weight as error
    correction bits (`ecc_i8`, `ecc_i16`) beside a bf16 or f16 value.

    ```mlir
    qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16 {
      qopt.hyper @lr = 1.000000e-03 : f64
      qopt.state @m : #qopt.group<storage = si8, group_size = 32, ...>
      qopt.update {
        ...
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       StrAttr:$param_name,
                       TypeAttrOf<AnyFloat>:$param_type,
                       Qopt_MasterFormatAttr:$master,
                       StrAttr:$grad_name,
                       TypeAttrOf<AnyFloat>:$grad_type);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `param` $param_name `:` $param_type `master` `` $master
    `grad` $grad_name `:` $grad_type attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  // Drops yielded uniforms that no qopt.uniform reads and renumbers the rest.
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// The update region's op (verified to exist exactly once).
    UpdateOp getUpdate();
    /// The outlined uniforms, or null before `qopt-outline-uniforms`.
    UniformsOp getUniforms();
  }];
}

def Qopt_HyperOp : Qopt_Op<"hyper", [Symbol, HasParent<"OptimizerOp">]> {
  let summary = "a hyperparameter with its default value";
  let description = [{
    A launch-uniform scalar given by the trainer at each step (float64, or a
    boolean), with the default used when none is given.

    ```mlir
    qopt.hyper @lr = 1.000000e-03 : f64
    qopt.hyper @nesterov = false
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypedAttrInterface:$value);
  let assemblyFormat = "$sym_name `=` $value attr-dict";
  let hasVerifier = 1;
}

def Qopt_StateOp : Qopt_Op<"state", [Symbol, HasParent<"OptimizerOp">]> {
  let summary = "an optimizer state and its storage scheme";
  let description = [{
    ```mlir
    qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt,
                                scale = f16, rounding = half_up, divisor = absmax>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Qopt_StateSchemeAttr:$scheme);
  let assemblyFormat = "$sym_name `:` $scheme attr-dict";
}

def Qopt_UpdateOp : Qopt_Op<"update", [
    HasParent<"OptimizerOp">, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "the per-element update of one step";
  let description = [{
    Runs once per element, conceptually. Every `qopt.store_state` and the one
    `qopt.store_param` inside it happen after all of its loads.
  }];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Qopt_UniformsOp : Qopt_Op<"uniforms", [
    HasParent<"OptimizerOp">, IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "launch-uniform scalars, evaluated on the host in float64";
  let description = [{
    Produced by `qopt-outline-uniforms`. The region computes, from
    `qopt.hyper_value` and `qopt.step_count` in f64 (or i1), the values that
    `qopt.yield` returns; yielded value `i` is rounded to float32 once and read
    in the update as `qopt.uniform i`.
  }];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
}

def Qopt_YieldOp : Qopt_Op<"yield", [Pure, Terminator, HasParent<"UniformsOp">]> {
  let summary = "the values of a qopt.uniforms region";
  let arguments = (ins Variadic<AnyTypeOf<[F64, I1]>>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ /* no values */ }]>];
}

//===----------------------------------------------------------------------===//
// Values read inside the update
//===----------------------------------------------------------------------===//

def Qopt_HyperValueOp : Qopt_Op<"hyper_value", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the value of a hyperparameter at this step";
  let arguments = (ins FlatSymbolRefAttr:$hyper);
  let results = (outs AnyTypeOf<[F64, I1]>:$result);
  let assemblyFormat = "$hyper attr-dict `:` type($result)";
}

def Qopt_StepCountOp : Qopt_Op<"step_count", [Pure]> {
  let summary = "the 1-based step count, as f64";
  let results = (outs F64:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, $_builder.getF64Type());
  }]>];
}

def Qopt_UniformOp : Qopt_Op<"uniform", [Pure]> {
  let summary = "an outlined launch-uniform value, rounded to float32";
  let description = [{
    `qopt.uniform 2 : f32` reads entry 2 of the launch's uniforms table.
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$index);
  let results = (outs F32:$result);
  let assemblyFormat = "$index attr-dict `:` type($result)";
  // A uniform whose value is a constant folds to that constant rounded to
  // float32 once, as the runtime would round it.
  let hasFolder = 1;
}

def Qopt_LoadGradOp : Qopt_Op<"load_grad", [Pure]> {
  let summary = "the gradient of this element, as float32";
  let description = [{
    Without an operand, the stored gradient widened to float32 (exact). With
    `unscale %s`, a launch-uniform f32 (the inverse of a loss scale), the
    gradient is multiplied by `%s` in float32 and rounded back to the
    gradient's own type (nearest even) before it is widened: the value that
    `torch.amp.GradScaler.unscale_` leaves in a bf16 or f16 gradient (its
    `_amp_foreach_non_finite_check_and_unscale_` multiplies in float32 and
    stores in the gradient's dtype), so that a fused unscale equals unscale_
    followed by the step bit for bit. For an f32 gradient it is one multiply.

    ```mlir
    %g = qopt.load_grad : f32
    %u = qopt.load_grad unscale %inv : f32
    ```
  }];
  let arguments = (ins Optional<F32>:$inv_scale);
  let results = (outs F32:$result);
  let assemblyFormat = "(`unscale` $inv_scale^)? attr-dict `:` type($result)";
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, $_builder.getF32Type(), Value());
  }]>];
}

def Qopt_SkipIfOp : Qopt_Op<"skip_if", [HasParent<"UpdateOp">]> {
  let summary = "skip the whole step when a launch-uniform flag is nonzero";
  let description = [{
    When `%flag` is nonzero (NaN included) the update has no effect on any
    element: no parameter, error bit, state code, scale or absmax is written.
    The flag must be uniform over the launch, so the lowerings test it once
    per launch and walk no tile (`qopt-fuse-grad-scaling` creates it from a
    found-inf hyperparameter; after `qopt-outline-uniforms` its operand is a
    `qopt.uniform`). A step with several skip_if ops skips when any is set.

    ```mlir
    %f = qopt.uniform 4 : f32
    qopt.skip_if %f : f32
    ```
  }];
  let arguments = (ins F32:$flag);
  let assemblyFormat = "$flag attr-dict `:` type($flag)";
}

def Qopt_LoadParamOp : Qopt_Op<"load_param", [Pure]> {
  let summary = "load the parameter and reconstruct its float32 master weight";
  let description = [{
    With error-correction bits `rho`, the master weight is
    `f32(x16) + ((rho / Nmax) * 2^h) * 2^(l - h)` (numerics.md §3); without,
    it is the parameter widened to float32.
  }];
  let results = (outs F32:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Qopt_LoadStateOp : Qopt_Op<"load_state", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "load a state and dequantize it to float32";
  let arguments = (ins FlatSymbolRefAttr:$state);
  let results = (outs F32:$result);
  let assemblyFormat = "$state attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Stores
//===----------------------------------------------------------------------===//

def Qopt_StoreStateOp : Qopt_Op<"store_state", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "requantize a state's new value and store it";
  let description = [{
    For group and codebook schemes the new scale (absmax) is the maximum over
    the group's or block's new values, so this store is a reduction across
    elements as well as a per-element store.
  }];
  let arguments = (ins FlatSymbolRefAttr:$state, F32:$value);
  let assemblyFormat = "$state `,` $value attr-dict `:` type($value)";
}

def Qopt_ReduceOp : Qopt_Op<"reduce", [Pure, HasParent<"UpdateOp">]> {
  let summary = "a per-tensor reduction of a per-element value";
  let description = [{
    The value is the same on every element of one tensor: `sum` (the sum of
    the operand), `max` (its maximum, NaN-propagating), `norm` (the square
    root of the sum of its squares) or `rms` (that sum divided by the
    element count, then the root), each accumulated in float64 in the order
    docs/numerics.md ("Reductions") fixes and rounded to f32 once; a NaN
    result is the canonical quiet NaN. The operand sees the values the
    update computes (new, unquantized states), and must not depend on
    another qopt.reduce. The lowerings evaluate the operand's ops in a pass
    over the tensor before the update.

    With `global` the value is the same on every element of every tensor of
    the step (all launches of one qopt_step_many): each tensor's float64
    accumulation, then the pairwise tree over the step's tensors in order
    (docs/numerics.md, "Whole-step reductions"); `sum`, `max` and `norm`
    only. The step reads it from a uniform slot after the optimizer's own
    (docs/abi.md, "Whole-step reductions").

    ```mlir
    %n = qopt.reduce norm %u : f32
    %g = qopt.reduce global norm %grad : f32
    ```
  }];
  let arguments = (ins Qopt_ReductionKindAttr:$kind, F32:$operand,
                       UnitAttr:$global);
  let results = (outs F32:$result);
  let assemblyFormat = "(`global` $global^)? $kind $operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Qopt_StoreParamOp : Qopt_Op<"store_param"> {
  let summary = "split the new master weight and store the parameter";
  let description = [{
    Rounds to the 16-bit parameter (nearest even) and, with error-correction
    bits, stores `rho` (numerics.md §3); an f32 parameter is stored as it is.
    With `master = stochastic` the bf16 parameter is rounded stochastically
    and `key` holds the seed and the step count, two launch-uniform f32
    values (numerics.md, "Stochastic rounding"); otherwise `key` is empty.
  }];
  let arguments = (ins F32:$value, Variadic<F32>:$key);
  let assemblyFormat =
      "$value (`key` `(` $key^ `)`)? attr-dict `:` type($value)";
  let builders = [OpBuilder<(ins "Value":$value), [{
    build($_builder, $_state, value, ValueRange{});
  }]>];
}

#endif // QOPT_DIALECT_QOPT_QOPTOPS_TD

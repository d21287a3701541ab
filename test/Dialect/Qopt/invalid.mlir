// RUN: qopt-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// expected-error @+1 {{error-correction bits need a bf16 or f16 parameter, got 'f32'}}
qopt.optimizer @O param "p" : f32 master ecc_i8 grad "g" : f32 {
  qopt.update {
    %p = qopt.load_param : f32
    qopt.store_param %p : f32
  }
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{must be stored exactly once in the update, found 2 stores}}
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_state @m, %g : f32
    qopt.store_state @m, %g : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{must be stored exactly once in the update, found 0 stores}}
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{the parameter must be stored exactly once in the update, found 0 stores}}
qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  qopt.update {
    %g = qopt.load_grad : f32
  }
}

// -----

// expected-error @+1 {{needs exactly one qopt.update, found 0}}
qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  qopt.update {
    // expected-error @+1 {{'m' is not a state of @O}}
    %m = qopt.load_state @m : f32
    qopt.store_param %m : f32
  }
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  qopt.hyper @lr = 1.0e-3 : f64
  qopt.update {
    // expected-error @+1 {{type 'i1' does not match @lr of type 'f64'}}
    %h = qopt.hyper_value @lr : i1
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{group_size must be a power of two in [2, 4096], got 48}}
  qopt.state @m : #qopt.group<storage = si8, group_size = 48, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{sqrt companding needs unsigned (ui8) storage}}
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{codebook block must be a power of two in [32, 4096], got 100}}
  qopt.state @m : #qopt.codebook<block = 100>
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  qopt.update {
    %g = qopt.load_grad : f32
    // expected-error @+1 {{is not allowed in a qopt.update; use qopt, arith and math operations}}
    %x = "test.foo"(%g) : (f32) -> f32
    qopt.store_param %x : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %c = arith.constant 1.0 : f64
    // expected-error @+1 {{operand #0 must be 32-bit float}}
    qopt.skip_if %c : f64
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

func.func @skip_outside_an_update(%f: f32) {
  // expected-error @+1 {{expects parent op 'qopt.update'}}
  qopt.skip_if %f : f32
  return
}

// -----

qopt.optimizer @BadOverflow param "p" : f32 master none grad "g" : f32 {
  // expected-error @+2 {{expected one of [saturate, ieee] for what a quantized state stores when a scale does not fit its storage type, got: wrap}}
  // expected-error @+1 {{failed to parse Qopt_CodebookSchemeAttr parameter 'overflow'}}
  qopt.state @m : #qopt.codebook<block = 256, overflow = wrap>
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_state @m, %g : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{group storage must be si8, ui8, si4 or ui4, got 'si16'}}
  qopt.state @m : #qopt.group<storage = si16, group_size = 32, companding = linear, scale = f16, rounding = half_up, divisor = absmax>
}

// -----

qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{the dynamic table needs si4 storage}}
  qopt.state @m : #qopt.group<storage = si8, group_size = 128, companding = dynamic, scale = f32, rounding = half_up, divisor = absmax>
}

// -----

// expected-error @+1 {{stochastic rounding needs a bf16 parameter, got 'f16'}}
qopt.optimizer @O param "p" : f16 master stochastic grad "g" : f16 {
  qopt.update {
    %p = qopt.load_param : f32
    qopt.store_param %p : f32
  }
}

// -----

qopt.optimizer @O param "p" : bf16 master stochastic grad "g" : bf16 {
  qopt.update {
    %p = qopt.load_param : f32
    // expected-error @+1 {{takes 2 key values (seed, step) with master stochastic, found 0}}
    qopt.store_param %p : f32
  }
}

// -----

// expected-error @+1 {{a Kahan compensation needs a bf16 parameter, got 'f32'}}
qopt.optimizer @O param "p" : f32 master kahan_bf16 grad "g" : f32 {
  qopt.update {
    %p = qopt.load_param : f32
    qopt.store_param %p : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %n = qopt.reduce norm %g : f32
    %u = arith.mulf %g, %n : f32
    // expected-error @+1 {{reduces a value that depends on another qopt.reduce; a reduction of a reduction is not supported}}
    %s = qopt.reduce sum %u : f32
    %p = arith.addf %g, %s : f32
    qopt.store_param %p : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    // expected-error @+1 {{a whole-step reduction is sum, max or norm; found rms}}
    %n = qopt.reduce global rms %g : f32
    %p = arith.addf %g, %n : f32
    qopt.store_param %p : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %n = qopt.reduce global norm %g : f32
    %u = arith.mulf %g, %n : f32
    // expected-error @+1 {{reduces a value that depends on another qopt.reduce; a reduction of a reduction is not supported}}
    %s = qopt.reduce sum %u : f32
    %p = arith.addf %g, %s : f32
    qopt.store_param %p : f32
  }
}

// -----

// The manifest names the kernel by the optimizer's symbol.
// expected-error @+1 {{'qopt.optimizer' op symbol name must not be empty}}
qopt.optimizer @"" param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{'qopt.optimizer' op the name of the parameter must not be empty}}
qopt.optimizer @O param "" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{'qopt.optimizer' op stream name "p" is given to both the parameter and the gradient}}
qopt.optimizer @O param "p" : f32 master none grad "p" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{'qopt.optimizer' op stream name "p.ecc" is given to both the parameter's error bits and the gradient}}
qopt.optimizer @O param "p" : bf16 master ecc_i8 grad "p.ecc" : bf16 {
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{'qopt.optimizer' op stream name "m.codes" is given to both the parameter and the state_codes of state @m}}
qopt.optimizer @O param "m.codes" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_state @m, %g : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{'qopt.optimizer' op stream name "g" is given to both the gradient and state @g}}
qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.state @g : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_state @g, %g : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  // The manifest writes the default as a JSON number, which has no NaN.
  // expected-error @+1 {{'qopt.hyper' op default value must be a finite number, got NaN}}
  qopt.hyper @lr = 0x7FF8000000000000 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  // expected-error @+1 {{'qopt.hyper' op default value must be a finite number, got inf}}
  qopt.hyper @lr = 0x7FF0000000000000 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  // expected-error @+1 {{'qopt.hyper' op default value must be a finite number, got -inf}}
  qopt.hyper @lr = 0xFFF0000000000000 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  // expected-error @+1 {{'qopt.hyper' op symbol name must not be empty}}
  qopt.hyper @"" = 1.0 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

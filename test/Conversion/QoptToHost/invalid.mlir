// RUN: qopt-opt %s --qopt-plan-kernel="target=host elements-per-thread=12" --convert-qopt-to-host -split-input-file -verify-diagnostics
// RUN: not qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=target=host --convert-qopt-to-host=mode=loose -split-input-file 2>&1 | FileCheck %s --check-prefix=MODE

// MODE: for the --mode option: Cannot find option named 'loose'!

// Chunks of 12 lanes would straddle two groups of 32, at any thread count.
// expected-error @+1 {{no launch shape of 32 to 1024 threads and 1 to 16 lanes (12 asked) holds every group and block of this optimizer whole; the measured shape is 256 x 12}}
qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  // expected-error @+1 {{group or block of 32 elements is not a whole number of 12-element vectors (a thread's lanes lie in one group)}}
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = linear, scale = f32, rounding = half_even, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %m = qopt.load_state @m : f32
    %p = qopt.load_param : f32
    %mn = arith.addf %m, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// The update must read outlined uniforms, not hyperparameters.
qopt.optimizer @NotOutlined param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @lr = 1.0e-03 : f64
  qopt.update {
    %p = qopt.load_param : f32
    // expected-error @+1 {{must be outlined first: run qopt-outline-uniforms}}
    %lr = qopt.hyper_value @lr : f64
    %lr32 = arith.truncf %lr : f64 to f32
    %pn = arith.subf %p, %lr32 : f32
    qopt.store_param %pn : f32
  }
}

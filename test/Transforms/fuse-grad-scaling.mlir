// RUN: qopt-opt %s --qopt-fuse-grad-scaling -split-input-file -verify-diagnostics | FileCheck %s
// RUN: qopt-opt %s --qopt-fuse-grad-scaling --qopt-outline-uniforms -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=OUTLINED

// The hyperparameters follow the spec's own; every gradient read is unscaled
// by f32(1 / grad_scale) (float64, one rounding); f32(found_inf) skips.
// CHECK-LABEL: qopt.optimizer @SGD
// CHECK:      qopt.hyper @lr = 1.000000e-01 : f64
// CHECK-NEXT: qopt.hyper @grad_scale = 1.000000e+00 : f64
// CHECK-NEXT: qopt.hyper @found_inf = 0.000000e+00 : f64
// CHECK-NEXT: qopt.state @m
// CHECK:      qopt.update {
// CHECK-NEXT:   %[[S:.+]] = qopt.hyper_value @grad_scale : f64
// CHECK-NEXT:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:   %[[INV:.+]] = arith.divf %[[ONE]], %[[S]] : f64
// CHECK-NEXT:   %[[INV32:.+]] = arith.truncf %[[INV]] : f64 to f32
// CHECK-NEXT:   %[[F:.+]] = qopt.hyper_value @found_inf : f64
// CHECK-NEXT:   %[[F32:.+]] = arith.truncf %[[F]] : f64 to f32
// CHECK-NEXT:   qopt.skip_if %[[F32]] : f32
// CHECK-NEXT:   %[[G:.+]] = qopt.load_grad unscale %[[INV32]] : f32
// CHECK-NOT:    qopt.load_grad :
// CHECK:        arith.mulf %{{.+}}, %[[G]] : f32

// After outlining both are uniforms: the runtime (or the trainer's device
// tensors) supplies them with the others.
// OUTLINED-LABEL: qopt.optimizer @SGD
// OUTLINED:      qopt.uniforms {
// OUTLINED:        %[[S:.+]] = qopt.hyper_value @grad_scale : f64
// OUTLINED:        %[[INV:.+]] = arith.divf %{{.+}}, %[[S]] : f64
// OUTLINED:        %[[F:.+]] = qopt.hyper_value @found_inf : f64
// OUTLINED:        qopt.yield %[[INV]], %[[F]],
// OUTLINED:      qopt.update {
// OUTLINED-NEXT:   %[[U0:.+]] = qopt.uniform 0 : f32
// OUTLINED-NEXT:   %[[U1:.+]] = qopt.uniform 1 : f32
// OUTLINED-NEXT:   qopt.skip_if %[[U1]] : f32
// OUTLINED:        qopt.load_grad unscale %[[U0]] : f32
qopt.optimizer @SGD param "p" : f32 master none grad "g" : f16 {
  qopt.hyper @lr = 0.1 : f64
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %m = qopt.load_state @m : f32
    %mn = arith.addf %m, %g : f32
    %p = qopt.load_param : f32
    %lr = qopt.hyper_value @lr : f64
    %lr32 = arith.truncf %lr : f64 to f32
    %d = arith.mulf %lr32, %g : f32
    %pn = arith.subf %p, %d : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}

// -----

qopt.optimizer @Reserved param "p" : f32 master none grad "g" : f32 {
  // expected-error @+1 {{hyperparameter 'found_inf' is reserved for grad scaling (qopt-opt --grad-scaling); rename it}}
  qopt.hyper @found_inf = 0.0 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

// expected-error @+1 {{already has its uniforms outlined; qopt-fuse-grad-scaling must run before qopt-outline-uniforms}}
qopt.optimizer @Outlined param "p" : f32 master none grad "g" : f32 {
  qopt.uniforms {
    qopt.yield
  }
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// -----

qopt.optimizer @Twice param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %c = arith.constant 0.0 : f32
    // expected-error @+1 {{is already in the update; grad scaling is fused once}}
    qopt.skip_if %c : f32
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

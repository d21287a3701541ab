// RUN: qopt-opt %s | qopt-opt | FileCheck %s

// CHECK-LABEL: qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16
qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16 {
  // CHECK: qopt.hyper @lr = 1.000000e-03 : f64
  qopt.hyper @lr = 1.0e-3 : f64
  qopt.hyper @beta1 = 0.9 : f64
  // CHECK: qopt.hyper @nesterov = false
  qopt.hyper @nesterov = false
  // CHECK: qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  // CHECK: qopt.state @c : #qopt.codebook<block = 2048>
  qopt.state @c : #qopt.codebook<block = 2048>
  // CHECK: qopt.state @b : #qopt.plain<storage = bf16>
  qopt.state @b : #qopt.plain<storage = bf16>
  // CHECK: qopt.update {
  qopt.update {
    // CHECK-NEXT: %[[G:.+]] = qopt.load_grad : f32
    %g = qopt.load_grad : f32
    // CHECK-NEXT: %[[P:.+]] = qopt.load_param : f32
    %p = qopt.load_param : f32
    // CHECK-NEXT: %[[M:.+]] = qopt.load_state @m : f32
    %m = qopt.load_state @m : f32
    // CHECK-NEXT: qopt.hyper_value @beta1 : f64
    %b1 = qopt.hyper_value @beta1 : f64
    // CHECK-NEXT: qopt.step_count : f64
    %s = qopt.step_count : f64
    %b1s = math.powf %b1, %s : f64
    %b1f = arith.truncf %b1s : f64 to f32
    %mn = arith.mulf %b1f, %m : f32
    // CHECK: qopt.store_state @m, %{{.+}} : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @c, %g : f32
    qopt.store_state @b, %g : f32
    // CHECK: qopt.store_param %{{.+}} : f32
    qopt.store_param %p : f32
  }
}

// Grad scaling (qopt-fuse-grad-scaling): an unscaled gradient read and a
// launch-uniform skip.
// CHECK-LABEL: qopt.optimizer @Scaled
// CHECK: %[[S:.+]] = qopt.uniform 0 : f32
// CHECK: %[[F:.+]] = qopt.uniform 1 : f32
// CHECK: qopt.skip_if %[[F]] : f32
// CHECK: qopt.load_grad unscale %[[S]] : f32
// CHECK: qopt.load_grad : f32
qopt.optimizer @Scaled param "p" : f16 master none grad "g" : f16 {
  qopt.uniforms {
    %one = arith.constant 1.0 : f64
    %zero = arith.constant 0.0 : f64
    qopt.yield %one, %zero : f64, f64
  }
  qopt.update {
    %s = qopt.uniform 0 : f32
    %f = qopt.uniform 1 : f32
    qopt.skip_if %f : f32
    %g = qopt.load_grad unscale %s : f32
    %raw = qopt.load_grad : f32
    %d = arith.subf %g, %raw : f32
    qopt.store_param %d : f32
  }
}

// The overflow policy of group and codebook states: saturate, the default,
// is not printed; ieee is.
// CHECK-LABEL: qopt.optimizer @Overflow
// CHECK: qopt.state @a : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
// CHECK: qopt.state @b : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax, overflow = ieee>
// CHECK: qopt.state @c : #qopt.codebook<block = 256>
// CHECK: qopt.state @d : #qopt.codebook<block = 256, overflow = ieee>
qopt.optimizer @Overflow param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @a : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax, overflow = saturate>
  qopt.state @b : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax, overflow = ieee>
  qopt.state @c : #qopt.codebook<block = 256>
  qopt.state @d : #qopt.codebook<block = 256, overflow = ieee>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    qopt.store_state @a, %g : f32
    qopt.store_state @b, %g : f32
    qopt.store_state @c, %g : f32
    qopt.store_state @d, %g : f32
    qopt.store_param %p : f32
  }
}

// -----

// 4-bit group states and a stochastically rounded parameter keyed by two f32 values.
// CHECK-LABEL: qopt.optimizer @FourBit
// CHECK: #qopt.group<storage = si4, group_size = 128, companding = dynamic, scale = f32
// CHECK: #qopt.group<storage = ui4, group_size = 128, companding = nonzero, scale = f32
// CHECK: qopt.store_param %{{.*}} key(%{{.*}}, %{{.*}}) : f32
qopt.optimizer @FourBit param "p" : bf16 master stochastic grad "g" : bf16 {
  qopt.state @m : #qopt.group<storage = si4, group_size = 128, companding = dynamic, scale = f32, rounding = half_up, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui4, group_size = 128, companding = nonzero, scale = f32, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_state @m, %g : f32
    qopt.store_state @v, %g : f32
    %s = arith.constant 1.0 : f32
    qopt.store_param %g key(%s, %s) : f32
  }
}

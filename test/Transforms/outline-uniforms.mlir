// RUN: qopt-opt %s --qopt-outline-uniforms | FileCheck %s

// CHECK-LABEL: qopt.optimizer @AdamW
// CHECK:      qopt.uniforms {
// CHECK-NEXT:   %[[B1:.+]] = qopt.hyper_value @beta1 : f64
// CHECK-NEXT:   %[[S:.+]] = qopt.step_count : f64
// CHECK-NEXT:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:   %[[POW:.+]] = math.powf %[[B1]], %[[S]] : f64
// CHECK-NEXT:   %[[BC1:.+]] = arith.subf %[[ONE]], %[[POW]] : f64
// CHECK-NEXT:   %[[OMB:.+]] = arith.subf %[[ONE]], %[[B1]] : f64
// CHECK-NEXT:   %[[NEST:.+]] = qopt.hyper_value @nesterov : i1
// CHECK-NEXT:   qopt.yield %[[B1]], %[[OMB]], %[[BC1]], %[[NEST]] : f64, f64, f64, i1
// CHECK-NEXT: }
// CHECK:      qopt.update {
// CHECK-NEXT:   %[[G:.+]] = qopt.load_grad : f32
// CHECK-NEXT:   %[[M:.+]] = qopt.load_state @m : f32
// CHECK-NEXT:   %[[U0:.+]] = qopt.uniform 0 : f32
// CHECK-NEXT:   %[[A:.+]] = arith.mulf %[[U0]], %[[M]] : f32
// CHECK-NEXT:   %[[U1:.+]] = qopt.uniform 1 : f32
// CHECK-NEXT:   %[[B:.+]] = arith.mulf %[[U1]], %[[G]] : f32
// CHECK-NEXT:   %[[MN:.+]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT:   %[[U2:.+]] = qopt.uniform 2 : f32
// CHECK-NEXT:   %[[D:.+]] = arith.divf %[[MN]], %[[U2]] : f32
// CHECK-NEXT:   %[[U3:.+]] = qopt.uniform 3 : f32
// CHECK-NEXT:   %[[Z:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   %[[C:.+]] = arith.cmpf une, %[[U3]], %[[Z]] : f32
// CHECK-NEXT:   %[[SEL:.+]] = arith.select %[[C]], %[[D]], %[[MN]] : f32
// CHECK-NEXT:   qopt.store_state @m, %[[MN]] : f32
// CHECK-NEXT:   qopt.store_param %[[SEL]] : f32
// CHECK-NEXT: }
qopt.optimizer @AdamW param "p" : bf16 master none grad "g" : bf16 {
  qopt.hyper @beta1 = 0.9 : f64
  qopt.hyper @nesterov = true
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %m = qopt.load_state @m : f32
    %b1 = qopt.hyper_value @beta1 : f64
    %s = qopt.step_count : f64
    %one = arith.constant 1.0 : f64
    %pow = math.powf %b1, %s : f64
    %bc1 = arith.subf %one, %pow : f64
    %b1f = arith.truncf %b1 : f64 to f32
    %a = arith.mulf %b1f, %m : f32
    %omb = arith.subf %one, %b1 : f64
    %ombf = arith.truncf %omb : f64 to f32
    %b = arith.mulf %ombf, %g : f32
    %mn = arith.addf %a, %b : f32
    %bc1f = arith.truncf %bc1 : f64 to f32
    %d = arith.divf %mn, %bc1f : f32
    %nest = qopt.hyper_value @nesterov : i1
    %sel = arith.select %nest, %d, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %sel : f32
  }
}

// RUN: qopt-opt %s --canonicalize | FileCheck %s

// A uniform whose value is a constant folds into the update (rounded to f32
// once, as the runtime would), and the uniforms table keeps only what the
// kernel reads, renumbered.

// CHECK-LABEL: qopt.optimizer @Fold
// CHECK:      qopt.uniforms {
// CHECK-NEXT:   %[[LR:.+]] = qopt.hyper_value @lr : f64
// CHECK-NEXT:   qopt.yield %[[LR]] : f64
// CHECK-NEXT: }
// CHECK:      qopt.update {
// CHECK-NEXT:   %[[TENTH:.+]] = arith.constant 1.000000e-01 : f32
// CHECK-NEXT:   %[[G:.+]] = qopt.load_grad : f32
// CHECK-NEXT:   %[[P:.+]] = qopt.load_param : f32
// CHECK-NEXT:   %[[U0:.+]] = qopt.uniform 0 : f32
// CHECK-NEXT:   %[[A:.+]] = arith.mulf %[[G]], %[[TENTH]] : f32
// CHECK-NEXT:   %[[B:.+]] = arith.mulf %[[U0]], %[[A]] : f32
// CHECK-NEXT:   %[[N:.+]] = arith.subf %[[P]], %[[B]] : f32
// CHECK-NEXT:   qopt.store_param %[[N]] : f32
qopt.optimizer @Fold param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @lr = 1.0e-3 : f64
  qopt.uniforms {
    %c = arith.constant 0.1 : f64
    %t = arith.constant true
    %lr = qopt.hyper_value @lr : f64
    qopt.yield %c, %t, %lr : f64, i1, f64
  }
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %c = qopt.uniform 0 : f32
    %t = qopt.uniform 1 : f32
    %lr = qopt.uniform 2 : f32
    %a = arith.mulf %c, %g : f32
    %b = arith.mulf %lr, %a : f32
    %d = arith.mulf %t, %b : f32
    %n = arith.subf %p, %d : f32
    qopt.store_param %n : f32
  }
}

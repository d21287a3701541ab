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
// bc1 is needed only where nesterov picks the select's true value: 0 elsewhere.
// CHECK-NEXT:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:   %[[GBC1:.+]] = arith.select %[[NEST]], %[[BC1]], %[[ZERO]] : f64
// CHECK-NEXT:   qopt.yield %[[B1]], %[[OMB]], %[[GBC1]], %[[NEST]] : f64, f64, f64, i1
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

// The guards of uniforms needed in one branch only: `a` in the false value of
// one select and the true value of another, nested (both guards); `b` in both
// values of a select (none); `c` in a branch and in a store (none).
// CHECK-LABEL: qopt.optimizer @Guards
// CHECK:      qopt.uniforms {
// CHECK-DAG:    %[[A:.+]] = qopt.hyper_value @a : f64
// CHECK-DAG:    %[[B:.+]] = qopt.hyper_value @b : f64
// CHECK-DAG:    %[[C:.+]] = qopt.hyper_value @c : f64
// CHECK-DAG:    %[[X:.+]] = qopt.hyper_value @x : i1
// CHECK-DAG:    %[[Y:.+]] = qopt.hyper_value @y : i1
// CHECK:        %[[Z:.+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:   %[[GA1:.+]] = arith.select %[[X]], %[[Z]], %[[A]] : f64
// CHECK-NEXT:   %[[GA:.+]] = arith.select %[[Y]], %[[GA1]], %[[Z]] : f64
// CHECK-NEXT:   qopt.yield %[[GA]], %[[B]], %[[C]], %[[Y]], %[[X]] : f64, f64, f64, i1, i1
qopt.optimizer @Guards param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @a = 1.0 : f64
  qopt.hyper @b = 2.0 : f64
  qopt.hyper @c = 3.0 : f64
  qopt.hyper @x = true
  qopt.hyper @y = true
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %a = qopt.hyper_value @a : f64
    %b = qopt.hyper_value @b : f64
    %c = qopt.hyper_value @c : f64
    %x = qopt.hyper_value @x : i1
    %y = qopt.hyper_value @y : i1
    %af = arith.truncf %a : f64 to f32
    %ga = arith.mulf %af, %g : f32
    %bf = arith.truncf %b : f64 to f32
    %gb = arith.mulf %bf, %g : f32
    %cf = arith.truncf %c : f64 to f32
    %gc = arith.mulf %cf, %g : f32
    %inner = arith.select %y, %ga, %gb : f32
    %outer = arith.select %x, %gc, %inner : f32
    %both = arith.select %x, %gb, %gb : f32
    %sum = arith.addf %outer, %both : f32
    qopt.store_state @m, %cf : f32
    qopt.store_param %sum : f32
  }
}

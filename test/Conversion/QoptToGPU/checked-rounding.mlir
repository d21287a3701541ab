// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu=checked-rounding=false | FileCheck %s --check-prefix=IEEE
// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu=mode=fast | FileCheck %s --check-prefix=FAST

// Checked rounding (strict mode, the default): a softsign and a sqrt code are
// computed through div.approx.ftz / sqrt.approx.ftz, kept where u' = t' + 0.5
// lies more than 2^-10 from an integer, |u'| < 512 and the divisor is in
// [2^-40, 2^100]; the thread's lanes take the IEEE chain otherwise. A linear
// code (one IEEE division) keeps the IEEE chain alone.

// CHECK-LABEL: gpu.func @Codes
// The softsign code (state m): z = m / s and 2z / (1 + |z|), approximately.
// CHECK: llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"
// CHECK: %[[U:.+]] = arith.addf %{{.+}}, %cst{{.*}} : vector<4xf32>
// CHECK: %[[Q:.+]] = llvm.call_intrinsic "llvm.floor"(%[[U]])
// CHECK: %[[FRAC:.+]] = arith.subf %[[U]], %[[Q]] : vector<4xf32>
// CHECK-DAG: arith.cmpf ogt, %[[FRAC]], %{{.+}} : vector<4xf32>
// CHECK-DAG: arith.cmpf olt, %[[FRAC]], %{{.+}} : vector<4xf32>
// CHECK: %[[ALL:.+]] = vector.reduction <and>, %{{.+}} : vector<4xi1> into i1
// CHECK: scf.if %[[ALL]] -> (vector<4xf32>) {
// CHECK-NEXT: scf.yield %[[Q]] : vector<4xf32>
// CHECK-NEXT: } else {
// CHECK: arith.divf %{{.+}}, %{{.+}} : vector<4xf32>
// CHECK: arith.divf %{{.+}}, %{{.+}} : vector<4xf32>
// CHECK: llvm.call_intrinsic "llvm.floor"
// CHECK: scf.yield
// The sqrt code's absmax (state v): one square root of the lanes' maximum,
// a negative value turned into NaN first.
// CHECK: %[[NAN:.+]] = arith.constant dense<0x7FC00000> : vector<4xf32>
// CHECK: %[[NEG:.+]] = arith.cmpf olt, %[[V:.+]], %{{.+}} : vector<4xf32>
// CHECK: arith.select %[[NEG]], %[[NAN]], %[[V]] : vector<4xi1>, vector<4xf32>
// CHECK: gpu.shuffle xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%{{.+}}) : (f32) -> f32
// The sqrt code: sqrt.approx.ftz per lane, the same check, the IEEE chain
// behind it.
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.approx.ftz.f"
// CHECK: vector.reduction <and>
// CHECK: scf.if
// CHECK: } else {
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
// CHECK: arith.divf
// The linear code (state w): no approximate chain, up to the full tile's
// stores (the partial tile's body follows with the same codes).
// CHECK-NOT: llvm.nvvm.div.approx
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : vector<4xi8>, !llvm.ptr<1>
// CHECK: gpu.return

// IEEE-NOT: llvm.nvvm.div.approx
// IEEE-NOT: llvm.nvvm.sqrt.approx
// IEEE-NOT: vector.reduction <and>
// IEEE: gpu.return

// Fast mode has no check: its codes come from the approximate chain alone.
// FAST-NOT: vector.reduction <and>
// FAST: gpu.return

qopt.optimizer @Codes param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @w : #qopt.group<storage = si8, group_size = 32, companding = linear, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %w = qopt.load_state @w : f32
    %mn = arith.addf %m, %g : f32
    %g2 = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %g2 : f32
    %wn = arith.subf %w, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_state @w, %wn : f32
    qopt.store_param %pn : f32
  }
}

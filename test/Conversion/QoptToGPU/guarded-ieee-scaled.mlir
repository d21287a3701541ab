// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=on --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=off --convert-qopt-to-gpu | FileCheck %s --check-prefix=OFF

// A numerator u * m with u uniform (Adam's (lr / bc1) * m) is checked through
// m: |u * m| lies in [RN(|u| min|m|), RN(|u| max|m|)], two scalar products.
// (A second state keeps the lanes at 8.)
// max|m| is then the same tree as a signed state's absmax of m, which LLVM's
// CSE shares (FlashAdamW: one tree of 7 maxima fewer per thread and tile).
// Only where the tiles are staged (KernelEmitter::carryPointers): elsewhere
// registers are tight (the codebook kernels took 78 instead of 64 with it)
// and the numerator keeps its own lanes' check.
// OFF-LABEL: gpu.func @Scaled
// OFF-COUNT-7: arith.minimumf
// OFF-COUNT-7: arith.maximumf
// OFF-NEXT: arith.constant
// OFF-NEXT: arith.cmpf oge
// OFF: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// The all-zero shortcut in the fallback, as below: every kernel has it.
// OFF: scf.if %{{.+}} -> (vector<8xf32>) {
// OFF: } else {
// OFF: llvm.call_intrinsic "llvm.fabs"(%[[OA:.+]]) : (vector<8xf32>) -> vector<8xf32>
// OFF-COUNT-7: arith.maximumf
// OFF-NEXT: arith.cmpf oeq
// OFF: scf.if %{{.+}} -> (vector<8xf32>) {
// OFF-NEXT: %[[OZ:.+]] = arith.mulf %[[OA]], %{{.+}} : vector<8xf32>
// OFF-NEXT: scf.yield %[[OZ]] : vector<8xf32>
// OFF-NEXT: } else {
// OFF: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// OFF: gpu.return

// CHECK-LABEL: gpu.func @Scaled
// min|m| over the lanes, then max|m| (the vector's fabs, as an absmax has
// it), then the two bounds through |u|.
// CHECK: %[[M0:.+]] = vector.extract %[[M:.+]][0] : f32 from vector<8xf32>
// CHECK-COUNT-7: arith.minimumf
// CHECK: llvm.call_intrinsic "llvm.fabs"(%[[M]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK-COUNT-7: arith.maximumf
// CHECK-NEXT: %[[AU:.+]] = llvm.call_intrinsic "llvm.fabs"(%{{.+}}) : (f32) -> f32
// CHECK-NEXT: arith.constant
// CHECK-NEXT: %[[HI:.+]] = arith.mulf %[[AU]], %{{.+}} : f32
// CHECK-NEXT: arith.cmpf ole, %[[HI]]
// CHECK-NEXT: arith.constant
// CHECK-NEXT: %[[LO:.+]] = arith.mulf %[[AU]], %{{.+}} : f32
// CHECK-NEXT: arith.cmpf oge, %[[LO]]
// Then the divisor g, of which nothing is known: its own lanes' range.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK: %[[Q0:.+]] = arith.mulf %[[A:.+]], %[[R:.+]] : vector<8xf32>
// CHECK: %[[Q:.+]] = llvm.intr.fma(%[[R]], %{{.+}}, %[[Q0]])
// CHECK-NEXT: scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK-NEXT: scf.yield %[[Q]] : vector<8xf32>
// CHECK-NEXT: } else {
// The fallback: a thread whose dividends are all +-0 (max|a| == 0) and
// whose divisors lie in [2^-60, 2^60] takes a * c, div.rn's signed zero,
// computed in its own branch (the fast path's q0 = a * r would live across
// the guard); any other thread each lane's div.rn.
// CHECK: llvm.call_intrinsic "llvm.fabs"(%[[A]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK-COUNT-7: arith.maximumf
// CHECK-NEXT: arith.cmpf oeq
// CHECK: scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK-NEXT: %[[Z:.+]] = arith.mulf %[[A]], %[[C:.+]] : vector<8xf32>
// CHECK-NEXT: scf.yield %[[Z]] : vector<8xf32>
// CHECK-NEXT: } else {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: gpu.return
qopt.optimizer @Scaled param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @lr = 0.001 : f64
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @x : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %lrh = qopt.hyper_value @lr : f64
    %lr = arith.truncf %lrh : f64 to f32
    %mn = arith.addf %m, %g : f32
    %lrm = arith.mulf %lr, %mn : f32
    %x = qopt.load_state @x : f32
    %u = arith.divf %lrm, %g : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @x, %x : f32
    qopt.store_param %pn : f32
  }
}

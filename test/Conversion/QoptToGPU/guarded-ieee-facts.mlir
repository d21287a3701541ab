// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=on --convert-qopt-to-gpu | FileCheck %s --check-prefix=STAGED

// Range facts (guarded IEEE, strict mode): Adam's denominator
// sqrt(v / bc2) + eps. The new v = b2 * w + (1 - b2) * g * g with w = x * x
// is nonnegative where the uniforms b2 and 1 - b2 are; v / bc2's own check
// (v itself in [2^-60, 2^60], not |v|: the stronger condition, and its
// maximum is then a sqrt state's absmax tree) then bounds the quotient to
// [2^-60, 2^100] where
// also bc2 is in [2^-40, 1], inside the square root's domain, and the root
// plus an eps in [0, 2^40] lies inside the division's. So the square root
// and the last divisor take no look at their lanes: their guard is that
// condition, a few scalar compares. The numerator m keeps its check. (The
// test of guarded-ieee.mlir, with v of unknown sign, keeps every check.)

// CHECK-LABEL: gpu.func @Facts
// The uniforms' conditions: b2 >= 0, (1 - b2) >= 0, bc2 in [2^-40, 1],
// eps in [0, 2^40] (scalar compares).
// v / bc2 with its lanes' range: the minimum and maximum of v, no fabs.
// CHECK: %[[V:.+]] = arith.addf %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK: %[[V0:.+]] = vector.extract %[[V]][0] : f32 from vector<8xf32>
// CHECK-NEXT: %[[V1:.+]] = vector.extract %[[V]][1] : f32 from vector<8xf32>
// CHECK-NOT: llvm.fabs
// CHECK: arith.minimumf %[[V0]], %[[V1]] : f32
// CHECK-COUNT-6: arith.minimumf
// CHECK: %[[Q:.+]] = scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;", "=f,f,f"
// The square root: no minimum or maximum of its lanes before its branch.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rsqrt.approx.ftz.f"
// CHECK-NOT: arith.minimumf
// CHECK: %[[S:.+]] = scf.if %[[SOK:.+]] -> (vector<8xf32>) {
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// m / (s + eps): the numerator's range alone, one chain of minima over the
// 8 lanes (7 of them), none for the divisor.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK-COUNT-7: arith.minimumf
// CHECK-NOT: arith.minimumf
// CHECK: scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: gpu.return

// With staged tiles (the kernel has registers to spare), the square root's
// fallback first takes a thread whose inputs are all +-0 as its own result
// (sqrt.rn(+-0) = +-0; the fast sequence would give NaN), before each lane's
// sqrt.rn.
// STAGED-LABEL: gpu.func @Facts
// STAGED: llvm.call_intrinsic "llvm.nvvm.rsqrt.approx.ftz.f"
// STAGED: scf.if %{{.+}} -> (vector<8xf32>) {
// STAGED-NEXT: scf.yield
// STAGED-NEXT: } else {
// STAGED: llvm.call_intrinsic "llvm.fabs"(%[[S:.+]]) : (vector<8xf32>) -> vector<8xf32>
// STAGED-COUNT-7: arith.maximumf
// STAGED-NEXT: arith.cmpf oeq
// STAGED-NEXT: scf.if %{{.+}} -> (vector<8xf32>) {
// STAGED-NEXT: scf.yield %[[S]] : vector<8xf32>
// STAGED-NEXT: } else {
// STAGED: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"

qopt.optimizer @Facts param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @b2 = 0.999 : f64
  qopt.hyper @bc2 = 0.5 : f64
  qopt.hyper @eps = 1.0e-8 : f64
  qopt.state @x : #qopt.plain<storage = f32>
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %x = qopt.load_state @x : f32
    %m = qopt.load_state @m : f32
    %b2h = qopt.hyper_value @b2 : f64
    %b2 = arith.truncf %b2h : f64 to f32
    %oneh = arith.constant 1.0 : f64
    %c2h = arith.subf %oneh, %b2h : f64
    %c2 = arith.truncf %c2h : f64 to f32
    %bc2h = qopt.hyper_value @bc2 : f64
    %bc2 = arith.truncf %bc2h : f64 to f32
    %epsh = qopt.hyper_value @eps : f64
    %eps = arith.truncf %epsh : f64 to f32
    %w = arith.mulf %x, %x : f32
    %a = arith.mulf %b2, %w : f32
    %cg = arith.mulf %c2, %g : f32
    %cgg = arith.mulf %cg, %g : f32
    %v = arith.addf %a, %cgg : f32
    %vh = arith.divf %v, %bc2 : f32
    %s = math.sqrt %vh : f32
    %d = arith.addf %s, %eps : f32
    %u = arith.divf %m, %d : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @x, %v : f32
    qopt.store_state @m, %m : f32
    qopt.store_param %pn : f32
  }
}


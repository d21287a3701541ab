// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu=guarded-ieee=false | FileCheck %s --check-prefix=UNGUARDED

// Checked rounding of a sqrt code whose square root the update computed
// (LaneMath::knownRoot): Adam's sqrt(v / bc2), with bc2 a launch uniform,
// gives sqrt(v) as sqrt.rn(v / bc2) * sqrt.rn(bc2), the uniform's root once
// where it is defined and folded into the thread's quotient 255 / s; the
// thread's check adds bc2 in [2^-40, 1]; where bc2 is outside it, the
// lanes' own checks in the fallback take the sqrt.approx chain (inline PTX,
// not hoisted into the fast path). A state whose root the update takes
// directly (sqrt(y)) uses it as it is. No sqrt.approx on the fast path of
// either.

// CHECK-LABEL: gpu.func @KnownRoot
// sqrt.rn of the uniform bc2 before the tile loop (the only scalar sqrt.rn
// before the update's square roots).
// CHECK: %[[SBC2:.+]] = llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%{{.+}}) : (f32) -> f32
// CHECK: scf.for
// The update's sqrt(v / bc2): its guarded result.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rsqrt.approx.ftz.f"
// CHECK: %[[ROOTV:.+]] = scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;"
// The update's sqrt(y).
// CHECK: llvm.call_intrinsic "llvm.nvvm.rsqrt.approx.ftz.f"
// CHECK: %[[ROOTY:.+]] = scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;"
// The code of v: bc2's range first (in [2^-40, 1]), then 255 / s times
// sqrt(bc2) and t' = root * that, unrounded; the range joins the thread's
// check.
// CHECK-NOT: llvm.nvvm.sqrt.approx
// CHECK: arith.cmpf oge, %[[BC2:.+]], %cst{{.*}} : f32
// CHECK-NEXT: arith.constant 1.000000e+00 : f32
// CHECK-NEXT: arith.cmpf ole, %[[BC2]], %cst{{.*}} : f32
// CHECK-NEXT: %[[BCOK:.+]] = arith.andi
// CHECK: %[[K:.+]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%{{.+}}, %{{.+}}) : (f32, f32) -> f32
// CHECK-NEXT: %[[KS:.+]] = arith.mulf %[[K]], %[[SBC2]] : f32
// CHECK-NEXT: %[[KSV:.+]] = vector.broadcast %[[KS]] : f32 to vector<8xf32>
// CHECK-NEXT: arith.constant dense<0x4B400000>
// CHECK-NEXT: llvm.intr.fma(%[[ROOTV]], %[[KSV]], %{{.+}})
// The divisor below 65504 (a saturating f16 scale, docs/numerics.md
// "Overflow"), at least 2^-40.
// CHECK: arith.constant 6.550400e+04 : f32
// CHECK-NEXT: %[[BH:.+]] = arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK-NEXT: arith.andi
// CHECK-NEXT: arith.constant
// CHECK-NEXT: %[[AL:.+]] = arith.cmpf oge, %{{.+}}, %cst{{.*}} : f32
// CHECK-NEXT: arith.andi
// CHECK-NEXT: %[[DOK:.+]] = arith.andi %[[BH]], %[[AL]] : i1
// CHECK-NEXT: %[[ALL:.+]] = arith.andi %{{.+}}, %[[BCOK]] : i1
// CHECK-NEXT: scf.if %[[ALL]]
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// The fallback: the sqrt.approx chain's distances where bc2 is out of range
// (times the thread's 255 / s itself, computed once), the root's where it is
// in; each lane's check, then the IEEE loop.
// CHECK-NOT: llvm.nvvm.div.approx
// CHECK: vector.broadcast %[[K]] : f32 to vector<8xf32>
// CHECK-COUNT-8: llvm.inline_asm "sqrt.approx.ftz.f32 $0, $1;"
// CHECK: arith.select %[[BCOK]], %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK-NEXT: arith.select %[[BCOK]], %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK-NEXT: arith.select %[[BCOK]], %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK: arith.andi %[[DOK]], %{{.+}} : i1
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;"
// The code of y: its root times 255 / s, no product by a uniform's root.
// CHECK-NOT: llvm.nvvm.sqrt.approx
// CHECK: %[[KY:.+]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%{{.+}}, %{{.+}}) : (f32, f32) -> f32
// CHECK-NEXT: %[[KYV:.+]] = vector.broadcast %[[KY]] : f32 to vector<8xf32>
// CHECK-NEXT: arith.constant dense<0x4B400000>
// CHECK-NEXT: llvm.intr.fma(%[[ROOTY]], %[[KYV]], %{{.+}})
// CHECK-NOT: llvm.nvvm.sqrt.approx
// CHECK: gpu.return

// Without guarded IEEE (plain sqrt.rn in the update) no root is recorded:
// the codes take sqrt.approx per lane.
// UNGUARDED-LABEL: gpu.func @KnownRoot
// UNGUARDED: llvm.call_intrinsic "llvm.nvvm.sqrt.approx.ftz.f"

qopt.optimizer @KnownRoot param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @bc2 = 0.5 : f64
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @y : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %v = qopt.load_state @v : f32
    %y = qopt.load_state @y : f32
    %bc2h = qopt.hyper_value @bc2 : f64
    %bc2 = arith.truncf %bc2h : f64 to f32
    %g2 = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %g2 : f32
    %yn = arith.addf %y, %g2 : f32
    %vh = arith.divf %vn, %bc2 : f32
    %s = math.sqrt %vh : f32
    %r = math.sqrt %yn : f32
    %d = arith.addf %s, %r : f32
    %pn = arith.subf %p, %d : f32
    qopt.store_state @v, %vn : f32
    qopt.store_state @y, %yn : f32
    qopt.store_param %pn : f32
  }
}

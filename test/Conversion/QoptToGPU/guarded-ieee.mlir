// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=16 --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=16 --convert-qopt-to-gpu=guarded-ieee=false | FileCheck %s --check-prefix=PLAIN
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=0 elements-per-thread=16" --convert-qopt-to-gpu=mode=fast | FileCheck %s --check-prefix=FAST
// RUN: qopt-opt %s --emit=ptx | FileCheck %s --check-prefix=PTX

// Guarded IEEE (strict mode, the default): the update's divisions and square
// roots take ptxas's div.rn.f32 / sqrt.rn.f32 fast-path sequence on the
// thread's lanes, the range check once for all of them (the lanes' smallest
// and largest magnitude), and div.rn / sqrt.rn as inline PTX (which LLVM
// cannot hoist above the branch) for a thread with a lane out of range. A
// divisor broadcast from a uniform gets its reciprocal once.

// CHECK-LABEL: gpu.func @Guarded
// v / c, c a uniform: its reciprocal, refined once, where the uniform is
// loaded (before the tile loop).
// CHECK: %[[C:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NEXT: %[[R0:.+]] = llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"(%[[C]]) : (f32) -> f32
// CHECK: %[[NC:.+]] = arith.negf %[[C]] : f32
// CHECK: %[[E:.+]] = llvm.intr.fma(%[[NC]], %[[R0]], %{{.+}}) : (f32, f32, f32) -> f32
// CHECK: %[[R:.+]] = llvm.intr.fma(%[[E]], %[[R0]], %[[R0]]) : (f32, f32, f32) -> f32
// CHECK: scf.for
// The lanes' range: one minimum and one maximum of |v| over the lanes, two
// comparisons; then the divisor's range.
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: arith.cmpf oge
// CHECK: arith.cmpf ole
// CHECK: %[[RV:.+]] = vector.broadcast %[[R]] : f32 to vector<16xf32>
// CHECK: arith.cmpf ole
// CHECK: arith.cmpf oge
// q0 = v * r; q = fma(r, fma(-c, q0, v), q0).
// CHECK: %[[Q0:.+]] = arith.mulf %[[V:.+]], %[[RV]] : vector<16xf32>
// CHECK: %[[REM:.+]] = llvm.intr.fma(%{{.+}}, %[[Q0]], %[[V]])
// CHECK: %[[Q:.+]] = llvm.intr.fma(%[[RV]], %[[REM]], %[[Q0]])
// CHECK: %[[VC:.+]] = scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK-NEXT: scf.yield %[[Q]] : vector<16xf32>
// CHECK-NEXT: } else {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;", "=f,f,f"
// CHECK: scf.yield
// sqrt(v / c): rsqrt.approx.ftz per lane, s = fma(fma(-s0, s0, a), y/2, s0),
// a in [2^-100, 2^100] (no magnitude: a negative lane fails).
// CHECK: llvm.call_intrinsic "llvm.nvvm.rsqrt.approx.ftz.f"
// CHECK: arith.mulf %[[VC]], %{{.+}} : vector<16xf32>
// CHECK: llvm.intr.fma
// CHECK: llvm.intr.fma
// CHECK-NOT: llvm.call_intrinsic "llvm.fabs"
// CHECK: arith.minimumf
// CHECK: arith.cmpf oge, %{{.+}}, %cst{{.*}} : f32
// CHECK: scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK: } else {
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// m / d, d per lane: its reciprocal per lane and both operands' ranges.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK: llvm.intr.fma({{.+}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// CHECK: scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: gpu.return

// PLAIN-LABEL: gpu.func @Guarded
// PLAIN-NOT: rcp.approx
// PLAIN-NOT: llvm.intr.fma
// PLAIN: arith.divf %{{.+}}, %{{.+}} : vector<16xf32>
// PLAIN: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
// PLAIN: gpu.return

// Fast mode divides approximately and needs no guard.
// FAST-LABEL: gpu.func @Guarded
// FAST-NOT: rcp.approx
// FAST-NOT: llvm.inline_asm
// FAST: gpu.return

// The emitted sequence: the uniform reciprocal and its refinement before the
// tile loop, then per lane mul.rn and two fma.rn, div.rn behind the branch.
// PTX: .visible .entry Guarded(
// 256 threads: built for two resident blocks per SM.
// PTX: .maxntid 256, 1, 1
// PTX-NEXT: .minnctapersm 2
// PTX-DAG: neg.f32 [[NC:%r[0-9]+]], [[C:%r[0-9]+]];
// PTX-DAG: rcp.approx.ftz.f32 [[R0:%r[0-9]+]], [[C]];
// PTX: fma.rn.f32 [[E:%r[0-9]+]], [[NC]], [[R0]], 0f3F800000;
// PTX: fma.rn.f32 [[R:%r[0-9]+]], [[E]], [[R0]], [[R0]];
// PTX: mul.rn.f32 [[Q0:%r[0-9]+]], [[R]], {{%r[0-9]+}};
// PTX: fma.rn.f32 [[REM:%r[0-9]+]], [[NC]], [[Q0]],
// PTX: fma.rn.f32 {{%r[0-9]+}}, [[R]], [[REM]], [[Q0]];
// PTX: div.rn.f32
// PTX: rsqrt.approx.ftz.f32
// PTX: sqrt.rn.f32

qopt.optimizer @Guarded param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @c = 3.0 : f64
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %v = qopt.load_state @v : f32
    %ch = qopt.hyper_value @c : f64
    %c = arith.truncf %ch : f64 to f32
    %g2 = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %g2 : f32
    %vc = arith.divf %vn, %c : f32
    %s = math.sqrt %vc : f32
    %d = arith.addf %s, %c : f32
    %u = arith.divf %g, %d : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

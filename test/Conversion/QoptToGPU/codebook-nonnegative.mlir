// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=16 --convert-qopt-to-gpu | FileCheck %s

// A codebook state whose qmap has no entry below zero (Adam's v with
// bitsandbytes' unsigned map) is nonnegative where its block's absmax is:
// each thread checks the qmap entries it copies to shared memory, and the
// barrier after the copy and-reduces that over the block. With the
// uniforms' conditions (b2 and 1 - b2 >= 0, guarded-ieee-facts.mlir), the
// new v is then nonnegative, so the square root of v / bc2 and the last
// divisor take no look at their lanes; v / bc2 checks |v| (the absmax's
// tree, which CSE shares); and v's codes skip c's sign where that
// condition holds (the other branch is the signed lookup of codebook.mlir).

// CHECK-LABEL: gpu.func @Nonneg
// CHECK: %[[LOOP:.+]] = scf.for %{{.+}} = %{{.+}} to %c256_i64{{.*}} iter_args(%[[OK:.+]] = %true) -> (i1)
// CHECK: %[[ENTRY:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[BELOW:.+]] = arith.cmpf olt, %[[ENTRY]], %cst{{.*}} : f32
// CHECK: %[[NOT:.+]] = arith.xori %[[BELOW]], %true : i1
// CHECK: %[[ACC:.+]] = arith.andi %[[OK]], %[[NOT]] : i1
// CHECK: scf.yield %[[ACC]] : i1
// CHECK: %[[MINE:.+]] = arith.extui %[[LOOP]] : i1 to i32
// CHECK: %[[ALL:.+]] = nvvm.barrier #nvvm.reduction<and> %[[MINE]] -> i32
// CHECK: %[[QNN:.+]] = arith.cmpi ne, %[[ALL]], %c0_i32{{.*}} : i32
// In the tile: qmap[code] * absmax, nonnegative where absmax >= 0 too; then
// b2 * w and (1 - b2) * g * g where b2 >= 0 and 1 - b2 >= 0.
// CHECK: %[[W:.+]] = arith.mulf %{{.+}}, %[[ABSMAX:.+]] : vector<16xf32>
// CHECK: %[[AOK:.+]] = arith.cmpf oge, %{{.+}}, %cst{{.*}} : f32
// CHECK: %[[WNN:.+]] = arith.andi %[[QNN]], %[[AOK]] : i1
// CHECK: %[[AWNN:.+]] = arith.andi %[[WNN]], %{{.+}} : i1
// CHECK: %[[VNN:.+]] = arith.andi %[[AWNN]], %{{.+}} : i1
// v / bc2: the magnitudes' minimum and maximum.
// CHECK: llvm.call_intrinsic "llvm.fabs"
// CHECK: arith.minimumf
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// The square root: no minimum or maximum of its lanes before its branch.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rsqrt.approx.ftz.f"
// CHECK-NOT: arith.minimumf
// CHECK-NOT: arith.maximumf
// CHECK: scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// g / (s + eps): g's range alone (one tree of minima, 15 of them), none
// for the divisor.
// CHECK-COUNT-15: arith.minimumf
// CHECK-NOT: arith.minimumf
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK-NOT: arith.minimumf
// CHECK: scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// Its fallback (an f32 parameter's kernel has the all-zero shortcut,
// LaneFacts::zeroShortcutLaneDivisors) looks at the divisor's lanes, whose facts'
// condition may have failed with the dividend's, before the lanes' div.rn.
// CHECK: arith.cmpf oeq
// CHECK: arith.minimumf
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// v's codes on the bucket path: where v is known nonnegative, the positive
// buckets (the table's first half) by c's bits alone, no |c| and no sign.
// CHECK: scf.if %[[VNN]] -> (vector<16xi8>) {
// CHECK-NOT: llvm.fabs
// CHECK: %[[C:.+]] = vector.extract %{{.+}}[0] : f32 from vector<16xf32>
// CHECK: %[[MAG:.+]] = llvm.call_intrinsic "llvm.maxnum"(%[[C]], %cst{{.*}}) : (f32, f32) -> f32
// CHECK: %[[BITS:.+]] = arith.bitcast %[[MAG]] : f32 to i32
// CHECK: %[[STEP:.+]] = arith.shrui %[[BITS]], %c16_i32{{.*}} : i32
// CHECK: arith.addi %[[STEP]], %c-13184_i32{{.*}} : i32
// CHECK-NOT: arith.shrsi
// CHECK: } else {
// CHECK: llvm.call_intrinsic "llvm.fabs"
// CHECK: arith.shrsi %{{.+}}, %c31_i32

qopt.optimizer @Nonneg param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @b2 = 0.999 : f64
  qopt.hyper @bc2 = 0.5 : f64
  qopt.hyper @eps = 1.0e-8 : f64
  qopt.state @v : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %w = qopt.load_state @v : f32
    %b2h = qopt.hyper_value @b2 : f64
    %b2 = arith.truncf %b2h : f64 to f32
    %oneh = arith.constant 1.0 : f64
    %c2h = arith.subf %oneh, %b2h : f64
    %c2 = arith.truncf %c2h : f64 to f32
    %bc2h = qopt.hyper_value @bc2 : f64
    %bc2 = arith.truncf %bc2h : f64 to f32
    %epsh = qopt.hyper_value @eps : f64
    %eps = arith.truncf %epsh : f64 to f32
    %a = arith.mulf %b2, %w : f32
    %cg = arith.mulf %c2, %g : f32
    %cgg = arith.mulf %cg, %g : f32
    %v = arith.addf %a, %cgg : f32
    %vh = arith.divf %v, %bc2 : f32
    %s = math.sqrt %vh : f32
    %d = arith.addf %s, %eps : f32
    %u = arith.divf %g, %d : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @v, %v : f32
    qopt.store_param %pn : f32
  }
}

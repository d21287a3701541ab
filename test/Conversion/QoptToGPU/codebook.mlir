// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu='codebook-buckets=false guarded-ieee=false' | FileCheck %s --check-prefix=FULL
// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu | FileCheck %s --check-prefix=NOASYNC

// Codebook states take no async copies by default (useAsyncCopy: measured
// slower, the codebook search already loads the shared-memory pipe).
// NOASYNC-NOT: cp.async
// NOASYNC: gpu.return

// Seed 000's blockwise codebook: the qmap table, its 255 midpoints (and 8
// of +inf after them) in shared memory, filled once per block, and a table of
// 2 x 4097 buckets of normalized values (a sign and a 128th of a binade of
// |c| in [2^-32, 1]; i16: midpoints below each, how many inside); the block
// absmax of 2048 elements (128 threads of 16 lanes) over four warp shuffles
// and then shared memory; the code by one comparison with the first midpoint
// of the lane's bucket, the 8-step search of all midpoints for a thread with
// a lane in a bucket of more than one.

// CHECK-LABEL: gpu.module @Codebook_kernels
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_qmap0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_mid0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<263 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_bucket0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<8194 x i16>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_warpmax0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<8 x f32>
// CHECK: gpu.func @Codebook(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %{{.+}}: !llvm.ptr<1>, %[[QMAP:.+]]: !llvm.ptr<1>) kernel
// CHECK: llvm.mlir.addressof @__qopt_Codebook_qmap0 : !llvm.ptr<3>
// CHECK: gpu.barrier
// Midpoints, then the +inf padding, then the buckets in ascending order of c
// (the negative ones from -1 up, then the positive ones): a run of 8194 / 256
// buckets per thread, each the magnitudes [2^-32 + k * 2^16, + 2^16) (from 0
// for k = 0, 1.0 alone at the end) of its sign; one binary search for the
// run's first bucket, then two cursors moving up the midpoints (< the
// bucket's lowest c, <= its highest).
// CHECK: scf.for
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: arith.shli %{{.+}}, %{{.+}} : i32
// CHECK: arith.minui
// CHECK-COUNT-8: arith.cmpf olt
// CHECK: scf.for %{{.+}} = %{{.+}} to %c33_i64{{.*}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (i32, i32)
// CHECK: scf.while
// CHECK: arith.cmpf olt
// CHECK: scf.while
// CHECK: arith.cmpf ole
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 2 : i64} : i16, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-4: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
// c = x / max(absmax, 1e-30): the block's reciprocal once, two FMA
// corrections per lane, div.rn for a thread with a lane out of range
// (guarded IEEE).
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK: llvm.intr.fma
// CHECK: llvm.intr.fma
// CHECK: scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// Per lane: |c|'s pattern clamped to [2^-32, 1], its bucket in the sign's
// half, then one comparison with the bucket's first midpoint.
// CHECK: arith.maxui
// CHECK: arith.minui
// CHECK: arith.shrui %{{.+}}, %{{.+}} : i32
// CHECK: llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr<3> -> i16
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK-NEXT: arith.cmpf olt, %{{.+}}, %{{.+}} : f32
// CHECK-NOT: arith.cmpf olt
// CHECK: arith.cmpf uno
// CHECK: arith.cmpi ule
// CHECK: scf.if %{{.+}} -> (vector<16xi8>) {
// CHECK: } else {
// CHECK-COUNT-8: arith.cmpf ult, %{{.+}}, %{{.+}} : f32

// Without the bucket table: the 8-step search of all midpoints alone.
// FULL-NOT: __qopt_Codebook_bucket0
// FULL: arith.divf
// FULL-NOT: arith.cmpf olt
// FULL-COUNT-8: arith.cmpf ult, %{{.+}}, %{{.+}} : f32

qopt.optimizer @Codebook param "p" : bf16 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %mn = arith.addf %m, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}

// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu | FileCheck %s

// Seed 000's blockwise codebook: the qmap table and its 255 midpoints in
// shared memory, filled once per block; the block absmax of 2048 elements
// (128 threads) over four warp shuffles and then shared memory; the code by an
// 8-step branchless search of the midpoints.

// CHECK-LABEL: gpu.module @Codebook_kernels
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_qmap0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_mid0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<255 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_warpmax0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<8 x f32>
// CHECK: gpu.func @Codebook(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %{{.+}}: !llvm.ptr<1>, %[[QMAP:.+]]: !llvm.ptr<1>) kernel
// CHECK: llvm.mlir.addressof @__qopt_Codebook_qmap0 : !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-4: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: gpu.barrier
// CHECK: arith.divf
// CHECK-COUNT-8: arith.cmpf ult, %{{.+}}, %{{.+}} : f32

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

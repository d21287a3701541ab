// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu | FileCheck %s

// Two block-wide absmax reductions per tile (two codebook states of 2048
// elements: 256 threads of 8 lanes, across 8 warps). Each warp's maximum is
// one redux.sync of the lanes' maximum's bit pattern (magnitudes order as
// unsigned integers); its lane 0 writes it to the state's slots, a barrier,
// then lane j of every warp reads warp j's slot and one more redux.sync
// gives the block's. No barrier after the reads: the other reduction's
// barrier orders them before the slots' next write, one tile later (with
// one such reduction per tile, codebook.mlir, the barrier after the reads
// stays).

// CHECK-LABEL: gpu.func @TwoBlocks
// The full tile's body: m's reduction, then v's, with one barrier each.
// CHECK: scf.if
// CHECK-NOT: gpu.shuffle
// CHECK: nvvm.redux.sync umax %{{.+}}, %c-1_i32 : i32 -> i32
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: arith.minui %{{.+}}, %c7_i64 : i64
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK-NOT: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.redux.sync umax %{{.+}}, %c-1_i32{{.*}} : i32 -> i32
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: arith.minui %{{.+}}, %c7_i64{{.*}} : i64
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK-NOT: gpu.barrier
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>

qopt.optimizer @TwoBlocks param "p" : bf16 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.state @v : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %g2 = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %g2 : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

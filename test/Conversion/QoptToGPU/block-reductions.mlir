// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=tile-claims=0 --convert-qopt-to-gpu | FileCheck %s

// Two block-wide absmax reductions per tile (two codebook states of 2048
// elements: 256 threads of 8 lanes, across 8 warps), behind one barrier.
// Each warp's maximum per state is one redux.sync of the lanes' maximum's
// bit pattern (magnitudes order as unsigned integers); lane 0 writes both
// to the states' slots of the tile's parity (t % 2: a block's tiles are
// consecutive), one barrier, then lane j of every warp reads warp j's slot
// and one more redux.sync gives each block's absmax. No barrier after the
// reads: a warp writes the same slots again two tiles on, after every warp
// passed the next tile's barrier.

// CHECK-LABEL: gpu.func @TwoBlocks
// The tile loop of a run (from the run's first tile to a computed end).
// CHECK: scf.for %[[T:arg[0-9]+]] = %arg{{[0-9]+}} to %{{[0-9]+}} step
// (The L2 prefetch of the tile two on, codebook.mlir.)
// CHECK: nvvm.cp.async.bulk.prefetch
// CHECK: }
// The full tile's body: both reductions, then the codes.
// CHECK: scf.if
// CHECK: arith.remui %[[T]], %c2_i64{{.*}} : i64
// CHECK-NOT: gpu.shuffle
// CHECK: nvvm.redux.sync umax %{{.+}}, %c-1_i32 : i32 -> i32
// CHECK: nvvm.redux.sync umax
// CHECK: scf.if
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: arith.minui %{{.+}}, %c7_i64 : i64
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK: arith.minui %{{.+}}, %c7_i64{{.*}} : i64
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK-NOT: gpu.barrier
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK: } else {
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return

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

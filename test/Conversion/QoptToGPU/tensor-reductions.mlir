// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=gpu elements-per-thread=16" --convert-qopt-to-gpu | FileCheck %s
// RUN: not qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=gpu threads-per-block=32 elements-per-thread=4" --convert-qopt-to-gpu 2>&1 | FileCheck %s --check-prefix=SHAPE

// Per-tensor reductions on the GPU (docs/abi.md, "Reductions"): three entry
// points in one module. The step takes the values as the argument after the
// tables and reads the tensor's two (norm, max) once per run, at
// tensor * 2 + r.
// CHECK-LABEL: gpu.func @Norm(
// CHECK-SAME: %[[VALUES:[^:]+]]: !llvm.ptr<1>) kernel
// CHECK: %[[TENSOR:.+]] = arith.extsi %{{.+}} : i32 to i64
// CHECK: %[[FIRST:.+]] = arith.muli %[[TENSOR]], %{{.+}} : i64
// CHECK: llvm.getelementptr %[[VALUES]][%{{.+}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: llvm.load %{{.+}} : !llvm.ptr<1> -> f32
// CHECK: llvm.load %{{.+}} : !llvm.ptr<1> -> f32
// CHECK: gpu.return

// The pre-pass reads only the gradient (the operands' slice), stores no
// element, and per reduction builds each chunk's tree: the thread's 16
// lanes pairwise (15 nodes), shuffles down by 1 ... 16 of the f64's two
// halves, then the chunk's warps from shared memory; thread c writes chunk
// c's partial at (tile * 1 + c) * 2 + r, between two barriers.
// CHECK-LABEL: gpu.func @Norm_reduce(
// CHECK-NOT: gpu.func
// CHECK: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xf32>
// CHECK-NOT: -> vector<16xf32>
// CHECK: arith.extf %{{.+}} : vector<16xf32> to vector<16xf64>
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf64>
// CHECK-COUNT-15: arith.addf %{{.+}}, %{{.+}} : f64
// CHECK: gpu.shuffle  down %{{.+}}, %c1_i32
// CHECK: gpu.shuffle  down %{{.+}}, %c2_i32
// CHECK: gpu.shuffle  down %{{.+}}, %c4_i32
// CHECK: gpu.shuffle  down %{{.+}}, %c8_i32
// CHECK: gpu.shuffle  down %{{.+}}, %c16_i32
// CHECK-COUNT-15: arith.maximumf %{{.+}}, %{{.+}} : f64
// CHECK: gpu.barrier
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : f64, !llvm.ptr<1>
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : f64, !llvm.ptr<1>
// CHECK: gpu.barrier
// CHECK-NOT: vector<16xbf16>
// CHECK: gpu.return

// The finish: 512 threads, a block per tensor; each warp's run of
// partials in batches of 4 segments of 128 loaded together, both
// reductions in one pass (lane i the partials [4i, 4i + 4) of each segment,
// each chunk's two adjacent; each reduction's 4 in registers by 3 sums),
// each segment's tree by shuffles down 1 ... 16 (the f64
// in two halves), the batch's by 3 sums, broadcast from lane 0 (two idx
// shuffles); the batches by a stack of subtrees per reduction in local
// memory (merges: the trailing ones of the batch's index), folded newest
// first; then, one reduction after the other, the warps
// through shared memory; the square root rounded once (sqrt.rn.f64), one
// rounding to f32.
// CHECK-LABEL: gpu.func @Norm_finish(%{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>) kernel attributes {known_block_size = array<i32: 512, 1, 1>}
// CHECK: llvm.alloca %{{.+}} x f64
// CHECK-COUNT-32: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<1> -> f64
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-3: arith.addf %{{.+}}, %{{.+}} : f64
// CHECK-COUNT-80: gpu.shuffle  down
// CHECK-COUNT-3: arith.maximumf %{{.+}}, %{{.+}} : f64
// CHECK-COUNT-2: gpu.shuffle  idx %{{.+}}, %c0_i32
// CHECK: "llvm.intr.cttz"
// CHECK: arith.addf %{{.+}}, %{{.+}} : f64
// CHECK: gpu.barrier
// CHECK: "sqrt.rn.f64 $0, $1;"
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: arith.cmpf uno
// CHECK-NOT: "llvm.intr.cttz"
// CHECK: arith.maximumf %{{.+}}, %{{.+}} : f64
// CHECK: gpu.return

// SHAPE: tensor-reductions.mlir:[[@LINE+6]]:10: error: a per-tensor reduction's GPU lowering needs tiles of whole 2048-element chunks and warps of at most 2048 elements (a divisor); the plan has 32 threads of 4 elements

qopt.optimizer @Norm param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %sq = arith.mulf %g, %g : f32
    %n = qopt.reduce norm %sq : f32
    %m = qopt.reduce max %g : f32
    %p = qopt.load_param : f32
    %d = arith.divf %p, %n : f32
    %e = arith.addf %d, %m : f32
    qopt.store_param %e : f32
  }
}

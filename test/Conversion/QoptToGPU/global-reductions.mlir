// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=gpu" --convert-qopt-to-gpu | FileCheck %s

// Whole-step reductions on the GPU (docs/abi.md, "Whole-step reductions"):
// the step reads the per-tensor value (one: the norm) from its argument and
// the whole-step ones (sum, max) from uniform slots 1 and 2, after the one
// host-evaluated uniform (lr).
// CHECK-LABEL: gpu.func @Clip(
// CHECK-SAME: %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %[[U:[^:]+]]: !llvm.ptr<1>, %[[VALUES:[^:]+]]: !llvm.ptr<1>) kernel
// CHECK: llvm.getelementptr %[[U]][%c0_i64{{[_0-9]*}}]
// CHECK: llvm.getelementptr %[[U]][%c1_i64{{[_0-9]*}}]
// CHECK: llvm.getelementptr %[[U]][%c2_i64{{[_0-9]*}}]
// CHECK-NOT: llvm.getelementptr %[[U]][%c3_i64{{[_0-9]*}}]
// CHECK: llvm.getelementptr %[[VALUES]][%{{.+}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: gpu.return

// The pre-pass builds all three reductions' chunk partials.
// CHECK-LABEL: gpu.func @Clip_reduce(
// CHECK: gpu.return

// The finish: the whole-step sum's f64 tree stored unfinished at k * 2 + 0
// of the step's rows (its last argument), the per-tensor norm finished to
// f32 at k * 1 + 0, the whole-step max's tree at k * 2 + 1.
// CHECK-LABEL: gpu.func @Clip_finish(
// CHECK-SAME: %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %[[VALS:[^:]+]]: !llvm.ptr<1>, %[[ROWS:[^:]+]]: !llvm.ptr<1>) kernel
// CHECK: llvm.getelementptr %[[ROWS]]
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : f64, !llvm.ptr<1>
// CHECK: llvm.getelementptr %[[VALS]]
// CHECK: "sqrt.rn.f64 $0, $1;"
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: llvm.getelementptr %[[ROWS]]
// CHECK: arith.maximumf
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : f64, !llvm.ptr<1>
// CHECK: gpu.return

// The combine: one block of 512 threads over the step's rows (row * 2 + s),
// each value rounded once to f32 into its uniform slot.
// CHECK-LABEL: gpu.func @Clip_combine(
// CHECK-SAME: %{{.+}}: i64, %{{.+}}: !llvm.ptr<1>, %[[CU:[^:]+]]: !llvm.ptr<1>) kernel attributes {known_block_size = array<i32: 512, 1, 1>}
// Both trees in one pass over the rows, then each value.
// CHECK: arith.maximumf %{{.+}}, %{{.+}} : f64
// CHECK: llvm.getelementptr %[[CU]][%c1_i64{{[_0-9]*}}]
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: llvm.getelementptr %[[CU]][%c2_i64{{[_0-9]*}}]
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: gpu.return

qopt.optimizer @Clip param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @lr = 1.0e-01 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    %s = qopt.reduce global sum %g : f32
    %n = qopt.reduce norm %g : f32
    %m = qopt.reduce global max %g : f32
    %lr = qopt.hyper_value @lr : f64
    %lr32 = arith.truncf %lr : f64 to f32
    %p = qopt.load_param : f32
    %a = arith.divf %s, %n : f32
    %b = arith.mulf %a, %m : f32
    %c = arith.mulf %lr32, %b : f32
    %d = arith.subf %p, %c : f32
    qopt.store_param %d : f32
  }
}

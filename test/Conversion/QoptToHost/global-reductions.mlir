// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=4" --convert-qopt-to-host | FileCheck %s

// Whole-step reductions on the host (docs/abi.md, "Whole-step reductions"):
// the step function keeps its signature and reads the whole-step values from
// uniform slots 1 and 2 (after lr); <kernel>_partials writes each tensor's
// two f64 accumulations to its row of the step (its last argument), and
// <kernel>_combine folds the rows into the slots, each rounded once.
// CHECK-LABEL: llvm.func @Clip_host(
// CHECK-SAME: %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: i64, %[[U:[^:]+]]: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: i64, %{{.+}}: i64)
// CHECK: llvm.getelementptr %[[U]][%c1_i64{{[_0-9]*}}]
// CHECK: llvm.getelementptr %[[U]][%c2_i64{{[_0-9]*}}]
// CHECK-LABEL: llvm.func @Clip_partials(
// CHECK-SAME: %{{.+}}: i64, %{{.+}}: i64, %[[ROWS:[^:]+]]: !llvm.ptr)
// CHECK: llvm.getelementptr %[[ROWS]][%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK: llvm.getelementptr %[[ROWS]][%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NOT: llvm.getelementptr %[[ROWS]]
// CHECK-LABEL: llvm.func @Clip_combine(
// CHECK-SAME: %{{.+}}: i64, %{{.+}}: !llvm.ptr, %[[CU:[^:]+]]: !llvm.ptr)
// CHECK: "llvm.intr.cttz"
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: llvm.getelementptr %[[CU]][%c1_i64{{[_0-9]*}}]
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: llvm.getelementptr %[[CU]][%c2_i64{{[_0-9]*}}]

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

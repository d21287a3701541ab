// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=4" --convert-qopt-to-host | FileCheck %s

// A tensor's reductions run before the first of its tiles in the range: per
// chunk of 2048 elements the operand's slice (here g * g; the store is not
// in it) gives f64 terms, exact squares for norm, the identity (-0) past the
// tensor's end; a pairwise tree of 11 levels (1024 ... 1 sums) makes the
// chunk's partial. The partials go to the tree over the chunks by a stack of
// complete subtrees: chunk c's partial merges (older + newer) as often as c
// has trailing ones, then is pushed; the stack's subtrees are folded newest
// first. Then the square root in f64, one rounding to f32, NaN made
// canonical; the update reads the value from its slot.

// CHECK-LABEL: llvm.func @Norm_host(
// CHECK: %[[TERMS:.+]] = llvm.alloca %{{.+}} x f64 {alignment = 64 : i64}
// CHECK: %[[STACK:.+]] = llvm.alloca %{{.+}} x f64 {alignment = 16 : i64}
// CHECK: %[[VALUES:.+]] = llvm.alloca %{{.+}} x f32 {alignment = 16 : i64}
// CHECK: scf.if
// CHECK: %[[DEPTH:.+]] = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (i64)
// CHECK: %[[SQ:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<4xf32>
// CHECK: %[[WIDE:.+]] = arith.extf %[[SQ]] : vector<4xf32> to vector<4xf64>
// CHECK: %[[TERM:.+]] = arith.mulf %[[WIDE]], %[[WIDE]] : vector<4xf64>
// CHECK: arith.select %{{.+}}, %[[TERM]], %{{.+}} : vector<4xi1>, vector<4xf64>
// CHECK-NOT: qopt.store_param
// CHECK-COUNT-11: arith.addf %{{.+}}, %{{.+}} : f64
// CHECK: %[[MERGES:.+]] = "llvm.intr.cttz"
// CHECK: scf.for %{{.+}} = %{{.+}} to %[[MERGES]] step %{{.+}} iter_args(%[[NEWER:.+]] = %{{.+}}) -> (f64)
// CHECK: arith.addf %{{.+}}, %[[NEWER]] : f64
// CHECK: llvm.store %{{.+}}, %{{.+}} : f64, !llvm.ptr
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %[[DEPTH]] step %{{.+}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (f64)
// CHECK: arith.addf %{{.+}}, %[[ACC]] : f64
// CHECK: llvm.intr.sqrt(%[[SUM]]) : (f64) -> f64
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: arith.cmpf uno
// CHECK: llvm.store %{{.+}}, %{{.+}} : f32, !llvm.ptr
// CHECK: llvm.load %{{.+}} : !llvm.ptr -> f32
// CHECK: llvm.return

qopt.optimizer @Norm param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %sq = arith.mulf %g, %g : f32
    %n = qopt.reduce norm %sq : f32
    %p = qopt.load_param : f32
    %d = arith.divf %p, %n : f32
    qopt.store_param %d : f32
  }
}

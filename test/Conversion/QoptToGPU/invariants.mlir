// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=gpu" --convert-qopt-to-gpu | FileCheck %s

// The update's values that are the same on every lane are computed once, as
// scalars (1-lane vectors): those of the launch (uniforms, whole-step
// reductions) at the kernel's entry, before the runs' loop; those of a
// tensor (its per-tensor reductions) once per run, before the tile loop. The
// tile body only multiplies its lanes by their broadcasts.
// CHECK-LABEL: gpu.func @Scopes(
// The clip coefficient min(1, max_norm / (norm + eps)), once per launch.
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<1xf32>
// CHECK: arith.divf %{{.+}}, %{{.+}} : vector<1xf32>
// CHECK: arith.minimumf %{{.+}}, %{{.+}} : vector<1xf32>
// CHECK: scf.while
// The trust ratio of the run's tensor and its products with the clip and
// lr, once per run.
// CHECK: arith.divf %{{.+}}, %{{.+}} : vector<1xf32>
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<1xf32>
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<1xf32>
// CHECK: scf.for
// CHECK-NOT: arith.divf
// CHECK-NOT: arith.minimumf
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK-NOT: arith.divf
// CHECK-NOT: arith.minimumf
// CHECK: gpu.func @Scopes_reduce(

qopt.optimizer @Scopes param "p" : f32 master none grad "g" : f32 {
  qopt.hyper @lr = 1.0e-01 : f64
  qopt.hyper @max_norm = 1.0 : f64
  qopt.update {
    %one = arith.constant 1.0 : f32
    %eps = arith.constant 1.0e-06 : f32
    %g = qopt.load_grad : f32
    %gn = qopt.reduce global norm %g : f32
    %mn = qopt.hyper_value @max_norm : f64
    %mn32 = arith.truncf %mn : f64 to f32
    %den = arith.addf %gn, %eps : f32
    %q = arith.divf %mn32, %den : f32
    %clip = arith.minimumf %q, %one : f32
    %gc = arith.mulf %g, %clip : f32
    %p = qopt.load_param : f32
    %pn = qopt.reduce norm %p : f32
    %un = qopt.reduce norm %g : f32
    %ratio = arith.divf %pn, %un : f32
    %scale = arith.mulf %ratio, %clip : f32
    %lr = qopt.hyper_value @lr : f64
    %lr32 = arith.truncf %lr : f64 to f32
    %step = arith.mulf %lr32, %scale : f32
    %u = arith.mulf %step, %gc : f32
    %d = arith.subf %p, %u : f32
    qopt.store_param %d : f32
  }
}

// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=0 elements-per-thread=16" --convert-qopt-to-gpu | FileCheck %s

// x ** c with a constant c of 2 is one f32 product, as torch computes it; no
// float64 arithmetic (docs/numerics.md, "Elementary functions").

// CHECK-LABEL: gpu.func @Square
// CHECK-NOT: f64
// CHECK: arith.mulf %[[S:.+]], %[[S]] : vector<16xf32>
// CHECK-NOT: f64
// CHECK: gpu.return

qopt.optimizer @Square param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %two = arith.constant 2.0 : f32
    %s = math.powf %g, %two : f32
    qopt.store_param %s : f32
  }
}

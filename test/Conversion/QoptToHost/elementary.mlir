// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=4" --convert-qopt-to-host | FileCheck %s

// The host lowers the elementary functions as the GPU does (the same
// float64 sequence, lib/Codegen/ElementaryFunctions.cpp): here atan2 of the
// gradient and the parameter, one f64 division, the polynomial by fmas, the
// quadrant by selects; no rounding intrinsic (baseline x86-64 has none: the
// shifter rounds) and no call of a libm function other than fma.

// CHECK-LABEL: llvm.func @Atan2_host(
// CHECK-NOT: llvm.intr.roundeven
// CHECK-NOT: llvm.intr.floor
// CHECK: %[[Y:.+]] = arith.extf %{{.+}} : vector<4xf32> to vector<4xf64>
// CHECK: %[[T:.+]] = arith.divf %{{.+}}, %{{.+}} : vector<4xf64>
// CHECK: %[[Z:.+]] = arith.mulf %[[T]], %[[T]] : vector<4xf64>
// CHECK-COUNT-11: llvm.intr.fma(%{{.+}}, %[[Z]], %{{.+}})
// CHECK: %[[TZ:.+]] = arith.mulf %[[T]], %[[Z]] : vector<4xf64>
// CHECK: llvm.intr.fma(%[[TZ]], %{{.+}}, %[[T]])
// CHECK: arith.truncf %{{.+}} : vector<4xf64> to vector<4xf32>
// CHECK: llvm.call_intrinsic "llvm.copysign"
// CHECK-NOT: llvm.intr.roundeven
// CHECK-NOT: llvm.call @
// CHECK: llvm.return

qopt.optimizer @Atan2 param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %a = math.atan2 %g, %p : f32
    qopt.store_param %a : f32
  }
}

// RUN: qopt-opt %s --qopt-fuse-grad-scaling --qopt-outline-uniforms --qopt-plan-kernel="elements-per-thread=4 tile-claims=0" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="elements-per-thread=4 tile-claims=0" --convert-qopt-to-gpu | FileCheck %s --check-prefix=PLAIN

// The skip flag is tested once per launch: a set flag makes the tile count 0,
// so every block's tile range is empty. The gradient is multiplied by the inverse scale and rounded
// to its own type (f16 here) and back, as GradScaler.unscale_ stores it.
// CHECK: gpu.func @SGD(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %[[NTILES:.+]]: i64, %{{.+}}: !llvm.ptr<1>)
// CHECK: %[[INV:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[FOUND:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[SET:.+]] = arith.cmpf une, %[[FOUND]], %{{.+}} : f32
// CHECK: %[[BOUND:.+]] = arith.select %[[SET]], %{{.+}}, %[[NTILES]] : i64
// CHECK-NOT: %[[NTILES]]
// CHECK: arith.addi %[[BOUND]], %{{.+}} : i64
// CHECK:   %[[INVV:.+]] = vector.broadcast %[[INV]] : f32 to vector<4xf32>
// CHECK:   %[[G:.+]] = arith.extf %{{.+}} : vector<4xf16> to vector<4xf32>
// CHECK-NEXT: %[[M:.+]] = arith.mulf %[[G]], %[[INVV]] : vector<4xf32>
// CHECK-NEXT: %[[R:.+]] = arith.truncf %[[M]] : vector<4xf32> to vector<4xf16>
// CHECK-NEXT: arith.extf %[[R]] : vector<4xf16> to vector<4xf32>

// Without the pass the kernel has neither (the shipped kernels' PTX is
// unchanged unless compiled with --grad-scaling).
// PLAIN-NOT: arith.cmpf une
// PLAIN-NOT: arith.truncf %{{.+}} : vector<4xf32> to vector<4xf16>
qopt.optimizer @SGD param "p" : f32 master none grad "g" : f16 {
  qopt.hyper @lr = 0.1 : f64
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %lr = qopt.hyper_value @lr : f64
    %lr32 = arith.truncf %lr : f64 to f32
    %d = arith.mulf %lr32, %g : f32
    %pn = arith.subf %p, %d : f32
    qopt.store_param %pn : f32
  }
}

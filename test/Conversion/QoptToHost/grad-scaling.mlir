// RUN: qopt-opt %s --qopt-fuse-grad-scaling --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=4" --convert-qopt-to-host | FileCheck %s

// On the host a set skip flag empties the tile range [tile_begin, tile_end);
// the gradient is unscaled and rounded to bf16 with integer operations (no
// compiler-rt call), as every 16-bit conversion of the host backend.
// CHECK: llvm.func @SGD_host(%{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: i64, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %[[BEGIN:[^:]+]]: i64, %[[END:[^:]+]]: i64)
// CHECK: %[[INV:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: %[[FOUND:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: %[[SET:.+]] = arith.cmpf une, %[[FOUND]], %{{.+}} : f32
// CHECK: %[[STOP:.+]] = arith.select %[[SET]], %[[BEGIN]], %[[END]] : i64
// CHECK: scf.for %{{.+}} = %[[BEGIN]] to %[[STOP]] step %{{.+}} : i64 {
// CHECK:   %[[INVV:.+]] = vector.broadcast %[[INV]] : f32 to vector<4xf32>
// CHECK:   arith.mulf %{{.+}}, %[[INVV]] : vector<4xf32>
// CHECK-NOT: arith.truncf
// CHECK:   arith.trunci %{{.+}} : vector<4xi32> to vector<4xi16>
qopt.optimizer @SGD param "p" : f32 master none grad "g" : bf16 {
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

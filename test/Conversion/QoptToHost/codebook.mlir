// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=16" --convert-qopt-to-host | FileCheck %s

// Seed 000's blockwise codebook: the qmap read from the tables array, its 255
// midpoints computed once per call into a stack buffer; codes dequantized by
// a gather; per block of 2048 the absmax, the divisor max(absmax, 1e-30) and
// the code by an 8-step search of the midpoints (unordered less-than, so a
// NaN takes the last code); the f32 absmax stored per block. (Its states
// saturate: the numerics counters come last, overflow.mlir.)

// CHECK: llvm.func @Codebook_host(%{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr, %[[TABLES:[^:]+]]: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr)
// CHECK: llvm.alloca %{{.+}} x f32 {alignment = 64 : i64}
// CHECK: %[[MIDS:.+]] = llvm.alloca %{{.+}} x f32 {alignment = 16 : i64}
// CHECK: %[[SLOT:.+]] = llvm.getelementptr %[[TABLES]][%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[QMAP:.+]] = llvm.load %[[SLOT]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK: scf.for
// CHECK:   arith.addf
// CHECK:   arith.mulf
// CHECK:   llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     llvm.getelementptr %[[QMAP]][%{{.+}}] : (!llvm.ptr, vector<16xi32>) -> vector<16x!llvm.ptr>, f32
// CHECK:     llvm.intr.masked.gather
// CHECK:   scf.for
// CHECK:     arith.maximumf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:   arith.constant 1.000000e-30 : f32
// CHECK:   scf.for
// CHECK:     arith.divf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK-COUNT-8: arith.cmpf ult, %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:     arith.trunci %{{.+}} : vector<16xi32> to vector<16xi8>
// CHECK:   llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr

qopt.optimizer @Codebook param "p" : bf16 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %mn = arith.addf %m, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}

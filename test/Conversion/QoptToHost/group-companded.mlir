// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=16" --convert-qopt-to-host | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=16" --convert-qopt-to-host=mode=fast | FileCheck %s --check-prefix=FAST

// A companded group-32 momentum and a bf16 parameter with int8 error bits:
// qopt_host_counted_kernel_fn's signature (the numerics counters last: the
// state saturates, overflow.mlir), a loop over [tile_begin, tile_end), the
// update 16 lanes at a time (masked in a partial chunk) into a stack buffer,
// then per group of 32 the absmax (a NaN absmax becomes 0x7FC00000), the f16
// scale and the codes (floor without a libm call: truncate, adjust, sign).

// CHECK: llvm.func @Momentum_host(%{{.+}}: !llvm.ptr, %[[MAP:[^:]+]]: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %[[BEGIN:[^:]+]]: i64, %[[END:[^:]+]]: i64, %{{[^:]+}}: !llvm.ptr)
// CHECK: %[[BUF:.+]] = llvm.alloca %{{.+}} x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: scf.for %[[T:.+]] = %[[BEGIN]] to %[[END]] step %{{.+}} : i64 {
// CHECK:   llvm.getelementptr %[[MAP]][%[[T]]] : (!llvm.ptr, i64) -> !llvm.ptr, i32
// CHECK:   %[[COUNT:.+]] = arith.minsi
// CHECK:   scf.for %[[OFF:.+]] = %{{.+}} to %[[COUNT]] step %{{.+}} : i64 {
// CHECK:     llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr -> vector<16xi16>
// CHECK:     llvm.intr.masked.load %{{.+}}, %{{.+}}, %{{.+}} {alignment = 16 : i32} : (!llvm.ptr, vector<16xi1>, vector<16xi16>) -> vector<16xi16>
// CHECK:     llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr -> vector<16xi8>
// CHECK:     llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr -> i16
// CHECK:     arith.divf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:     %[[AT:.+]] = llvm.getelementptr %[[BUF]][%[[OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:     llvm.store %{{.+}}, %[[AT]] {alignment = 16 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:     llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xi16>, !llvm.ptr
// CHECK:     llvm.intr.masked.store
// CHECK:   scf.for %[[G:.+]] = %{{.+}} to %[[COUNT]] step %{{.+}} : i64 {
// CHECK:     scf.for %{{.+}} = %[[G]] to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (vector<16xf32>) : i64 {
// CHECK:       llvm.call_intrinsic "llvm.fabs"
// CHECK:       arith.maximumf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:     vector.extract_strided_slice %{{.+}} {offsets = [0], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK:     arith.constant 0x7FC00000 : f32
// CHECK:     arith.cmpf uno
// CHECK:     scf.for
// CHECK:       arith.fptosi %{{.+}} : vector<16xf32> to vector<16xi32>
// CHECK:       llvm.call_intrinsic "llvm.copysign"
// CHECK:       llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr
// CHECK:     llvm.store %{{.+}}, %{{.+}} {alignment = 2 : i64} : i16, !llvm.ptr
// CHECK: llvm.return
// CHECK-NOT: qopt.optimizer

// FAST: arith.mulf %{{.+}}, %{{.+}} fastmath<arcp,contract,afn> : vector<16xf32>

qopt.optimizer @Momentum param "p" : bf16 master ecc_i8 grad "g" : bf16 {
  qopt.hyper @beta = 0.9 : f64
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %b = qopt.hyper_value @beta : f64
    %bf = arith.truncf %b : f64 to f32
    %mn0 = arith.mulf %bf, %m : f32
    %mn = arith.addf %mn0, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}

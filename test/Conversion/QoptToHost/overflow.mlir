// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=16" --convert-qopt-to-host | FileCheck %s
// RUN: qopt-opt %s --qopt-set-overflow=policy=ieee --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=16" --convert-qopt-to-host | FileCheck %s --check-prefix=IEEE

// docs/numerics.md "Overflow": with saturating states the host function takes
// the numerics counters last (qopt_host_counted_kernel_fn). Per group, where
// the absmax is not below 65520 (NaN included), one atomic add to counter 0
// (finite) or 1 (NaN or inf), behind a null check; then the absmax saturates
// to 65504, or to 2^-24 where it is positive and at most 2^-25 (a zero f16,
// not counted), before the f16 scale. A codebook block's absmax: NaN to 0, +inf to
// FLT_MAX. Under ieee: the qopt_host_kernel_fn signature, no counting and no
// saturation.

// CHECK: llvm.func @Overflow_host(%{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: i64, %[[COUNTERS:[^:]+]]: !llvm.ptr)
// The group state m (its absmax with the NaN made canonical).
// CHECK: arith.constant 0x7FC00000 : f32
// CHECK: %[[ABSMAX:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK: %[[LIMIT:.+]] = arith.constant 6.552000e+04 : f32
// CHECK: %[[FITS:.+]] = arith.cmpf olt, %[[ABSMAX]], %[[LIMIT]] : f32
// CHECK: %[[SAT:.+]] = arith.xori %[[FITS]], %{{.+}} : i1
// CHECK-NEXT: %[[NULL:.+]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[GIVEN:.+]] = llvm.icmp "ne" %[[COUNTERS]], %[[NULL]] : !llvm.ptr
// CHECK-NEXT: %[[COUNT:.+]] = arith.andi %[[SAT]], %[[GIVEN]] : i1
// CHECK: scf.if %[[COUNT]] {
// CHECK:   %[[FINITE:.+]] = arith.cmpf olt, %[[ABSMAX]], %{{.+}} : f32
// CHECK:   %[[SLOT:.+]] = arith.select %[[FINITE]], %{{.+}}, %{{.+}} : i64
// CHECK:   %[[AT:.+]] = llvm.getelementptr %[[COUNTERS]][%[[SLOT]]] : (!llvm.ptr, i64) -> !llvm.ptr, i64
// CHECK:   llvm.atomicrmw add %[[AT]], %{{.+}} monotonic : !llvm.ptr, i64
// CHECK: }
// CHECK: %[[FITS2:.+]] = arith.cmpf olt, %[[ABSMAX]], %{{.+}} : f32
// CHECK: %[[MAX:.+]] = arith.constant 6.550400e+04 : f32
// CHECK: %[[SAT2:.+]] = arith.select %[[FITS2]], %[[ABSMAX]], %[[MAX]] : f32
// CHECK: %[[SMALLEST:.+]] = arith.constant 5.96046448E-8 : f32
// CHECK: %[[HALF:.+]] = arith.constant 2.98023224E-8 : f32
// CHECK: %[[SMALL2:.+]] = arith.cmpf ole, %[[ABSMAX]], %[[HALF]] : f32
// CHECK: %[[POS2:.+]] = arith.cmpf ogt, %[[ABSMAX]], %{{.+}} : f32
// CHECK: %[[UNDER2:.+]] = arith.andi %[[POS2]], %[[SMALL2]] : i1
// CHECK: arith.select %[[UNDER2]], %[[SMALLEST]], %[[SAT2]] : f32
// The codebook state c (its absmax with the NaN made canonical).
// CHECK: arith.constant 0x7FC00000 : f32
// CHECK: %[[CABS:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK: %[[INF:.+]] = arith.constant 0x7F800000 : f32
// CHECK: arith.cmpf olt, %[[CABS]], %[[INF]] : f32
// CHECK: scf.if
// CHECK:   llvm.atomicrmw add %{{.+}}, %{{.+}} monotonic : !llvm.ptr, i64
// CHECK: %[[ISNAN:.+]] = arith.cmpf uno, %[[CABS]], %[[CABS]] : f32
// CHECK: %[[ISINF:.+]] = arith.cmpf oeq, %[[CABS]], %{{.+}} : f32
// CHECK: %[[FLTMAX:.+]] = arith.constant 3.40282347E+38 : f32
// CHECK: %[[CLAMPED:.+]] = arith.select %[[ISINF]], %[[FLTMAX]], %[[CABS]] : f32
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: arith.select %[[ISNAN]], %[[ZERO]], %[[CLAMPED]] : f32

// IEEE: llvm.func @Overflow_host(%{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: i64)
// IEEE-NOT: llvm.atomicrmw
// IEEE-NOT: 6.550400e+04
// IEEE-NOT: 3.40282347E+38
// IEEE: llvm.return

qopt.optimizer @Overflow param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @c : #qopt.codebook<block = 256>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %c = qopt.load_state @c : f32
    %mn = arith.addf %m, %g : f32
    %cn = arith.addf %c, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @c, %cn : f32
    qopt.store_param %pn : f32
  }
}

// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="elements-per-thread=8 threads-per-block=256 async-copy=off tile-claims=0" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-set-overflow=policy=ieee --qopt-outline-uniforms --qopt-plan-kernel="elements-per-thread=8 threads-per-block=256 async-copy=off tile-claims=0" --convert-qopt-to-gpu | FileCheck %s --check-prefix=IEEE

// docs/numerics.md "Overflow": with saturating states the kernel takes the
// numerics counters last (docs/abi.md). A group's absmax (after the shuffles)
// saturates to 65504 where it is not below 65520 (NaN included), and to
// 2^-24 where it is positive and at most 2^-25 (a zero f16), before the f16
// scale; checked rounding sends a group whose divisor is not below 65504
// to the IEEE chain (its clamp); the thread that stores the group's scale
// adds 1 to counter 0 (finite absmax) or 1 (NaN or inf) by an atomic add,
// behind a null check, where the absmax did not fit (an underflow is not
// counted). A codebook block's absmax: NaN to 0, +inf to FLT_MAX.
// Under ieee: no counters argument, no saturation, no atomics.

// CHECK: gpu.func @Overflow(%{{[^:]+}}: !llvm.ptr<1>, %{{[^:]+}}: !llvm.ptr<1>, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr<1>, %{{[^:]+}}: !llvm.ptr<1>, %[[COUNTERS:[^:]+]]: !llvm.ptr<1>) kernel
// The group's absmax by shuffles, saturated.
// CHECK: gpu.shuffle  xor
// CHECK: %[[LIMIT:.+]] = arith.constant 6.552000e+04 : f32
// CHECK-NEXT: %[[FITS:.+]] = arith.cmpf olt, %[[ABSMAX:[^,]+]], %[[LIMIT]] : f32
// CHECK-NEXT: %[[MAX:.+]] = arith.constant 6.550400e+04 : f32
// CHECK-NEXT: %[[SAT:.+]] = arith.select %[[FITS]], %[[ABSMAX]], %[[MAX]] : f32
// An f16 scale's underflow: a positive absmax of at most 2^-25 takes 2^-24.
// CHECK-NEXT: %[[SMALLEST:.+]] = arith.constant 5.96046448E-8 : f32
// CHECK-NEXT: %[[HALF:.+]] = arith.constant 2.98023224E-8 : f32
// CHECK-NEXT: %[[SMALL:.+]] = arith.cmpf ole, %[[ABSMAX]], %[[HALF]] : f32
// CHECK-NEXT: %[[ZERO0:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[POS:.+]] = arith.cmpf ogt, %[[ABSMAX]], %[[ZERO0]] : f32
// CHECK-NEXT: %[[UNDER:.+]] = arith.andi %[[POS]], %[[SMALL]] : i1
// CHECK-NEXT: arith.select %[[UNDER]], %[[SMALLEST]], %[[SAT]] : f32
// CHECK-NEXT: %[[FLOOR:.+]] = arith.constant 9.99999996E-13 : f32
// Checked rounding: the divisor's upper bound is 65504, exclusive.
// CHECK: arith.constant 0.499755859 : f32
// CHECK: %[[DIV:.+]] = llvm.call_intrinsic "llvm.fabs"(%{{.+}}) : (f32) -> f32
// CHECK-NEXT: %[[HI:.+]] = arith.constant 6.550400e+04 : f32
// CHECK-NEXT: arith.cmpf olt, %[[DIV]], %[[HI]] : f32
// The leader's store of the scale, then the count.
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 2 : i64} : f16, !llvm.ptr<1>
// CHECK-NEXT: %[[TRUE:.+]] = arith.constant true
// CHECK-NEXT: %[[LIMIT2:.+]] = arith.constant 6.552000e+04 : f32
// CHECK-NEXT: %[[FITS2:.+]] = arith.cmpf olt, %[[ABSMAX]], %[[LIMIT2]] : f32
// CHECK-NEXT: %[[OVER:.+]] = arith.xori %[[FITS2]], %[[TRUE]] : i1
// CHECK-NEXT: %[[NULL:.+]] = llvm.mlir.zero : !llvm.ptr<1>
// CHECK-NEXT: %[[GIVEN:.+]] = llvm.icmp "ne" %[[COUNTERS]], %[[NULL]] : !llvm.ptr<1>
// CHECK-NEXT: %[[COUNT:.+]] = arith.andi %[[OVER]], %[[GIVEN]] : i1
// CHECK-NEXT: scf.if %[[COUNT]] {
// CHECK-NEXT:   %[[INF:.+]] = arith.constant 0x7F800000 : f32
// CHECK-NEXT:   %[[FINITE:.+]] = arith.cmpf olt, %[[ABSMAX]], %[[INF]] : f32
// CHECK-NEXT:   %[[ONE:.+]] = arith.constant 1 : i64
// CHECK-NEXT:   %[[ZERO:.+]] = arith.constant 0 : i64
// CHECK-NEXT:   %[[SLOT:.+]] = arith.select %[[FINITE]], %[[ZERO]], %[[ONE]] : i64
// CHECK-NEXT:   %[[AT:.+]] = llvm.getelementptr %[[COUNTERS]][%[[SLOT]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i64
// CHECK-NEXT:   %[[INC:.+]] = arith.constant 1 : i64
// CHECK-NEXT:   llvm.atomicrmw add %[[AT]], %[[INC]] monotonic : !llvm.ptr<1>, i64
// CHECK-NEXT: }
// The codebook block's absmax by redux.sync. The plan's
// early_saturation_counts (an unstaged codebook kernel): its leader counts a
// NaN or infinite one right there, then it saturates.
// CHECK: %[[CBITS:.+]] = nvvm.redux.sync  umax
// CHECK-NEXT: %[[CABS:.+]] = arith.bitcast %[[CBITS]] : i32 to f32
// CHECK: scf.if %{{.+}} {
// CHECK: llvm.icmp "ne" %[[COUNTERS]], %{{.+}} : !llvm.ptr<1>
// CHECK: llvm.atomicrmw add %{{.+}}, %{{.+}} monotonic : !llvm.ptr<1>, i64
// CHECK: %[[ISNAN:.+]] = arith.cmpf uno, %[[CABS]], %[[CABS]] : f32
// CHECK-NEXT: %[[CINF:.+]] = arith.constant 0x7F800000 : f32
// CHECK-NEXT: %[[ISINF:.+]] = arith.cmpf oeq, %[[CABS]], %[[CINF]] : f32
// CHECK-NEXT: %[[FLTMAX:.+]] = arith.constant 3.40282347E+38 : f32
// CHECK-NEXT: %[[CLAMPED:.+]] = arith.select %[[ISINF]], %[[FLTMAX]], %[[CABS]] : f32
// CHECK-NEXT: %[[CZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: arith.select %[[ISNAN]], %[[CZERO]], %[[CLAMPED]] : f32
// Its leader stores the absmax.
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<1>

// IEEE: gpu.func @Overflow(%{{[^:]+}}: !llvm.ptr<1>, %{{[^:]+}}: !llvm.ptr<1>, %{{[^:]+}}: i64, %{{[^:]+}}: !llvm.ptr<1>, %{{[^:]+}}: !llvm.ptr<1>) kernel
// IEEE-NOT: llvm.atomicrmw
// IEEE-NOT: 6.550400e+04
// IEEE-NOT: 3.40282347E+38
// IEEE: gpu.return

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

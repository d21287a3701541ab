// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=0 elements-per-thread=16" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx | FileCheck %s --check-prefix=PTX

// The elementary functions are float64 arithmetic on the lanes
// (lib/Codegen/ElementaryFunctions.cpp, docs/numerics.md): exp clamps its
// argument, takes k = RN(x / ln 2) by the 1.5 * 2^52 shifter, reduces by ln 2
// in two fmas, evaluates its polynomial by fmas, scales by 2^k built from
// bits and rounds to f32 once; a NaN lane keeps its input. No libdevice call
// and no approximate instruction.

// CHECK-LABEL: gpu.func @Exp
// CHECK: %[[X:.+]] = arith.extf %[[G:.+]] : vector<16xf32> to vector<16xf64>
// CHECK: arith.cmpf ult, %[[X]], %{{.+}} : vector<16xf64>
// CHECK: %[[SCALED:.+]] = arith.mulf %{{.+}}, %[[INVLN2:.+]] : vector<16xf64>
// CHECK: %[[SHIFTED:.+]] = arith.addf %[[SCALED]], %[[SHIFTER:.+]] : vector<16xf64>
// CHECK: %[[K:.+]] = arith.subf %[[SHIFTED]], %{{.+}} : vector<16xf64>
// CHECK: %[[MINUSK:.+]] = arith.negf %[[K]] : vector<16xf64>
// CHECK: %[[R1:.+]] = llvm.intr.fma(%[[MINUSK]], %{{.+}}, %{{.+}}) : (vector<16xf64>, vector<16xf64>, vector<16xf64>) -> vector<16xf64>
// CHECK: %[[R2:.+]] = llvm.intr.fma(%[[MINUSK]], %{{.+}}, %[[R1]])
// CHECK: %[[R:.+]] = arith.addf %[[R2]], %{{.+}} : vector<16xf64>
// CHECK-COUNT-11: llvm.intr.fma(%{{.+}}, %[[R]], %{{.+}})
// CHECK: %[[KI:.+]] = arith.fptosi %[[K]] : vector<16xf64> to vector<16xi64>
// CHECK: %[[P:.+]] = llvm.intr.fma(%{{.+}}, %[[R]], %{{.+}})
// CHECK: %[[BIASED:.+]] = arith.addi %[[KI]], %{{.+}} : vector<16xi64>
// CHECK: %[[BITS:.+]] = arith.shli %[[BIASED]], %{{.+}} : vector<16xi64>
// CHECK: %[[POW2:.+]] = arith.bitcast %[[BITS]] : vector<16xi64> to vector<16xf64>
// CHECK: %[[Y:.+]] = arith.mulf %[[P]], %[[POW2]] : vector<16xf64>
// CHECK: %[[Y32:.+]] = arith.truncf %[[Y]] : vector<16xf64> to vector<16xf32>
// CHECK: %[[NAN:.+]] = arith.cmpf uno, %[[G]], %[[G]] : vector<16xf32>
// CHECK: arith.select %[[NAN]], %[[G]], %[[Y32]] : vector<16xi1>, vector<16xf32>
// CHECK: gpu.return

// PTX-LABEL: .visible .entry Exp(
// PTX-NOT: call
// PTX-NOT: approx
// PTX: mul.rn.f64
// PTX: fma.rn.f64
// PTX: cvt.rzi.s64.f64
// PTX: cvt.rn.f32.f64
// PTX: ret;

qopt.optimizer @Exp param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %e = math.exp %g : f32
    qopt.store_param %e : f32
  }
}

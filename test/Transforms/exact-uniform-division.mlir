// RUN: qopt-opt %s --pass-pipeline='builtin.module(gpu.module(qopt-exact-uniform-division))' | FileCheck %s

// A division by a lane-uniform value (here max(broadcast absmax, 1e-12), as a
// group quantizer divides) becomes one reciprocal, a multiply, one fused
// correction and a proof of correct rounding per lane; a vector with any
// unproven lane takes the IEEE division. A division by a per-lane value and
// a fast-math division are left alone.

// CHECK-LABEL: gpu.func @quantize
// CHECK-SAME: (%[[X:.+]]: vector<4xf32>, %[[ABSMAX:.+]]: f32, %[[Y:.+]]: vector<4xf32>
// CHECK:      %[[S:.+]] = vector.extract %[[DIV:.+]][0] : f32 from vector<4xf32>
// CHECK:      %[[R:.+]] = arith.divf %{{.+}}, %[[S]] : f32
// CHECK:      %[[RV:.+]] = vector.broadcast %[[R]] : f32 to vector<4xf32>
// CHECK:      %[[Q0:.+]] = arith.mulf %[[X]], %[[RV]] : vector<4xf32>
// CHECK:      %[[NQ0:.+]] = arith.negf %[[Q0]] : vector<4xf32>
// CHECK:      %[[REM:.+]] = llvm.intr.fma(%[[NQ0]], %[[DIV]], %[[X]])
// CHECK:      %[[Q1:.+]] = llvm.intr.fma(%[[REM]], %[[RV]], %[[Q0]])
// CHECK:      %[[NQ1:.+]] = arith.negf %[[Q1]] : vector<4xf32>
// CHECK:      llvm.intr.fma(%[[NQ1]], %[[DIV]], %[[X]])
// CHECK:      arith.cmpf olt
// CHECK:      %[[ALL:.+]] = vector.reduction <and>, %{{.+}} : vector<4xi1> into i1
// CHECK:      %[[Q:.+]] = scf.if %[[ALL]] -> (vector<4xf32>) {
// CHECK:        scf.yield %{{.+}} : vector<4xf32>
// CHECK:      } else {
// CHECK:        %[[IEEE:.+]] = arith.divf %[[X]], %[[DIV]] : vector<4xf32>
// CHECK:        scf.yield %[[IEEE]] : vector<4xf32>
// CHECK:      }
// CHECK:      %[[PERLANE:.+]] = arith.divf %[[Q]], %[[Y]] : vector<4xf32>
// CHECK:      arith.divf %[[PERLANE]], %[[DIV]] fastmath<afn> : vector<4xf32>
gpu.module @kernels {
  gpu.func @quantize(%x: vector<4xf32>, %absmax: f32, %y: vector<4xf32>, %out: !llvm.ptr<1>) kernel {
    %floor = arith.constant dense<1.0e-12> : vector<4xf32>
    %b = vector.broadcast %absmax : f32 to vector<4xf32>
    %lt = arith.cmpf olt, %b, %floor : vector<4xf32>
    %s = arith.select %lt, %floor, %b : vector<4xi1>, vector<4xf32>
    %q = arith.divf %x, %s : vector<4xf32>
    %p = arith.divf %q, %y : vector<4xf32>
    %f = arith.divf %p, %s fastmath<afn> : vector<4xf32>
    llvm.store %f, %out {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
    gpu.return
  }
}

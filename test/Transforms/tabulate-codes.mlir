// RUN: qopt-opt %s --pass-pipeline='builtin.module(gpu.module(qopt-tabulate-codes))' | FileCheck %s

// The inverse softsign of a signed code, z = q / 127, y = z / (2 - |z|),
// becomes one table indexed by the code's byte. The expected entries were
// computed independently (Python, each float32 operation rounded once):
// byte 1 (q = 1) 0x3B81848E, byte 64 0x3EAC7691, byte 127 1.0, byte 129
// (q = -127) -1.0, byte 255 (q = -1) 0xBB81848E; the divisions are gone.

// CHECK-LABEL: gpu.module @kernels
// CHECK-DAG: llvm.mlir.global internal constant @__qopt_table0_values(dense<"0x000000008E84813B{{(([0-9A-F]{8}){62})}}9176AC3E{{(([0-9A-F]{8}){62})}}0000803F{{([0-9A-F]{8})}}000080BF{{(([0-9A-F]{8}){125})}}8E8481BB"> : tensor<256xf32>) {addr_space = 4 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_table0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
// CHECK: gpu.func @k(%[[CODES:.+]]: vector<2xi8>, %[[OUT:.+]]: !llvm.ptr<1>) kernel
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK-NOT: arith.divf
// CHECK: %[[C0:.+]] = vector.extract %[[CODES]][0] : i8 from vector<2xi8>
// CHECK: %[[I0:.+]] = arith.extui %[[C0]] : i8 to i32
// CHECK: llvm.getelementptr %{{.+}}[%[[I0]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, f32
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK-NOT: arith.divf
// CHECK: llvm.store
gpu.module @kernels {
  gpu.func @k(%codes: vector<2xi8>, %out: !llvm.ptr<1>) kernel {
    %c127 = arith.constant dense<127.0> : vector<2xf32>
    %c2 = arith.constant dense<2.0> : vector<2xf32>
    %q = arith.sitofp %codes : vector<2xi8> to vector<2xf32>
    %z = arith.divf %q, %c127 : vector<2xf32>
    %a = llvm.call_intrinsic "llvm.fabs"(%z) : (vector<2xf32>) -> vector<2xf32>
    %d = arith.subf %c2, %a : vector<2xf32>
    %y = arith.divf %z, %d : vector<2xf32>
    llvm.store %y, %out {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
    gpu.return
  }
}

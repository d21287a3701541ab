// RUN: qopt-opt %s --qopt-plan-kernel="target=gpu" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %S/Inputs/prepass-grad-norm.qopt --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json

// The reduce pre-pass's own shape (chooseReducePassLanes, docs/tuning.md#prepass):
// the step's tile of 512 threads x 8 lanes (two f32 states, a bf16 gradient),
// the pre-pass at 16 lanes and 256 threads where its operand is the gradient
// alone (GradNorm) or the update has two reductions (TwoNorms), at the step's
// 8 x 512 where one reduction reads a state (StateMean). Each warp's 32 x 16
// elements lie in one 2048-element chunk: four warps a chunk, so the
// chunk's tree reads four slots of the block's eight per reduction.
// CHECK-LABEL: gpu.func @GradNorm(
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>
// CHECK: -> vector<8xbf16>
// CHECK-LABEL: gpu.func @GradNorm_reduce(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xbf16>
// CHECK-NOT: -> vector<16xf32>
// CHECK: arith.extf %{{.+}} : vector<16xf32> to vector<16xf64>
// CHECK-COUNT-15: arith.addf %{{.+}}, %{{.+}} : f64
// CHECK: gpu.shuffle  down %{{.+}}, %c16_i32
// CHECK: gpu.barrier
// CHECK-COUNT-4: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<3> -> f64
// CHECK-NOT: !llvm.ptr<3> -> f64
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : f64, !llvm.ptr<1>
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @GradNorm_finish(
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>

// CHECK-LABEL: gpu.func @TwoNorms_reduce(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: -> vector<16xbf16>

// CHECK-LABEL: gpu.func @StateMean_reduce(
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>
// CHECK: -> vector<8xbf16>
// CHECK-NOT: vector<16x

// The manifest launches the pre-pass at its own block size.
// MANIFEST: "entry": "GradNorm_reduce",
// MANIFEST-NEXT: "grid": "tiles",
// MANIFEST-NEXT: "name": "reduce",
// MANIFEST-NEXT: "threads_per_block": 256
// MANIFEST: "entry": "GradNorm_finish",
// MANIFEST: "threads_per_block": 512

qopt.optimizer @GradNorm param "p" : bf16 master none grad "g" : bf16 {
  qopt.hyper @lr = 1.000000e-03 : f64
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.uniforms {
    %0 = qopt.hyper_value @lr : f64
    qopt.yield %0 : f64
  }
  qopt.update {
    %cst = arith.constant 0.899999976 : f32
    %0 = qopt.load_grad : f32
    %1 = qopt.reduce global  norm %0 : f32
    %2 = qopt.load_state @m : f32
    %3 = arith.mulf %2, %cst : f32
    %4 = arith.addf %3, %0 : f32
    %5 = qopt.load_state @v : f32
    %6 = arith.mulf %5, %cst : f32
    %7 = arith.mulf %0, %0 : f32
    %8 = arith.addf %6, %7 : f32
    %9 = qopt.load_param : f32
    %10 = qopt.uniform 0 : f32
    %11 = arith.mulf %10, %4 : f32
    %12 = arith.addf %8, %1 : f32
    %13 = arith.divf %11, %12 : f32
    %14 = arith.subf %9, %13 : f32
    qopt.store_state @m, %4 : f32
    qopt.store_state @v, %8 : f32
    qopt.store_param %14 : f32
  }
}
qopt.optimizer @TwoNorms param "p" : bf16 master none grad "g" : bf16 {
  qopt.hyper @lr = 1.000000e-03 : f64
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.uniforms {
    %0 = qopt.hyper_value @lr : f64
    qopt.yield %0 : f64
  }
  qopt.update {
    %cst = arith.constant 1.000000e+00 : f32
    %cst_0 = arith.constant 0.899999976 : f32
    %0 = qopt.load_state @m : f32
    %1 = arith.mulf %0, %cst_0 : f32
    %2 = qopt.load_grad : f32
    %3 = arith.addf %1, %2 : f32
    %4 = qopt.load_state @v : f32
    %5 = arith.mulf %4, %cst_0 : f32
    %6 = arith.mulf %2, %2 : f32
    %7 = arith.addf %5, %6 : f32
    %8 = qopt.load_param : f32
    %9 = qopt.reduce  norm %8 : f32
    %10 = qopt.reduce  norm %3 : f32
    %11 = arith.divf %9, %10 : f32
    %12 = qopt.uniform 0 : f32
    %13 = arith.mulf %12, %11 : f32
    %14 = arith.mulf %13, %3 : f32
    %15 = arith.addf %7, %cst : f32
    %16 = arith.divf %14, %15 : f32
    %17 = arith.subf %8, %16 : f32
    qopt.store_state @m, %3 : f32
    qopt.store_state @v, %7 : f32
    qopt.store_param %17 : f32
  }
}
qopt.optimizer @StateMean param "p" : bf16 master none grad "g" : bf16 {
  qopt.hyper @lr = 1.000000e-03 : f64
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.uniforms {
    %0 = qopt.hyper_value @lr : f64
    qopt.yield %0 : f64
  }
  qopt.update {
    %cst = arith.constant 1.000000e+00 : f32
    %cst_0 = arith.constant 9.99999996E-13 : f32
    %cst_1 = arith.constant 0.899999976 : f32
    %0 = qopt.load_state @m : f32
    %1 = arith.mulf %0, %cst_1 : f32
    %2 = qopt.load_grad : f32
    %3 = arith.addf %1, %2 : f32
    %4 = qopt.load_state @v : f32
    %5 = arith.mulf %4, %cst_1 : f32
    %6 = arith.mulf %2, %2 : f32
    %7 = arith.addf %5, %6 : f32
    %8 = arith.maximumf %7, %cst_0 : f32
    %9 = arith.divf %6, %8 : f32
    %10 = qopt.reduce  mean %9 : f32
    %11 = qopt.load_param : f32
    %12 = qopt.uniform 0 : f32
    %13 = arith.mulf %12, %3 : f32
    %14 = arith.addf %10, %cst : f32
    %15 = arith.divf %13, %14 : f32
    %16 = arith.subf %11, %15 : f32
    qopt.store_state @m, %3 : f32
    qopt.store_state @v, %7 : f32
    qopt.store_param %16 : f32
  }
}

// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="async-copy=on elements-per-thread=12" --convert-qopt-to-gpu 2>&1 | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="async-copy=on elements-per-thread=8" --convert-qopt-to-gpu 2>&1 | FileCheck %s --check-prefix=EIGHT

// Streams a thread's copy could not cover are not staged: 12 f32 lanes are 48
// bytes, three 16-byte chunks (the shared loads are joined pairwise, so only a
// power of two of chunks is staged). With nothing left to stage the compiler
// says so and the loads go to registers. 8 lanes (32 bytes, two chunks) stage.

// CHECK: warning: async copies: no stream of a 256 x 12 tile can be staged
// CHECK-NOT: cp.async
// CHECK: gpu.return

// EIGHT-NOT: warning
// EIGHT: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 16, cache =  cg
// EIGHT: vector.shuffle
// EIGHT: gpu.return

qopt.optimizer @Plain param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.plain<storage = f32>
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

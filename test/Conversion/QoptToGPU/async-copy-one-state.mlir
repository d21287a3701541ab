// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu=async-copy=on | FileCheck %s --check-prefix=ON
// RUN: qopt-opt %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --emit=ptx --async-copy=on -o %t.on.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST-ON --input-file=%t.on.manifest.json

// One state: no async copies by default (measured slower, useAsyncCopy);
// async-copy=on stages the bf16 parameter and gradient (16 lanes: 32 bytes,
// two chunks), the codes (16 bytes) and the f32 scale (4 bytes) of 256
// threads: (32 + 32 + 16 + 4) * 256 = 21504 bytes a stage, 43008 for two.

// AUTO-NOT: cp.async
// AUTO: gpu.return

// ON: llvm.mlir.global external @__qopt_Momentum_staging()
// ON: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 4, cache =  ca
// ON: nvvm.cp.async.commit.group
// ON: nvvm.cp.async.wait.group 1
// ON: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32

// MANIFEST: "shared_bytes": 0
// MANIFEST-ON: "shared_bytes": 43008

qopt.optimizer @Momentum param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = linear, scale = f32, rounding = half_up, divisor = absmax>
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

// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=2 bulk-copy-producer=false" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx --tile-claims=2 --bulk-copy-producer=false -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json

// A staged kernel (async copies: group states, a 16-bit parameter) never
// claims tiles, even when asked: its copy pipeline (and with bulk copies its
// stages' barrier phases) runs within one run of tiles. No work counters
// (the last argument is the numerics counters, docs/abi.md; no atomic add to
// an argument).
// CHECK-LABEL: gpu.func @Staged
// CHECK-SAME: %arg3: !llvm.ptr<1>, %arg4: !llvm.ptr<1>) kernel
// CHECK-NOT: llvm.atomicrmw add %arg
// CHECK: nvvm.cp.async.shared.global
// CHECK-NOT: llvm.atomicrmw add %arg
// CHECK: gpu.return

// MANIFEST: "args": [
// MANIFEST: "uniforms",
// MANIFEST-NEXT: "numerics_counters"
// MANIFEST-NEXT: ],
// MANIFEST-NOT: work_counters
// MANIFEST-NOT: tile_claims

qopt.optimizer @Staged param "p" : bf16 master none grad "g" : bf16 {
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

// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=off --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx --async-copy=off -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --emit=ptx --async-copy=off --tile-claims-static-eighths=7 -o %t.seven.ptx
// RUN: FileCheck %s --check-prefix=SEVEN --input-file=%t.seven.manifest.json
// RUN: qopt-opt %s --emit=ptx --async-copy=off --tile-claims-static-eighths=7 --tile-claims=0 -o %t.none.ptx
// RUN: FileCheck %s --check-prefix=NONE --input-file=%t.none.manifest.json

// Codebook blocks of 256 elements (a warp's absmax, no block-wide barrier
// per tile): chooseTileClaims' default is 6/8 of the tiles static, then one
// tile a claim (tile-claims.mlir: blocks of 2048, two tiles a claim).
// With a 16-bit parameter such blocks are staged by default, and a staged
// kernel never claims (tile-claims-staged.mlir): the kernels here are
// unstaged (--async-copy=off), as those of an f32 parameter are.

// CHECK-LABEL: gpu.func @SmallBlocks
// CHECK: %[[SCALED:.+]] = arith.muli %arg2, %c6_i64 : i64
// CHECK: arith.divui %[[SCALED]], %c8_i64{{.*}} : i64
// CHECK: llvm.atomicrmw add %{{.+}}, %c1_i64{{.*}} monotonic : !llvm.ptr<1>, i64
// CHECK: gpu.return

// MANIFEST: "tile_claims": {
// MANIFEST-NEXT: "static_eighths": 6,
// MANIFEST-NEXT: "tiles": 1

// --tile-claims-static-eighths alone replaces the choice's static share and
// keeps its claims; it makes none where --tile-claims=0 turns them off.
// SEVEN: "tile_claims": {
// SEVEN-NEXT: "static_eighths": 7,
// SEVEN-NEXT: "tiles": 1
// NONE-NOT: tile_claims
// NONE-NOT: work_counters

qopt.optimizer @SmallBlocks param "p" : bf16 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 256>
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

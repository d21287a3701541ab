// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --param-type=f32 --emit=ptx -o %t.f32.ptx
// RUN: FileCheck %s --check-prefix=F32 --input-file=%t.f32.manifest.json

// Two codebook states of blocks of 256 (each within a warp's lanes) and a
// 16-bit parameter: staged by default (chooseAsyncCopy's auto) at 256 threads
// of 8 lanes, two blocks per SM; a staged kernel claims no tiles. The
// dynamic shared memory holds the stages (14 KiB each: p, g, the codes and
// the absmax words) and then the two bucket tables (2 x 24 KiB): three
// stages, the most that keep it and the static tables within 99 KiB
// (chooseStagingSharedLimit), where four would fit the 160 KiB of group-state
// kernels.
// No work counters: no atomic add to an argument (the numerics counters'
// adds go to an element of them).
// CHECK-LABEL: gpu.func @TwoStates
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32
// CHECK-NOT: llvm.atomicrmw add %arg
// CHECK: nvvm.cp.async.shared.global
// CHECK-NOT: llvm.atomicrmw add %arg
// CHECK: gpu.return

// MANIFEST: "elements_per_thread": 8,
// MANIFEST: "shared_bytes": 92176,
// MANIFEST-NEXT: "suggested_blocks_per_sm": 2,
// MANIFEST-NEXT: "threads_per_block": 256,
// MANIFEST-NOT: "tile_claims"

// An f32 parameter: unstaged at 512 threads, claims as chooseTileClaims
// chooses for blocks within a warp. (The suggested blocks per SM count
// shared memory only; the runtime sizes the grid by the driver's
// occupancy: two such blocks at 64 registers.)
// F32: "elements_per_thread": 8,
// F32: "shared_bytes": 49168,
// F32-NEXT: "suggested_blocks_per_sm": 4,
// F32-NEXT: "threads_per_block": 512,
// F32-NEXT: "tile_claims": {
// F32-NEXT: "static_eighths": 6,
// F32-NEXT: "tiles": 1

qopt.optimizer @TwoStates param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.codebook<block = 256>
  qopt.state @v : #qopt.codebook<block = 256>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %gg = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %gg : f32
    %u = arith.mulf %mn, %vn : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

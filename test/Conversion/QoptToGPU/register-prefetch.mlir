// RUN: qopt-opt %s --qopt-plan-kernel="register-prefetch=on" | FileCheck %s --check-prefix=PLAN
// RUN: qopt-opt %s --qopt-plan-kernel="register-prefetch=off" | FileCheck %s --check-prefix=PLAN-OFF
// RUN: qopt-opt %s --qopt-plan-kernel="register-prefetch=on async-copy=on" 2>&1 | FileCheck %s --check-prefix=PLAN-STAGED
// RUN: qopt-opt %s --qopt-plan-kernel="min-blocks-per-sm=3" | FileCheck %s --check-prefix=PLAN-BLOCKS
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="register-prefetch=on tile-claims=0 l2-prefetch-tiles=0" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="register-prefetch=off tile-claims=0 l2-prefetch-tiles=0" --convert-qopt-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: qopt-opt %s --emit=ptx --register-prefetch=on --min-blocks-per-sm=3 -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: not qopt-opt %s --emit=ptx --min-blocks-per-sm=33 -o %t.bad.ptx 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not qopt-opt %s --qopt-plan-kernel="min-blocks-per-sm=-2" 2>&1 | FileCheck %s --check-prefix=PASSBAD
// RUN: not qopt-opt %s --emit=ptx --min-blocks-per-sm=9 -o %t.nine.ptx 2>&1 | FileCheck %s --check-prefix=NINE

// One codebook state of blocks of 256 and a bf16 parameter (Lion8bit's
// shape: 256 threads of 8 lanes, tiles of 2048 elements). With
// register_prefetch the run loads its first full tile's read streams (g, p
// and the codes: 16, 16 and 8 bytes a thread; the block's absmax, a float)
// before the tile loop, and
// each full tile the next one's at the loop's top, where that tile is full
// (k + 1 below the run's full tiles), poison elsewhere; the loop carries
// them into the full tile, which loads none of its own, while the partial
// tile still loads (and masks) its own.

// PLAN: l2_prefetch_lines = {{true|false}}, register_prefetch = true,
// PLAN-OFF: register_prefetch = false,
// A staged kernel's tiles come from its stages: no register prefetch, and
// where it was asked for, a warning that says so.
// PLAN-STAGED: warning: register prefetch: the 256 x 8 tiles are staged in shared memory by async copies, which already load the next tiles: no register prefetch
// PLAN-STAGED: stages = {{[2-4]}},
// PLAN-STAGED-SAME: register_prefetch = false,
// PLAN-BLOCKS: min_blocks_per_sm = 3,

// CHECK-LABEL: gpu.func @Prefetched
// The run's first tile, before its loop.
// CHECK: %[[RUN0:.+]] = arith.addi %{{.+}}, %c0_i64{{[_0-9]*}} : i64
// CHECK-NEXT: %[[FIRST:.+]] = arith.cmpi slt, %[[RUN0]], %[[LIMIT:.+]] : i64
// CHECK-NEXT: %[[INIT:.+]]:4 = scf.if %[[FIRST]] -> (vector<8xbf16>, vector<8xbf16>, vector<8xi8>, f32) {
// CHECK-COUNT-3: llvm.load %{{.+}} {alignment = {{[0-9]+}} : i64} : !llvm.ptr<1> -> vector<8x{{bf16|i8}}>
// The block's absmax at the thread's first element / 256.
// CHECK: arith.divui %{{.+}}, %c256_i64
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: llvm.mlir.poison : vector<8xbf16>
// CHECK-NEXT: llvm.mlir.poison : vector<8xbf16>
// CHECK-NEXT: llvm.mlir.poison : vector<8xi8>
// CHECK-NEXT: llvm.mlir.poison : f32
// CHECK: scf.for %[[K:arg[0-9]+]] = %{{.+}} to %{{.+}} step %c1_i64{{[_0-9]*}} iter_args(%[[G:arg[0-9]+]] = %[[INIT]]#0, %[[P:arg[0-9]+]] = %[[INIT]]#1, %[[C:arg[0-9]+]] = %[[INIT]]#2, %[[A:arg[0-9]+]] = %[[INIT]]#3) -> (vector<8xbf16>, vector<8xbf16>, vector<8xi8>, f32) : i64 {
// The next tile's loads at the loop's top.
// CHECK: %[[NEXT:.+]] = arith.addi %[[K]], %c1_i64{{[_0-9]*}} : i64
// CHECK-NEXT: %[[IN:.+]] = arith.cmpi slt, %[[NEXT]], %[[LIMIT]] : i64
// CHECK-NEXT: %[[LOADED:.+]]:4 = scf.if %[[IN]] -> (vector<8xbf16>, vector<8xbf16>, vector<8xi8>, f32) {
// CHECK-COUNT-3: llvm.load %{{.+}} {alignment = {{[0-9]+}} : i64} : !llvm.ptr<1> -> vector<8x{{bf16|i8}}>
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: } else {
// The full tile computes from the carried values and loads none of its own.
// CHECK: scf.if %{{.+}} {
// CHECK-NOT: llvm.load %{{.+}} : !llvm.ptr<1> -> {{vector<8x|f32}}
// CHECK: vector.bitcast %[[G]] : vector<8xbf16> to vector<4xi32>
// CHECK-NOT: llvm.load %{{.+}} : !llvm.ptr<1> -> {{vector<8x|f32}}
// CHECK: vector.broadcast %[[A]] : f32 to vector<8xf32>
// CHECK-NOT: llvm.load %{{.+}} : !llvm.ptr<1> -> {{vector<8x|f32}}
// CHECK: } else {
// The partial tile loads its own.
// CHECK: llvm.intr.masked.load
// CHECK: scf.yield %[[LOADED]]#0, %[[LOADED]]#1, %[[LOADED]]#2, %[[LOADED]]#3 : vector<8xbf16>, vector<8xbf16>, vector<8xi8>, f32
// CHECK: gpu.return

// OFF-LABEL: gpu.func @Prefetched
// OFF-NOT: iter_args({{.+}}vector<8x
// OFF-NOT: llvm.mlir.poison
// OFF: gpu.return

// In the PTX, p and g are loaded ahead of the loop and in it.
// PTX: .minnctapersm 3
// PTX-COUNT-2: ld.global.v4.b32
// BAD: qopt-opt: error: --min-blocks-per-sm takes -1 (chosen), 0 (no bound) or a number of blocks up to 32, got 33
// Nine blocks of 256 threads do not fit a multiprocessor (ptxas would
// ignore the bound).
// NINE: error: min-blocks-per-sm: 9 blocks of 256 threads exceed the 2048 threads a multiprocessor holds
// PASSBAD: error: qopt-plan-kernel: min-blocks-per-sm takes -1 (chosen), 0 (no bound) or up to 32 blocks, got -2

qopt.optimizer @Prefetched param "p" : bf16 master none grad "g" : bf16 {
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

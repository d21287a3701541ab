// RUN: qopt-opt %s --qopt-plan-kernel="l2-prefetch-kind=lines" | FileCheck %s --check-prefix=PLAN
// RUN: qopt-opt %s --qopt-plan-kernel="l2-prefetch-kind=lines l2-prefetch-tiles=0" | FileCheck %s --check-prefix=PLAN-NONE
// RUN: qopt-opt %s --qopt-plan-kernel | FileCheck %s --check-prefix=PLAN-AUTO
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="l2-prefetch-kind=lines tile-claims=0" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="l2-prefetch-kind=bulk tile-claims=0" --convert-qopt-to-gpu | FileCheck %s --check-prefix=BULK
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="l2-prefetch-kind=lines l2-prefetch-tiles=3 tile-claims=0" --convert-qopt-to-gpu | FileCheck %s --check-prefix=THREE
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="l2-prefetch-kind=lines l2-prefetch-tiles=0" --convert-qopt-to-gpu | FileCheck %s --check-prefix=NONE
// RUN: qopt-opt %s --emit=ptx --l2-prefetch-kind=lines -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: qopt-opt %s --emit=ptx --l2-prefetch-kind=lines --arch=sm_80 -o %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file=%t.sm80.ptx
// RUN: not qopt-opt %s --emit=ptx --l2-prefetch-tiles=-2 -o %t.bad.ptx 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not qopt-opt %s --emit=ptx --l2-prefetch-tiles=3000000000 -o %t.bad.ptx 2>&1 | FileCheck %s --check-prefix=BIG
// RUN: not qopt-opt %s --qopt-plan-kernel="l2-prefetch-tiles=1025" 2>&1 | FileCheck %s --check-prefix=PASSBIG

// One codebook state of blocks of 256 and a bf16 parameter (Lion8bit's
// shape: 256 threads of 8 lanes, tiles of 2048 elements, one tile ahead).
// With l2_prefetch_lines every thread prefetches its own lanes of the read
// streams one tile on (p and g 4096 bytes a tile, the codes 2048), at its
// load pointers plus a tile's bytes, inside the full tile and only where the
// later tile is a full tile of the run; thread 0's bulk prefetch is gone.

// PLAN: l2_prefetch_tiles = 1, l2_prefetch_lines = true
// PLAN-NONE: l2_prefetch_tiles = 0, l2_prefetch_lines = false
// The policy chooses lines here (docs/tuning.md#l2-prefetch).
// PLAN-AUTO: l2_prefetch_tiles = 1, l2_prefetch_lines = true

// CHECK-LABEL: gpu.func @Lines
// CHECK-NOT: nvvm.cp.async.bulk.prefetch
// CHECK: scf.for %[[K:arg[0-9]+]] = %arg{{[0-9]+}} to %{{.+}} step %c1_i64
// CHECK: %[[NEXT:.+]] = arith.addi %[[K]], %c1_i64{{[_0-9]*}} : i64
// CHECK-NEXT: %[[IN:.+]] = arith.cmpi slt, %[[NEXT]], %{{.+}} : i64
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK: %[[G:.+]] = llvm.getelementptr %{{.+}}[%c4096_i64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// CHECK-NEXT: nvvm.prefetch level = L2, %[[G]] : !llvm.ptr<1>
// CHECK: %[[P:.+]] = llvm.getelementptr %{{.+}}[%c4096_i64{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// CHECK-NEXT: nvvm.prefetch level = L2, %[[P]] : !llvm.ptr<1>
// CHECK: %[[C:.+]] = llvm.getelementptr %{{.+}}[%c2048_i64{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// CHECK-NEXT: nvvm.prefetch level = L2, %[[C]] : !llvm.ptr<1>
// CHECK-NEXT: }
// CHECK-NOT: nvvm.prefetch
// CHECK: gpu.return

// BULK-LABEL: gpu.func @Lines
// BULK-NOT: nvvm.prefetch
// BULK-COUNT-3: nvvm.cp.async.bulk.prefetch
// BULK-NOT: nvvm.prefetch
// BULK: gpu.return

// THREE: %c3_i64
// THREE: llvm.getelementptr %{{.+}}[%c12288_i64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// THREE-NEXT: nvvm.prefetch level = L2

// No tiles ahead: no prefetch of either kind.
// NONE-LABEL: gpu.func @Lines
// NONE-NOT: prefetch
// NONE: gpu.return

// PTX-NOT: cp.async.bulk.prefetch
// PTX: prefetch.global.L2 [%rd{{[0-9]+}}];
// PTX-NOT: cp.async.bulk.prefetch
// Below sm_90 the pipelines ask for no L2 prefetch at all.
// SM80-NOT: prefetch
// BAD: qopt-opt: error: --l2-prefetch-tiles takes -1 (chosen), 0 (none) or a number of tiles up to 1024, got -2
// BIG: qopt-opt: error: --l2-prefetch-tiles takes -1 (chosen), 0 (none) or a number of tiles up to 1024, got 3000000000
// PASSBIG: error: qopt-plan-kernel: l2-prefetch-tiles takes -1 (chosen), 0 (none) or up to 1024 tiles, got 1025

qopt.optimizer @Lines param "p" : bf16 master none grad "g" : bf16 {
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

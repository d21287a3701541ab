// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=3 tile-claims-static-eighths=7" --convert-qopt-to-gpu | FileCheck %s --check-prefix=THREE
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=tile-claims=0 --convert-qopt-to-gpu | FileCheck %s --check-prefix=STATIC
// RUN: qopt-opt %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: qopt-opt %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json

// Tile claims (chooseTileClaims: an unstaged kernel with a codebook state whose
// block of 2048 elements crosses warps): each block first steps its static
// range of 5/8 of the tiles over the grid, then claims three tiles at a time
// from the work counters, the argument before the numerics counters (the
// last: its states saturate, docs/abi.md). (Smaller codebook blocks:
// tile-claims-small-block.mlir.)
// Thread 0 adds to the claimed count at a claim's start and, after the
// claim's runs, hands grid * first plus the old count to the block through
// the shared slot of the claim's parity, behind one barrier. After its last
// claim thread 0 counts the block done (acq_rel); the last block zeroes both
// counters for the next launch.

// CHECK-LABEL: gpu.func @Claims
// CHECK-SAME: %[[NTILES:arg2]]: i64
// CHECK-SAME: %[[WORK:arg[0-9]+]]: !llvm.ptr<1>, %{{arg[0-9]+}}: !llvm.ptr<1>) kernel
// CHECK: %[[GDIM:.+]] = gpu.grid_dim x
// CHECK-NEXT: %[[GRID:.+]] = arith.index_castui %[[GDIM]] : index to i64
// ceil(numTiles / grid): the static ranges' size without claims.
// CHECK: %[[CHUNK:.+]] = arith.divui %{{.+}}, %[[GRID]] : i64
// CHECK: %[[SLOTS:.+]] = llvm.mlir.addressof @__qopt_Claims_claim : !llvm.ptr<3>
// CHECK: %[[SCALED:.+]] = arith.muli %[[NTILES]], %c5_i64 : i64
// CHECK: %[[EIGHTHS:.+]] = arith.divui %[[SCALED]], %c8_i64{{.*}} : i64
// CHECK: %[[PER:.+]] = arith.divui %[[EIGHTHS]], %[[GRID]] : i64
// CHECK: %[[CLAIMING:.+]] = arith.cmpi ne, %[[PER]], %c0_i64{{.*}} : i64
// Fewer tiles than that: ceil(numTiles / grid) static tiles per block.
// CHECK: %[[FIRST:.+]] = arith.select %[[CLAIMING]], %[[PER]], %[[CHUNK]] : i64
// CHECK: %[[BASE:.+]] = arith.muli %[[GRID]], %[[FIRST]] : i64
// CHECK: %[[C0:.+]] = arith.muli %{{.+}}, %[[FIRST]] : i64
// CHECK: scf.while (%[[C:arg[0-9]+]] = %[[C0]], %[[E:arg[0-9]+]] = %{{.+}}, %[[PAR:arg[0-9]+]] = %c0_i32{{.*}}) : (i64, i64, i32)
// CHECK: arith.cmpi slt, %[[C]], %[[NTILES]] : i64
// CHECK: } do {
// CHECK: %[[LEADER:.+]] = arith.andi %{{.+}}, %[[CLAIMING]] : i1
// CHECK: %[[OLD:.+]] = scf.if %[[LEADER]] -> (i64) {
// CHECK: llvm.atomicrmw add %[[WORK]], %c3_i64{{.*}} monotonic : !llvm.ptr<1>, i64
// The block's runs over [claim, end).
// CHECK: scf.while (%{{.+}} = %[[C]]) : (i64) -> i64 {
// CHECK: arith.cmpi slt, %{{.+}}, %[[E]] : i64
// CHECK: %[[GOT:.+]] = scf.if %[[CLAIMING]] -> (i64) {
// CHECK: %[[PARI:.+]] = arith.extui %[[PAR]] : i32 to i64
// CHECK: %[[SLOT:.+]] = llvm.getelementptr %[[SLOTS]][%[[PARI]]]
// CHECK: scf.if
// CHECK: %[[NEXT:.+]] = arith.addi %[[BASE]], %[[OLD]] : i64
// CHECK: llvm.store %[[NEXT]], %[[SLOT]] {alignment = 8 : i64} : i64, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: %[[LOADED:.+]] = llvm.load %[[SLOT]] {alignment = 8 : i64} : !llvm.ptr<3> -> i64
// CHECK: scf.yield %[[LOADED]] : i64
// CHECK: } else {
// CHECK: scf.yield %[[NTILES]] : i64
// CHECK: %[[GOTEND:.+]] = arith.addi %[[GOT]], %c3_i64{{.*}} : i64
// CHECK: %[[END:.+]] = arith.minsi %[[GOTEND]], %[[NTILES]] : i64
// CHECK: %[[FLIP:.+]] = arith.xori %[[PAR]], %c1_i32{{.*}} : i32
// CHECK: scf.yield %[[GOT]], %[[END]], %[[FLIP]] : i64, i64, i32
// CHECK: }
// CHECK: %[[COUNTS:.+]] = arith.andi %{{.+}}, %[[CLAIMING]] : i1
// CHECK: scf.if %[[COUNTS]] {
// CHECK: %[[DONEPTR:.+]] = llvm.getelementptr %[[WORK]][%c1_i64{{.*}}]
// CHECK: %[[DONE:.+]] = llvm.inline_asm has_side_effects "atom.acq_rel.gpu.global.add.u64 $0, [$1], 1;", "=l,l,~{memory}" %[[DONEPTR]]
// CHECK: %[[LASTID:.+]] = arith.subi %[[GRID]], %c1_i64{{.*}} : i64
// CHECK: arith.cmpi eq, %[[DONE]], %[[LASTID]] : i64
// CHECK: llvm.store %c0_i64{{.*}}, %[[WORK]] {alignment = 8 : i64} : i64, !llvm.ptr<1>
// CHECK: llvm.store %c0_i64{{.*}}, %[[DONEPTR]] {alignment = 8 : i64} : i64, !llvm.ptr<1>
// CHECK: gpu.return

// THREE-LABEL: gpu.func @Claims
// THREE: arith.muli %arg2, %c7_i64 : i64
// THREE: llvm.atomicrmw add %arg6, %c3_i64{{.*}} monotonic
// THREE: arith.addi %{{.+}}, %c3_i64{{.*}} : i64

// Without claims: no work counters (the numerics counters follow the
// qmaps), one static range per block: no atomic add but the numerics
// counters' (to an element, not to an argument).
// STATIC-LABEL: gpu.func @Claims
// STATIC-SAME: %arg5: !llvm.ptr<1>, %arg6: !llvm.ptr<1>) kernel
// STATIC-NOT: llvm.atomicrmw add %arg
// STATIC-NOT: atom.acq_rel
// STATIC: gpu.return

// Eight parameters: descriptors, tile map, tile count, uniforms, two qmaps,
// the work counters, the numerics counters.
// PTX: .entry Claims(
// PTX: .param .u64 .ptr .global .align 1 Claims_param_5,
// PTX-NEXT: .param .u64 .ptr .global .align 1 Claims_param_6,
// PTX-NEXT: .param .u64 .ptr .global .align 1 Claims_param_7
// PTX-NEXT: )
// PTX: atom.global.add.u64 {{.+}}, [{{%rd[0-9]+}}], 3;
// PTX: bar.sync 0;
// PTX: atom.acq_rel.gpu.global.add.u64
// The manifest lists the work counters, then the numerics counters, last and
// says how tiles are claimed.
// MANIFEST: "args": [
// MANIFEST: "v.qmap",
// MANIFEST-NEXT: "work_counters",
// MANIFEST-NEXT: "numerics_counters"
// MANIFEST-NEXT: ],
// MANIFEST: "tile_claims": {
// MANIFEST-NEXT: "static_eighths": 5,
// MANIFEST-NEXT: "tiles": 3

qopt.optimizer @Claims param "p" : bf16 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.state @v : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %g2 = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %g2 : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

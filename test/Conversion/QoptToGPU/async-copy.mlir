// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=on --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=off --convert-qopt-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: qopt-opt %s --emit=ptx --async-copy=on -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: FileCheck %s --check-prefix=PTXSTORE --input-file=%t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json

// Async copies (async-copy=on; by default an f32 parameter takes none:
// chooseAsyncCopy, measured slower for these mostly-memory steps). Each thread
// copies its part of a full tile into dynamic shared memory with cp.async
// stages - 1 tiles ahead: the run's first stages - 1 tiles before the run's
// loop, tile t + stages - 1 at the top of tile t's iteration; a cp.async
// group is committed either way, so that waiting for all but the latest
// stages - 1 groups waits for this tile.
// The full tile reads back only what the thread copied (no barrier). Layout
// per stage (512 threads x 8 lanes), by chooseTileStaging:
//   p f32 32 B (two 16-byte chunks)  0      g f32 32 B           16384
//   m.codes 8 B                      32768  m.scales f16 word 4 B 36864
//   v.codes 8 B                      38912  v.scales f16 word 4 B 43008
// 45056 bytes a stage; three stages (as many as fit in 160 KiB, at most
// four): 135168 bytes, two tiles in flight while one computes.
// The run's loop carries each stream's thread pointer to the tile two on
// (the copies' sources), advanced by the stream's bytes per tile (p and g 512
// x 32 B, the codes 512 x 8 B, the scales 128 groups x 2 B) in inline PTX;
// the current tile's are those minus two tiles. A full tile loads no
// descriptor and computes no index.

// CHECK: llvm.mlir.global external @__qopt_Staged_staging() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: gpu.func @Staged
// CHECK: %[[STAGING:.+]] = llvm.mlir.addressof @__qopt_Staged_staging : !llvm.ptr<3>
// CHECK: scf.while
// The six thread pointers at the run's first tile.
// CHECK-COUNT-6: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<1> -> !llvm.ptr<1>
// The run's first tile, where it is full, into stage 0.
// CHECK: scf.if %{{.+}} {
// CHECK-COUNT-4: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 16, cache =  cg : !llvm.ptr<3>, !llvm.ptr<1>
// CHECK: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 8, cache =  ca
// The f16 scale's aligned word: the thread pointer with its low bits cleared.
// CHECK: llvm.intr.ptrmask %{{.+}}, %c-4_i64
// CHECK: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 4, cache =  ca
// CHECK: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 8, cache =  ca
// CHECK: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 4, cache =  ca
// CHECK: }
// CHECK-NEXT: nvvm.cp.async.commit.group
// The run's second tile into stage 1 (45056 bytes on).
// CHECK: scf.if %{{.+}} {
// CHECK: arith.constant 45056 : i64
// CHECK: nvvm.cp.async.shared.global
// CHECK: }
// CHECK-NEXT: nvvm.cp.async.commit.group
// The run's pointers two tiles on (p: 2 x 16384 bytes), which the loop
// carries (with two states too) and advances after the tile's last use of
// them.
// CHECK: %[[P0:.+]] = llvm.getelementptr %{{.+}}[%c32768_i64]
// CHECK: %[[G0:.+]] = llvm.getelementptr %{{.+}}[%c32768_i64{{.*}}]
// CHECK: %[[MC0:.+]] = llvm.getelementptr %{{.+}}[%c8192_i64{{.*}}]
// CHECK: %[[MS0:.+]] = llvm.getelementptr %{{.+}}[%c512_i64{{.*}}]
// CHECK: %[[VC0:.+]] = llvm.getelementptr %{{.+}}[%c8192_i64{{.*}}]
// CHECK: %[[VS0:.+]] = llvm.getelementptr %{{.+}}[%c512_i64{{.*}}]
// The loop counts the run's tiles from 0 in 32 bits.
// CHECK: scf.for %[[K:.+]] = %c0_i32 to %{{.+}} step %c1_i32{{.*}} iter_args(%[[P1:[^ ]+]] = %[[P0]], %[[G1:[^ ]+]] = %[[G0]], %[[MC1:[^ ]+]] = %[[MC0]], %[[MS1:[^ ]+]] = %[[MS0]], %[[VC1:[^ ]+]] = %[[VC0]], %[[VS1:[^ ]+]] = %[[VS0]]) -> (!llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>)  : i32 {
// This tile's thread pointers, two tiles back.
// CHECK: %[[P:.+]] = llvm.getelementptr %[[P1]][%c-32768_i64]
// CHECK: %[[G:.+]] = llvm.getelementptr %[[G1]][%c-32768_i64{{.*}}]
// CHECK: %[[MC:.+]] = llvm.getelementptr %[[MC1]][%c-8192_i64{{.*}}]
// CHECK: %[[MS:.+]] = llvm.getelementptr %[[MS1]][%c-512_i64{{.*}}]
// CHECK: %[[VC:.+]] = llvm.getelementptr %[[VC1]][%c-8192_i64{{.*}}]
// CHECK: %[[VS:.+]] = llvm.getelementptr %[[VS1]][%c-512_i64{{.*}}]
// The tile two on, if it is in the run and full, into stage (its index in
// the run) % 3, from the carried pointers.
// CHECK: %[[NEXT:.+]] = arith.addi %[[K]], %c2_i32{{.*}} : i32
// CHECK: arith.cmpi slt, %[[NEXT]], %{{.+}} : i32
// CHECK: arith.remui %[[NEXT]], %c3_i32{{.*}} : i32
// CHECK: scf.if %{{.+}} {
// CHECK: llvm.getelementptr %[[P1]][%c0_i64{{.*}}]
// CHECK: nvvm.cp.async.shared.global
// CHECK-COUNT-7: nvvm.cp.async.shared.global
// CHECK: }
// CHECK-NEXT: nvvm.cp.async.commit.group
// The full tile: wait for all groups but the latest two, then shared loads
// only; p's two chunks joined.
// CHECK: scf.if %{{.+}} {
// CHECK-NEXT: nvvm.cp.async.wait.group 2
// CHECK-NOT: !llvm.ptr<1> -> {{vector|!llvm.ptr}}
// CHECK: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
// CHECK: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
// CHECK: vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf32>, vector<4xf32>
// CHECK: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<8xi8>
// CHECK: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<8xi8>
// The thread's scale within the word: the group index's low bit.
// CHECK: arith.andi %{{.+}}, %c1_i64{{.*}} : i64
// CHECK: llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr<3> -> f16
// The stores go to the thread pointers: a group's leader its scale (and,
// where it saturated, its count: docs/abi.md), then the codes and p.
// CHECK-NOT: !llvm.ptr<1> -> !llvm.ptr<1>
// CHECK: llvm.store %{{.+}}, %[[MS]] {alignment = 2 : i64} : f16, !llvm.ptr<1>
// CHECK: llvm.atomicrmw add
// CHECK-NOT: !llvm.ptr<1> -> !llvm.ptr<1>
// CHECK: llvm.store %{{.+}}, %[[VS]] {alignment = 2 : i64} : f16, !llvm.ptr<1>
// CHECK: llvm.atomicrmw add
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: llvm.store %{{.+}}, %[[MC]] {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK-NEXT: llvm.store %{{.+}}, %[[VC]] {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK-NEXT: llvm.store %{{.+}}, %[[P]] {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr<1>
// CHECK: } else {
// The partial tile loads from global memory, masked.
// CHECK: llvm.intr.masked.load
// The advance, after the tile's last use of the pointers: inline PTX, by
// each stream's bytes per tile.
// CHECK: llvm.inline_asm "add.s64 $0, $1, 16384;", "=l,l"
// CHECK: llvm.inline_asm "add.s64 $0, $1, 16384;", "=l,l"
// CHECK: llvm.inline_asm "add.s64 $0, $1, 4096;", "=l,l"
// CHECK: llvm.inline_asm "add.s64 $0, $1, 256;", "=l,l"
// CHECK: llvm.inline_asm "add.s64 $0, $1, 4096;", "=l,l"
// CHECK: llvm.inline_asm "add.s64 $0, $1, 256;", "=l,l"
// CHECK: scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
// CHECK: gpu.return

// OFF-NOT: cp.async
// OFF-NOT: staging
// OFF: gpu.return

// PTX: .extern .shared .align 16 .b8 __qopt_Staged_staging[];
// PTX: cp.async.cg.shared.global [{{%rd[0-9]+}}], [{{%rd[0-9]+}}], 16;
// PTX: cp.async.ca.shared.global [{{%rd[0-9]+}}{{(\+[0-9]+)?}}], [{{%rd[0-9]+}}], 4;
// PTX: cp.async.commit_group;
// PTX: cp.async.wait_group 2;
// PTX: ld.shared.v4.b32
// The full tile's stores at the carried pointers less a tile.
// PTXSTORE: st.global.v2.b32 [{{%rd[0-9]+}}+-8192]
// PTXSTORE: st.global.v4.b32 [[[P:%rd[0-9]+]]+-32768]
// PTXSTORE-NEXT: st.global.v4.b32 [[[P]]+-32752]

// MANIFEST: "shared_bytes": 135168
// Where the driver cannot size the grid: as many blocks as 228 KiB of shared
// memory holds, 1 KiB reserved each: 233472 / (135168 + 1024) = 1.
// MANIFEST: "suggested_blocks_per_sm": 1
qopt.optimizer @Staged param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
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

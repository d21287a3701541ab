// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=bulk-copy-producer=true --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx --bulk-copy-producer -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --emit=ptx --bulk-copy --bulk-copy-producer -o %t.both.ptx
// RUN: cmp %t.ptx %t.both.ptx
// RUN: qopt-opt %s --emit=ptx --bulk-copy -o %t.refill.ptx
// RUN: FileCheck %s --check-prefix=REFILL --input-file=%t.refill.manifest.json
// RUN: qopt-opt %s --emit=ptx -o %t.off.ptx
// RUN: FileCheck %s --check-prefix=REFILL --input-file=%t.off.manifest.json
// RUN: qopt-opt %s --emit=ptx --bulk-copy-producer=false -o %t.false.ptx
// RUN: cmp %t.off.ptx %t.false.ptx
// RUN: qopt-opt %s --emit=ptx --arch=sm_80 --bulk-copy-producer -o %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=REFILL --input-file=%t.sm80.manifest.json
// RUN: qopt-opt %s --emit=ptx --threads-per-block=512 --bulk-copy-producer -o %t.given.ptx
// RUN: FileCheck %s --check-prefix=GIVEN --input-file=%t.given.ptx
// RUN: FileCheck %s --check-prefix=GIVEN-MANIFEST --input-file=%t.given.manifest.json

// A producer warp (bulk-copy-producer, asked for: off by default,
// docs/tuning.md#producer-warp; sm_90 and newer, with or without bulk-copy,
// which adds bulk copies where it does not apply):
// the block holds the
// tile's threads and one warp more, whose lane 0 issues every stage's bulk
// copies (bulk-copy.mlir has the stage layout). The policy's 512 threads
// become 480 and the producer: the block stays at 16 warps, for which ptxas
// bounds the registers at 128 a thread (at 17 warps, 96). A tile is 3840
// elements: 7680 + 7680 + 3840 + 240 + 3840 + 240 = 23520 bytes of copies.
// The 15 computing warps wait for a stage's copies on its first mbarrier
// and, after the tile's stores, each of their threads arrives at its second
// (480 arrivals, each releasing its thread's loads of the stage), which
// the producer waits on before it refills the stage: no warp of theirs
// issues a copy, and no block barrier ends a run.

// CHECK-DAG: llvm.mlir.global internal @__qopt_Bulk_stage_full() {{.+}} : !llvm.array<4 x i64>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Bulk_stage_empty() {{.+}} : !llvm.array<4 x i64>
// CHECK-LABEL: gpu.func @Bulk
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>
// Thread 0 sets up both barriers of each stage before the kernel's barrier.
// CHECK: scf.if
// CHECK: "mbarrier.init.shared.b64 [$0], 1;"
// CHECK-COUNT-4: "mbarrier.init.shared.b64 [$0], 480;"
// CHECK: llvm.inline_asm has_side_effects "fence.mbarrier_init.release.cluster;"
// CHECK: gpu.barrier
// Threads 480 and on produce; thread 480 alone issues.
// CHECK: %[[PRODUCER:.+]] = arith.cmpi sge, %{{.+}}, %c480_i64
// CHECK: scf.if %[[PRODUCER]] {
// CHECK: arith.cmpi eq, %{{.+}}, %c480_i64
// CHECK: scf.while (%{{.+}} = %{{.+}}, %[[BEFORE:.+]] = %c0_i32) : (i64, i32) -> (i64, i32)
// Every full tile of the run: its stage, and for a stage's use u > 0 the
// wait for phase u - 1 of its release, then the copies.
// CHECK: scf.for %[[J:.+]] = %c0_i32{{.*}} to %{{.+}} step %c1_i32{{.*}} : i32 {
// CHECK: %[[G:.+]] = arith.addi %[[BEFORE]], %[[J]] : i32
// CHECK: arith.remui %[[G]], %c4_i32
// CHECK: %[[USE:.+]] = arith.divui %[[G]], %c4_i32{{.*}}
// CHECK: %[[REUSED:.+]] = arith.cmpi ne, %[[USE]], %c0_i32{{.*}}
// CHECK: scf.if %[[REUSED]] {
// CHECK: mbarrier.try_wait.parity.shared.b64
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK: mbarrier.arrive.expect_tx.shared.b64 state, [$0], 23520;
// CHECK-COUNT-6: cp.async.bulk.shared::cluster.global
// CHECK: } else {
// The computing warps: no fill of their own before the loop.
// CHECK-NOT: cp.async.bulk.shared
// CHECK: scf.for %[[K:.+]] = %c0_i32{{.*}} to %{{.+}} step %c1_i32{{.*}} : i32 {
// CHECK: mbarrier.try_wait.parity.shared.b64
// CHECK: llvm.store %{{.+}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT: bar.warp.sync
// CHECK: "{ .reg .b64 state; mbarrier.arrive.shared.b64 state, [$0]; }"
// CHECK-NOT: cp.async.bulk.shared
// CHECK-NOT: atom.acq_rel.cta.shared
// CHECK-NOT: gpu.barrier
// CHECK: scf.yield %{{.+}}, %{{.+}} : i64, i32
// CHECK: gpu.return

// PTX: .maxntid 512, 1, 1
// PTX: .shared .align 16 .b8 __qopt_Bulk_stage_empty[32];
// PTX: mbarrier.arrive.shared.b64
// PTX-NOT: atom.acq_rel.cta.shared
// PTX-NOT: cp.async.cg

// MANIFEST: "producer_warps": 1,
// MANIFEST: "shared_bytes": 107520,
// MANIFEST: "threads_per_block": 480,
// MANIFEST: "tile_elements": 3840,
// MANIFEST: "version": 2

// Threads given on the command line stay: the block is one warp more.
// GIVEN: .maxntid 544, 1, 1
// GIVEN: mbarrier.arrive.expect_tx.shared.b64 state, [{{%rd[0-9]+}}], 25088;
// GIVEN-MANIFEST: "producer_warps": 1,
// GIVEN-MANIFEST: "threads_per_block": 512,

// Without a producer warp (or on sm_80, which has no bulk copies): version 1.
// REFILL: "version": 1
// REFILL-NOT: producer_warps

qopt.optimizer @Bulk param "p" : bf16 master none grad "g" : bf16 {
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

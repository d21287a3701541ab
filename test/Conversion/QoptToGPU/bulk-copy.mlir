// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="bulk-copy=true bulk-copy-producer=false" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx --bulk-copy --bulk-copy-producer=false -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --emit=ptx --bulk-copy-producer=false -o %t.default.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.default.manifest.json
// RUN: FileCheck %s --check-prefix=DEFAULT --input-file=%t.default.ptx
// RUN: qopt-opt %s --emit=ptx --bulk-copy --arch=sm_80 -o %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file=%t.sm80.ptx
// RUN: qopt-opt %s --emit=ptx --bulk-copy --async-copy=on --param-type=f32 -o %t.f32.ptx
// RUN: FileCheck %s --check-prefix=F32 --input-file=%t.f32.ptx

// Bulk copies (bulk-copy, sm_90 and newer) without a producer warp
// (bulk-copy-producer=false; bulk-copy-producer.mlir has it): the stages of a
// staged kernel filled by cp.async.bulk of each stream's whole tile instead
// of each thread's cp.async of its own bytes, the last warp done with a
// stage refilling it. The stage layout is the async copies'
// (async-copy.mlir), so the manifest's shared memory is the same: per stage
// (512 threads x 8 lanes, bf16 parameter)
//   p bf16      0      g bf16        8192   m.codes 16384
//   m.scales 20480 (256 bytes of the 2048)  v.codes 22528
//   v.scales 26624 (256 bytes of the 2048)
// 28672 bytes a stage, four stages. A tile's copies carry 8192 + 8192 + 4096
// + 256 + 4096 + 256 = 25088 bytes and complete the stage's mbarrier; its
// f16 scales lie in the stage as in memory, each thread reading its group's.

// CHECK: llvm.mlir.global internal @__qopt_Bulk_stage_readers() {{.+}} : !llvm.array<4 x i32>
// CHECK: llvm.mlir.global internal @__qopt_Bulk_stage_full() {{.+}} : !llvm.array<4 x i64>
// CHECK-LABEL: gpu.func @Bulk
// Thread 0 sets up a barrier per stage (one arrival: the expect_tx) and
// zeroes its count of readers, before the kernel's barrier.
// CHECK: scf.if
// CHECK-COUNT-4: llvm.inline_asm has_side_effects "mbarrier.init.shared.b64 [$0], 1;", "l,~{memory}"
// CHECK: llvm.inline_asm has_side_effects "fence.mbarrier_init.release.cluster;"
// CHECK: gpu.barrier
// The runs carry the staged tiles before them (i32, from 0).
// CHECK: %{{.+}}:2 = scf.while (%{{.+}} = %{{.+}}, %[[BEFORE:.+]] = %c0_i32) : (i64, i32) -> (i64, i32)
// Thread 0 fills the stages with the run's first full tiles, at most four:
// the barrier expects the bytes, the six copies (their sources from the
// descriptor, the run's tile j on) complete them.
// CHECK: scf.if
// CHECK-NEXT: "fence.proxy.async.shared::cta;"
// CHECK: %[[FILL:.+]] = arith.minsi %{{.+}}, %c4_i32 : i32
// CHECK: scf.for %[[J:.+]] = %{{.+}} to %[[FILL]] step
// CHECK: arith.addi %[[BEFORE]], %[[J]] : i32
// CHECK: "{ .reg .b64 state; mbarrier.arrive.expect_tx.shared.b64 state, [$0], 25088; }"
// CHECK: llvm.load %{{.+}} {alignment = 8 : i64} : !llvm.ptr<1> -> !llvm.ptr<1>
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], 8192, [$2];"
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], 8192, [$2];"
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], 4096, [$2];"
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], 256, [$2];"
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], 4096, [$2];"
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], 256, [$2];"{{.*}}
// CHECK-NEXT: }
// CHECK: scf.for %[[K:.+]] = %c0_i32{{.*}} to %{{.+}} step %c1_i32{{.*}} : i32 {
// CHECK-NOT: nvvm.cp.async
// A full tile: its stage and the parity of the stage's use, then the wait.
// CHECK: %[[G:.+]] = arith.addi %[[BEFORE]], %[[K]] : i32
// CHECK: arith.remui %[[G]], %c4_i32
// CHECK: %[[USE:.+]] = arith.divui %{{.+}}, %c4_i32
// CHECK: %[[PARITY:.+]] = arith.andi %[[USE]], %c1_i32
// CHECK: scf.while : () -> () {
// CHECK: "{ .reg .pred done; mbarrier.try_wait.parity.shared.b64 done, [$1], $2; selp.u32 $0, 1, 0, done; }", "=r,l,r,~{memory}" %{{.+}}, %[[PARITY]]
// CHECK: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<8xbf16>
// The thread's f16 scale: its group's (thread base / 32) two bytes on.
// CHECK: arith.divui %{{.+}}, %c32_i64
// CHECK: %c20480_i64 = arith.constant 20480 : i64
// CHECK: llvm.load %{{.+}} {alignment = 2 : i64} : !llvm.ptr<3> -> f16
// After the tile's stores each warp counts itself a reader done; the one
// that completes the count refills the stage with the tile four on.
// CHECK: llvm.store %{{.+}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NEXT: llvm.inline_asm has_side_effects "bar.warp.sync -1;"
// CHECK: "atom.acq_rel.cta.shared.add.u32 $0, [$1], 1;"
// CHECK: arith.remui %{{.+}}, %c16_i32
// CHECK: %[[NEXT:.+]] = arith.addi %[[K]], %c4_i32{{.*}} : i32
// CHECK: arith.cmpi slt, %[[NEXT]]
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK: mbarrier.arrive.expect_tx.shared.b64 state, [$0], 25088;
// CHECK-COUNT-6: cp.async.bulk.shared::cluster.global
// The partial tile reads global memory; after the run's tiles a barrier,
// before thread 0 fills the stages with the next run's.
// CHECK: gpu.barrier
// CHECK: scf.yield %{{.+}}, %{{.+}} : i64, i32

// PTX: .shared .align 16 .b8 __qopt_Bulk_stage_full[32];
// PTX: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{{%rd[0-9]+}}], [{{%rd[0-9]+}}], 8192, [{{%rd[0-9]+}}];
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: atom.acq_rel.cta.shared.add.u32
// PTX-NOT: cp.async.wait_group
// PTX-NOT: cp.async.cg

// MANIFEST: "shared_bytes": 114688

// DEFAULT-NOT: mbarrier
// DEFAULT: cp.async.cg.shared.global
// DEFAULT-NOT: mbarrier

// sm_80 has no cp.async.bulk: the option leaves the kernel as by default.
// SM80-NOT: mbarrier
// SM80: cp.async.cg.shared.global
// SM80-NOT: cp.async.bulk

// An f32 parameter's thread reads two 16-byte chunks, interleaved by chunk
// in the stage (chooseTileStaging), not where a bulk copy leaves them: async
// copies.
// F32-NOT: cp.async.bulk
// F32: cp.async.cg.shared.global
// F32-NOT: cp.async.bulk

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

// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=tile-claims=0 --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=0 split-absmax-barrier=false" --convert-qopt-to-gpu | FileCheck %s --check-prefix=BAR
// RUN: qopt-opt %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: qopt-opt %s --emit=ptx --arch=sm_80 -o %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file=%t.sm80.ptx

// Two codebook states of blocks of 2048 (8 warps) and an f32 parameter, held
// to 80 registers: the plan splits the blocks' absmax barrier
// (docs/tuning.md#split-absmax). Thread 0 sets the mbarrier's count to the
// block's 256 threads before the kernel's first barrier. In a tile, as soon
// as both stored states are computed, each warp's maxima go to the slots of
// the tile's parity and every thread arrives; the parameter's arithmetic
// (the division and the square root) follows; then every thread waits on
// its arrival's phase (try_wait in a loop) before it reads the slots, and
// no bar.sync stands in the tile.

// CHECK-LABEL: gpu.func @Split
// CHECK: llvm.inline_asm has_side_effects "mbarrier.init.shared.b64 [$0], 256;"
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: nvvm.redux.sync umax
// CHECK: nvvm.redux.sync umax
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NOT: gpu.barrier
// CHECK: llvm.inline_asm has_side_effects "mbarrier.arrive.shared.b64 $0, [__qopt_Split_absmax_arrivals];", "=l,~{memory}"
// CHECK-NOT: gpu.barrier
// CHECK: sqrt
// CHECK-NOT: gpu.barrier
// CHECK: scf.while
// CHECK: llvm.inline_asm has_side_effects "{ .reg .pred done; mbarrier.try_wait.shared.b64 done, [__qopt_Split_absmax_arrivals], $1; selp.u32 $0, 1, 0, done; }"
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK-NOT: gpu.barrier
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK: gpu.return

// Not asked: one bar.sync between the slots' stores and reads, no mbarrier.
// BAR-LABEL: gpu.func @Split
// BAR-NOT: mbarrier
// BAR: nvvm.redux.sync umax
// BAR: nvvm.redux.sync umax
// BAR: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// BAR: llvm.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// BAR-NEXT: }
// BAR-NEXT: gpu.barrier
// BAR-NOT: mbarrier
// BAR: gpu.return

// In PTX for sm_90 the mbarrier is the kernel's; sm_80 has no try_wait, and
// the compile pipeline asks for no split there.
// PTX: .shared .align 16 .b8 __qopt_Split_absmax_arrivals[8];
// PTX: mbarrier.init.shared.b64 [%rd{{[0-9]+}}], 256;
// PTX: mbarrier.arrive.shared.b64 %rd{{[0-9]+}}, [__qopt_Split_absmax_arrivals];
// PTX: mbarrier.try_wait.shared.b64 done, [__qopt_Split_absmax_arrivals], %rd{{[0-9]+}};
// SM80-NOT: mbarrier

qopt.optimizer @Split param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.state @v : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %gg = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %gg : f32
    %r = math.sqrt %vn : f32
    %u = arith.divf %mn, %r : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

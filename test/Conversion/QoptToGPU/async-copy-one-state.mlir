// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=bulk-copy-producer=false --convert-qopt-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=async-copy=off --convert-qopt-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: qopt-opt %s --emit=ptx --bulk-copy-producer=false -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --emit=ptx --async-copy=off -o %t.off.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST-OFF --input-file=%t.off.manifest.json

// One group state (SGD's momentum, Lion): async copies by default too
// (chooseAsyncCopy), with 512 threads of 8 lanes (chooseThreadsPerBlock,
// chooseElementsPerThread). A stage holds the bf16 parameter and gradient (16
// bytes each), the codes (8) and the f32 scale (4) of 512 threads:
// (16 + 16 + 8 + 4) * 512 = 22528 bytes, 90112 for four stages (3 tiles in
// flight while one computes). The scale is one 4-byte copy per thread.

// AUTO: llvm.mlir.global external @__qopt_Momentum_staging()
// AUTO: gpu.func @Momentum({{.+}}) kernel attributes {known_block_size = array<i32: 512, 1, 1>}
// AUTO: nvvm.cp.async.shared.global %{{.+}}, %{{.+}}, 4, cache =  ca
// AUTO: nvvm.cp.async.commit.group
// With one state the loop carries the four streams' pointers three tiles on
// and counts the run's tiles from 0 in 32 bits.
// AUTO: scf.for %{{.+}} = %c0_i32 to %{{.+}} step %{{.+}} iter_args(%[[P:[^ ]+]] = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (!llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>)  : i32 {
// AUTO: nvvm.cp.async.wait.group 3
// AUTO: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<8xbf16>
// AUTO: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// The advance, after the tile's last use of the pointers: inline PTX, so
// that LLVM does not fold the phi into current pointers (QoptToGPU.cpp).
// AUTO: llvm.ptrtoint %[[P]]
// AUTO-NEXT: llvm.inline_asm "add.s64 $0, $1, 8192;", "=l,l"
// AUTO: llvm.inline_asm "add.s64 $0, $1, 8192;", "=l,l"
// AUTO: llvm.inline_asm "add.s64 $0, $1, 4096;", "=l,l"
// AUTO: llvm.inline_asm "add.s64 $0, $1, 512;", "=l,l"
// AUTO: scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>

// OFF-NOT: cp.async
// OFF: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// OFF: gpu.return

// MANIFEST: "elements_per_thread": 8
// One state: more than one wave while each block keeps 24 tiles
// (getGridMinTilesPerBlock).
// MANIFEST: "min_tiles_per_block": 24,
// MANIFEST: "shared_bytes": 90112
// MANIFEST: "threads_per_block": 512
// One state: four waves of the resident blocks (chooseGridWaves).
// MANIFEST: "waves": 4{{$}}
// MANIFEST-OFF: "shared_bytes": 0

qopt.optimizer @Momentum param "p" : bf16 master none grad "g" : bf16 {
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

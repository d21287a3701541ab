// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="elements-per-thread=16 threads-per-block=256 async-copy=off tile-claims=0" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="elements-per-thread=16 threads-per-block=256 async-copy=off tile-claims=0" --convert-qopt-to-gpu=mode=fast | FileCheck %s --check-prefix=FAST

// A companded group-32 momentum and a bf16 parameter with int8 error bits: the
// kernel signature of docs/abi.md, 16 lanes per thread and loads straight to
// registers (no async copies: async-copy.mlir has those), each block stepping a
// contiguous range of tiles in runs of one tensor's tiles (one tile-map load
// per run), 16-byte accesses with a masked tail, the group absmax over two
// threads by one xor shuffle.

// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: gpu.module @Momentum_kernels
// One state, 256 threads: built for two resident blocks per SM.
// CHECK: gpu.func @Momentum(%[[DESCS:.+]]: !llvm.ptr<1>, %[[MAP:.+]]: !llvm.ptr<1>, %[[NTILES:.+]]: i64, %[[UNIF:.+]]: !llvm.ptr<1>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32}
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[BID:.+]] = gpu.block_id x
// CHECK: %[[GDIM:.+]] = gpu.grid_dim x
// chunk = ceil(numTiles / gridDim.x); [start, stop) clamped to numTiles.
// CHECK: %[[CHUNK:.+]] = arith.divui %{{.+}}, %{{.+}} : i64
// CHECK: %[[START:.+]] = arith.minsi %{{.+}}, %[[NTILES]] : i64
// CHECK: %[[STOP:.+]] = arith.minsi %{{.+}}, %[[NTILES]] : i64
// CHECK: scf.while (%[[RUNSTART:.+]] = %[[START]]) : (i64) -> i64 {
// CHECK:   arith.cmpi slt, %[[RUNSTART]], %[[STOP]] : i64
// CHECK: } do {
// CHECK:   %[[ENTRY:.+]] = llvm.getelementptr %[[MAP]][%{{.+}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK:   llvm.load %[[ENTRY]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// The run ends at the tensor's last tile or at stop, and has at least one.
// CHECK:   arith.minsi %[[STOP]], %{{.+}} : i64
// CHECK:   %[[RUNEND:.+]] = arith.maxsi %{{.+}}, %{{.+}} : i64
// CHECK:   scf.for %[[T:.+]] = %{{.+}} to %[[RUNEND]] step %{{.+}} : i64 {
// CHECK-NOT: llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// A tile wholly inside its tensor (block-uniform test) has a body without
// masks: every element stream the update reads is loaded at its top, so that
// all loads are in flight before the first use, and stored at its end.
// CHECK:     %[[TILEFULL:.+]] = arith.cmpi sle, %{{.+}}, %{{.+}} : i64
// CHECK:     scf.if %[[TILEFULL]] {
// CHECK:       llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xbf16>
// CHECK-NEXT:  llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xbf16>
// CHECK-NEXT:  llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xi8>
// CHECK-NEXT:  llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xi8>
// CHECK-NOT:   llvm.intr.masked
// bf16 lanes widen from the words that hold them in pairs: the even lane
// shifted up, the odd lane with its low half cleared, interleaved.
// CHECK:       %[[WORDS:.+]] = vector.bitcast %{{.+}} : vector<16xbf16> to vector<8xi32>
// CHECK-NEXT:  %[[SIXTEEN:.+]] = arith.constant dense<16> : vector<8xi32>
// CHECK-NEXT:  %[[EVEN:.+]] = arith.shli %[[WORDS]], %[[SIXTEEN]] : vector<8xi32>
// CHECK-NEXT:  %[[HIGH:.+]] = arith.constant dense<-65536> : vector<8xi32>
// CHECK-NEXT:  %[[ODD:.+]] = arith.andi %[[WORDS]], %[[HIGH]] : vector<8xi32>
// CHECK-NEXT:  %[[LANES:.+]] = vector.shuffle %[[EVEN]], %[[ODD]] [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15] : vector<8xi32>, vector<8xi32>
// CHECK-NEXT:  arith.bitcast %[[LANES]] : vector<16xi32> to vector<16xf32>
// CHECK:       gpu.shuffle xor %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK-NOT:   gpu.shuffle
// CHECK:       llvm.call_intrinsic "llvm.floor"
// The rounded parameter, widened the same way for its error bits.
// CHECK:       %[[X16:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// CHECK-NEXT:  vector.bitcast %[[X16]] : vector<16xbf16> to vector<8xi32>
// CHECK-NOT:   llvm.intr.masked
// CHECK:       llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr<1>
// CHECK-NEXT:  llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xbf16>, !llvm.ptr<1>
// CHECK-NEXT:  llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr<1>
// The tensor's last tile: the same body with a lane mask, each thread's loads
// under one branch (vector loads when its lanes are all inside, masked loads
// otherwise), and likewise its stores.
// CHECK:     } else {
// CHECK:       scf.if %[[FULL:[^ ]+]] -> (vector<16xbf16>, vector<16xbf16>, vector<16xi8>, vector<16xi8>) {
// CHECK-NEXT:    llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<16xbf16>
// CHECK:       } else {
// CHECK:         llvm.intr.masked.load %{{.+}}, %{{.+}}, %{{.+}} {alignment = 16 : i32} : (!llvm.ptr<1>, vector<16xi1>, vector<16xbf16>) -> vector<16xbf16>
// CHECK:       arith.divf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:       gpu.shuffle xor %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK-NOT:   gpu.shuffle
// CHECK:       llvm.call_intrinsic "llvm.floor"
// CHECK:       scf.if %[[FULL]] {
// CHECK-NEXT:    llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr<1>
// CHECK-NEXT:    llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xbf16>, !llvm.ptr<1>
// CHECK-NEXT:    llvm.store %{{.+}}, %{{.+}} {alignment = 16 : i64} : vector<16xi8>, !llvm.ptr<1>
// CHECK:       } else {
// CHECK:         llvm.intr.masked.store
// CHECK: gpu.return

// FAST: arith.mulf %{{.+}}, %{{.+}} fastmath<arcp,contract,afn> : vector<16xf32>
// FAST-NOT: llvm.nvvm.sqrt.rn.f

qopt.optimizer @Momentum param "p" : bf16 master ecc_i8 grad "g" : bf16 {
  qopt.hyper @beta = 0.9 : f64
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %b = qopt.hyper_value @beta : f64
    %bf = arith.truncf %b : f64 to f32
    %mn0 = arith.mulf %bf, %m : f32
    %mn = arith.addf %mn0, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}

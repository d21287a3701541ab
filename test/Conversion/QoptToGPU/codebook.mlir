// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=16 --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="codebook-buckets=false elements-per-thread=16" --convert-qopt-to-gpu=guarded-ieee=false | FileCheck %s --check-prefix=FULL
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=16 --convert-qopt-to-gpu | FileCheck %s --check-prefix=NOASYNC
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="l2-prefetch=false elements-per-thread=16" --convert-qopt-to-gpu | FileCheck %s --check-prefix=NOPF
// RUN: qopt-opt %s --emit=gpu --elements-per-thread=16 --arch=sm_80 | FileCheck %s --check-prefix=NOPF
// RUN: qopt-opt %s --emit=gpu --elements-per-thread=16 --arch=sm_90 | FileCheck %s --check-prefix=PF
// RUN: qopt-opt %s --emit=ptx --elements-per-thread=16 -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %s --emit=ptx --elements-per-thread=16 --codebook-buckets=false -o %t.off.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST-OFF --input-file=%t.off.manifest.json

// Codebook states take no async copies by default (chooseAsyncCopy: measured
// slower, the codebook search already loads the shared-memory pipe).
// NOASYNC-NOT: nvvm.cp.async.shared.global
// NOASYNC: gpu.return
// Without l2-prefetch (what the pipelines set below sm_90): no prefetch.
// NOPF-NOT: nvvm.cp.async.bulk.prefetch
// NOPF: gpu.return
// qopt-opt --emit=gpu takes the pass options from the chip as the PTX
// pipeline does (getConvertQoptToGPUOptions): the prefetch on sm_90 only.
// PF-COUNT-3: nvvm.cp.async.bulk.prefetch

// Seed 000's blockwise codebook: the qmap table and its 255 midpoints (and 8
// of +inf after them) in shared memory, filled once per block, and in the
// dynamic shared memory a table of 2 x 3073 u32 buckets of normalized values
// (a sign and a 128th of a binade of |c| in [2^-24, 1]), with a flag that
// says whether every bucket holds at most one midpoint; the block absmax of
// 2048 elements (128 threads of 16 lanes, 4 of the tile's 8 warps) by
// redux.sync in each warp, then one more across the group's warp maxima; the code from the lane's bucket entry
// in integer operations where the flag is set and the block's absmax is
// finite, else the 8-step search of all midpoints. Built for four blocks
// per SM at 256 threads (64 registers).

// CHECK-LABEL: gpu.module @Codebook_kernels
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_qmap0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_mid0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<263 x f32>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_bucketsfit0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1 x i32>
// CHECK-DAG: llvm.mlir.global external @__qopt_Codebook_buckets() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global internal @__qopt_Codebook_warpmax0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<16 x f32>
// CHECK: gpu.func @Codebook(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %{{.+}}: !llvm.ptr<1>, %[[QMAP:.+]]: !llvm.ptr<1>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 4 : i32}
// CHECK: %[[BUCKETS:.+]] = llvm.mlir.addressof @__qopt_Codebook_buckets : !llvm.ptr<3>
// CHECK: %[[TABLE:.+]] = llvm.getelementptr %[[BUCKETS]][%c0_i64] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, i8
// CHECK: %[[FITS:.+]] = llvm.mlir.addressof @__qopt_Codebook_bucketsfit0 : !llvm.ptr<3>
// The table's fill: whether none of a thread's entries is below zero,
// and-reduced over the block by the barrier after it (the state's range
// facts; codebook-nonnegative.mlir).
// CHECK: scf.for %{{.+}} = %{{.+}} to %c256_i64{{.*}} iter_args(%{{.+}} = %true) -> (i1)
// CHECK: arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK: nvvm.barrier #nvvm.reduction<and> %{{.+}} -> i32
// Midpoints, then the +inf padding; thread 0 sets the flag. Pass 1, a
// thread per midpoint: its bucket in ascending order of c (the negative
// ones from -1 up, then the positive ones; each the magnitudes [2^-24 + k *
// 2^16, + 2^16) of its sign, from 0 for k = 0, 1.0 alone at the end; -1
// below, 6146 above), a midpoint above the next (or a NaN) clearing the
// flag, the padding INT32_MAX; a midpoint inside the buckets writes its
// bucket's entry: its index times 2^16 plus the low 16 bits of its
// magnitude (negative) or 0xFFFF minus them (positive); the next midpoint
// in the same bucket, or a magnitude <= 2^-24, clears the flag.
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.if
// CHECK: llvm.store %c1_i32{{.*}}, %[[FITS]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: %[[BUCKETOF:.+]] = llvm.mlir.addressof @__qopt_Codebook_bucketof : !llvm.ptr<3>
// CHECK: scf.for %[[J:.+]] = %{{.+}} to %c263_i64
// CHECK: arith.cmpf ugt
// CHECK: llvm.store %c0_i32{{.*}}, %[[FITS]]
// CHECK: %[[MAG:.+]] = arith.andi %{{.+}}, %c2147483647_i32
// CHECK: %[[NEG:.+]] = arith.cmpi slt, %{{.+}}, %c0_i32
// CHECK: arith.maxui %[[MAG]], %c864026624_i32
// CHECK: %[[K:.+]] = arith.shrui %{{.+}}, %c16_i32
// CHECK: arith.subi %c3072_i32{{.*}}, %[[K]] : i32
// CHECK: %[[OWN:.+]] = arith.select %[[NEG]], %c-1_i32, %c6146_i32 : i32
// CHECK: %[[INSIDE:.+]] = arith.cmpi ule, %[[MAG]], %c1065353216_i32
// The table index: k for a positive midpoint, 3073 + k for a negative one.
// CHECK: %[[KNEG:.+]] = arith.addi %[[K]], %c3073_i32{{.*}} : i32
// CHECK: %[[MIDX:.+]] = arith.select %[[NEG]], %[[KNEG]], %[[K]] : i32
// CHECK: %[[ORDER:.+]] = arith.select %[[INSIDE]], %{{.+}}, %[[OWN]] : i32
// CHECK: %[[AIN:.+]] = arith.cmpi ule, %{{.+}}, %c1065353216_i32
// CHECK: %[[AFTER:.+]] = arith.select %[[AIN]], %{{.+}}, %{{.+}} : i32
// CHECK: scf.if %[[INSIDE]] {
// CHECK: %[[LOW:.+]] = arith.andi %[[MAG]], %c65535_i32
// CHECK: %[[COMP:.+]] = arith.subi %c65535_i32{{.*}}, %[[LOW]] : i32
// CHECK: %[[OFF:.+]] = arith.select %[[NEG]], %[[LOW]], %[[COMP]] : i32
// CHECK: %[[JJ:.+]] = arith.trunci %[[J]] : i64 to i32
// CHECK: %[[JCOUNT:.+]] = arith.shli %[[JJ]], %c16_i32{{.*}} : i32
// CHECK: %[[MADDR:.+]] = llvm.getelementptr %[[TABLE]][%[[MIDX]]]
// CHECK: %[[MENTRY:.+]] = arith.addi %[[JCOUNT]], %[[OFF]] : i32
// CHECK: llvm.store %[[MENTRY]], %[[MADDR]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: %[[TWO:.+]] = arith.cmpi eq, %[[AFTER]], %[[ORDER]] : i32
// CHECK: arith.cmpi ule, %[[MAG]], %c864026624_i32
// CHECK: arith.ori %[[TWO]], %{{.+}} : i1
// CHECK: scf.if
// CHECK: llvm.store %c0_i32{{.*}}, %[[FITS]]
// CHECK: scf.yield %[[ORDER]] : i32
// CHECK: scf.yield %c2147483647_i32 : i32
// CHECK: gpu.barrier
// Pass 2: a run of 6146 / 256 buckets per thread, one binary search for
// the run's first bucket, then one integer cursor over the midpoints'
// buckets: a bucket the cursor's midpoint lies in (pass 1's) moves the
// cursor on, the others get the count of midpoints below.
// CHECK-COUNT-8: arith.cmpf olt
// CHECK: %[[START:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : i32
// CHECK: %[[STARTP:.+]] = llvm.getelementptr %[[BUCKETOF]][%[[START]]]
// CHECK: %[[STARTB:.+]] = llvm.load %[[STARTP]] {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK: scf.for %{{.+}} = %{{.+}} to %c25_i64{{.*}} step %{{.+}} iter_args(%[[CUR:.+]] = %[[START]], %[[CURB:.+]] = %[[STARTB]]) -> (i32, i32)
// CHECK: %[[V:.+]] = arith.addi %{{.+}}, %{{.+}} : i32
// CHECK: %[[IN:.+]] = arith.cmpi ult, %[[V]], %c6146_i32{{.*}} : i32
// CHECK: %[[AT:.+]] = arith.cmpi eq, %[[CURB]], %[[V]] : i32
// CHECK: %[[HERE:.+]] = arith.andi %[[IN]], %[[AT]] : i1
// The bucket's table index: v - 3073 for a positive one, 6145 - v (3073 + k)
// for a negative one.
// CHECK: %[[VNEG:.+]] = arith.cmpi ult, %[[V]], %c3073_i32{{.*}} : i32
// CHECK: %[[VPOS:.+]] = arith.subi %[[V]], %c3073_i32{{.*}} : i32
// CHECK: %[[VREV:.+]] = arith.subi %c6145_i32{{.*}}, %[[V]] : i32
// CHECK: %[[VIDX:.+]] = arith.select %[[VNEG]], %[[VREV]], %[[VPOS]] : i32
// CHECK: %[[NOT:.+]] = arith.xori %[[HERE]], %true{{.*}} : i1
// CHECK: %[[COUNTONLY:.+]] = arith.andi %[[IN]], %[[NOT]] : i1
// CHECK: scf.if %[[COUNTONLY]] {
// CHECK: %[[VADDR:.+]] = llvm.getelementptr %[[TABLE]][%[[VIDX]]]
// CHECK: %[[COUNT:.+]] = arith.shli %[[CUR]], %c16_i32
// CHECK: llvm.store %[[COUNT]], %[[VADDR]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: }
// CHECK: %[[STEP:.+]] = arith.extui %[[HERE]] : i1 to i32
// CHECK: %[[NEXT:.+]] = arith.addi %[[CUR]], %[[STEP]] : i32
// CHECK: %[[NEXTP:.+]] = llvm.getelementptr %[[BUCKETOF]][%[[NEXT]]]
// CHECK: %[[NEXTB:.+]] = llvm.load %[[NEXTP]]
// CHECK: %[[KEEP:.+]] = arith.select %[[HERE]], %[[NEXTB]], %[[CURB]] : i32
// CHECK: scf.yield %[[NEXT]], %[[KEEP]] : i32, i32
// CHECK: gpu.barrier
// CHECK: %[[FLAG:.+]] = llvm.load %[[FITS]] {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK: %[[FIT:.+]] = arith.cmpi ne, %[[FLAG]]
// The block absmax: the lanes' maximum, a warp's by redux.sync, the warps'
// through shared memory (16 slots: two tiles' parities of 8 warps) and one
// more redux.sync; one barrier per tile (block-reductions.mlir). Before
// them, thread 0 has L2 fetch the read streams (g, p, m's codes) of the
// run's full tile two on (chooseL2PrefetchTiles: codebook, 16-bit parameter).
// CHECK: scf.for
// CHECK: %[[LATER:.+]] = arith.addi %{{.+}}, %c2_i64{{.*}} : i64
// CHECK: arith.cmpi slt, %[[LATER]]
// CHECK: scf.if
// CHECK: nvvm.cp.async.bulk.prefetch %{{.+}}, %c16384_i32 : <1>
// CHECK: nvvm.cp.async.bulk.prefetch %{{.+}}, %c8192_i32 : <1>
// CHECK: nvvm.cp.async.bulk.prefetch %{{.+}}, %c4096_i32 : <1>
// CHECK-NEXT: }
// CHECK-NOT: gpu.shuffle
// CHECK: nvvm.redux.sync umax %{{.+}}, %c-1_i32 : i32 -> i32
// CHECK: gpu.barrier
// CHECK: arith.minui %{{.+}}, %c3_i64
// CHECK: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK: nvvm.redux.sync umax
// CHECK-NOT: gpu.barrier
// c = x / d, d = max(absmax, 1e-30). Where the buckets fit, absmax is
// finite and d lies in [2^-30, 2^60]: div.rn's fast-path sequence (the
// block's reciprocal once, two FMA corrections per lane) with no check of
// the lanes (exact for |x| >= 2^-60; below, c and the sequence both lie
// within 2^-24 of 0, where every c has one code), then per lane |c|
// clamped below to 2^-24, its bucket in its sign's half, one load, and the
// entry plus c's low 16 bits (complemented where negative), whose bits
// 16..23 are the code. The block's reciprocal where d is computed (from the
// absmax saturated as docs/numerics.md "Overflow" says).
// CHECK: arith.constant 3.40282347E+38 : f32
// CHECK: arith.constant 1.000000e-30 : f32
// CHECK-NEXT: arith.cmpf olt
// CHECK-NEXT: %[[D:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"(%[[D]])
// CHECK: llvm.intr.fma
// CHECK: llvm.intr.fma
// The saturated absmax is finite (the plan's early_saturation_counts): the
// divisor's range alone.
// CHECK: %[[BELOW:.+]] = arith.cmpf ole, %[[D]], %cst
// CHECK: %[[ABOVE:.+]] = arith.cmpf oge, %[[D]], %cst
// CHECK-NEXT: %[[RANGE:.+]] = arith.andi %[[ABOVE]], %[[BELOW]] : i1
// CHECK-NEXT: %[[FAST:.+]] = arith.andi %[[FIT]], %[[RANGE]] : i1
// CHECK: scf.if %[[FAST]] -> (vector<16xi8>) {
// CHECK-NOT: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK: llvm.intr.fma
// CHECK: llvm.intr.fma
// CHECK-NOT: arith.minimumf
// CHECK-NOT: scf.if
// CHECK: llvm.call_intrinsic "llvm.fabs"
// CHECK: llvm.call_intrinsic "llvm.maxnum"(%{{.+}}, %cst{{.*}}) : (f32, f32) -> f32
// CHECK: %[[SIGN:.+]] = arith.shrsi %{{.+}}, %c31_i32
// CHECK: arith.andi %[[SIGN]], %c3073_i32
// CHECK: arith.addi %{{.+}}, %c-13184_i32
// CHECK: llvm.getelementptr %[[TABLE]]
// CHECK: %[[ENTRY:.+]] = llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK: arith.xori %{{.+}}, %[[SIGN]]
// CHECK: %[[SUM:.+]] = arith.addi %[[ENTRY]]
// Byte 2 of two lanes' sums into a half word, two halves into a word (prmt
// selectors 0x62 and 0x5410): four codes in three prmt, no shifts.
// CHECK: %[[PAIR:.+]] = llvm.call_intrinsic "llvm.nvvm.prmt"(%[[SUM]], %{{.+}}, %c98_i32) : (i32, i32, i32) -> i32
// CHECK: llvm.call_intrinsic "llvm.nvvm.prmt"(%[[PAIR]], %{{.+}}, %c21520_i32) : (i32, i32, i32) -> i32
// CHECK: vector.bitcast %{{.+}} : vector<4xi32> to vector<16xi8>
// CHECK-NOT: arith.cmpf
// Else the exact guarded division (div.rn for a thread with a lane out of
// range) and the 8-step search.
// CHECK: } else {
// CHECK: arith.minimumf
// CHECK: scf.if %{{.+}} -> (vector<16xf32>) {
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK-COUNT-8: arith.cmpf ult, %{{.+}}, %{{.+}} : f32

// Without the bucket table: the 8-step search of all midpoints alone.
// FULL-NOT: __qopt_Codebook_buckets
// FULL-NOT: __qopt_Codebook_bucketsfit0
// FULL: arith.divf
// FULL-NOT: arith.cmpf olt
// FULL-COUNT-8: arith.cmpf ult, %{{.+}}, %{{.+}} : f32

// The manifest asks for the bucket table: 6146 x 4 bytes.
// MANIFEST: "shared_bytes": 24584
// A codebook state: one wave (chooseGridWaves).
// MANIFEST: "waves": 1{{$}}
// MANIFEST-OFF: "shared_bytes": 0

qopt.optimizer @Codebook param "p" : bf16 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
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

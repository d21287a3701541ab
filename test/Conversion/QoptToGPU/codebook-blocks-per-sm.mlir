// RUN: qopt-opt %s --emit=gpu | FileCheck %s
// RUN: qopt-opt %s --param-type=f32 --emit=gpu | FileCheck %s --check-prefix=F32

// Two codebook states of blocks of 2048 (spanning the tile's warps), unstaged
// at 256 threads (QoptToGPU.cpp: codebookRegisters). With a 16-bit parameter
// four blocks per SM (64 registers a thread); with an f32 one three (80:
// block2048.f32 on the H200 +3.4% at 64 Mi on the bench's gradients, 5%
// faster on realistic ones; the 16-bit ones lost 2% at three).
// The guards' fallbacks (LaneFacts::zeroShortcutLaneDivisors): both kernels
// try the all-zero shortcut (max|a| == 0) where the divisor is a uniform or block
// value (the codes' normalization by the absmax, later in the tile); for the
// update's division by lane values m / v only the f32 kernel does, as the
// 16-bit one, at its 64-register bound, lost 2% on the bench's gradients to
// that part: its fallback goes to the lanes' div.rn directly.
// CHECK-LABEL: gpu.func @Blockwise
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 4 : i32
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK: } else {
// CHECK-NOT: arith.cmpf oeq
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: arith.cmpf oeq
// CHECK: gpu.return
// F32-LABEL: gpu.func @Blockwise
// F32-SAME: known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 3 : i32
// F32: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// F32: } else {
// F32: arith.cmpf oeq
// F32: scf.if %{{.+}} -> (vector<8xf32>) {
// F32-NEXT: arith.mulf
// F32-NEXT: scf.yield
// F32-NEXT: } else {
// F32: llvm.inline_asm "div.rn.f32 $0, $1, $2;"

qopt.optimizer @Blockwise param "p" : bf16 master none grad "g" : bf16 {
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
    %u = arith.divf %mn, %vn : f32
    %pn = arith.subf %p, %u : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

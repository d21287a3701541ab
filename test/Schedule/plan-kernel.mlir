// RUN: qopt-opt %s --qopt-plan-kernel -split-input-file | FileCheck %s
// RUN: qopt-opt %s --qopt-plan-kernel=target=host -split-input-file | FileCheck %s --check-prefix=HOST
// RUN: qopt-opt %s --qopt-plan-kernel="async-copy=off tile-claims=3 l2-prefetch=false split-absmax-barrier=false" -split-input-file | FileCheck %s --check-prefix=ASKED
// RUN: qopt-opt %s --qopt-plan-kernel="l2-prefetch-tiles=4" -split-input-file | FileCheck %s --check-prefix=AHEAD4
// RUN: qopt-opt %s --qopt-plan-kernel="l2-prefetch-tiles=3" -split-input-file | FileCheck %s --check-prefix=AHEAD3
// RUN: qopt-opt %s --qopt-plan-kernel="bulk-copy-producer=true" -split-input-file | FileCheck %s --check-prefix=PRODUCER
// RUN: qopt-opt %s --qopt-plan-kernel="target=host bulk-copy-producer=true" -split-input-file | FileCheck %s --check-prefix=PRODUCER-HOST

// qopt-plan-kernel writes the tuning policy's launch plan (lib/Schedule) into
// the IR; convert-qopt-to-gpu, convert-qopt-to-host and the manifest read it.

// Two group states and a bf16 parameter: staged at 512 x 8, four stages of
// 28 KiB (per thread p 16 B, g 16 B, each state's codes 8 B and its f16
// scale's 4-byte word), run thread pointers (with the guards' choices that
// cost registers), no claims, 4 waves. The host plan keeps the tile and
// steps it statically. Where a producer warp is asked for, the policy gives
// it one: the block's 512 threads become 480 x 8 and the producer, four
// stages of 26880 bytes (the same layout of a 3840-element tile), filled by
// its bulk copies (docs/tuning.md#producer-warp), and the host plan walks the
// same tiles.
// CHECK-LABEL: qopt.optimizer @Group
// CHECK-SAME: qopt.kernel_plan = #qopt.kernel_plan<threads = 512, lanes = 8, stages = 4, shared_bytes = 114688, codebook_buckets = true, bulk_copy = false, run_pointers = true, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = true, early_saturation_counts = false, split_absmax_barrier = false, waves = 4, min_tiles_per_block = 128, suggested_blocks_per_sm = 2>
// PRODUCER-LABEL: qopt.optimizer @Group
// PRODUCER-SAME: qopt.kernel_plan = #qopt.kernel_plan<threads = 480, lanes = 8, stages = 4, shared_bytes = 107520, codebook_buckets = true, bulk_copy = true, run_pointers = true, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = true, early_saturation_counts = false, split_absmax_barrier = false, waves = 4, min_tiles_per_block = 128, suggested_blocks_per_sm = 2, producer_warp = true>
// PRODUCER-HOST-LABEL: qopt.optimizer @Group
// PRODUCER-HOST-SAME: #qopt.kernel_plan<threads = 480, lanes = 8, stages = 0,
// HOST-LABEL: qopt.optimizer @Group
// A staged kernel prefetches only where asked and past its copies (three
// tiles ahead with four stages), by lines.
// AHEAD4-LABEL: qopt.optimizer @Group
// AHEAD4-SAME: stages = 4,
// AHEAD4-SAME: l2_prefetch_tiles = 4, l2_prefetch_lines = true,
// AHEAD3-LABEL: qopt.optimizer @Group
// AHEAD3-SAME: l2_prefetch_tiles = 0, l2_prefetch_lines = false,
// HOST-SAME: #qopt.kernel_plan<threads = 512, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = false, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 4, min_tiles_per_block = 128, suggested_blocks_per_sm = 4>
// Unstaged when asked: 512 x 8 still (two states), claims of 3 tiles past
// 5/8 as asked, no dynamic shared memory; without run thread pointers the
// two states' descriptor loads are invariant.
// ASKED-LABEL: qopt.optimizer @Group
// ASKED-SAME: #qopt.kernel_plan<threads = 512, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = true, bulk_copy = false, run_pointers = false, invariant_descriptors = true, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 3, claim_static_eighths = 5, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 4, min_tiles_per_block = 128, suggested_blocks_per_sm = 4>
qopt.optimizer @Group param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = linear, scale = f16, rounding = half_even, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_even, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %vn = arith.mulf %g, %g : f32
    %vs = arith.addf %v, %vn : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vs : f32
    qopt.store_param %pn : f32
  }
}

// -----

// One codebook state of blocks of 2048 and a bf16 parameter: unstaged at
// 256 x 8, the
// bucket tables alone in dynamic shared memory, L2 prefetch two tiles ahead,
// claims of three tiles past 5/8, registers bounded for four blocks a
// multiprocessor, no all-zero shortcut for lane divisors (a 16-bit
// parameter), saturation counts at the absmax, one wave.
// CHECK-LABEL: qopt.optimizer @Codebook
// CHECK-SAME: #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 24584, codebook_buckets = true, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 2, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 3, claim_static_eighths = 5, min_blocks_per_sm = 4, zero_shortcut_lane_divisors = false, scaled_range_checks = false, early_saturation_counts = true, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>
// HOST-LABEL: qopt.optimizer @Codebook
// HOST-SAME: #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = false, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>
// ASKED-LABEL: qopt.optimizer @Codebook
// ASKED-SAME: l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 3, claim_static_eighths = 5,
qopt.optimizer @Codebook param "p" : bf16 master none grad "g" : bf16 {
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

// -----

// Two codebook states of blocks of 2048 and an f32 parameter: unstaged,
// descriptor loads not invariant (at the codebook kernels' register bound),
// the all-zero shortcut for lane divisors too, registers for three blocks a
// multiprocessor (80 a thread), so the blocks' absmax barrier split (not
// where not asked, nor on the host).
// CHECK-LABEL: qopt.optimizer @CodebookF32
// CHECK-SAME: run_pointers = false, invariant_descriptors = false,
// CHECK-SAME: l2_prefetch_tiles = 1, l2_prefetch_lines = true,
// CHECK-SAME: min_blocks_per_sm = 3, zero_shortcut_lane_divisors = true, scaled_range_checks = false,
// CHECK-SAME: split_absmax_barrier = true,
// HOST-LABEL: qopt.optimizer @CodebookF32
// HOST-SAME: split_absmax_barrier = false,
// ASKED-LABEL: qopt.optimizer @CodebookF32
// ASKED-SAME: split_absmax_barrier = false,
qopt.optimizer @CodebookF32 param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.state @v : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %vn = arith.addf %v, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// A plan already attached is replaced, not kept.
// CHECK-LABEL: qopt.optimizer @Replanned
// CHECK-SAME: #qopt.kernel_plan<threads = 256, lanes = 8,
// CHECK-SAME: min_blocks_per_sm = 2,
qopt.optimizer @Replanned param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 32, lanes = 1, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = false, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 1, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// Two 16-bit plain states and a bf16 parameter: staged like group states
// (docs/tuning.md#async-copy), at 512 x 8, each thread copying its own
// bytes (no producer warp, even where asked: docs/tuning.md#producer-warp).
// CHECK-LABEL: qopt.optimizer @PlainBf16
// CHECK-SAME: #qopt.kernel_plan<threads = 512, lanes = 8, stages = {{[2-4]}},
// CHECK-SAME: run_pointers = true,
// PRODUCER-LABEL: qopt.optimizer @PlainBf16
// PRODUCER-SAME: #qopt.kernel_plan<threads = 512, lanes = 8,
// PRODUCER-SAME: bulk_copy = false,
// PRODUCER-SAME: suggested_blocks_per_sm = {{[0-9]+}}>
qopt.optimizer @PlainBf16 param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.plain<storage = bf16>
  qopt.state @v : #qopt.plain<storage = bf16>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %vn = arith.addf %v, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// One float32 plain state: unstaged (a 32-bit state), 256 threads of 8
// lanes (docs/tuning.md#lanes), two blocks a multiprocessor at least.
// CHECK-LABEL: qopt.optimizer @PlainF32OneState
// CHECK-SAME: #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0,
// CHECK-SAME: min_blocks_per_sm = 2,
qopt.optimizer @PlainF32OneState param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.plain<storage = f32>
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

// -----

// The L2 prefetch of unstaged kernels (docs/tuning.md#l2-prefetch): each
// thread's lines 1 tile ahead for two states with a group state (an f32
// parameter leaves them unstaged); none for one group state, nor for two
// float32 plain states, nor for three codebook states of an f32 parameter.
// CHECK-LABEL: qopt.optimizer @TwoGroupF32
// CHECK-SAME: stages = 0,
// CHECK-SAME: l2_prefetch_tiles = 1, l2_prefetch_lines = true,
// ASKED-LABEL: qopt.optimizer @TwoGroupF32
// ASKED-SAME: l2_prefetch_tiles = 0, l2_prefetch_lines = false,
qopt.optimizer @TwoGroupF32 param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %gg = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %gg : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// CHECK-LABEL: qopt.optimizer @OneGroupF32
// CHECK-SAME: l2_prefetch_tiles = 0, l2_prefetch_lines = false,
qopt.optimizer @OneGroupF32 param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
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

// -----

// CHECK-LABEL: qopt.optimizer @TwoPlainF32States
// CHECK-SAME: l2_prefetch_tiles = 0, l2_prefetch_lines = false,
qopt.optimizer @TwoPlainF32States param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %vn = arith.addf %v, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// CHECK-LABEL: qopt.optimizer @ThreeCodebookF32
// CHECK-SAME: l2_prefetch_tiles = 0, l2_prefetch_lines = false,
qopt.optimizer @ThreeCodebookF32 param "p" : f32 master none grad "g" : f32 {
  qopt.state @a : #qopt.codebook<block = 256>
  qopt.state @b : #qopt.codebook<block = 256>
  qopt.state @c : #qopt.codebook<block = 256>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %a = qopt.load_state @a : f32
    %b = qopt.load_state @b : f32
    %c = qopt.load_state @c : f32
    %an = arith.addf %a, %g : f32
    %bn = arith.addf %b, %g : f32
    %cn = arith.addf %c, %an : f32
    %pn = arith.subf %p, %bn : f32
    qopt.store_state @a, %an : f32
    qopt.store_state @b, %bn : f32
    qopt.store_state @c, %cn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// Plain states only, unstaged: the register prefetch where a tile's loads
// take at most 24 registers a thread (docs/tuning.md#register-prefetch).
// One float32 state of an f32 parameter at 8 lanes: p, g and the state, 12
// bytes an element, 24 registers: on (not on the host).
// CHECK-LABEL: qopt.optimizer @OnePlainF32
// CHECK-SAME: stages = 0,
// CHECK-SAME: register_prefetch = true,
// HOST-LABEL: qopt.optimizer @OnePlainF32
// HOST-SAME: register_prefetch = false,
qopt.optimizer @OnePlainF32 param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.plain<storage = f32>
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

// -----

// Two float32 states of an f32 parameter: 16 bytes an element, 32 registers:
// off.
// CHECK-LABEL: qopt.optimizer @TwoPlainF32Param
// CHECK-SAME: register_prefetch = false,
qopt.optimizer @TwoPlainF32Param param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %vn = arith.addf %v, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

// -----

// The same states of a bf16 parameter: 12 bytes an element, 24 registers:
// on.
// CHECK-LABEL: qopt.optimizer @TwoPlainBf16Param
// CHECK-SAME: register_prefetch = true,
qopt.optimizer @TwoPlainBf16Param param "p" : bf16 master none grad "g" : bf16 {
  qopt.state @m : #qopt.plain<storage = f32>
  qopt.state @v : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %mn = arith.addf %m, %g : f32
    %vn = arith.addf %v, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}

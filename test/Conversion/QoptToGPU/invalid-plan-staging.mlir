// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu -verify-diagnostics -split-input-file

// A staged kernel's copies take their sources from the run's thread
// pointers: a plan that stages tiles without them is refused.

// expected-error @+1 {{has a launch plan that stages tiles without run_pointers}}
qopt.optimizer @StagedWithoutRunPointers param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 2, shared_bytes = 16384, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// The prefetch's distance is added to the loop's 32-bit tile counter: a
// hand-written plan outside 0 to 1024 is refused.

// expected-error @+1 {{has a launch plan with l2_prefetch_tiles = -3, outside 0 to 1024}}
qopt.optimizer @NegativePrefetch param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = -3, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// expected-error @+1 {{has a launch plan with l2_prefetch_tiles = 4611686018427387904, outside 0 to 1024}}
qopt.optimizer @HugePrefetch param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 4611686018427387904, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// A staged kernel's prefetch is each thread's lines.

// expected-error @+1 {{has a launch plan that stages tiles and prefetches them in bulk (l2_prefetch_lines = false)}}
qopt.optimizer @StagedBulkPrefetch param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 2, shared_bytes = 16384, codebook_buckets = false, bulk_copy = false, run_pointers = true, invariant_descriptors = false, l2_prefetch_tiles = 3, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// A staged kernel's tiles come from its stages, not from registers loaded ahead.

// expected-error @+1 {{has a launch plan that stages tiles and prefetches them into registers (register_prefetch = true)}}
qopt.optimizer @StagedRegisterPrefetch param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 2, shared_bytes = 16384, codebook_buckets = false, bulk_copy = false, run_pointers = true, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = true, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// Bulk copies fill stages: none without them.

// expected-error @+1 {{has a launch plan with bulk_copy and no stages}}
qopt.optimizer @BulkWithoutStages param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = true, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// The register bound counts blocks that fit a multiprocessor's 2048 threads.

// expected-error @+1 {{has a launch plan with min_blocks_per_sm = 9, outside 0 to 8 blocks of 256 threads}}
qopt.optimizer @TooManyBlocks param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 9, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// ... and is not negative.

// expected-error @+1 {{has a launch plan with min_blocks_per_sm = -5, outside 0 to 8 blocks of 256 threads}}
qopt.optimizer @NegativeBlocks param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = -5, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// A producer warp issues bulk copies: a plan with one and without
// bulk_copy is refused (the field is optional, false when absent).

// expected-error @+1 {{has a launch plan with producer_warp that has no bulk_copy}}
qopt.optimizer @ProducerWithoutBulk param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 0, shared_bytes = 0, codebook_buckets = false, bulk_copy = false, run_pointers = false, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4, producer_warp = true>} {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}

// -----

// ... and the other warps meet at no block barrier after the producer's
// branch: a codebook state (its block absmax across warps) is refused.

// expected-error @+1 {{has a launch plan with producer_warp that its update does not allow}}
qopt.optimizer @ProducerWithCodebook param "p" : bf16 master none grad "g" : bf16 attributes {qopt.kernel_plan = #qopt.kernel_plan<threads = 256, lanes = 8, stages = 2, shared_bytes = 16384, codebook_buckets = false, bulk_copy = true, run_pointers = true, invariant_descriptors = false, l2_prefetch_tiles = 0, l2_prefetch_lines = false, register_prefetch = false, claim_tiles = 0, claim_static_eighths = 0, min_blocks_per_sm = 0, zero_shortcut_lane_divisors = true, scaled_range_checks = false, early_saturation_counts = false, split_absmax_barrier = false, waves = 1, min_tiles_per_block = 24, suggested_blocks_per_sm = 4, producer_warp = true>} {
  qopt.state @m : #qopt.codebook<block = 2048>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %mn = arith.addf %m, %g : f32
    qopt.store_state @m, %mn : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_param %pn : f32
  }
}

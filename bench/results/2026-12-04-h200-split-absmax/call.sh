#!/usr/bin/env bash
# The codebook absmax of blocks that span warps through a split arrive / wait
# (mbarrier) instead of one bar.sync: the GPU suites on the candidate (every
# spec and variant); main against it for the block2048 kernels, alternating;
# the realistic pool; ncu's warp states and source counts of both.
set -uo pipefail
source bench/device_call.sh
device_call_begin split .carry/c9
gpu_suites cand "$S/ieee"
stamp ab
ab_realistic adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.f32,adamw8bit_block2048.scaled,flash_adamw adamw8bit_block2048,adamw8bit_block2048.f32 \
  main cand
stamp ncu
for set in main cand; do
  timeout 100 ncu --clock-control none -k "regex:^AdamW8bit_block2048\$" --launch-skip 12 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    "$B/qopt-bench" --kernels "$S/$set" --specs adamw8bit_block2048 --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    > "$R/ncu-$set.txt" 2>&1
  echo "ncu $set rc=$?"
  grep -E "Duration|Issued Warp|No Eligible|Barrier|Long Scoreboard|Warp Cycles Per Issued" "$R/ncu-$set.txt" | head -8
done
ncu_source AdamW8bit_block2048 cand adamw8bit_block2048 src_block2048_cand
device_call_end

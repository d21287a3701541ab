#!/usr/bin/env bash
# The split absmax barrier's wait with a suspend-time hint (try_wait ...,
# 1000000 ns), which the first candidate (../2026-12-04-h200-split-absmax/)
# lacked: there each thread asked about 18 times a tile. main, the hinted
# candidate (candh) and both at three blocks per SM (b3), for the 16-bit and
# f32 parameter variants; the unhinted candidate (cand) for f32; ncu's source
# counts of the hinted bf16 kernel.
set -uo pipefail
source bench/device_call.sh
device_call_begin hint .carry/c11
ab_realistic adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.scaled,adamw8bit_block2048.f16.scaled,adamw8bit_block2048.f32 adamw8bit_block2048,adamw8bit_block2048.f32 \
  main candh mainb3 candhb3 cand=adamw8bit_block2048.f32
ncu_source AdamW8bit_block2048 candh adamw8bit_block2048 src_block2048_candh
ncu_source AdamW8bit_block2048 candhb3 adamw8bit_block2048 src_block2048_candhb3
device_call_end

#!/usr/bin/env bash
# The split absmax barrier with one arrival a warp (lane 0's, its state
# shuffled to the warp; mbarrier count 8): in ../2026-12-04-h200-split-hint/
# every thread arrived and waiters asked again about 15 times a tile. main,
# the per-warp candidate (candw), both at three blocks per SM (b3), and the
# per-thread one (candh); ncu's source counts of candw's bf16 kernel.
set -uo pipefail
source bench/device_call.sh
device_call_begin warps .carry/c12
bench_rounds ab adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.scaled,adamw8bit_block2048.f16.scaled,adamw8bit_block2048.f32 \
  16,64,256 main candw mainb3 candwb3 candh
stamp realistic
realistic adamw8bit_block2048,adamw8bit_block2048.f32 main candw candwb3
ncu_source AdamW8bit_block2048 candw adamw8bit_block2048 src_block2048_candw
device_call_end

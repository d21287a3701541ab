#!/usr/bin/env bash
# The L2 prefetch's branch taken by warp 0 in whole (vote.any of thread 0)
# instead of thread 0's branch, which ptxas predicated in every warp: main
# (fin, a182d52) against it (pf) for every kernel with the prefetch,
# alternating; the realistic pool; ncu source counts of Lion8bit.
set -uo pipefail
source bench/device_call.sh
device_call_begin pf .carry/c15
ab_realistic lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,ademamix8bit,lars8bit,lion8bit.f16,adamw8bit_block2048.scaled lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,ademamix8bit \
  fin pf
ncu_source Lion8bit pf lion8bit src_lion8bit_pf
device_call_end

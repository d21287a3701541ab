#!/usr/bin/env bash
# The split absmax barrier against block2048's register bound: main and the
# split candidate (the mbarrier named by its symbol) at four blocks per SM
# (64 registers) and at three (.minnctapersm 3, 80 registers), for the 16-bit
# and f32 parameter variants, alternating; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin shapes .carry/c10
ab_realistic adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.scaled,adamw8bit_block2048.f16.scaled,adamw8bit_block2048.f32 adamw8bit_block2048,adamw8bit_block2048.f16 \
  main cand mainb3 candb3
device_call_end

#!/usr/bin/env bash
# Every kernel with the L2 prefetch at distance 1 (chooseL2PrefetchTiles
# returning 1; d1) against a182d52's distance 2 (fin), alternating; the
# realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin dist2 .carry/c18
ab_realistic lion8bit,lion8bit.f16,adagrad8bit,rmsprop8bit,adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.scaled,ademamix8bit,lars8bit lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,ademamix8bit \
  fin d1
device_call_end

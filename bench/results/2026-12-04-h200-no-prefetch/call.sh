#!/usr/bin/env bash
# The unstaged kernels without their L2 prefetch (the PTX's
# cp.async.bulk.prefetch.L2 lines removed, the addresses then dead): main
# (fin, a182d52) against them (nopf), alternating; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin nopf .carry/c16
ab_realistic lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,ademamix8bit,lars8bit,lion8bit.f16,adamw8bit_block2048.scaled lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,ademamix8bit \
  fin nopf
device_call_end

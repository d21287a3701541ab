#!/usr/bin/env bash
# The kept split absmax barrier (c1705fc: block2048.f32 and .f32.scaled only):
# the GPU suites on every spec and variant; main (e1eecae) against it for
# the changed kernels and two controls, alternating; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin final .carry/c13
gpu_suites fin "$S/ieee"
stamp ab
ab_realistic adamw8bit_block2048.f32,adamw8bit_block2048.f32.scaled,adamw8bit_block2048,flash_adamw adamw8bit_block2048,adamw8bit_block2048.f32 \
  main fin
device_call_end

#!/usr/bin/env bash
# AdamW4bit's v nonnegative (the (k + 1) / 16 table's facts) and 4 lanes a
# thread: the GPU suites on the new kernels, then the previous commit's
# 4-bit kernels, the new ones and three shapes, alternating.
set -uo pipefail
source bench/device_call.sh
device_call_begin q4b .carry/c3
gpu_suites new2 "$S/ieee"
stamp bench
bench_rounds bench adamw4bit,adamw4bit_sr,flash_adamw4bit 1,16,64,256 \
  base new2 e4t512=adamw4bit e4t256=adamw4bit e4t1024=adamw4bit
stamp realistic
realistic adamw4bit base new2 e4t512 e4t256 e4t1024
device_call_end

#!/usr/bin/env bash
# The 4-bit table entries' addresses from the packed word and no clamp to 1
# in full tiles: the GPU suites on the new kernels, then the previous
# commit's 4-bit kernels and the new ones, alternating, and ncu's counts.
set -uo pipefail
source bench/device_call.sh
device_call_begin q4c .carry/c4
gpu_suites new3 "$S/ieee"
stamp bench
bench_rounds bench adamw4bit,adamw4bit_sr,flash_adamw4bit 1,16,64,256 base new3
stamp realistic
realistic adamw4bit,adamw4bit_sr,flash_adamw4bit base new3
stamp ncu
ncu_source AdamW4bit new3 adamw4bit src_adamw4bit_new3
device_call_end

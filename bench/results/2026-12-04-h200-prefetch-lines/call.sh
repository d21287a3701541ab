#!/usr/bin/env bash
# The L2 prefetch by each thread of its own lanes (prefetch.global.L2) in
# place of thread 0's bulk prefetch: fin2 = main's kernels (54f88f9), lines =
# the same tiles ahead by lines, lines1 = lines one tile ahead in every
# unstaged kernel. The GPU suites on lines1; the kernels that prefetch today
# at 16, 64 and 256 Mi, the unstaged ones below 0.9 that do not at 64 Mi,
# alternating, two rounds; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin plines .carry/c22
gpu_suites lines1 "$S/ieee"
stamp abA
bench_rounds abA lion8bit,adagrad8bit,rmsprop8bit,ademamix8bit,adamw8bit_block2048,lars8bit 16,64,256 fin2 lines lines1
stamp abB
bench_rounds abB flash_adamw.f32,flash_adam.f32,flash_sgd.f32,flash_lion.f32,adamw8bit_block256.f32,adamw8bit_block2048.f32,adamw4bit.f32,flash_adamw4bit.f32,lion8bit.f32,adagrad8bit.f32,ademamix8bit.f32,adam_atan2,adam_atan2_bf16.f32,stable_adamw,lamb_state32,lars_state32,flash_adamw_clip.f32,lion_state32,flash_sgd_state32,flash_adamw_state32 64 fin2 lines1
stamp realistic
realistic lion8bit,adagrad8bit,rmsprop8bit,ademamix8bit,adamw8bit_block2048,adam_atan2,stable_adamw,lamb_state32 fin2 lines lines1
device_call_end

#!/usr/bin/env bash
# 4-bit dynamic codes by buckets and the group divisor made uniform: the GPU
# suites on the new kernels (every shipped spec and variant), then main's
# kernels against them, alternating, and one ncu source count of AdamW4bit.
set -uo pipefail
source bench/device_call.sh
device_call_begin q4 .carry/c2
gpu_suites new "$S/ieee"
stamp bench
bench_rounds bench adamw4bit,adamw4bit_sr,flash_adamw_linear,flash_sgd,flash_sgd_bf16,flash_sgd_ecc16,flash_sgdw_bf16,flash_sgdw_ecc16,flash_lion_bf16,flash_lion_ecc16,flash_adamw,adamw8bit_block2048 \
  16,64,256 base new
stamp realistic
realistic adamw4bit,adamw4bit_sr,flash_adamw_linear base new
stamp ncu
ncu_source AdamW4bit new adamw4bit src_adamw4bit_new
device_call_end

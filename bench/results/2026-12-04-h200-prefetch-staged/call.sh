#!/usr/bin/env bash
# The line prefetch in the staged kernels, past the tiles their cp.async
# copies run ahead: stg4 / stg6 = each thread's prefetch.global.L2 of its
# lanes 4 / 6 tiles ahead (qopt-opt --l2-prefetch-tiles), against main's
# kernels (fin2), alternating, two rounds; the realistic pool. Then ncu's
# source counts of Lion8bit and block2048 as shipped now (pol2).
set -uo pipefail
source bench/device_call.sh
device_call_begin pstg .carry/c24
bench_rounds ab flash_adamw,flash_adam,flash_adamw_ecc16,flash_lion,flash_sgd,adamw8bit_block256,adamw4bit,flash_adamw4bit,adam_atan2_bf16,flash_adamw_linear,flash_adamw_sr,flash_adamw_clip 16,64,256 fin2 stg4 stg6
stamp realistic
realistic flash_adamw,flash_lion,adamw8bit_block256,adamw4bit,adam_atan2_bf16,flash_adamw_clip fin2 stg4 stg6
stamp ncu
ncu_source Lion8bit pol2 lion8bit src_lion8bit_lines
ncu_source AdamW8bit_block2048 pol2 adamw8bit_block2048 src_block2048
device_call_end

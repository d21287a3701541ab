#!/usr/bin/env bash
# The policy of the line prefetch (pol: chooseL2PrefetchTiles /
# chooseL2PrefetchLines after the first call) against main's kernels (fin2):
# every kernel it changes (bf16 and f32 variants) at 16, 64 and 256 Mi and
# the GPT-2 list, alternating, two rounds; the realistic pool. Every pol
# kernel is byte-identical to the first call's lines1 kernel (its suites).
set -uo pipefail
source bench/device_call.sh
device_call_begin plpol .carry/c23
bench_rounds ab adagrad8bit.f32,adagrad8bit,adam_atan2.f32,adam_atan2,adam_atan2_bf16.f32,adamw4bit.f32,adamw4bit_sr.f32,adamw8bit_block2048.f32,adamw8bit_block256.f32,adamw_state32.f32,adamw_state32,ademamix8bit,ademamix_state32.f32,ademamix_state32,flash_adam.f32,flash_adam_bf16.f32,flash_adam_bf16_state32.f32,flash_adam_bf16_state32,flash_adam_ecc16.f32,flash_adam_ecc16_state32.f32,flash_adam_ecc16_state32,flash_adam_state32.f32,flash_adam_state32,flash_adamw.f32,flash_adamw4bit.f32,flash_adamw_bf16.f32,flash_adamw_bf16_state32.f32,flash_adamw_bf16_state32,flash_adamw_clip.f32,flash_adamw_ecc16.f32,flash_adamw_ecc16_state32.f32,flash_adamw_ecc16_state32,flash_adamw_kahan.f32,flash_adamw_linear.f32,flash_adamw_sr.f32,flash_adamw_state32.f32,flash_adamw_state32,lamb8bit.f32,lamb_state32.f32,lamb_state32,lars8bit.f32,lars8bit,lion8bit.f32,lion8bit,rmsprop8bit.f32,rmsprop8bit,stable_adamw.f32,stable_adamw 16,64,256 fin2 pol
stamp realistic
realistic lion8bit,adagrad8bit,rmsprop8bit,ademamix8bit,lars8bit,adam_atan2,stable_adamw,lamb_state32,adamw_state32,flash_adamw_state32,flash_adam_state32,ademamix_state32,flash_adamw_bf16_state32 fin2 pol
device_call_end

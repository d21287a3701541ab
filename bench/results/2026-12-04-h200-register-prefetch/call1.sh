#!/usr/bin/env bash
# The register prefetch (the next full tile's element streams loaded into
# registers before the current tile's work, the loop carrying them): base =
# main's kernels (a9706ec), rp = --register-prefetch=on, rp3 = the same at
# --min-blocks-per-sm=3, base3 = main's at 3 blocks, rpL2 / rpN = rp with the
# L2 prefetch 2 tiles ahead / none. The codebook kernels at 16, 64, 256 Mi
# and the GPT-2 list, every other kernel it changes at 64 Mi, alternating,
# two rounds; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin rp1 .carry/c28
stamp abA
bench_rounds abA lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,lars8bit 16,64,256 base rp rp3 base3=lion8bit,adagrad8bit,rmsprop8bit rpL2=lion8bit,adagrad8bit,rmsprop8bit,lars8bit rpN=lion8bit,adagrad8bit,rmsprop8bit,lars8bit
stamp abB
bench_rounds abB ademamix8bit,adagrad8bit.f32,adagrad_state32.f32,adagrad_state32,adam_atan2.f32,adam_atan2,adam_atan2_bf16.f32,adamw4bit.f32,adamw8bit_block2048.f32,adamw8bit_block256.f32,adamw_state32.f32,adamw_state32,ademamix8bit.f32,ademamix_state32.f32,ademamix_state32,flash_adam.f32,flash_adam_bf16_state32,flash_adam_ecc16_state32,flash_adam_state32.f32,flash_adam_state32,flash_adamw.f32,flash_adamw4bit.f32,flash_adamw_bf16_state32 64 base rp rp3=lion8bit.f32,adagrad8bit.f32,rmsprop8bit.f32
stamp abC
bench_rounds abC flash_adamw_clip.f32,flash_adamw_ecc16_state32,flash_adamw_linear.f32,flash_adamw_state32.f32,flash_adamw_state32,flash_lion.f32,flash_lion_bf16_state32,flash_lion_ecc16_state32,flash_lion_state32.f32,flash_lion_state32,flash_sgd.f32,flash_sgd_bf16_state32,flash_sgd_ecc16_state32,flash_sgd_state32.f32,flash_sgd_state32,flash_sgdw.f32,flash_sgdw_bf16_state32,flash_sgdw_ecc16_state32,flash_sgdw_state32.f32,flash_sgdw_state32,lamb8bit.f32,lamb_state32.f32,lamb_state32,lars8bit.f32,lars_state32.f32,lars_state32,lion8bit.f32,lion_state32.f32,lion_state32,rmsprop8bit.f32,rmsprop_state32.f32,rmsprop_state32,stable_adamw.f32,stable_adamw 64 base rp
stamp realistic
realistic lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,lars8bit base rp
realistic lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048 rp3
device_call_end

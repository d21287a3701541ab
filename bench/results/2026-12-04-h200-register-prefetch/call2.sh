#!/usr/bin/env bash
# The kept policy (chooseRegisterPrefetch: plain states only, at most 24
# registers carried): pol = its kernels (every changed one byte-identical to
# call 1's rp), base = main's (a9706ec). The GPU suites on pol; every kernel
# it changes at 16, 64, 256 Mi and the GPT-2 list, alternating, two rounds;
# the realistic pool; every kernel of pol against the copy roof and torch's
# fused AdamW.
set -uo pipefail
source bench/device_call.sh
device_call_begin rp2 .carry/c29
gpu_suites pol "$S/ieee"
stamp abA
bench_rounds abA adagrad_state32.f32,adagrad_state32,adam_atan2,adam_atan2_bf16.f32,adamw_state32,flash_adam_bf16_state32,flash_adamw_bf16_state32,flash_lion_bf16_state32.f32,flash_lion_bf16_state32,flash_lion_ecc16_state32.f32,flash_lion_ecc16_state32,flash_lion_state32.f32,flash_lion_state32,flash_sgd_bf16_state32.f32,flash_sgd_bf16_state32,flash_sgd_ecc16_state32.f32,flash_sgd_ecc16_state32 16,64,256 base pol
stamp abB
bench_rounds abB flash_sgd_state32.f32,flash_sgd_state32,flash_sgdw_bf16_state32.f32,flash_sgdw_bf16_state32,flash_sgdw_ecc16_state32.f32,flash_sgdw_ecc16_state32,flash_sgdw_state32.f32,flash_sgdw_state32,lamb_state32,lars_state32.f32,lars_state32,lion_state32.f32,lion_state32,rmsprop_state32.f32,rmsprop_state32,stable_adamw 16,64,256 base pol
stamp realistic
realistic adam_atan2,adam_atan2_bf16.f32,flash_sgd_state32.f32,lars_state32.f32,lion_state32,stable_adamw,lamb_state32 base pol
roof_and_torch pol
device_call_end

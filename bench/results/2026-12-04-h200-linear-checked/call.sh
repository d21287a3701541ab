#!/usr/bin/env bash
# Checked rounding for linear codes (FlashAdamWLinear): the GPU suites on
# the candidate, then the session's final kernels against it, alternating.
set -uo pipefail
source bench/device_call.sh
device_call_begin lin .carry/c7
gpu_suites lin "$S/ieee"
stamp bench
bench_rounds bench flash_adamw_linear,flash_adamw_linear.f32,flash_adamw 1,16,64,256 fin lin
stamp realistic
realistic flash_adamw_linear fin lin
stamp ncu
ncu_source FlashAdamW_linear lin flash_adamw_linear src_flash_adamw_linear_lin
device_call_end

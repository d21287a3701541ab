#!/usr/bin/env bash
# main at dd3af2c (pol2: the line prefetch's policy; every kernel byte-identical
# to the ones measured before it): the GPU suites on every spec and variant;
# every kernel at 64 Mi against the copy roof; FlashAdamW and block2048 on the
# GPT-2 list; torch's fused AdamW in the same call.
set -uo pipefail
source bench/device_call.sh
device_call_begin lfin .carry/c26
gpu_suites pol2 "$S/ieee"
stamp gpt2
bench_rounds gpt2 flash_adamw,adamw8bit_block2048,lion8bit,adagrad8bit,rmsprop8bit 64 pol2
roof_and_torch pol2
device_call_end

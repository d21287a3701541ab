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
stamp all
timeout 280 "$B/qopt-bench" --kernels "$S/pol2" --sizes 64 --no-gpt2 --no-sweep --no-runtime --csv "$R/all-pol2.csv" \
  > "$R/all-pol2.log" 2>&1
echo "all rc=$?"
stamp torch
timeout 200 python3 bench/torch_baselines.py --out "$R/torch.json" --sizes 64 > "$R/torch.log" 2>&1
echo "torch rc=$?"
tail -4 "$R/torch.log"
device_call_end

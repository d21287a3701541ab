#!/usr/bin/env bash
# The session's final kernels (70ca071): the GPU suites on every spec and
# variant; main's kernels at the session's start (b1703b5) against them for
# every spec whose PTX changed, alternating; every default kernel against
# the copy roof; torch's fused AdamW in the same call.
set -uo pipefail
source bench/device_call.sh
device_call_begin fin .carry/c5
gpu_suites fin "$S/ieee"
stamp ab
bench_rounds ab adamw4bit,adamw4bit_sr,flash_adamw4bit,flash_adamw_linear,flash_sgd,flash_sgd_bf16,flash_sgd_ecc16,flash_sgdw_bf16,flash_sgdw_ecc16,flash_lion_bf16,flash_lion_ecc16,flash_adamw,adamw8bit_block2048 \
  16,64,256 main fin
stamp realistic
realistic adamw4bit,adamw4bit_sr,flash_adamw_linear main fin
stamp all
timeout 240 "$B/qopt-bench" --kernels "$S/fin" --sizes 64 --no-gpt2 --no-sweep --no-runtime --csv "$R/all-fin.csv" \
  > "$R/all-fin.log" 2>&1
echo "all rc=$?"
sed -n '/^GB\/s/,/^wrote/p' "$R/all-fin.log" | grep -v '^wrote'
stamp torch
timeout 200 python3 bench/torch_baselines.py --out "$R/torch.json" --sizes 64 > "$R/torch.log" 2>&1
echo "torch rc=$?"
tail -8 "$R/torch.log"
device_call_end

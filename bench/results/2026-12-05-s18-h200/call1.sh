#!/usr/bin/env bash
# The seventeenth session's producer warp on an H200 (it ran only on H100s):
# on an H200, the A/B of c12's kernels with and without the producer warp
# (s/old = --bulk-copy-producer=false), the realistic pool, then every default
# kernel against the copy roof and torch fused AdamW. On any other GPU it
# records the machine and stops: the A/B on an H100 is in
# ../2026-12-05-s17-producer/.
set -uo pipefail
source bench/device_call.sh
device_call_begin h200ab .carry/c12
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: stopping"
  device_call_end
  exit 0
fi
stamp ab
ab_realistic flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_sr,flash_adamw_linear,flash_adamw_kahan,flash_adam_bf16 \
  flash_adamw,flash_adamw_linear old head
roof_and_torch head
device_call_end

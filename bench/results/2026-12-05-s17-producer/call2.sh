#!/usr/bin/env bash
# After call.sh: the policy kept (chooseProducerWarp: the Adam family's 9
# specs), built again (`bash make_sets.sh c11`). Every GPU suite on the
# default kernels, the A/B against the same build without producer warps at
# 16, 64, 256 Mi and the GPT-2 list (AdamAtan2Bf16 and FlashLion, now
# without one, as controls), realistic gradients of three of them; then
# the main job on this build (call3.sh: pytest's CUDA tests).
set -uo pipefail
source bench/device_call.sh
device_call_begin producer2 .carry/c11
all_gpu_suites head "$S/ieee" "$S/fast"
stamp ab
ab_realistic flash_adamw,flash_adam,flash_adamw_bf16,flash_adamw_ecc16,flash_adamw_linear,flash_adamw_kahan,flash_adamw_sr,adam_atan2_bf16,flash_lion \
  flash_adamw,flash_adam,flash_adamw_linear old head
stamp main
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
timeout 120 "$C/x/build/bin/qopt-main" --kernels "$C/x/build/kernels" > "$R/main.log" 2>&1; echo "main rc=$?"
grep -iE 'equal|FlashAdamW|block|ms' "$R/main.log" | head -12
device_call_end

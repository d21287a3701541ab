#!/usr/bin/env bash
# Where issue 28's targets stand with the default of c00e5c0 (.carry/c13): on
# an H200, every default kernel at 64 Mi against the copy roof, torch fused
# AdamW in the same call, and FlashAdamW and block2048 at 16, 64 and 256 Mi
# and on the GPT-2 list. On any other GPU it records the machine and stops.
set -uo pipefail
source bench/device_call.sh
device_call_begin targets .carry/c13
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: stopping"
  device_call_end
  exit 0
fi
bench_rounds targets flash_adamw,adamw8bit_block2048 16,64,256 head
roof_and_torch head
device_call_end

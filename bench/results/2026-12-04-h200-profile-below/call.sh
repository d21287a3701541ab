#!/usr/bin/env bash
# ncu source counts (SASS, executed) of the kernels below 0.88 that the
# session did not change, on its final build (4eea5bc), for the next one.
set -uo pipefail
source bench/device_call.sh
device_call_begin prof2 .carry/c6
for item in flash_adamw4bit:FlashAdamW4bit ademamix8bit:AdEMAMix8bit adamw8bit_block256:AdamW8bit_block256 \
            lamb8bit:LAMB8bit lamb8bit:LAMB8bit_reduce lars8bit:LARS8bit lars8bit:LARS8bit_reduce \
            flash_adamw_linear:FlashAdamW_linear; do
  IFS=: read -r spec kernel <<< "$item"
  ncu_source "$kernel" fin "$spec" "src_$kernel"
done
device_call_end

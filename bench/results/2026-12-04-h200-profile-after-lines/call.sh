#!/usr/bin/env bash
# ncu source counts (SASS with executed counts and stall samples) of kernels
# below 0.88 as shipped at e01f192 (pol2), one launch at 64 Mi each.
set -uo pipefail
source bench/device_call.sh
device_call_begin prof2 .carry/c26
ncu_source FlashAdamW pol2 flash_adamw src_flash_adamw
ncu_source AdEMAMix8bit pol2 ademamix8bit src_ademamix8bit
ncu_source AdamW8bit_block256 pol2 adamw8bit_block256 src_block256
ncu_source AdamW4bit pol2 adamw4bit src_adamw4bit
device_call_end

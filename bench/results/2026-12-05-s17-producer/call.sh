#!/usr/bin/env bash
# Issue 28: the producer warp (now the default) against the kernels without
# it (--bulk-copy-producer=false) of the same build. The strict and checked-rounding suites
# on every default kernel (s/head), then the A/B (s/old, make_sets.sh)
# of the specs that take it at 16, 64 and 256 Mi and on the GPT-2 list, the
# realistic-gradient pool of FlashAdamW, and ncu's counts of one launch of
# FlashAdamW in each set; the stream probe again (its block2048 half fixed).
set -uo pipefail
source bench/device_call.sh
device_call_begin producer .carry/c10
gpu_suites head "$S/ieee"
stamp ab
ab_realistic flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_linear,flash_lion,flash_sgd,adam_atan2_bf16 \
  flash_adamw old head
stamp ncu
for set in old head; do
  timeout 60 ncu --clock-control none -k regex:^FlashAdamW\$ --launch-skip 12 --launch-count 1 \
    --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__registers_per_thread,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active \
    "$B/qopt-bench" --kernels "$S/$set" --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    > "$R/ncu-$set.txt" 2>&1
  echo "ncu $set rc=$?"; grep -E 'inst_executed|issue_active|dram__|duration|registers|block_size|warps_active' "$R/ncu-$set.txt"
done
stamp probe
timeout 90 .carry/probe/stream_probe 64 > "$R/probe64.txt" 2>&1; echo "probe rc=$?"
grep -v ',' "$R/probe64.txt" | grep -E 'roof|K=(0|80) ' | head -30
device_call_end

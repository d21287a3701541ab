#!/usr/bin/env bash
# After call1 (the producer warp loses 10% on the H200): the GPU suites on c12's
# `old` set (--bulk-copy-producer=false, the kernels of the default once the
# policy turns the producer off), then on an H200 the stream probe
# (bench/stream_probe.cu, .carry/probe) beside the shipped kernels, ncu's issue
# and DRAM counts of the probe's pipelines, and ncu's source counts of
# FlashAdamW in both forms.
set -uo pipefail
source bench/device_call.sh
device_call_begin h200probe .carry/c12
gpu_suites old "$S/ieee"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  P=$PWD/.carry/probe/stream_probe
  stamp probe
  timeout 240 "$P" 64 > "$R/probe64.txt" 2>&1; echo "probe rc=$?"
  grep -v ',' "$R/probe64.txt" | head -100
  stamp shipped
  bench_rounds real flash_adamw,adamw8bit_block2048 64 old head
  stamp ncu
  timeout 150 ncu --clock-control none --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__registers_per_thread \
    -k 'regex:(direct|async|tma)Kernel' --csv "$P" 64 once > "$R/probe-ncu.csv" 2> "$R/probe-ncu.err"
  echo "ncu rc=$?"; tail -2 "$R/probe-ncu.err"
  ncu_source FlashAdamW old flash_adamw src_flash_adamw_old
  ncu_source FlashAdamW head flash_adamw src_flash_adamw_head
fi
device_call_end

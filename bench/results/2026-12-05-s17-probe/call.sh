#!/usr/bin/env bash
# Issue 28's stream probe (bench/stream_probe.cu, built here for sm_90a and
# carried as .carry/probe): FlashAdamW's and block2048's streams under three
# tile pipelines and synthetic arithmetic, beside the shipped kernels of the
# same streams (c9's `head` set) and the copy roof in the same call; ncu's
# instruction and issue counts of each probe kernel; and the fp16 checkpoint
# test of af82396 on torch 2.11 (bench/results/2026-12-05-s16-device/call2.sh).
set -uo pipefail
source bench/device_call.sh
device_call_begin probe .carry/c9
P=$PWD/.carry/probe/stream_probe
stamp probe
timeout 240 "$P" 64 > "$R/probe64.txt" 2>&1; echo "probe rc=$?"
grep -v ',' "$R/probe64.txt" | head -100
stamp shipped
bench_rounds real flash_adamw,adamw8bit_block2048 64 head
stamp ncu
timeout 150 ncu --clock-control none --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__registers_per_thread \
  -k 'regex:(direct|async|tma)Kernel' --csv "$P" 64 once > "$R/probe-ncu.csv" 2> "$R/probe-ncu.err"
echo "ncu rc=$?"; tail -2 "$R/probe-ncu.err"; wc -l "$R/probe-ncu.csv"
stamp fp16
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 120 python3 -m pytest -p no:cacheprovider -q -rfs \
  python/tests/test_flash_api.py -k "16bit_params" 2>&1 | grep -E "Failed|passed|failed|off; first" | cut -c1-400
device_call_end

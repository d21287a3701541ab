#!/usr/bin/env bash
# The producer warp off by default (this session's build, `.carry/c13` from
# bench/make_verify_carry.sh): every GPU suite, the main job and pytest's CUDA
# tests; on an H200 also the stream probe (bench/stream_probe.cu, carried as
# .carry/probe) beside FlashAdamW and block2048, and ncu's issue and DRAM
# counts of the probe's pipelines: #h100's open question (issue or memory
# side) asked on the H200.
set -uo pipefail
source bench/device_call.sh
device_call_begin verify .carry/c13
all_gpu_suites head "$S/ieee" "$S/fast"
stamp main
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
timeout 100 "$C/x/build/bin/qopt-main" --kernels "$C/x/build/kernels" > "$R/main.log" 2>&1; echo "main rc=$?"
grep -E '^(flash_adamw|adamw8bit)' "$R/main.log"
stamp pytest
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 200 python3 -m pytest -p no:cacheprovider -q -k cuda \
  python/tests > "$R/pytest.log" 2>&1; echo "pytest rc=$?"; tail -1 "$R/pytest.log"
grep -E "^FAILED" "$R/pytest.log" | head
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  P=$PWD/.carry/probe/stream_probe
  stamp probe
  timeout 150 "$P" 64 > "$R/probe64.txt" 2>&1; echo "probe rc=$?"
  grep -v ',' "$R/probe64.txt" | head -60
  bench_rounds real flash_adamw,adamw8bit_block2048 64 head
  stamp ncu
  timeout 100 ncu --clock-control none --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__registers_per_thread \
    -k 'regex:(direct|async|tma)Kernel' --csv "$P" 64 once > "$R/probe-ncu.csv" 2> "$R/probe-ncu.err"
  echo "ncu rc=$?"; tail -2 "$R/probe-ncu.err"
fi
device_call_end

#!/usr/bin/env bash
# Issue 23, third call: the runtime-level whole-step tests with the shipped kernels' folder given
# (FlashAdamWClip over launches and steps, host and CUDA), and qopt-bench of FlashAdamWClip beside
# FlashAdamW and LAMB8bit with the copy roof (64 Mi and the GPT-2 list in one launch).
set -uo pipefail
C=$PWD/.carry/step; R=$(mktemp -d)
tar -C $C -xJf $C/payload.tar.xz
B=$C/build
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $R/env.txt 2>&1
cat $R/env.txt
stamp whole-step
LD_LIBRARY_PATH=$B/runtime QOPT_TEST_KERNEL_ROOT=$B/kernels QOPT_TEST_EXTRA_KERNEL_DIR=$B/test/host/kernels \
  timeout 120 $B/test/host/qopt-whole-step-tests > $R/whole-step.log 2>&1
echo "exit $?" >> $R/whole-step.log; grep -E "OK|FAILED|PASSED|SKIPPED|exit|Failure" $R/whole-step.log | head -20
stamp qopt-bench
LD_LIBRARY_PATH=$B/runtime timeout 200 $B/bench/qopt-bench --kernels $B/kernels --specs flash_adamw,flash_adamw_clip,lamb8bit --sizes 64 --no-sweep --no-runtime > $R/qopt_bench.txt 2>&1
echo "exit $?" >> $R/qopt_bench.txt; cat $R/qopt_bench.txt | tail -40
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

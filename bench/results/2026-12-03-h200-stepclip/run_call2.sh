#!/usr/bin/env bash
# Issue 23's whole-step reductions on the H200: the runtime-level whole-step tests on CUDA (FlashAdamWClip over
# launches and steps, GlobalProbe's order in one call and split), the strict suite over every kernel (the runtime's
# launch path changed), the runtime's GPU tests, the CUDA Python tests, then clip_bench with FlashAdamWClip.
set -uo pipefail
export PYTHONUNBUFFERED=1
C=$PWD/.carry/step; R=$(mktemp -d)
tar -C $C -xJf $C/payload.tar.xz
B=$C/build
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > $R/env.txt 2>&1
cat $R/env.txt
shards() { # name count timeout binary...
  local name=$1 n=$2 t=$3; shift 3; local pids=()
  for i in $(seq 0 $((n-1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout $t "$@" --gtest_brief=1 > $R/$name.$i.log 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n-1))); do wait ${pids[$i]}; echo "exit $?" >> $R/$name.$i.log; done
  cat $R/$name.*.log | grep -E "FAILED|PASSED|SKIPPED|exit" | sort | uniq -c | tail -20
}
stamp whole-step
LD_LIBRARY_PATH=$B/runtime QOPT_TEST_EXTRA_KERNEL_DIR=$B/test/host/kernels timeout 120 $B/test/host/qopt-whole-step-tests > $R/whole-step.log 2>&1
echo "exit $?" >> $R/whole-step.log; grep -E "OK|FAILED|PASSED|SKIPPED|exit|Failure" $R/whole-step.log | head -20
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx shards strict 10 150 $B/test/gpu/qopt-gpu-tests
stamp runtime
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx timeout 90 $B/runtime/tests/qopt_runtime_tests --gtest_brief=1 > $R/runtime.log 2>&1
echo "exit $?" >> $R/runtime.log; grep -E "FAILED|PASSED|exit" $R/runtime.log | head -10
stamp pytest
QOPT_BUILD_DIR=$B PYTHONPATH=$C/python timeout 150 python3 -m pytest -q -p no:cacheprovider $C/python/tests/test_step_reduction.py $C/python/tests/test_clip.py > $R/pytest.log 2>&1
echo "exit $?" >> $R/pytest.log; grep -E "passed|failed|FAILED|Error" $R/pytest.log | tail -12
stamp qopt-bench
LD_LIBRARY_PATH=$B/runtime timeout 150 $B/bench/qopt-bench --kernels $B/kernels --specs flash_adamw,flash_adamw_clip,lamb8bit --sizes 64 --no-sweep --no-runtime > $R/qopt_bench.txt 2>&1
echo "exit $?" >> $R/qopt_bench.txt; tail -30 $R/qopt_bench.txt
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

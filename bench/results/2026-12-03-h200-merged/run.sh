#!/usr/bin/env bash
# The merged main (q4speed + wt-redgpu + wt-py) on the H200: the full strict and checked-rounding suites
# (every shipped and reduction kernel), the runtime's GPU tests, and every CUDA Python test.
set -uo pipefail
export PYTHONUNBUFFERED=1
C=$PWD/.carry/final; R=$(mktemp -d)
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
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx shards strict 10 150 $B/test/gpu/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$B/test/gpu/kernels-ieee-rounding shards checked 12 150 $B/test/gpu/qopt-gpu-checked-rounding-tests
stamp runtime
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx timeout 60 $B/runtime/tests/qopt_runtime_tests --gtest_brief=1 > $R/runtime.log 2>&1
echo "exit $?" >> $R/runtime.log; grep -E "FAILED|PASSED|exit" $R/runtime.log | head -10
stamp pytest
QOPT_BUILD_DIR=$B PYTHONPATH=$PWD/python timeout 200 python3 -m pytest -q -p no:cacheprovider python/tests > $R/pytest.log 2>&1
echo "exit $?" >> $R/pytest.log; grep -E "passed|failed|FAILED|Error" $R/pytest.log | tail -12
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

#!/usr/bin/env bash
# Issue 24's close-out on the H200, main at 6c30def: the full strict and checked-rounding suites
# (every shipped kernel, flash_adamw_kahan included), qopt-bench of the 4-bit / stochastic-rounding /
# Kahan kernels beside the 8-bit ones at 64 Mi and on the GPT-2 list, and the CUDA Python tests.
set -uo pipefail
export PYTHONUNBUFFERED=1
C=$PWD/.carry/q4v; R=$(mktemp -d)
tar -C $C -xJf $C/payload.tar.xz
B=$C/build
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > $R/env.txt 2>&1
cat $R/env.txt
shards() { # name count timeout binary...
  local name=$1 n=$2 t=$3; shift 3; local pids=()
  for i in $(seq 0 $((n-1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout $t "$@" --gtest_brief=1 > $R/$name.$i.log 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n-1))); do wait ${pids[$i]}; echo "exit $?" >> $R/$name.$i.log; done
  cat $R/$name.*.log | grep -E "FAILED|PASSED|SKIPPED|exit|tests from" | sort | uniq -c | tail -20
}
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx shards strict 8 200 $B/test/gpu/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$B/test/gpu/kernels-ieee-rounding shards checked 8 200 $B/test/gpu/qopt-gpu-checked-rounding-tests
stamp bench
timeout 150 $B/bench/qopt-bench --kernels $B/kernels --sizes 64 --no-sweep --no-runtime \
  --specs adamw4bit,adamw4bit_sr,flash_adamw4bit,flash_adamw_sr,flash_adamw_kahan,flash_adamw,flash_adamw_bf16,adamw8bit_block256,adamw8bit_block2048 \
  --json $R/bench.json --csv $R/bench.csv > $R/bench.log 2>&1
echo "exit $?" >> $R/bench.log; tail -30 $R/bench.log
stamp pytest
QOPT_BUILD_DIR=$B PYTHONPATH=$PWD/python timeout 200 python3 -m pytest -q -p no:cacheprovider python/tests/test_4bit.py python/tests/test_cuda.py python/tests/test_overflow.py > $R/pytest.log 2>&1
echo "exit $?" >> $R/pytest.log; tail -8 $R/pytest.log
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

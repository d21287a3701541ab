#!/usr/bin/env bash
# Final call of the session: the merged main's GPU suites (strict,
# checked rounding, runtime, whole-step, Python on CUDA), then every
# default kernel against the copy roof and torch fused AdamW in one run
# (issue 28's table), and the coalesced finish of the reductions.
set -uo pipefail
export PYTHONUNBUFFERED=1
C=$PWD/.carry/final6; tar -C $C -xJf $C/payload.tar.xz; B=$C/build
R=$OUT/final; mkdir -p $R
start=$(date +%s); stamp() { echo "[final +$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > $R/env.txt 2>&1
cat $R/env.txt
export LD_LIBRARY_PATH=$B/runtime
shards() { # name count timeout binary...
  local name=$1 n=$2 t=$3; shift 3; local pids=()
  for i in $(seq 0 $((n-1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout $t "$@" --gtest_brief=1 > $R/$name.$i.log 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n-1))); do wait ${pids[$i]}; echo "exit $?" >> $R/$name.$i.log; done
  cat $R/$name.*.log | grep -oE '(PASSED|SKIPPED|FAILED) +\] [0-9]+|^exit [0-9]+' | awk '{k=$1" "$2; if ($1=="exit") {e[$2]++} else s[$1]+=$3} END {for (k in s) print "'$name'", k, s[k]; for (k in e) print "'$name' exit", k, e[k]}'
}
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx shards strict 10 150 $B/test/gpu/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$B/test/gpu/kernels-ieee-rounding shards checked 12 150 $B/test/gpu/qopt-gpu-checked-rounding-tests
stamp runtime
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx timeout 90 $B/runtime/tests/qopt_runtime_tests --gtest_brief=1 > $R/runtime.log 2>&1; echo "exit $?" >> $R/runtime.log; grep -E "PASSED|FAILED|exit" $R/runtime.log | head -5
stamp whole-step
QOPT_TEST_KERNEL_ROOT=$B/kernels QOPT_TEST_EXTRA_KERNEL_DIR=$B/test/host/kernels timeout 120 $B/test/host/qopt-whole-step-tests --gtest_brief=1 > $R/whole-step.log 2>&1; echo "exit $?" >> $R/whole-step.log; grep -E "PASSED|FAILED|exit" $R/whole-step.log | head -5
stamp pytest-cuda
QOPT_BUILD_DIR=$B PYTHONPATH=$PWD/python timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests/test_cuda.py python/tests/test_step_reduction.py python/tests/test_clip.py python/tests/test_trust_ratio.py > $R/pytest.log 2>&1; echo "exit $?" >> $R/pytest.log; tail -3 $R/pytest.log
stamp bench
ALL=$(ls $B/kernels/ptx/*.manifest.json | xargs -n1 basename | sed 's/.manifest.json//' | grep -v '\.' | tr '\n' ',' | sed 's/,$//')
timeout 150 $B/bench/qopt-bench --kernels $B/kernels --specs $ALL --sizes 1,16,64,256 --no-sweep --no-runtime --json $R/bench.json --csv $R/bench.csv > $R/bench.log 2>&1; echo "rc=$?"
grep -A80 '^GB/s' $R/bench.log | head -70
stamp torch
timeout 150 python3 bench/torch_baselines.py --out $R/torch.json > $R/torch.log 2>&1; echo "rc=$?"; tail -12 $R/torch.log
cd $OUT && tar czf final.tar.gz final && rm -rf final
stamp done

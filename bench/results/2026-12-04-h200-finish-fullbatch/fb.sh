#!/usr/bin/env bash
# The finish's full batches at constant offsets (the build) against
# main (1c1c998), alternating; the GPU suites on the build.
set -uo pipefail
export PYTHONUNBUFFERED=1
C=$PWD/.carry/fb; tar -C $C -xJf $C/payload.tar.xz; mkdir -p $C/base && tar -C $C/base -xJf $C/base.tar.xz; B=$C/build
R=$OUT/fb; mkdir -p $R
start=$(date +%s); stamp() { echo "[fb +$(( $(date +%s) - start ))s] $*"; }
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
RED=flash_adamw_clip,lamb8bit,lars8bit,lamb_state32,lars_state32,stable_adamw
stamp bench-ab
for rep in 1 2; do
  for v in base fb; do
    K=$B/kernels; [ $v = base ] && K=$C/base/kernels
    timeout 120 $B/bench/qopt-bench --kernels $K --specs $RED --sizes 16,64,256 --no-sweep --no-runtime > $R/bench-$v-$rep.log 2>&1; echo "$v $rep rc=$?"
  done
done
for v in base fb; do grep -A8 '^GB/s' $R/bench-$v-2.log; done
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx shards strict 10 200 $B/test/gpu/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$B/test/gpu/kernels-ieee-rounding shards checked 12 200 $B/test/gpu/qopt-gpu-checked-rounding-tests
stamp whole-step
QOPT_TEST_KERNEL_ROOT=$B/kernels QOPT_TEST_EXTRA_KERNEL_DIR=$B/test/host/kernels timeout 120 $B/test/host/qopt-whole-step-tests --gtest_brief=1 > $R/whole-step.log 2>&1; echo "exit $?" >> $R/whole-step.log; grep -E "PASSED|FAILED|exit" $R/whole-step.log | head -5
stamp pytest-cuda
QOPT_BUILD_DIR=$B PYTHONPATH=$PWD/python timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests/test_step_reduction.py python/tests/test_clip.py python/tests/test_trust_ratio.py > $R/pytest.log 2>&1; echo "exit $?" >> $R/pytest.log; tail -3 $R/pytest.log
cd $OUT && tar czf fb.tar.gz fb && rm -rf fb
stamp done

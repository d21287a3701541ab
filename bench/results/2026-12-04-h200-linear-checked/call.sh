#!/usr/bin/env bash
# Checked rounding for linear codes (FlashAdamWLinear): the GPU suites on
# the candidate, then the session's final kernels against it, alternating.
set -uo pipefail
C=$PWD/.carry/c7; tar -C $C -xJf $C/s.tar.xz; S=$C/s; B=$C/bin
R=$OUT/lin; mkdir -p $R
start=$(date +%s); stamp() { echo "[lin +$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; } > $R/env.txt 2>&1; cat $R/env.txt
shards() { # name count timeout binary...
  local name=$1 n=$2 t=$3; shift 3; local pids=()
  for i in $(seq 0 $((n-1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout $t "$@" --gtest_brief=1 > $R/$name.$i.log 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n-1))); do wait ${pids[$i]}; echo "exit $?" >> $R/$name.$i.log; done
  cat $R/$name.*.log | grep -oE '(PASSED|SKIPPED|FAILED) +\] [0-9]+|^exit [0-9]+' | awk '{k=$1" "$2; if ($1=="exit") {e[$2]++} else s[$1]+=$3} END {for (k in s) print "'$name'", k, s[k]; for (k in e) print "'$name' exit", k, e[k]}'
  grep -h "FAILED  \]" $R/$name.*.log | head -5
}
stamp strict
QOPT_TEST_KERNEL_DIR=$S/lin/ptx shards strict 10 200 $B/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$S/lin/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$S/ieee shards checked 12 200 $B/qopt-gpu-checked-rounding-tests
stamp bench
for rep in 1 2; do
  for v in fin lin; do
    timeout 150 $B/qopt-bench --kernels $S/$v --specs flash_adamw_linear,flash_adamw_linear.f32,flash_adamw --sizes 1,16,64,256 --no-sweep --no-runtime --csv $R/bench-$v-$rep.csv > $R/bench-$v-$rep.log 2>&1; echo "$v $rep rc=$?"
  done
done
for v in fin lin; do echo "== $v"; grep -A4 '^GB/s' $R/bench-$v-2.log | grep -v wrote; done
stamp realistic
for v in fin lin; do
  timeout 120 $B/qopt-bench --kernels $S/$v --specs flash_adamw_linear --sizes 64 --no-sweep --no-runtime --experiments > $R/exp-$v.log 2>&1; echo "exp $v rc=$?"
  grep -E "shipped, realistic" $R/exp-$v.log | head -6
done
stamp ncu
timeout 100 ncu --clock-control none -k "regex:^FlashAdamW_linear\$" --launch-skip 12 --launch-count 1 \
  --section SourceCounters --page source --print-source sass --csv \
  $B/qopt-bench --kernels $S/lin --specs flash_adamw_linear --sizes 64 --no-gpt2 --no-sweep --no-runtime > $R/src_flash_adamw_linear_lin.csv 2>&1; echo "ncu rc=$?"
gzip $R/src_flash_adamw_linear_lin.csv
cd $OUT && tar czf lin.tar.gz lin && rm -rf lin
stamp done

#!/usr/bin/env bash
# The 4-bit table entries' addresses from the packed word and no clamp to 1
# in full tiles: the GPU suites on the new kernels, then the previous
# commit's 4-bit kernels and the new ones, alternating, and ncu's counts.
set -uo pipefail
C=$PWD/.carry/c4; tar -C $C -xJf $C/s.tar.xz; S=$C/s; B=$C/bin
R=$OUT/q4c; mkdir -p $R
start=$(date +%s); stamp() { echo "[q4c +$(( $(date +%s) - start ))s] $*"; }
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
QOPT_TEST_KERNEL_DIR=$S/new3/ptx shards strict 10 200 $B/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$S/new3/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$S/ieee shards checked 12 200 $B/qopt-gpu-checked-rounding-tests
stamp bench
for rep in 1 2; do
  for v in base new3; do
    timeout 150 $B/qopt-bench --kernels $S/$v --specs adamw4bit,adamw4bit_sr,flash_adamw4bit --sizes 1,16,64,256 --no-sweep --no-runtime --csv $R/bench-$v-$rep.csv > $R/bench-$v-$rep.log 2>&1; echo "$v $rep rc=$?"
  done
done
for v in base new3; do echo "== $v"; grep -A4 '^GB/s' $R/bench-$v-2.log | grep -v wrote; done
stamp realistic
for v in base new3; do
  timeout 120 $B/qopt-bench --kernels $S/$v --specs adamw4bit,adamw4bit_sr,flash_adamw4bit --sizes 64 --no-sweep --no-runtime --experiments > $R/exp-$v.log 2>&1; echo "exp $v rc=$?"
  grep -E "shipped, realistic" $R/exp-$v.log | head -6
done
stamp ncu
timeout 100 ncu --clock-control none -k "regex:^AdamW4bit\$" --launch-skip 12 --launch-count 1 \
  --section SourceCounters --page source --print-source sass --csv \
  $B/qopt-bench --kernels $S/new3 --specs adamw4bit --sizes 64 --no-gpt2 --no-sweep --no-runtime > $R/src_adamw4bit_new3.csv 2>&1; echo "ncu rc=$?"
gzip $R/src_adamw4bit_new3.csv
cd $OUT && tar czf q4c.tar.gz q4c && rm -rf q4c
stamp done

#!/usr/bin/env bash
# 4-bit dynamic codes by buckets and the group divisor made uniform: the GPU
# suites on the new kernels (every shipped spec and variant), then main's
# kernels against them, alternating, and one ncu source count of AdamW4bit.
set -uo pipefail
export PYTHONUNBUFFERED=1
C=$PWD/.carry/c2; tar -C $C -xJf $C/s.tar.xz; S=$C/s; B=$C/bin
R=$OUT/q4; mkdir -p $R
start=$(date +%s); stamp() { echo "[q4 +$(( $(date +%s) - start ))s] $*"; }
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
QOPT_TEST_KERNEL_DIR=$S/new/ptx shards strict 10 200 $B/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$S/new/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$S/ieee shards checked 12 200 $B/qopt-gpu-checked-rounding-tests
stamp bench
SP=adamw4bit,adamw4bit_sr,flash_adamw_linear,flash_sgd,flash_sgd_bf16,flash_sgd_ecc16,flash_sgdw_bf16,flash_sgdw_ecc16,flash_lion_bf16,flash_lion_ecc16,flash_adamw,adamw8bit_block2048
for rep in 1 2; do
  for v in base new; do
    timeout 150 $B/qopt-bench --kernels $S/$v --specs $SP --sizes 16,64,256 --no-sweep --no-runtime --csv $R/bench-$v-$rep.csv > $R/bench-$v-$rep.log 2>&1; echo "$v $rep rc=$?"
  done
done
grep -A14 '^GB/s' $R/bench-base-2.log; grep -A14 '^GB/s' $R/bench-new-2.log
stamp realistic
for v in base new; do
  timeout 120 $B/qopt-bench --kernels $S/$v --specs adamw4bit,adamw4bit_sr,flash_adamw_linear --sizes 64 --no-sweep --no-runtime --experiments > $R/exp-$v.log 2>&1; echo "exp $v rc=$?"
  grep -iE "realistic" $R/exp-$v.log | head -6
done
stamp ncu
timeout 100 ncu --clock-control none -k "regex:^AdamW4bit\$" --launch-skip 12 --launch-count 1 \
  --section SourceCounters --page source --print-source sass --csv \
  $B/qopt-bench --kernels $S/new --specs adamw4bit --sizes 64 --no-gpt2 --no-sweep --no-runtime > $R/src_adamw4bit_new.csv 2>&1; echo "ncu rc=$?"
cd $OUT && tar czf q4.tar.gz q4 && rm -rf q4
stamp done

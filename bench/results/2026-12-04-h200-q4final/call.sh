#!/usr/bin/env bash
# The session's final kernels (70ca071): the GPU suites on every spec and
# variant; main's kernels at the session's start (b1703b5) against them for
# every spec whose PTX changed, alternating; every default kernel against
# the copy roof; torch's fused AdamW in the same call.
set -uo pipefail
C=$PWD/.carry/c5; tar -C $C -xJf $C/s.tar.xz; S=$C/s; B=$C/bin
R=$OUT/fin; mkdir -p $R
start=$(date +%s); stamp() { echo "[fin +$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > $R/env.txt 2>&1; cat $R/env.txt
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
QOPT_TEST_KERNEL_DIR=$S/fin/ptx shards strict 10 200 $B/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$S/fin/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$S/ieee shards checked 12 200 $B/qopt-gpu-checked-rounding-tests
stamp ab
SP=adamw4bit,adamw4bit_sr,flash_adamw4bit,flash_adamw_linear,flash_sgd,flash_sgd_bf16,flash_sgd_ecc16,flash_sgdw_bf16,flash_sgdw_ecc16,flash_lion_bf16,flash_lion_ecc16,flash_adamw,adamw8bit_block2048
for rep in 1 2; do
  for v in main fin; do
    timeout 150 $B/qopt-bench --kernels $S/$v --specs $SP --sizes 16,64,256 --no-sweep --no-runtime --csv $R/ab-$v-$rep.csv > $R/ab-$v-$rep.log 2>&1; echo "$v $rep rc=$?"
  done
done
grep -A15 '^GB/s' $R/ab-main-2.log | grep -v wrote; grep -A15 '^GB/s' $R/ab-fin-2.log | grep -v wrote
stamp realistic
for v in main fin; do
  timeout 150 $B/qopt-bench --kernels $S/$v --specs adamw4bit,adamw4bit_sr,flash_adamw_linear --sizes 64 --no-sweep --no-runtime --experiments > $R/exp-$v.log 2>&1; echo "exp $v rc=$?"
  grep -E "shipped, realistic" $R/exp-$v.log | head -6
done
stamp all
timeout 240 $B/qopt-bench --kernels $S/fin --sizes 64 --no-gpt2 --no-sweep --no-runtime --csv $R/all-fin.csv > $R/all-fin.log 2>&1; echo "all rc=$?"
grep -A70 '^GB/s' $R/all-fin.log | grep -v wrote | head -70
stamp torch
timeout 200 python3 bench/torch_baselines.py --out $R/torch.json --sizes 64 > $R/torch.log 2>&1; echo "torch rc=$?"; tail -8 $R/torch.log
cd $OUT && tar czf fin.tar.gz fin && rm -rf fin
stamp done

#!/usr/bin/env bash
# 4-bit codes' speed (branch q4speed at 001a2bb (staged packed codes)) on the H200: the full strict and checked-rounding
# suites on the new build (the new FourBitTables test included), and qopt-bench of the 4-bit kernels,
# main's build (.carry/q4v) against the new one, interleaved, two rounds, with 8-bit references.
set -uo pipefail
O=$PWD/.carry/q4v; N=$PWD/.carry/q4s; R=$(mktemp -d)
mkdir -p $O/x $N/x
tar -C $O/x -xJf $O/payload.tar.xz build/kernels/ptx build/kernels/fatbin build/bench/qopt-bench
tar -C $N/x -xJf $N/payload.tar.xz
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; } > $R/env.txt 2>&1
cat $R/env.txt
shards() { # name count timeout binary...
  local name=$1 n=$2 t=$3; shift 3; local pids=()
  for i in $(seq 0 $((n-1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout $t "$@" --gtest_brief=1 > $R/$name.$i.log 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n-1))); do wait ${pids[$i]}; echo "exit $?" >> $R/$name.$i.log; done
  cat $R/$name.*.log | grep -E "FAILED|PASSED|SKIPPED|exit|differ" | sort | uniq -c | tail -20
}
B=$N/x/build
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx shards strict 4 200 $B/test/gpu/qopt-gpu-tests --gtest_filter="*4bit*:FourBitTables*"
stamp checked
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$B/test/gpu/kernels-ieee-rounding shards checked 4 200 $B/test/gpu/qopt-gpu-checked-rounding-tests --gtest_filter="*4bit*"
SPECS=adamw4bit,adamw4bit_sr,flash_adamw4bit,flash_adamw,adamw8bit_block256
for r in 1 2; do for s in old new; do
  if [ $s = old ]; then X=$O/x/build; else X=$N/x/build; fi
  stamp "bench $s $r"
  timeout 90 $X/bench/qopt-bench --kernels $X/kernels --specs $SPECS --sizes 64 --no-sweep --no-runtime \
    --json $R/bench_${s}_$r.json --csv $R/bench_${s}_$r.csv > $R/bench_${s}_$r.log 2>&1
  echo "exit $?" >> $R/bench_${s}_$r.log; grep -A8 "^GB/s" $R/bench_${s}_$r.log
done; done
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

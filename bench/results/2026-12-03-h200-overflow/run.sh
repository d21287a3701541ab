#!/usr/bin/env bash
set -uo pipefail
C=$PWD/.carry/v; R=$(mktemp -d)
tar -C $C -xJf $C/payload.tar.xz
N=$C/new
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; } > $R/env.txt 2>&1
cat $R/env.txt
stamp strict
# gtest shards in parallel (the reference side is CPU work; 16 cores)
shards() { # name count timeout binary...
  local name=$1 n=$2 t=$3; shift 3; local pids=()
  for i in $(seq 0 $((n-1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout $t "$@" --gtest_brief=1 > $R/$name.$i.log 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n-1))); do wait ${pids[$i]}; echo "exit $?" >> $R/$name.$i.log; done
  cat $R/$name.*.log | grep -E "FAILED|PASSED|exit|tests from" | sort | uniq -c | tail -20
}
QOPT_TEST_KERNEL_DIR=$N/k/ptx shards strict 6 150 $N/bin/qopt-gpu-tests
SPECS=flash_adamw,adamw8bit_block2048,adamw8bit_block256,flash_adamw_bf16,flash_lion,lion8bit,adagrad8bit,rmsprop8bit,ademamix8bit,adamw_state32,flash_adamw_state32,flash_sgd,adam_atan2
for r in ${ROUNDS:-1}; do
  for s in old new; do
    if [ $s = old ]; then B=$C/old/bin/qopt-bench; K=$C/old/k; else B=$N/bin/qopt-bench; K=$N/k; fi
    stamp "bench $s $r"
    timeout 60 $B --kernels $K --specs $SPECS --sizes 64 --no-sweep --no-runtime --json $R/bench_${s}_$r.json --csv $R/bench_${s}_$r.csv > $R/bench_${s}_$r.log 2>&1
    echo "exit $?" >> $R/bench_${s}_$r.log; tail -1 $R/bench_${s}_$r.log
  done
done
stamp checked
QOPT_TEST_KERNEL_DIR=$N/k/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$N/kernels-ieee-rounding shards checked 8 ${CR_S:-300} $N/bin/qopt-gpu-checked-rounding-tests
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

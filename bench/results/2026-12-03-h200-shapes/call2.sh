#!/usr/bin/env bash
# Call 2: the candidate policy (8 lanes for every unstaged step; async
# copies for 16-bit plain states) against main's kernels: the strict and
# checked-rounding suites on the candidate's PTX, then the changed kernels
# (every variant) side by side, interleaved, two rounds, and the one-state
# kernels at three blocks per SM (m3: .minnctapersm 3 in the candidate's PTX).
set -uo pipefail
OUT=${OUT:?}
C=$PWD/.carry/shapes; tar xJf $C/s2.tar.xz -C /tmp && D=/tmp/d2
start=$(date +%s); stamp() { echo "[call2 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call2; mkdir -p "$R"
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
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
QOPT_TEST_KERNEL_DIR=$D/kernels-new/ptx shards strict 10 150 $D/bin/qopt-gpu-tests
stamp checked
QOPT_TEST_KERNEL_DIR=$D/kernels-new/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee-rounding shards checked 12 150 $D/bin/qopt-gpu-checked-rounding-tests
MAIN=$(cat $D/changed-main.txt); VAR=$(cat $D/changed-variants.txt); ONE=$(cat $D/one-state.txt)
for r in 1 2; do
  for s in base new m3; do
    [ $(( $(date +%s) - start )) -gt 500 ] && { stamp "out of time"; break 2; }
    stamp "round $r: $s"
    if [ $s = m3 ]; then
      timeout 120 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $ONE --sizes 64 --no-gpt2 --no-sweep --no-runtime \
        --json $R/ab_${s}_$r.json --csv $R/ab_${s}_$r.csv > $R/ab_${s}_$r.log 2>&1
      continue
    fi
    timeout 150 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $MAIN --sizes 1,16,64,256 --no-sweep --no-runtime \
      --json $R/ab_${s}_$r.json --csv $R/ab_${s}_$r.csv > $R/ab_${s}_$r.log 2>&1
    timeout 120 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $VAR --sizes 64 --no-gpt2 --no-sweep --no-runtime \
      --json $R/abv_${s}_$r.json --csv $R/abv_${s}_$r.csv > $R/abv_${s}_$r.log 2>&1
  done
done
for s in base new; do
  [ $(( $(date +%s) - start )) -gt 540 ] && break
  stamp "realistic: $s"
  timeout 60 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $MAIN --sizes 64 --no-gpt2 --no-sweep --no-runtime --experiments \
    --json $R/exp_$s.json --csv $R/exp_$s.csv > $R/exp_$s.log 2>&1
done
cd "$OUT" && tar czf call2.tar.gz call2 && rm -rf call2
stamp done

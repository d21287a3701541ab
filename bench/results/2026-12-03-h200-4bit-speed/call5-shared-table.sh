#!/usr/bin/env bash
# The dynamic 4-bit table from shared memory (q4speed at HEAD): strict on adamw4bit* and FourBitTables,
# and the bench against call 3's kernels (main), interleaved, two rounds.
set -uo pipefail
O=$PWD/.carry/q4v; N=$PWD/.carry/q4s; R=$(mktemp -d)
mkdir -p $O/x $N/x
tar -C $O/x -xJf $O/payload.tar.xz build/bench/qopt-bench
tar -C $N/x -xJf $N/payload.tar.xz
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
B=$N/x/build
stamp strict
QOPT_TEST_KERNEL_DIR=$B/kernels/ptx timeout 120 $B/test/gpu/qopt-gpu-tests --gtest_brief=1 --gtest_filter='*/adamw4bit*:FourBitTables*' > $R/strict.log 2>&1
echo "exit $?" >> $R/strict.log; tail -4 $R/strict.log
# main's kernels (call 3) for the comparison: from .carry/m3
M=$PWD/.carry/m3; mkdir -p $M/x; tar -C $M/x -xJf $M/payload.tar.xz
for r in 1 2; do for s in main new; do
  if [ $s = main ]; then X=$M/x/build; else X=$B; fi
  stamp "bench $s $r"
  timeout 60 $B/bench/qopt-bench --kernels $X/kernels --specs adamw4bit,adamw4bit_sr,flash_adamw4bit,adamw8bit_block256 --sizes 64 --no-sweep --no-runtime \
    --json $R/bench_${s}_$r.json > $R/bench_${s}_$r.log 2>&1
  echo "exit $?" >> $R/bench_${s}_$r.log; grep -A6 "^GB/s" $R/bench_${s}_$r.log
done; done
tar -C $R -czf $OUT/logs.tar.gz .
stamp done

#!/usr/bin/env bash
# Brief G, call 2: after call 1's fixes (the f16 skip of the order test, the
# host runtime's ranges at tensor boundaries, the finish split into two
# functions, the bench's phase grids): the reduction kernels' strict and
# order tests, their checked rounding, pytest's reduction classes on CUDA,
# and qopt-bench of them beside adamw8bit_block256 at 64 Mi.
set -uo pipefail
OUT=${OUT:?}
tar xJf .carry/redgpu/payload.tar.xz -C /tmp && D=/tmp/d
start=$(date +%s); stamp() { echo "[call2 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call2; mkdir -p "$R"
export QOPT_TEST_KERNEL_DIR=$D/build/kernels/ptx
F='*lamb*:*lars*:*stable*'
stamp "suites"
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 100 "$D/bin/qopt-gpu-tests" --gtest_filter="$F" > "$R/strict$i.log" 2>&1 &
done
QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee timeout 100 "$D/bin/qopt-gpu-checked-rounding-tests" --gtest_filter="$F" > "$R/checked.log" 2>&1 &
( cd "$D" && QOPT_BUILD_DIR=$D/build PYTHONPATH=$D/python timeout 100 python3 -m pytest -q -p no:cacheprovider python/tests/test_trust_ratio.py -rs > "$R/pytest.log" 2>&1 ) &
wait
stamp "suites done"
for f in "$R"/strict*.log "$R"/checked.log; do
  echo "== $(basename $f)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED  \]" "$f" | tail -8
done
tail -3 "$R/pytest.log"
stamp "bench"
timeout 60 "$D/bin/qopt-bench" --kernels "$D/build/kernels" --specs adamw8bit_block256,lamb8bit,lars8bit,stable_adamw,lamb_state32,lars_state32 \
  --sizes 64 --no-sweep --no-runtime --csv "$R/bench.csv" --json "$R/bench.json" > "$R/bench.log" 2>&1
echo "bench rc=$?"; grep -E "self-check|^GB/s|^[a-z_0-9]+ +[0-9]+ \(" "$R/bench.log"
stamp "end"
tar czf "$OUT/call2.tar.gz" -C "$OUT" call2

#!/usr/bin/env bash
# Brief G (issue 23): per-tensor reductions on the GPU. The strict suite in six
# shards (every shipped kernel, the 15 reduction kernels and their order
# test), checked rounding (shipped + reductions), the runtime's GPU tests,
# pytest's reduction classes on CUDA, then qopt-bench of the reduction
# kernels beside adamw8bit_block256 at 64 Mi.
set -uo pipefail
OUT=${OUT:?}
tar xJf .carry/redgpu/payload.tar.xz -C /tmp && D=/tmp/d
start=$(date +%s); stamp() { echo "[call1 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call1; mkdir -p "$R"
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv; python3 -c "import torch, sys; print(torch.__version__, sys.version)"; python3 -c "import pytest; print('pytest', pytest.__version__)"; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
export QOPT_TEST_KERNEL_DIR=$D/build/kernels/ptx
stamp "suites"
for i in 0 1 2 3 4 5; do
  GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i timeout 200 "$D/bin/qopt-gpu-tests" --gtest_brief=1 > "$R/strict$i.log" 2>&1 &
done
QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee timeout 200 "$D/bin/qopt-gpu-checked-rounding-tests" --gtest_brief=1 > "$R/checked.log" 2>&1 &
timeout 200 "$D/build/runtime/tests/qopt_runtime_tests" --gtest_brief=1 > "$R/runtime.log" 2>&1 &
timeout 200 "$D/build/runtime/tests/qopt_runtime_shared_tests" --gtest_brief=1 > "$R/runtime_shared.log" 2>&1 &
( cd "$D" && QOPT_BUILD_DIR=$D/build PYTHONPATH=$D/python timeout 200 python3 -m pytest -q -p no:cacheprovider python/tests/test_trust_ratio.py -rs > "$R/pytest.log" 2>&1 ) &
wait
stamp "suites done"
for f in "$R"/strict*.log "$R"/checked.log "$R"/runtime*.log; do
  echo "== $(basename $f): $(grep -cE '^\[  FAILED  \]' $f) failed lines"; grep -E "^\[  (PASSED|FAILED) |tests ran|^\[  FAILED  \]" "$f" | tail -6
done
tail -3 "$R/pytest.log"
stamp "bench"
timeout 100 "$D/bin/qopt-bench" --kernels "$D/build/kernels" --specs adamw8bit_block256,lamb8bit,lars8bit,stable_adamw,lamb_state32,lars_state32 \
  --sizes 64 --no-sweep --no-runtime --csv "$R/bench.csv" --json "$R/bench.json" > "$R/bench.log" 2>&1
echo "bench rc=$?"; tail -25 "$R/bench.log"
stamp "end"
tar czf "$OUT/call1.tar.gz" -C "$OUT" call1

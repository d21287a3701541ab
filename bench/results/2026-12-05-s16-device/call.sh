#!/usr/bin/env bash
# Sixteenth session, one call on whatever GPU is lent, kernels and runtime
# built at 4fb9c60 (bash bench/make_verify_carry.sh .carry/c9, plus
# .carry/c9/radam/{host,ptx}: python/tests/test_custom_spec.py's RAdam spec):
# 1. the 55 default kernels at 64 Mi against the copy roof, two rounds, and
#    torch fused AdamW in the same call;
# 2. RAdam written as torch writes it (a NaN uniform in the branch not taken,
#    steps 3 to 5) stepped 8 times on the host and the GPU from one input;
# 3. the GPU suites on every kernel (the FlashSGD and LARS families' manifests
#    changed with the branch guards), beside them the multi-process DCP / DDP
#    / FSDP2 tests, each in its own process; then the rest of pytest.
set -uo pipefail
source bench/device_call.sh
device_call_begin s16 .carry/c9
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
X=$C/x/build
D=$(cat bench/results/2026-12-05-s16-device/defaults.txt)
for rep in 1 2; do
  stamp "defaults round $rep"
  timeout 120 "$B/qopt-bench" --kernels "$S/head" --specs "$D" --sizes 64 --no-sweep --no-runtime \
    --csv "$R/defaults-$rep.csv" > "$R/defaults-$rep.log" 2>&1
  echo "defaults $rep rc=$?"
done
sed -n '/^GB\/s/,/^wrote/p' "$R/defaults-2.log" | grep -v '^wrote'
stamp torch
timeout 120 python3 bench/torch_baselines.py --out "$R/torch.json" --sizes 64 > "$R/torch.log" 2>&1
echo "torch rc=$?"; tail -4 "$R/torch.log"
stamp radam
Q=$X/bin/qopt-step
W=$(mktemp -d)
$Q --kernel MyRAdam --kernels "$C/radam" --make-example "$W/r.st" --tensor w=4096x100 --tensor b=3001 --seed 2 > /dev/null
$Q --kernel MyRAdam --kernels "$C/radam" --in "$W/r.st" --out "$W/rh.st" --steps 8 --hyper lr=1e-2 2>&1 | tail -1
$Q --kernel MyRAdam --kernels "$C/radam" --backend cuda --in "$W/r.st" --out "$W/rc.st" --steps 8 --hyper lr=1e-2 2>&1 | tail -1
cmp "$W/rh.st" "$W/rc.st" && echo "MyRAdam 8 steps: host == cuda"
export QOPT_BUILD_DIR=$X PYTHONPATH=$PWD/python
P="python3 -m pytest -p no:cacheprovider -rfs"
pids=()
i=0
for t in "test_dcp.py::test_dcp_save_at_n_load_at_m" "test_dcp.py::test_fsdp2_unavailable_names_the_torch_it_needs" \
         "test_dist.py::test_ddp_and_fsdp2_match_single_process" \
         "test_dist.py::test_fsdp2_clip_in_the_kernel_matches_single_process" "test_train_fsdp.py"; do
  timeout 300 $P -v "python/tests/$t" > "$R/pytest-d$i.log" 2>&1 & pids+=($!)
  i=$((i + 1))
done
gpu_suites head "$S/ieee"
stamp guarded
timeout 60 "$B/qopt-gpu-guarded-ieee-tests" --gtest_brief=1 > "$R/guarded.log" 2>&1
echo "guarded rc=$?"; tail -2 "$R/guarded.log"
stamp fast
QOPT_TEST_FAST_PTX_DIR=$S/fast shards fast 8 100 "$B/qopt-gpu-fast-tests"
stamp pytest
timeout 200 $P -q --ignore=python/tests/test_train_fsdp.py --ignore=python/tests/test_dcp.py \
  --ignore=python/tests/test_dist.py python/tests > "$R/pytest-main.log" 2>&1
echo "pytest main rc=$?"; tail -1 "$R/pytest-main.log"
grep -E "^(FAILED|ERROR) " "$R/pytest-main.log" | cut -c1-220 | head -20
for p in "${pids[@]}"; do wait "$p"; echo "pytest dist pid rc=$?"; done
for f in "$R"/pytest-d*.log; do grep -E "PASSED|FAILED|ERROR|SKIPPED" "$f" | cut -c1-160 | head -12; tail -1 "$f"; done
device_call_end

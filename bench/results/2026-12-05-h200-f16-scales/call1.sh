#!/usr/bin/env bash
# The float16 scales' underflow rule (273f69f, 557cdd2) on the H200, first
# run on a GPU: the GPU suites on every kernel of main (strict against the
# C++ reference, checked rounding against the IEEE builds, the guarded
# div/sqrt sequences, fast mode), then ab1600a's kernels (before the rule)
# against main's for every kernel whose PTX the rule changed, alternating,
# and pytest with CUDA on main's build.
set -uo pipefail
source bench/device_call.sh
device_call_begin v1 .carry/c1
gpu_suites head "$S/ieee"
stamp guarded
timeout 100 "$B/qopt-gpu-guarded-ieee-tests" --gtest_brief=1 > "$R/guarded.log" 2>&1
echo "guarded rc=$?"; tail -3 "$R/guarded.log"
stamp fast
QOPT_TEST_FAST_PTX_DIR=$S/fast shards fast 8 150 "$B/qopt-gpu-fast-tests"
stamp ab
bench_rounds ab "$(cat "$S/changed.txt")" 16,64,256 old head
stamp realistic
realistic flash_adamw,flash_adamw4bit,flash_adam,flash_lion old head
stamp pytest
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 170 python3 -m pytest -q -rs -p no:cacheprovider \
  -k cuda python/tests > "$R/pytest.log" 2>&1
echo "pytest rc=$?"; tail -3 "$R/pytest.log"
device_call_end

#!/usr/bin/env bash
# main at 8b6a7bc on the H200: the GPU suites after the kernel suites took
# their random tensors from one helper (test/common/RandomTensors.h), and the
# whole pytest suite on torch 2.11 after the FSDP bar's change (5f75bae,
# 499e531), which the last call could not run.
set -uo pipefail
source bench/device_call.sh
device_call_begin verify .carry/c5
gpu_suites head "$S/ieee"
stamp guarded
timeout 100 "$B/qopt-gpu-guarded-ieee-tests" --gtest_brief=1 > "$R/guarded.log" 2>&1
echo "guarded rc=$?"; tail -3 "$R/guarded.log"
stamp fast
QOPT_TEST_FAST_PTX_DIR=$S/fast shards fast 8 150 "$B/qopt-gpu-fast-tests"
stamp pytest
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
X=$C/x/build
QOPT_BUILD_DIR=$X PYTHONPATH=$PWD/python timeout 150 python3 -m pytest -v -rfs -p no:cacheprovider \
  python/tests/test_train_fsdp.py > "$R/fsdp.log" 2>&1
echo "fsdp rc=$?"; grep -E "PASSED|FAILED|SKIPPED|ERROR" "$R/fsdp.log" | cut -c1-160
stamp pytest-rest
QOPT_BUILD_DIR=$X PYTHONPATH=$PWD/python timeout 300 python3 -m pytest -q -rfs -p no:cacheprovider \
  --ignore=python/tests/test_train_fsdp.py python/tests > "$R/pytest.log" 2>&1
echo "pytest rc=$?"; tail -1 "$R/pytest.log"
grep -E "^(FAILED|ERROR) " "$R/pytest.log" | cut -c1-200 | head -30
device_call_end

#!/usr/bin/env bash
# After call2.sh, on the same carry but for bin/qopt-gpu-fast-tests, rebuilt
# with FastKernelNumericsTest taking the reference's tile from the manifest
# (stochastic rounding's element index; flash_adamw_sr failed 3 tests in
# call2 on the old binary): the fast-mode GPU suite again, then pytest's
# CUDA tests (the Python package on kernels with producer warps:
# checkpoints, FSDP shards, the torch references).
set -uo pipefail
source bench/device_call.sh
device_call_begin producer3 .carry/c11
stamp fast
QOPT_TEST_FAST_PTX_DIR=$S/fast shards fast 8 100 "$B/qopt-gpu-fast-tests"
stamp pytest
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 400 python3 -m pytest -p no:cacheprovider -q -k cuda \
  python/tests > "$R/pytest.log" 2>&1; echo "pytest rc=$?"; tail -5 "$R/pytest.log"
grep -E "^FAILED" "$R/pytest.log" | head
device_call_end

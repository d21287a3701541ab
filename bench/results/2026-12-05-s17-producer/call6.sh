#!/usr/bin/env bash
# The final kernels (c12, 27892d1's policy and release): the main job and
# pytest's CUDA tests.
set -uo pipefail
source bench/device_call.sh
device_call_begin producer6 .carry/c12
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
timeout 100 "$C/x/build/bin/qopt-main" --kernels "$C/x/build/kernels" > "$R/main.log" 2>&1; echo "main rc=$?"
grep -E '^(flash_adamw|adamw8bit)' "$R/main.log"
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 200 python3 -m pytest -p no:cacheprovider -q -k cuda \
  python/tests > "$R/pytest.log" 2>&1; echo "pytest rc=$?"; tail -1 "$R/pytest.log"
grep -E "^FAILED" "$R/pytest.log" | head
device_call_end

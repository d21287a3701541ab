#!/usr/bin/env bash
# The Python package on the final build (3b10a2b's kernels, CI's build): the
# 4-bit, Flash and API tests with CUDA.
set -uo pipefail
source bench/device_call.sh
device_call_begin py .carry/c8
mkdir -p "$C/x"
tar -C "$C/x" -xJf "$C/build.tar.xz"
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 400 python3 -m pytest -q -rs -p no:cacheprovider \
  python/tests/test_4bit.py python/tests/test_4bit_state.py python/tests/test_cuda.py > "$R/pytest.log" 2>&1
echo "pytest rc=$?"
grep -E "SKIPPED|passed" "$R/pytest.log" | cut -c1-220 | sort | uniq -c | sort -rn | head -12
device_call_end

#!/usr/bin/env bash
# The Python package on this build (main at d4dd2fa: the runtime, every
# kernel as PTX and host library, carried) under torch 2.11 with CUDA: the
# whole pytest suite (CPU and CUDA parameters; torch >= 2.1's checkpoint
# hooks and the copies of 12-04 run here for the first time), the shipped
# kernels' library through the shared runtime, and the main job's binary.
set -uo pipefail
source bench/device_call.sh
device_call_begin py .carry/c3
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
X=$C/x/build
QOPT_BUILD_DIR=$X PYTHONPATH=$PWD/python timeout 330 python3 -m pytest -q -rfs -p no:cacheprovider \
  python/tests > "$R/pytest.log" 2>&1
echo "pytest rc=$?"; tail -1 "$R/pytest.log"
grep -E "^(FAILED|ERROR) " "$R/pytest.log" | cut -c1-200 | head -30
stamp shipped
LD_LIBRARY_PATH=$X/lib:$X/runtime timeout 100 "$X/test/gpu/qopt-shipped-kernels-tests" --gtest_brief=1 \
  > "$R/shipped.log" 2>&1
echo "shipped rc=$?"; tail -2 "$R/shipped.log"
stamp main
timeout 100 "$X/bin/qopt-main" --kernels "$X/kernels/ptx" > "$R/main.log" 2>&1
echo "main rc=$?"; tail -12 "$R/main.log"
device_call_end

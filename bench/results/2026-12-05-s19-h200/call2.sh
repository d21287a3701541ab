#!/usr/bin/env bash
# The Python package after this session's fixes (gradient checks before the
# norm options, set_fp32_model_state_dict's refusals, decouple_lr's zero
# reference) on the GPU machine's torch 2.11 with CUDA: the whole pytest
# suite, host and CUDA tests (the session's machine has torch 1.13 and no
# GPU). The runtime and kernels are .carry/c13's build (c00e5c0: the runtime
# library and every kernel unchanged since); python/ is the working tree's.
set -uo pipefail
source bench/device_call.sh
device_call_begin pytest .carry/c13
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
stamp pytest
QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python timeout 500 python3 -m pytest -p no:cacheprovider -q \
  python/tests > "$R/pytest.log" 2>&1; echo "pytest rc=$?"; tail -1 "$R/pytest.log"
grep -E "^(FAILED|ERROR)" "$R/pytest.log" | head -20
device_call_end

#!/usr/bin/env bash
# The default of c00e5c0 (.carry/c13) under compute-sanitizer: racecheck
# and synccheck on the strict tests of the Adam family's kernels
# (per-thread cp.async stages again) and of block2048 and block256.
set -uo pipefail
source bench/device_call.sh
device_call_begin sanitize .carry/c13
export QOPT_TEST_KERNEL_DIR=$S/head/ptx
"$B/qopt-gpu-tests" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}' |
  grep -E '(flash_adam(w)?(_bf16|_ecc16|_linear|_kahan|_sr)?|adamw8bit_block(2048|256))$' > "$R/tests.txt"
wc -l < "$R/tests.txt"
sanitize_tests 200 9 racecheck synccheck
device_call_end

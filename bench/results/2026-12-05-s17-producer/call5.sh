#!/usr/bin/env bash
# After call4.sh's racecheck reports (the producer kernels' stage loads
# against the refills, with one arrival per warp after bar.warp.sync): every
# computing thread now arrives at the stage's release barrier (its count the
# threads). Build c12 (`bash make_sets.sh c12`). racecheck and synccheck on
# the Adam family's strict tests, the strict, checked-rounding and fast
# suites on every kernel, and the A/B against the same build without
# producer warps.
set -uo pipefail
source bench/device_call.sh
device_call_begin producer5 .carry/c12
stamp sanitizers
export QOPT_TEST_KERNEL_DIR=$S/head/ptx
"$B/qopt-gpu-tests" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}' |
  grep -E 'flash_adam(w)?(_bf16|_ecc16|_linear|_kahan|_sr)?$' > "$R/tests.txt"
sanitize_tests 200 7 racecheck synccheck
unset QOPT_TEST_KERNEL_DIR
gpu_suites head "$S/ieee"
stamp fast
QOPT_TEST_FAST_PTX_DIR=$S/fast shards fast 8 100 "$B/qopt-gpu-fast-tests"
stamp ab
bench_rounds ab flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_sr,flash_adamw_linear 16,64,256 old head
realistic flash_adamw old head
device_call_end

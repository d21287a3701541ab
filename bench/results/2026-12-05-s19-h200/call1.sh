#!/usr/bin/env bash
# Two parts. (1) The default of c00e5c0 (.carry/c13) under compute-sanitizer:
# racecheck and synccheck on the strict tests of the Adam family's kernels and
# of block2048 and block256 (prepared in the eighteenth session, not run then).
# (2) The one-group-state Flash kernels (SGD, SGDW, Lion and their bf16 and
# ecc16 forms), at 0.877 to 0.889 of the roof on the H200, in two shapes
# beside the default 512 x 8 staged (.carry/c14, bench/make_kernel_set.sh):
# t256m3 = --threads-per-block=256 --min-blocks-per-sm=3 (three blocks, 80
# registers), t256m2 = 256 threads, two blocks (the default's registers);
# then the strict tests of those specs on each set.
set -uo pipefail
source bench/device_call.sh
device_call_begin sanitize .carry/c13
export QOPT_TEST_KERNEL_DIR=$S/head/ptx
"$B/qopt-gpu-tests" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}' |
  grep -E '(flash_adam(w)?(_bf16|_ecc16|_linear|_kahan|_sr)?|adamw8bit_block(2048|256))$' > "$R/tests.txt"
wc -l < "$R/tests.txt"
sanitize_tests 200 9 racecheck synccheck
unset QOPT_TEST_KERNEL_DIR
device_call_end

device_call_begin shapes .carry/c14
SP=flash_sgd,flash_lion,flash_sgdw,flash_sgd_bf16,flash_lion_bf16,flash_sgdw_bf16,flash_sgd_ecc16,flash_lion_ecc16,flash_sgdw_ecc16
bench_rounds ab "$SP" 16,64,256 base t256m3 t256m2
stamp realistic
realistic flash_sgd,flash_lion,flash_sgdw base t256m3 t256m2
for set in base t256m3 t256m2; do
  stamp "strict $set"
  QOPT_TEST_KERNEL_DIR=$S/$set/ptx timeout 200 "$B/qopt-gpu-tests" --gtest_brief=1 \
    --gtest_filter="$(echo "$SP" | sed "s#\([^,]*\)#*/\1#g; s#,#:#g")" > "$R/strict-$set.log" 2>&1
  echo "strict $set rc=$? $(grep -oE '(PASSED|FAILED|SKIPPED) +\] [0-9]+' "$R/strict-$set.log" | tr '\n' ' ')"
done
device_call_end

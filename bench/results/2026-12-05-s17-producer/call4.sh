#!/usr/bin/env bash
# The producer warp's barriers under compute-sanitizer (docs/gpu-testing.md):
# racecheck, synccheck and memcheck on every strict test of the Adam family
# (the kernels that take a producer warp; c11's build), six processes at a
# time; first a short A/B of three of them (old / head, two rounds) on
# whatever card comes.
set -uo pipefail
source bench/device_call.sh
device_call_begin producer4 .carry/c11
bench_rounds ab4 flash_adamw,flash_adam,flash_adamw_sr 64 old head
stamp sanitizers
export QOPT_TEST_KERNEL_DIR=$S/head/ptx
"$B/qopt-gpu-tests" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}' |
  grep -E 'flash_adam(w)?(_bf16|_ecc16|_linear|_kahan|_sr)?( |$)' | sed 's/ .*//' > "$R/tests.txt"
wc -l < "$R/tests.txt"
sanitize_tests 280 6 racecheck synccheck memcheck
device_call_end

#!/usr/bin/env bash
# The underflow no longer counted (one atomic add per underflowing group made
# FlashAdamWLinear 46% slower in call 1): the GPU suites on every kernel of
# the candidate (`new`), then ab1600a's kernels (`old`, before the rule),
# main's at 391d648 (`head`, the rule counted) and the candidate's for the
# changed ones, alternating; the realistic pool; ncu's instruction counts of
# FlashAdamW (old, new); every kernel of the candidate at 64 Mi against the
# copy roof and torch fused AdamW in the same call.
set -uo pipefail
source bench/device_call.sh
device_call_begin v2 .carry/c2
gpu_suites new "$S/ieee"
stamp ab
bench_rounds ab "$(cat "$S/changed.txt")" 16,64,256 old head new
stamp realistic
realistic flash_adamw,flash_adamw_linear,flash_adamw4bit,flash_adam old head new
for set in old new; do
  stamp "ncu $set"
  timeout 60 ncu --clock-control none -k "regex:^FlashAdamW\$" --launch-skip 12 --launch-count 1 \
    --section SpeedOfLight --section InstructionStats --section SchedulerStats \
    "$B/qopt-bench" --kernels "$S/$set" --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    > "$R/ncu-$set.txt" 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Instructions  |Registers" "$R/ncu-$set.txt" | head -5
done
roof_and_torch new
device_call_end

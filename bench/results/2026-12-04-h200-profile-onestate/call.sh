#!/usr/bin/env bash
# The one-state codebook kernels (Lion8bit, Adagrad8bit, RMSprop8bit: 0.68 to
# 0.73 of the roof at 64 Mi with few instructions): ncu's speed of light,
# warp states, scheduler, occupancy, memory workload, and source counts, one
# launch each in qopt-bench's timed loop at 64 Mi.
set -uo pipefail
source bench/device_call.sh
device_call_begin onestate .carry/c14
for k in Lion8bit:lion8bit Adagrad8bit:adagrad8bit RMSprop8bit:rmsprop8bit; do
  kernel=${k%%:*}; spec=${k#*:}
  timeout 100 ncu --clock-control none -k "regex:^$kernel\$" --launch-skip 12 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section LaunchStats \
    "$B/qopt-bench" --kernels "$S/fin" --specs "$spec" --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    > "$R/ncu-$spec.txt" 2>&1
  echo "ncu $spec rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|No Eligible|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" "$R/ncu-$spec.txt" | head -8
  ncu_source "$kernel" fin "$spec" "src_$spec"
done
device_call_end

#!/usr/bin/env bash
# Per-instruction executed counts (ncu source page, SASS) and the SASS of
# four kernels at 64 Mi, main at b1703b5.
set -uo pipefail
C=$PWD/.carry/p1; R=$OUT/prof; mkdir -p $R
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; ncu --version | tail -1; } > $R/env.txt 2>&1; cat $R/env.txt
B=$C/bin/qopt-bench
true
declare -A N=([flash_adamw]=FlashAdamW [adamw8bit_block2048]=AdamW8bit_block2048 [adamw4bit]=AdamW4bit [adamw8bit_block256]=AdamW8bit_block256)
for k in flash_adamw adamw8bit_block2048 adamw4bit; do

  stamp "ncu $k"
  timeout 100 ncu --clock-control none -k "regex:^${N[$k]}\$" --launch-skip 12 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats --section Occupancy --section SourceCounters \
    $B --kernels $C/kernels --specs $k --sizes 64 --no-gpt2 --no-sweep --no-runtime > $R/ncu_$k.txt 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Ipc Active|No Eligible|Achieved Occupancy|Registers Per|Executed Instructions  " $R/ncu_$k.txt | head -8
  timeout 100 ncu --clock-control none -k "regex:^${N[$k]}\$" --launch-skip 12 --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    $B --kernels $C/kernels --specs $k --sizes 64 --no-gpt2 --no-sweep --no-runtime > $R/src_$k.csv 2>&1
  echo "src rc=$? $(wc -l < $R/src_$k.csv)"
done
cd $OUT && tar czf prof.tar.gz prof && rm -rf prof
stamp done

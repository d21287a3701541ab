#!/usr/bin/env bash
# Where the 4-bit and the codebook kernels spend their issue slots (main at cdc6032): SASS of each
# kernel and one ncu profile of its 64 Mi launch (clocks left alone).
set -uo pipefail
C=$PWD/.carry/prof; R=$(mktemp -d)
tar -C $C -xJf $C/payload.tar.xz
B=$C/build
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; which ncu cuobjdump; ncu --version | tail -1; } > $R/env.txt 2>&1
cat $R/env.txt
for k in adamw4bit flash_adamw4bit adamw8bit_block2048 flash_adamw adamw8bit_block256; do
  cuobjdump --dump-sass $B/kernels/fatbin/$k.fatbin > $R/$k.sass 2>&1
  echo "$k sass lines: $(grep -c '^\s*/\*[0-9a-f]*\*/' $R/$k.sass)"
done
declare -A NAME=([adamw4bit]=AdamW4bit [flash_adamw4bit]=FlashAdamW4bit [adamw8bit_block2048]=AdamW8bit_block2048 [flash_adamw]=FlashAdamW [adamw8bit_block256]=AdamW8bit_block256)
for k in adamw4bit flash_adamw4bit adamw8bit_block2048; do
  stamp "ncu $k"
  timeout 120 ncu --clock-control none -k "regex:^${NAME[$k]}\$" --launch-skip 6 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    --metrics smsp__sass_inst_executed_op_shared_ld.sum,smsp__inst_executed.sum,smsp__sass_thread_inst_executed_op_fp32_pred_on.sum,smsp__sass_thread_inst_executed_op_integer_pred_on.sum,smsp__sass_thread_inst_executed_op_conversion_pred_on.sum,smsp__sass_inst_executed_op_branch.sum \
    $B/bench/qopt-bench --kernels $B/kernels --specs $k --sizes 64 --no-gpt2 --no-sweep --no-runtime --iters 10 > $R/ncu_$k.txt 2>&1
  echo "exit $?" >> $R/ncu_$k.txt
  grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Memory Throughput|No Eligible|Stall|Registers Per|Achieved Occupancy|inst_executed.sum|exit" $R/ncu_$k.txt | head -24
done
tar -C $R -czf $OUT/prof.tar.gz .
stamp done

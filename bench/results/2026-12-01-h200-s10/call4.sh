set -u
S=$OUT/c4; mkdir -p $S
start=$(date +%s)
for s in head bulk; do
  timeout 120 ncu --clock-control none --kernel-name FlashAdamW --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep --no-runtime --json /dev/null --csv /dev/null > $S/ncu_$s.log 2>&1
  echo "[+$(( $(date +%s)-start ))s] ncu $s rc=$?"
  grep -E "Duration|Issue Slots Busy|Executed Instructions  |Registers Per|Warp Cycles Per Issued|Stall|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit" $S/ncu_$s.log | head -40
done
timeout 150 ncu --clock-control none --kernel-name FlashAdamW --launch-skip 20 --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    devrun/bin/qopt-bench --kernels devrun/kernels-bulk --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep --no-runtime --json /dev/null --csv /dev/null > $S/ncusrc_bulk.csv 2>&1
echo "[+$(( $(date +%s)-start ))s] ncusrc rc=$? $(wc -l < $S/ncusrc_bulk.csv)"
gzip $S/ncusrc_bulk.csv
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $S

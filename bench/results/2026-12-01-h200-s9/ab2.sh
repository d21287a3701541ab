set -u
export OUT
D=devB
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/env.txt; date -u >> $R/env.txt
stamp strict; QOPT_TEST_KERNEL_DIR=$D/kernels-w1/ptx timeout 120 $D/bin/qopt-gpu-tests > $R/strict.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/strict.log | tr '\n' ' ')"
stamp pytest; QOPT_RUNTIME_LIBRARY=$PWD/$D/bin/libqopt_runtime.so.0 QOPT_KERNEL_DIR=$PWD/$D/kernels-w1/ptx:$PWD/$D/host PYTHONPATH=$PWD/python timeout 200 python3 -m pytest -q -x -p no:cacheprovider python/tests > $R/pytest.log 2>&1; echo "rc=$? $(tail -1 $R/pytest.log)"
SP=flash_adamw,flash_adam,adamw8bit_block2048
for r in 1 2; do
  for s in w1 m64 m96 m128; do
    stamp "round $r $s"
    timeout 100 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $SP --sizes 64,256 --no-sweep --no-runtime --json $R/b_${s}_$r.json > $R/b_${s}_$r.log 2>&1
    grep -E "^== |^   (64Mi|256Mi|gpt2)|roof used" $R/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-110
  done
done
stamp ncu
timeout 100 ncu --clock-control none --kernel-name FlashAdamW --launch-skip 20 --launch-count 1 \
    --print-details all --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section LaunchStats \
    --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $D/bin/qopt-bench --kernels $D/kernels-w1 --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep \
    --no-runtime --json /dev/null --csv /dev/null > $R/ncu_flash_adamw.log 2>&1
grep -E "Duration|Issue Slots Busy|Executed Instructions  |Registers Per|Achieved Occ|Warp Cycles Per Issued|sm__cycles|dram__|No Eligible" $R/ncu_flash_adamw.log | head -14
timeout 120 ncu --clock-control none --kernel-name FlashAdamW --launch-skip 20 --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    $D/bin/qopt-bench --kernels $D/kernels-w1 --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep \
    --no-runtime --json /dev/null --csv /dev/null > $R/ncusrc_flash_adamw.csv 2>&1
echo "rc=$? $(wc -l < $R/ncusrc_flash_adamw.csv) lines"
gzip -9 $R/ncusrc_flash_adamw.csv
stamp done
tar czf $OUT/call2.tar.gz -C $OUT r && rm -rf $R

#!/usr/bin/env bash
# One device call that produces every number of bench/results/<date>-h200/:
#   qopt-bench on the shipped kernels (and, if present, a second kernel set
#   for comparison), the PyTorch baselines, the main job, the chart, the SASS
#   instruction mix, and a time-boxed Nsight Compute look at two kernels.
# Run from the repository root on the GPU machine, with the bench built here:
#   cmake -G Ninja -S bench -B build-bench && ninja -C build-bench
#   (kernels: build-bench/kernels-head/{fatbin,ptx}; optional build-bench/kernels-pre)
# Everything lands under $OUT: bench.json bench.csv torch.json main.log
# gbps_vs_size.png raw.tar.gz (logs, environment, SASS, ncu).
set -uo pipefail
OUT=${OUT:?set OUT to the results folder}
B=${QOPT_BENCH_BUILD:-build-bench}
K=${QOPT_BENCH_KERNELS:-$B/kernels-head}
KPRE=${QOPT_BENCH_KERNELS_PRE:-$B/kernels-pre}
R=$OUT/raw
mkdir -p "$R/sass"
export PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[run_h200 +$(( $(date +%s) - start ))s] $*"; }

{
  date -u
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current --format=csv
  uname -a
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  cuobjdump --version | tail -1
  ncu --version | tail -1
  nproc
} > "$R/env.txt" 2>&1
stamp "env done"

stamp "qopt-bench (shipped kernels: $K)"
timeout 170 "$B/qopt-bench" --kernels "$K" --json "$OUT/bench.json" --csv "$OUT/bench.csv" \
  2>&1 | tee "$R/bench.log"
if [ -d "$KPRE" ]; then
  stamp "qopt-bench (comparison kernels: $KPRE)"
  timeout 90 "$B/qopt-bench" --kernels "$KPRE" --no-sweep --no-runtime \
    --json "$R/bench-pre.json" --csv "$R/bench-pre.csv" > "$R/bench-pre.log" 2>&1
  tail -14 "$R/bench-pre.log"
fi

stamp "torch baselines"
timeout 120 python3 bench/torch_baselines.py --out "$OUT/torch.json" 2>&1 | tee "$R/torch.log"

stamp "main job"
timeout 90 "$B/bin/qopt-main" --kernels "$K" 2>&1 | tee "$OUT/main.log"

stamp "first step"
# qopt-first-step from the top-level build (it links libqopt_kernels): five
# fresh processes, each timed from the launcher's clock reading.
TOP=${QOPT_TOP_BUILD:-build}
if [ -x "$TOP/bin/qopt-first-step" ]; then
  for i in 1 2 3 4 5; do
    LD_LIBRARY_PATH=$TOP/runtime:$TOP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      "$TOP/bin/qopt-first-step" --start-ns "$(date +%s%N)"
  done 2>&1 | tee "$OUT/first_step.log"
fi

stamp "plot"
timeout 30 python3 bench/plot.py --bench "$OUT/bench.json" --torch "$OUT/torch.json" \
  --out "$OUT/gbps_vs_size.png" --driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)" 2>&1 | tail -3

stamp "SASS"
for f in "$K"/fatbin/*.fatbin; do
  n=$(basename "$f" .fatbin)
  cuobjdump -sass -arch sm_90 "$f" > "$R/sass/head_$n.sass" 2>&1
  cuobjdump -res-usage -arch sm_90 "$f" >> "$R/res_usage_head.txt" 2>&1
done
python3 bench/sass_mix.py "$R"/sass/head_*.sass > "$R/sass_mix_head.txt" 2>&1
if [ -d "$KPRE/ptx" ]; then
  for f in "$KPRE"/ptx/*.cubin; do
    n=$(basename "$f" .cubin)
    cuobjdump -sass "$f" > "$R/sass/pre_$n.sass" 2>&1
  done
  python3 bench/sass_mix.py "$R"/sass/pre_*.sass > "$R/sass_mix_pre.txt" 2>&1
fi
gzip -9 "$R"/sass/*.sass
head -40 "$R/sass_mix_head.txt"

stamp "ncu"
for pair in flash_adamw:FlashAdamW adamw8bit_block2048:AdamW8bit_block2048; do
  spec=${pair%%:*}; kern=${pair##*:}
  # --launch-skip 20: a launch of the timed loop (after the self-check and
  # 3 warm-ups per buffer set), the steady state.
  timeout 50 ncu --clock-control none --kernel-name "$kern" --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section InstructionStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section SchedulerStats \
    "$B/qopt-bench" --kernels "$K" --specs "$spec" --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    --json /dev/null --csv /dev/null > "$R/ncu_$spec.txt" 2>&1
  echo "ncu $spec rc=$?"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Stall" "$R/ncu_$spec.txt" | head -20
done

stamp "pack"
tar czf "$OUT/raw.tar.gz" -C "$OUT" raw && rm -rf "$R"
ls -la "$OUT"
stamp "done"

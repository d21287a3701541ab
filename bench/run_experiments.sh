#!/usr/bin/env bash
# Second device call of bench/results/<date>-h200/: what limits the kernels.
#  * qopt-bench --experiments: at 64 Mi and on the GPT-2 list, the shipped
#    binary on the default and on a realistic-gradient pool, the same PTX
#    JIT-compiled as is, and the PTX with launch bounds (256, 2) and (256, 3)
#    added (bench/make_exp_ptx.sh; each checked bit-exact against qopt_step).
#    The kernels and the compiler are not changed: this predicts what
#    occupancy would buy.
#  * ncu warp-stall breakdown and pipe utilisation of two kernels at 64 Mi.
set -uo pipefail
OUT=${OUT:?}
B=${QOPT_BENCH_BUILD:-build-bench}
K=${QOPT_BENCH_KERNELS:-$B/kernels-head}
start=$(date +%s)
stamp() { echo "[run_experiments +$(( $(date +%s) - start ))s] $*"; }
stamp "experiments"
[ -d "$B/kernels-exp" ] || bash bench/make_exp_ptx.sh "$K/ptx" "$B/kernels-exp"
timeout 240 "$B/qopt-bench" --kernels "$K" --experiments --exp-ptx "$B/kernels-exp" \
  --json "$OUT/experiments.json" --csv /dev/null 2>&1 | tee "$OUT/experiments.log"
stamp "ncu stalls"
for pair in ${QOPT_NCU_SPECS:-}; do
  spec=${pair%%:*}; kern=${pair##*:}
  timeout 50 ncu --clock-control none --kernel-name "$kern" --launch-skip 12 --launch-count 1 \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',smsp__inst_executed.sum,smsp__thread_inst_executed.sum,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
    "$B/qopt-bench" --kernels "$K" --specs "$spec" --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    --json /dev/null --csv /dev/null > "$OUT/ncu_stalls_$spec.txt" 2>&1
  echo "ncu $spec rc=$?"
done
stamp "done"

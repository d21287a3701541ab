#!/usr/bin/env bash
# The reduce pre-pass at the copy roof (brief PRE), one device call on the H200.
# Carried: .carry/pre/payload.tar.xz = bin/ (qopt-bench, qopt-gpu-tests,
# qopt-whole-step-tests, libqopt_runtime), sets/<v>/ptx (the six reductions
# specs in every form and flash_adamw, PTX + manifest), extra/<v>/ (the test
# kernels of qopt-whole-step-tests, global_probe.ptx of that compiler).
# Sets: base = main's compiler; p2/p4 = L2 prefetch 2/4 tiles ahead of the
# operands' streams; b32 = finish batches of 32 partials; l2/l4 = the
# pre-pass at 2x/4x the step's lanes (threads / 2, / 4); p0l2 = 2x lanes alone.
# 1. strict suite (reduction specs) and the whole-step tests (CUDA cases) on
#    the three sets whose code differs (p2b32, p2l2, p2l4), in parallel;
# 2. qopt-bench, every set interleaved, two rounds (phases alone included).
set -uo pipefail
OUT=${OUT:?}
C=$PWD/.carry/pre; D=$(mktemp -d); tar -C $D -xJf $C/payload.tar.xz
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
export LD_LIBRARY_PATH=$D/bin
F='*flash_adamw_clip*:*lamb8bit*:*lars8bit*:*lamb_state32*:*lars_state32*:*stable_adamw*'
L=$OUT/logs; mkdir -p $L
stamp "suites"
pids=()
for v in p2b32 p2l2 p2l4; do
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i QOPT_TEST_KERNEL_DIR=$D/sets/$v/ptx timeout 170 \
      $D/bin/qopt-gpu-tests --gtest_filter="$F" --gtest_brief=1 > $L/strict_$v.$i.log 2>&1 &
    pids+=($!)
  done
  QOPT_TEST_KERNEL_ROOT=$D/sets/$v QOPT_TEST_EXTRA_KERNEL_DIR=$D/extra/$v timeout 170 \
    $D/bin/qopt-whole-step-tests --gtest_filter='-*/Host' > $L/whole_step_$v.log 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait $p; done
for v in p2b32 p2l2 p2l4; do
  echo "strict $v: $(cat $L/strict_$v.*.log | grep -hE '^\[  PASSED|^\[  FAILED|^\[  SKIPPED' | tr '\n' ' ')"
  cat $L/strict_$v.*.log | grep -E "^\[  FAILED  \] [A-Z]" | head -5
  echo "whole-step $v: $(grep -hE '^\[  PASSED|^\[  FAILED|^\[  SKIPPED' $L/whole_step_$v.log | tr '\n' ' ')"
done
SPECS=flash_adamw_clip,lamb8bit,lars8bit,lamb_state32,lars_state32,stable_adamw,flash_adamw
for r in 1 2; do
  for v in base p2 p4 p2b32 p2l2 p2l4 p0l2; do
    stamp "bench round $r: $v"
    timeout 100 $D/bin/qopt-bench --kernels $D/sets/$v --specs $SPECS --sizes 16,64,256 --no-sweep \
      --no-runtime --json $L/bench_${v}_$r.json --csv $L/bench_${v}_$r.csv > $L/bench_${v}_$r.log 2>&1
    echo "exit $?" >> $L/bench_${v}_$r.log
    grep -E "phases alone|^[a-z_0-9]+ +[0-9]+ \(" $L/bench_${v}_$r.log | head -40 | sed "s/^/$v  /" | grep -v "^$v  *phases" | head -8
  done
done
cd $OUT && tar czf logs.tar.gz logs && rm -rf logs
stamp done

#!/usr/bin/env bash
# The session's start (c0cb6a9) against its end (9e1add6) on the reduction specs
# and the FlashSGD family: 16/64/256 Mi, the GPT-2 list, and qopt-bench's
# experiments (the realistic-gradient pool) at 64 Mi; alternating, two rounds.
set -uo pipefail
C=$PWD/.carry/real; mkdir -p $C/start $C/final
tar -C $C/start -xJf $C/start.tar.xz; tar -C $C/final -xJf $C/final.tar.xz
R=$OUT/real; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader; } > $R/env.txt 2>&1; cat $R/env.txt
export LD_LIBRARY_PATH=$C/final/runtime
S=flash_adamw_clip,lamb8bit,lars8bit,lamb_state32,lars_state32,stable_adamw,flash_sgd,flash_sgdw,flash_adamw
for rep in 1 2; do
  for v in start final; do
    timeout 120 $C/final/bench/qopt-bench --kernels $C/$v/kernels --specs $S --sizes 16,64,256 --no-sweep --no-runtime > $R/bench-$v-$rep.log 2>&1; echo "bench $v $rep rc=$?"
    timeout 120 $C/final/bench/qopt-bench --kernels $C/$v/kernels --specs $S --sizes 64 --no-gpt2 --no-sweep --no-runtime --experiments > $R/exp-$v-$rep.log 2>&1; echo "exp $v $rep rc=$?"
  done
done
for v in start final; do grep -A11 '^GB/s' $R/bench-$v-2.log; done
grep -E "^== |realistic" $R/exp-start-2.log | head -30
grep -E "^== |realistic" $R/exp-final-2.log | head -30
cd $OUT && tar czf real.tar.gz real && rm -rf real

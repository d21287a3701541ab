set -u
export OUT
D=devB
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/env.txt; date -u >> $R/env.txt
for s in t256 t128; do
  stamp "strict on $s (flash_adamw)"; QOPT_TEST_KERNEL_DIR=$D/kernels-$s/ptx timeout 100 $D/bin/qopt-gpu-tests --gtest_filter='*flash_adamw*:*FlashAdamW*' > $R/strict_$s.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/strict_$s.log | tr '\n' ' ')"
done
for r in 1 2; do
  for s in cur t256 t128; do
    stamp "round $r $s"
    timeout 100 $D/bin/qopt-bench --kernels $D/kernels-$s --specs flash_adamw --sizes 64 --no-gpt2 --no-sweep --no-runtime --json $R/t_${s}_$r.json > $R/t_${s}_$r.log 2>&1
    grep -E "^   64Mi|regs," $R/t_${s}_$r.log | sed "s/^/$s  /" | cut -c1-130
  done
done
SP=flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_bf16,flash_adamw_linear,flash_adamw.f16,flash_adam.scaled
for r in 1 2; do
  for s in w1 cur; do
    stamp "waves round $r $s"
    timeout 150 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $SP --sizes 16,64,256 --no-sweep --no-runtime --json $R/b_${s}_$r.json > $R/b_${s}_$r.log 2>&1
    grep -E "^== |^   (16Mi|64Mi|256Mi|gpt2)|roof used" $R/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-110
  done
done
stamp sass
for c in $D/x4/*.cubin; do cuobjdump -sass $c | grep -E "LDS|LEA" | head -8 > $R/x4_$(basename $c .cubin).txt; done
head -5 $R/x4_*.txt
for s in t256; do cuobjdump -sass 2>/dev/null; done
stamp done
tar czf $OUT/call3.tar.gz -C $OUT r && rm -rf $R

set -u
export OUT
D=devB
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/env.txt; date -u >> $R/env.txt
stamp guarded; timeout 60 $D/bin/qopt-gpu-guarded-ieee-tests > $R/guarded.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/guarded.log | tr '\n' ' ')"
stamp strict; QOPT_TEST_KERNEL_DIR=$D/kernels-root/ptx timeout 120 $D/bin/qopt-gpu-tests > $R/strict.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/strict.log | tr '\n' ' ')"
for s in root pmv pvm; do
  stamp "checked $s"; QOPT_TEST_KERNEL_DIR=$D/kernels-$s/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee timeout 150 $D/bin/qopt-gpu-checked-rounding-tests --gtest_filter='*flash_adam*' > $R/checked_$s.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/checked_$s.log | tr '\n' ' ')"
done
SP=flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_bf16
for r in 1 2; do
  for s in base root pmv pvm; do
    stamp "round $r $s"
    timeout 100 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $SP --sizes 64 --no-gpt2 --no-sweep --no-runtime --json $R/b_${s}_$r.json > $R/b_${s}_$r.log 2>&1
    grep -E "^== |^   64Mi|roof used|regs," $R/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-120
  done
done
stamp "sweep 256 base/root"
for s in base root; do
  timeout 120 $D/bin/qopt-bench --kernels $D/kernels-$s --specs flash_adamw --sizes 64,256 --sweep-at 256 --no-runtime --json $R/sw_$s.json > $R/sw_$s.log 2>&1
  grep -E "grid sweep|^   (64Mi|256Mi|gpt2)|roof used" $R/sw_$s.log | sed "s/^/$s  /" | cut -c1-200
done
stamp sass
for c in $D/cubin/*.cubin; do cuobjdump -sass $c > $R/$(basename $c .cubin).sass 2>&1; done
stamp done
tar czf $OUT/call1.tar.gz -C $OUT r && rm -rf $R

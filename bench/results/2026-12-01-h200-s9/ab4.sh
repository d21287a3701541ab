set -u
export OUT
D=devB
start=$(date +%s); stamp() { echo "[+$(( $(date +%s) - start ))s] $*"; }
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/env.txt; date -u >> $R/env.txt
stamp strict; QOPT_TEST_KERNEL_DIR=$D/kernels-pk/ptx timeout 120 $D/bin/qopt-gpu-tests > $R/strict.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/strict.log | tr '\n' ' ')"
stamp checked; QOPT_TEST_KERNEL_DIR=$D/kernels-pk/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee timeout 150 $D/bin/qopt-gpu-checked-rounding-tests > $R/checked.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/checked.log | tr '\n' ' ')"
stamp ecc; LD_LIBRARY_PATH=$D/bin QOPT_TEST_EXTRA_KERNEL_DIR=$D/extra timeout 200 $D/bin/qopt-ecc-tests --gtest_filter='*Cuda*' > $R/ecc.log 2>&1; echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/ecc.log | tr '\n' ' ')"
SP=flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_bf16,flash_lion,flash_sgd
for r in 1 2 3; do
  for s in cur pk; do
    stamp "round $r $s"
    timeout 100 $D/bin/qopt-bench --kernels $D/kernels-$s --specs $SP --sizes 64 --no-gpt2 --no-sweep --no-runtime --json $R/b_${s}_$r.json > $R/b_${s}_$r.log 2>&1
    grep -E "^== |^   64Mi|roof used" $R/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-110
  done
done
stamp done
tar czf $OUT/call4.tar.gz -C $OUT r && rm -rf $R

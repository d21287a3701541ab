set -u
export OUT
S=$OUT/verify; mkdir -p $S
K=devrun/kernels-head/ptx
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
date -u | tee $S/env.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $S/env.txt
run guarded_ieee timeout 60 devrun/bin/qopt-gpu-guarded-ieee-tests
QOPT_TEST_KERNEL_DIR=$K run strict timeout 120 devrun/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$K QOPT_TEST_IEEE_ROUNDING_DIR=devrun/kernels-ieee run checked timeout 200 devrun/bin/qopt-gpu-checked-rounding-tests
LD_LIBRARY_PATH=devrun/bin QOPT_TEST_EXTRA_KERNEL_DIR=devrun/extra run ecc timeout 150 devrun/bin/qopt-ecc-tests --gtest_filter='*Cuda*'
QOPT_RUNTIME_LIBRARY=$PWD/devrun/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$K:$PWD/devrun/host PYTHONPATH=$PWD/python \
  run pytest timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests
echo "suites failed:${fail:- none}" | tee $S/summary.txt
timeout 90 devrun/bin/qopt-main --kernels devrun/kernels-head > $S/main.log 2>&1; echo "main rc=$?"; grep -E "device time|agreement|stream|==" $S/main.log | grep -E "==|device time" 
for r in 1 2; do for s in prev head; do
  timeout 60 devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw_bf16 --sizes 64 --no-gpt2 --no-sweep --no-runtime --json $S/b_${s}_$r.json > $S/b_${s}_$r.log 2>&1
  grep -E "^== |^   64Mi" $S/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-100
done; done
tar czf $OUT/verify-suites.tar.gz -C $OUT verify && rm -rf $S

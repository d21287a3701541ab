set -u
S=$OUT/c1; mkdir -p $S
start=$(date +%s)
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "[+$(( $(date +%s)-start ))s] $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -3 | tr '\n' ' ')"; }
date -u | tee $S/env.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a $S/env.txt
QOPT_TEST_KERNEL_DIR=devrun/kernels-bulk/ptx run strict timeout 150 devrun/bin/qopt-gpu-tests
grep -E "FAILED|differ" $S/strict.log | head -20
QOPT_TEST_KERNEL_DIR=devrun/kernels-bulk/ptx QOPT_TEST_IEEE_ROUNDING_DIR=devrun/kernels-ieee run checked timeout 200 devrun/bin/qopt-gpu-checked-rounding-tests
grep -E "FAILED|differ" $S/checked.log | head -20
for s in bulk head; do
  timeout 60 devrun/bin/qopt-main --kernels devrun/kernels-$s > $S/main_$s.log 2>&1; echo "[+$(( $(date +%s)-start ))s] main $s rc=$?"; grep -E "device time|equal|==" $S/main_$s.log | head -8
done
for r in 1 2; do for s in head bulk; do
  timeout 60 devrun/bin/qopt-bench --kernels devrun/kernels-$s --specs flash_adamw,flash_adam,flash_lion,flash_adamw_bf16 --sizes 64 --no-gpt2 --no-sweep --no-runtime --json $S/b_${s}_$r.json > $S/b_${s}_$r.log 2>&1
  echo "[+$(( $(date +%s)-start ))s] bench $s $r rc=$?"; grep -E "^[a-z_0-9.]+ +[0-9]+ \(|^   64Mi|roof" $S/b_${s}_$r.log | sed "s/^/$s  /" | cut -c1-150
done; done
if [ $(( $(date +%s)-start )) -lt 420 ]; then
  QOPT_RUNTIME_LIBRARY=$PWD/devrun/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/devrun/kernels-bulk/ptx:$PWD/devrun/host PYTHONPATH=$PWD/python \
    run pytest timeout 130 python3 -m pytest -q -p no:cacheprovider python/tests
fi
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $S
echo "[+$(( $(date +%s)-start ))s] done"

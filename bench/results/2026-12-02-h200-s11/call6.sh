set -u
S=$OUT/verify; mkdir -p $S
K=devrun/kernels-new/ptx
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
date -u | tee $S/env.txt
QOPT_TEST_KERNEL_DIR=$K run strict timeout 120 devrun/bin/qopt-gpu-tests
QOPT_RUNTIME_LIBRARY=$PWD/devrun/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$K:$PWD/devrun/host PYTHONPATH=$PWD/python \
  run pytest timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests
timeout 60 devrun/bin/qopt-main --kernels devrun/kernels-new > $S/main.log 2>&1; echo "main rc=$?"; grep -E "^flash_adamw|^adamw8bit" $S/main.log
echo "suites failed:${fail:- none}" | tee $S/summary.txt
tar czf $OUT/call6-runtime-verify.tar.gz -C $OUT verify && rm -rf $S

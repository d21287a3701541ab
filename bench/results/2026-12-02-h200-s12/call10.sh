set -u
S=$OUT/verify; mkdir -p $S
K=devrun/kn/ptx
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
date -u | tee $S/env.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $S/env.txt
QOPT_TEST_KERNEL_DIR=$K run strict timeout 120 devrun/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$K QOPT_TEST_IEEE_ROUNDING_DIR=devrun/kernels-ieee run checked timeout 200 devrun/bin/qopt-gpu-checked-rounding-tests
QOPT_RUNTIME_LIBRARY=$PWD/devrun/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$K:$PWD/devrun/host PYTHONPATH=$PWD/python \
  run pytest timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests
echo "suites failed:${fail:- none}" | tee $S/summary.txt
tar czf $OUT/verify.tar.gz -C $OUT verify && rm -rf $S

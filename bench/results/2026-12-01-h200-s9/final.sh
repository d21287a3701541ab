set -u
export OUT
S=$OUT/suites; mkdir -p $S
K=devbench/kernels-head/fatbin
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
date -u
run guarded_ieee timeout 120 devrun/bin/qopt-gpu-guarded-ieee-tests
QOPT_TEST_KERNEL_DIR=$K run strict timeout 240 devrun/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$K QOPT_TEST_IEEE_ROUNDING_DIR=devrun/kernels-ieee run checked timeout 240 devrun/bin/qopt-gpu-checked-rounding-tests
LD_LIBRARY_PATH=devrun/bin QOPT_TEST_EXTRA_KERNEL_DIR=devrun/extra run ecc timeout 240 devrun/bin/qopt-ecc-tests --gtest_filter='*Cuda*'
QOPT_TEST_KERNEL_DIR=$K QOPT_TEST_FAST_PTX_DIR=devrun/kernels-fast run fast timeout 120 devrun/bin/qopt-gpu-fast-tests
QOPT_RUNTIME_LIBRARY=$PWD/devtop/runtime/libqopt_runtime.so.0 QOPT_KERNEL_DIR=$PWD/$K:$PWD/devpy/host PYTHONPATH=$PWD/python \
  run pytest timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests
echo "suites failed:${fail:- none}" | tee $S/summary.txt
tar czf $OUT/final-suites.tar.gz -C $OUT suites && rm -rf $S
QOPT_BENCH_BUILD=devbench QOPT_BENCH_KERNELS=devbench/kernels-head QOPT_BENCH_KERNELS_PRE=devbench/kernels-pre \
  QOPT_TOP_BUILD=devtop bash bench/run_h200.sh 2>&1 | grep -vE "^\s+(self-check|[0-9]+Mi )" | tail -120
# The device returns at most 8 files: the small ones into one archive.
cd $OUT && tar czf extras.tar.gz torch.json first_step.log && rm -f torch.json; ls -la $OUT

# Call 8 (fourteenth session): the final commit's kernels (PTX: block2048
# and .scaled byte-identical to call 7's zu, .f16 forms new with the same
# policy, every other kernel identical to call 5's). The GPU suites in full
# on them, pytest on CUDA, the main job; block2048 against call 6's build.
set -u
D=build-bench/devrun11
S=$OUT/c8; mkdir -p $S
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
QOPT_TEST_KERNEL_DIR=$D/kn/ptx run strict timeout 150 $D/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$D/kn/fatbin run strict_fatbin timeout 150 $D/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$D/kn/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked timeout 200 $D/bin/qopt-gpu-checked-rounding-tests
QOPT_RUNTIME_LIBRARY=$PWD/$D/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$D/kn/fatbin:$PWD/$D/kn/host PYTHONPATH=$PWD/python \
  run pytest timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests
run main timeout 120 $D/bin/qopt-main --kernels $D/kn
grep -E "device time|equal" $S/main.log | head -8
echo "suites failed:${fail:- none}" | tee $S/summary.txt
tar czf $OUT/call8-verify.tar.gz -C $OUT c8 && rm -rf $S

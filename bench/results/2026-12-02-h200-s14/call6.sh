# Call 6 (fourteenth session): the final commit's build. Its PTX is
# byte-identical to call 5's for every kernel but block2048, .f16 and
# .scaled (bf16 and f16 with their scaled forms), which are the start's
# again (no zero shortcut). Strict on the final fatbins and PTX, pytest on
# CUDA (the Python package's step prepares every launch before any runs;
# the kernel-folder test fixed), the main job, and block2048 start / final.
set -u
D=build-bench/devrun9
S=$OUT/c6; mkdir -p $S
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
QOPT_TEST_KERNEL_DIR=$D/kn/fatbin run strict timeout 150 $D/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$D/kn/ptx run strict_ptx timeout 150 $D/bin/qopt-gpu-tests
QOPT_RUNTIME_LIBRARY=$PWD/$D/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$D/kn/fatbin:$PWD/$D/kn/host PYTHONPATH=$PWD/python \
  run pytest timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests
run main timeout 120 $D/bin/qopt-main --kernels $D/kn
grep -E "device time|equal" $S/main.log | head -8
echo "suites failed:${fail:- none}" | tee $S/summary.txt
tar czf $OUT/call6-verify.tar.gz -C $OUT c6 && rm -rf $S
D=$D SETS="base new" ROUNDS=2 SUITES=0 SIZES=16,64,256 GPT2=" " SPECS=adamw8bit_block2048,adamw8bit_block2048.f32 bash bench/ab_h200.sh
mv $OUT/ab.tar.gz $OUT/call6-final-vs-start.tar.gz

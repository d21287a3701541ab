# Call 5 (fourteenth session): the final build (the zero shortcut in every
# kernel, computed in the fallback; block2048.f32 at three blocks per SM;
# the Python package's step prepared and validated for every launch before
# any runs) verified and measured.
#  1. the GPU suites on its fatbins (strict on the PTX too), checked
#     rounding against the all-IEEE build, pytest on CUDA, the main job;
#  2. the session's start (kernels-base, PTX) against the final build's PTX,
#     the changed kernels at 1 / 16 / 64 / 256 Mi and the GPT-2 list, two
#     rounds; then the realistic-gradient pool.
set -u
D=build-bench/devrun8
S=$OUT/verify; mkdir -p $S
fail=""
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|passed|failed' $S/$n.log | tail -2 | tr '\n' ' ')"; [ $rc -eq 0 ] || fail="$fail $n"; }
date -u | tee $S/env.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $S/env.txt
run guarded timeout 60 $D/bin/qopt-gpu-guarded-ieee-tests
QOPT_TEST_KERNEL_DIR=$D/kn/fatbin run strict timeout 150 $D/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$D/kn/ptx run strict_ptx timeout 150 $D/bin/qopt-gpu-tests
QOPT_TEST_KERNEL_DIR=$D/kn/fatbin QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked timeout 200 $D/bin/qopt-gpu-checked-rounding-tests
QOPT_RUNTIME_LIBRARY=$PWD/$D/bin/libqopt_runtime.so.0.3 QOPT_KERNEL_DIR=$PWD/$D/kn/fatbin:$PWD/$D/kn/host PYTHONPATH=$PWD/python \
  run pytest timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests
run main timeout 120 $D/bin/qopt-main --kernels $D/kn
grep -E "ms|equal|GB/s" $S/main.log | head -14
echo "suites failed:${fail:- none}" | tee $S/summary.txt
tar czf $OUT/verify.tar.gz -C $OUT verify && rm -rf $S
SP=adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.scaled,adamw8bit_block2048.f32,adamw8bit_block256,adamw8bit_block256.f32,flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw.f32,flash_adam.f32
D=$D SETS="base new" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " SPECS=$SP bash bench/ab_h200.sh
mkdir -p $OUT/exp
for n in base new; do
  timeout 200 $D/bin/qopt-bench --kernels $D/kernels-$n --specs $SP \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/$n.json --csv /dev/null > $OUT/exp/$n.log 2>&1
  grep -E "^== |realistic" $OUT/exp/$n.log | cut -c1-110 | sed "s/^/$n /"
done
tar czf $OUT/exp.tar.gz -C $OUT exp && rm -rf $OUT/exp

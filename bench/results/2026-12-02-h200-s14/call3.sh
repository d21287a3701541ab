# Call 3 (fourteenth session): call 2's m3s (three blocks per SM and the
# registers-to-spare facts) took block2048 on realistic gradients from 0.270
# to 0.239 ms. Which part does it: the facts at four blocks (s4: both the
# zero shortcut and the scaled numerator; z4: the zero shortcut alone) and
# at three (z3: the zero shortcut alone; m3s again as the control).
set -u
D=build-bench/devrun7
S=$OUT/c3; mkdir -p $S
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $S/$n.log | head -3 | tr '\n' ' ')"; }
for n in s4 z4 z3; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx run strict_$n timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*block2048*'
done
QOPT_TEST_KERNEL_DIR=$D/kernels-z4/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked_z4 timeout 150 $D/bin/qopt-gpu-checked-rounding-tests --gtest_filter='*block2048*'
tar czf $OUT/suites.tar.gz -C $OUT c3 && rm -rf $S
mkdir -p $OUT/exp
for r in 1 2; do for n in base m3s z3 s4 z4; do
  timeout 200 $D/bin/qopt-bench --kernels $D/kernels-$n --specs adamw8bit_block2048,adamw8bit_block2048.f32 \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/${n}_$r.json --csv /dev/null > $OUT/exp/${n}_$r.log 2>&1
  grep -E "realistic" $OUT/exp/${n}_$r.log | cut -c1-110 | sed "s/^/$n /"
done; done
tar czf $OUT/exp.tar.gz -C $OUT exp && rm -rf $OUT/exp
D=$D SETS="base m3s z3 s4 z4" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " \
  SPECS=adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.f32,adamw8bit_block2048.scaled \
  bash bench/ab_h200.sh

# Call 2 (fourteenth session): block2048 at three and two blocks per SM
# (.minnctapersm 3: 80 registers, no spills; 2: 104-112 registers) against
# the shipped four (64 registers, 16-36 bytes spilled). The same PTX
# otherwise. Strict block2048 numerics on both candidates first.
# m3s: three blocks and the registers-to-spare facts (the zero shortcut,
# the numerator checked through m) that the 64-register bound ruled out.
set -u
D=build-bench/devrun7
S=$OUT/c2; mkdir -p $S
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $S/$n.log | head -3 | tr '\n' ' ')"; }
for n in m3 m2 m3s; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx run strict_$n timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*block2048*'
done
tar czf $OUT/suites.tar.gz -C $OUT c2 && rm -rf $S
D=$D SETS="base m3 m2 m3s" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " \
  SPECS=adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.f32,adamw8bit_block2048.scaled \
  bash bench/ab_h200.sh
mkdir -p $OUT/exp
for n in base m3 m2 m3s; do
  timeout 200 $D/bin/qopt-bench --kernels $D/kernels-$n --specs adamw8bit_block2048,adamw8bit_block2048.f32 \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/$n.json --csv /dev/null > $OUT/exp/$n.log 2>&1
  grep -E "realistic" $OUT/exp/$n.log | cut -c1-110 | sed "s/^/$n /"
done
tar czf $OUT/exp.tar.gz -C $OUT exp && rm -rf $OUT/exp

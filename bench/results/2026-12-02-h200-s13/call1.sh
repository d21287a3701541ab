# Call 1 (thirteenth session): the qmap flag's GPU test on the shipped
# kernels and on a mutant whose flag is forced true (it must fail there),
# strict and checked rounding on the candidates, then base / e1 / e12
# interleaved. e1: bucket entries biased by their bucket's high bits (no
# mask of |c|'s low 16 bits); e12: e1 and the scaled-numerator check in the
# unstaged kernels.
set -u
D=build-bench/devrun
S=$OUT/c1; mkdir -p $S
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $S/$n.log | head -3 | tr '\n' ' ')"; }
QOPT_TEST_KERNEL_DIR=$D/kernels-base/ptx run flag_base timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*CodebookQmapFlag*:*CodebookBoundaries*'
QOPT_TEST_KERNEL_DIR=$D/kernels-mutant/ptx run flag_mutant timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*CodebookQmapFlag*:*CodebookBoundaries*'
grep -E "elements differ" $S/flag_mutant.log | head -4 | cut -c1-300
for n in e1 e12; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx run strict_$n timeout 200 $D/bin/qopt-gpu-tests
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked_$n timeout 200 $D/bin/qopt-gpu-checked-rounding-tests
done
tar czf $OUT/suites.tar.gz -C $OUT c1 && rm -rf $S
D=$D SETS="base e1 e12" ROUNDS=2 SUITES=0 SIZES=1,64,256 \
  SPECS=adamw8bit_block2048,adamw8bit_block256,adamw8bit_block2048.f32,adamw8bit_block256.f32,flash_adamw.f32,flash_adam.f32 \
  NCU_SKIP=40 NCU_SOURCE="e12:adamw8bit_block2048:AdamW8bit_block2048" bash bench/ab_h200.sh

# Call 1 (fourteenth session): block2048 at 16 lanes a thread (128 registers:
# 128 threads, four blocks per SM, or 256 threads, two) against the shipped
# 256 x 8 (64 registers). The candidates' block2048 numerics first (strict
# against the C++ reference, checked rounding against the all-IEEE build).
set -u
D=build-bench/devrun7
S=$OUT/c1; mkdir -p $S
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $S/$n.log | head -3 | tr '\n' ' ')"; }
for n in t128 t256; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx run strict_$n timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*block2048*'
done
QOPT_TEST_KERNEL_DIR=$D/kernels-t128/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked_t128 timeout 150 $D/bin/qopt-gpu-checked-rounding-tests --gtest_filter='*block2048*'
tar czf $OUT/suites.tar.gz -C $OUT c1 && rm -rf $S
D=$D SETS="base t128 t256" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " \
  SPECS=adamw8bit_block2048,adamw8bit_block2048.f16,adamw8bit_block2048.f32,adamw8bit_block2048.scaled \
  NCU_SKIP=40 NCU="t128:adamw8bit_block2048:AdamW8bit_block2048" bash bench/ab_h200.sh
mkdir -p $OUT/exp
for n in base t128 t256; do
  timeout 200 $D/bin/qopt-bench --kernels $D/kernels-$n --specs adamw8bit_block2048,adamw8bit_block2048.f32 \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/$n.json --csv /dev/null > $OUT/exp/$n.log 2>&1
  grep -E "^== |realistic" $OUT/exp/$n.log | cut -c1-110 | sed "s/^/$n /"
done
tar czf $OUT/exp.tar.gz -C $OUT exp && rm -rf $OUT/exp

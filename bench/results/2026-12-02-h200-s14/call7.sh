# Call 7 (fourteenth session): the 16-bit block2048's zero-row cliff with a
# cheaper shortcut. final: the shipped kernels (no shortcut in block2048);
# zs: the shortcut in the square root's fallback only; zu: also in the
# divisions by a uniform or block value (not the lane divisor's, whose
# fallback checks the divisor's lanes); za: in every fallback (call 4's y4).
set -u
D=build-bench/devrun10
S=$OUT/c7; mkdir -p $S
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $S/$n.log | head -3 | tr '\n' ' ')"; }
for n in zs zu; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx run strict_$n timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*block2048*'
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked_$n timeout 150 $D/bin/qopt-gpu-checked-rounding-tests --gtest_filter='*block2048*'
done
tar czf $OUT/call7-suites.tar.gz -C $OUT c7 && rm -rf $S
mkdir -p $OUT/exp
for r in 1 2; do for n in final zs zu za; do
  timeout 200 $D/bin/qopt-bench --kernels $D/kernels-$n --specs adamw8bit_block2048,adamw8bit_block2048.scaled \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/${n}_$r.json --csv /dev/null > $OUT/exp/${n}_$r.log 2>&1
  grep -E "realistic grads   64Mi" $OUT/exp/${n}_$r.log | cut -c1-110 | sed "s/^/$n /"
done; done
tar czf $OUT/call7-realistic.tar.gz -C $OUT exp && rm -rf $OUT/exp
D=$D SETS="final zs zu za" ROUNDS=2 SUITES=0 SIZES=16,64,256 GPT2=" " SPECS=adamw8bit_block2048,adamw8bit_block2048.scaled bash bench/ab_h200.sh
mv $OUT/ab.tar.gz $OUT/call7-cheaper-shortcut.tar.gz

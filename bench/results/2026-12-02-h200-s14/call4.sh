# Call 4 (fourteenth session): the all-zero shortcut of the guards'
# fallbacks computes its signed zero in the fallback (a * c) instead of
# keeping the fast path's a * r alive across the branch.
#   new: that change alone (the staged kernels' PTX changes; the unstaged
#        ones have no shortcut and are byte-identical to base);
#   y4:  new, and the shortcut in the unstaged kernels too (codebook kernels
#        of a 16-bit parameter, every f32 variant);
#   y3:  y4 with block2048 at three blocks per SM (80 registers).
# The GPU suites on y3 (every changed kernel's code), then the bench on the
# bench gradients and on the realistic pool.
set -u
D=build-bench/devrun7
S=$OUT/c4; mkdir -p $S
run() { local n=$1; shift; local t0=$(date +%s); "$@" > $S/$n.log 2>&1; local rc=$?; echo "suite $n rc=$rc ($(( $(date +%s)-t0 ))s): $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $S/$n.log | head -3 | tr '\n' ' ')"; }
run guarded timeout 60 $D/bin/qopt-gpu-guarded-ieee-tests
for n in y3 y4; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx run strict_$n timeout 200 $D/bin/qopt-gpu-tests
done
QOPT_TEST_KERNEL_DIR=$D/kernels-y3/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$D/kernels-ieee run checked_y3 timeout 300 $D/bin/qopt-gpu-checked-rounding-tests
tar czf $OUT/suites.tar.gz -C $OUT c4 && rm -rf $S
SP=flash_adamw,flash_adam,flash_adamw_ecc16,flash_adamw.f32,flash_adam.f32,adamw8bit_block2048,adamw8bit_block2048.f32,adamw8bit_block256,adamw8bit_block256.f32
mkdir -p $OUT/exp
for r in 1 2; do for n in base new y4 y3; do
  timeout 200 $D/bin/qopt-bench --kernels $D/kernels-$n --specs $SP \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/${n}_$r.json --csv /dev/null > $OUT/exp/${n}_$r.log 2>&1
  grep -E "^== |realistic" $OUT/exp/${n}_$r.log | cut -c1-110 | sed "s/^/$n /"
done; done
tar czf $OUT/exp.tar.gz -C $OUT exp && rm -rf $OUT/exp
D=$D SETS="base new y4 y3" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " SPECS=$SP bash bench/ab_h200.sh

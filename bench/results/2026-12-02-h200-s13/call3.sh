# Call 3: block shapes of the codebook kernels per kernel: 256 threads x 4
# blocks (shipped), 512 x 2 (t512), 1024 x 1 (t1024), unstaged, 64 registers;
# and 256 staged (v1). Strict numerics of the codebook tests on each
# candidate; the bench's pool at 1-256 Mi and the GPT-2 list, two rounds;
# then each set on the realistic-gradient pool (64 Mi, GPT-2 list).
set -u
D=build-bench/devrun3
for n in t512 t1024 v1; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*adamw8bit*:*Codebook*' 2>&1 | grep -E "^\[  PASSED|^\[  FAILED|elements differ" | head -5 | sed "s/^/$n strict: /"
done
D=$D SETS="base t512 t1024 v1" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " \
  SPECS=adamw8bit_block2048,adamw8bit_block256,adamw8bit_block2048.f32,adamw8bit_block256.f32,adamw8bit_block2048.f16,adamw8bit_block256.f16 bash bench/ab_h200.sh
mkdir -p $OUT/exp
for r in 1 2; do for n in base t512 t1024 v1; do
  timeout 120 $D/bin/qopt-bench --kernels $D/kernels-$n --specs adamw8bit_block2048,adamw8bit_block256,adamw8bit_block256.f32 \
    --sizes 64 --no-sweep --no-runtime --experiments --json $OUT/exp/$n-$r.json --csv /dev/null > $OUT/exp/$n-$r.log 2>&1
  grep -E "^== |realistic" $OUT/exp/$n-$r.log | cut -c1-110 | sed "s/^/$n r$r /"
done; done
tar czf $OUT/exp.tar.gz -C $OUT exp && rm -rf $OUT/exp

# Call 2: the codebook kernels staged (cp.async tiles ahead in shared memory):
# v1 256 threads (110 registers, two blocks per SM), v2 512 threads (119, one
# block), v3 1024 threads unstaged (64 registers, 76 B spilled), against the
# shipped 256 x 4 blocks (base). Strict numerics of v1 and v2 on the two
# seed specs first.
set -u
D=build-bench/devrun2
for n in v1 v2; do
  QOPT_TEST_KERNEL_DIR=$D/kernels-$n/ptx timeout 120 $D/bin/qopt-gpu-tests --gtest_filter='*adamw8bit*:*Codebook*' 2>&1 | grep -E "^\[  PASSED|^\[  FAILED|elements differ" | head -5 | sed "s/^/$n strict: /"
done
D=$D SETS="base v1 v2 v3" ROUNDS=2 SUITES=0 SIZES=1,16,64,256 GPT2=" " \
  SPECS=adamw8bit_block2048,adamw8bit_block256,adamw8bit_block2048.f32,adamw8bit_block256.f32 bash bench/ab_h200.sh

set -u
D=devrun SETS="cur noinv" SPECS=adamw8bit_block256.f32,adamw8bit_block2048.f32,flash_adamw.f32 SIZES=1,64,256 GPT2=" " ROUNDS=2 SUITES=0 \
  bash bench/ab_h200.sh 2>&1 | grep -v "^\[ab" | tail -44

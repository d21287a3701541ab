#!/usr/bin/env bash
# Call 3: sweep 3 (build.sh) at 64 Mi, sets interleaved, two rounds; then
# qopt-bench's grid sweep at 64 Mi for FlashAdamW, block256 and block2048.
set -uo pipefail
OUT=${OUT:?}
tar xJf .carry/sweep3/s3.tar.xz -C /tmp && D=/tmp/d
start=$(date +%s); stamp() { echo "[call3 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call3; mkdir -p "$R"
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
for r in 1 2; do
  for v in base aon aon512 t512 t128 aoff t256 l4 t1024l4; do
    stamp "round $r: $v"
    specs=$(ls $D/kernels-$v/ptx/*.manifest.json | xargs -n1 basename | sed 's/.manifest.json//' | tr '\n' ',' | sed 's/,$//')
    timeout 120 "$D/qopt-bench" --kernels "$D/kernels-$v" --specs "$specs" --sizes 64 --no-gpt2 --no-sweep \
      --no-runtime --json "$R/sw_${v}_$r.json" --csv "$R/sw_${v}_$r.csv" > "$R/sw_${v}_$r.log" 2>&1
  done
done
stamp "grid sweep"
timeout 200 "$D/qopt-bench" --kernels "$D/kernels-base" --specs flash_adamw,adamw8bit_block256,adamw8bit_block2048 --sizes 64 --no-gpt2 \
  --no-runtime --json "$R/grid.json" --csv "$R/grid.csv" > "$R/grid.log" 2>&1
cd "$OUT" && tar czf call3.tar.gz call3 && rm -rf call3
stamp done

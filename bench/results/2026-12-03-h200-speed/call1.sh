#!/usr/bin/env bash
# Call 1: today's main (11c2e8f, with #26's overflow policy) against the copy
# roof and torch fused AdamW; block2048's claim shapes and the kernels before
# #26, interleaved; the SASS of the kernels looked at.
# Carried: .carry/speed/s1.tar.xz = d/{bin,kernels-*,cubin}.
set -uo pipefail
OUT=${OUT:?}
tar xJf .carry/speed/s1.tar.xz -C /tmp && D=/tmp/d
start=$(date +%s); stamp() { echo "[call1 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call1; mkdir -p "$R/sass"
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
DEFAULTS=$(ls "$D"/kernels-base/ptx/*.manifest.json | xargs -n1 basename | sed 's/\.manifest\.json$//' | grep -v '\.' | paste -sd,)
stamp "qopt-bench: the 44 default kernels (bf16 parameters), 1/16/64/256 Mi and the GPT-2 list"
timeout 300 "$D/bin/qopt-bench" --kernels "$D/kernels-base" --specs "$DEFAULTS" --sizes 1,16,64,256 --no-sweep \
  --no-runtime --json "$R/bench.json" --csv "$R/bench.csv" > "$R/bench.log" 2>&1
echo "rc=$?"; grep -E "^[a-z_0-9.]+ +[0-9]+ \(|roof|copy" "$R/bench.log" | head -60
stamp "torch baselines"
timeout 150 python3 bench/torch_baselines.py --out "$R/torch.json" > "$R/torch.log" 2>&1; echo "rc=$?"; tail -12 "$R/torch.log"
for r in 1 2; do
  for s in base pre c3e5 c4e5 c2e6 c4e6; do
    specs=adamw8bit_block2048
    [ "$s" = pre ] || [ "$s" = base ] && specs=adamw8bit_block2048,flash_adamw,adamw8bit_block256
    stamp "ab round $r: $s"
    timeout 100 "$D/bin/qopt-bench" --kernels "$D/kernels-$s" --specs "$specs" --sizes 16,64,256 --no-sweep \
      --no-runtime --json "$R/ab_${s}_$r.json" --csv "$R/ab_${s}_$r.csv" > "$R/ab_${s}_$r.log" 2>&1
    grep -E "^[a-z_0-9.]+ +[0-9]+ \(" "$R/ab_${s}_$r.log" | sed "s/^/$s  /"
  done
done
stamp "SASS"
for f in "$D"/cubin/*.cubin; do
  n=$(basename "$f" .cubin)
  cuobjdump -sass "$f" > "$R/sass/$n.sass" 2>&1
  cuobjdump -res-usage "$f" 2>&1 | grep -E "REG|Function" >> "$R/sass/res_usage.txt"
done
python3 bench/sass_mix.py "$R"/sass/*.sass > "$R/sass_mix.txt" 2>&1; head -60 "$R/sass_mix.txt"
cd "$OUT" && tar czf call1.tar.gz call1 && rm -rf call1
stamp done

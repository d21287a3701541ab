#!/usr/bin/env bash
# One device call that checks and times kernel variants side by side:
#   1. the GPU suites on the newest set (strict numerics against the C++
#      reference, the guarded div/sqrt sequences against div.rn/sqrt.rn over
#      their domain, default kernels against the all-IEEE ones);
#   2. qopt-bench at the given sizes on every kernel set, the sets
#      interleaved (A B C A B C) so that drift of the machine shows;
#   3. the SASS and resource usage of the cubins under $D/cubin.
# Layout (built on the build machine and carried as one folder, $D):
#   $D/bin/{qopt-bench,qopt-gpu-tests,qopt-gpu-checked-rounding-tests,
#           qopt-gpu-guarded-ieee-tests}
#   $D/kernels-<name>/ptx   one kernel set each (the last one listed in
#                           $SETS is the one the suites check)
#   $D/kernels-ieee         --checked-rounding=false --guarded-ieee=false
#                           --codebook-buckets=false PTX of the shipped specs
#   $D/cubin/*.cubin        optional, for cuobjdump
# Usage: D=devrun SETS="base new" SPECS=flash_adamw,... SIZES=64 bash bench/ab_h200.sh
set -uo pipefail
OUT=${OUT:?set OUT to the results folder}
D=${D:-devrun}
SETS=${SETS:-base new}
SPECS=${SPECS:-}
SIZES=${SIZES:-64}
ROUNDS=${ROUNDS:-2}
SUITES=${SUITES:-1}
start=$(date +%s)
stamp() { echo "[ab_h200 +$(( $(date +%s) - start ))s] $*"; }
newest=${SETS##* }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ "$SUITES" = 1 ]; then
  stamp "guarded IEEE sequences"
  timeout 120 "$D/bin/qopt-gpu-guarded-ieee-tests" 2>&1 | tee "$OUT/guarded_ieee.log" | tail -4
  stamp "strict suite on kernels-$newest"
  QOPT_TEST_KERNEL_DIR="$D/kernels-$newest/ptx" timeout 240 "$D/bin/qopt-gpu-tests" \
    > "$OUT/strict.log" 2>&1
  tail -3 "$OUT/strict.log"
  stamp "checked-rounding suite (kernels-$newest against kernels-ieee)"
  QOPT_TEST_KERNEL_DIR="$D/kernels-$newest/ptx" QOPT_TEST_IEEE_ROUNDING_DIR="$D/kernels-ieee" \
    timeout 240 "$D/bin/qopt-gpu-checked-rounding-tests" > "$OUT/checked.log" 2>&1
  tail -3 "$OUT/checked.log"
fi

specArg=()
[ -n "$SPECS" ] && specArg=(--specs "$SPECS")
for r in $(seq 1 "$ROUNDS"); do
  for s in $SETS; do
    stamp "bench round $r: $s"
    timeout 120 "$D/bin/qopt-bench" --kernels "$D/kernels-$s" "${specArg[@]}" --sizes "$SIZES" \
      ${GPT2:---no-gpt2} --no-sweep --no-runtime --json "$OUT/bench_${s}_$r.json" --csv "$OUT/bench_${s}_$r.csv" \
      > "$OUT/bench_${s}_$r.log" 2>&1
    grep -E "^[a-z_0-9.]+ +[0-9]+ \(" "$OUT/bench_${s}_$r.log" | sed "s/^/$s  /"
  done
done

if [ -d "$D/cubin" ]; then
  stamp "SASS"
  mkdir -p "$OUT/sass"
  for f in "$D"/cubin/*.cubin; do
    n=$(basename "$f" .cubin)
    cuobjdump -sass "$f" > "$OUT/sass/$n.sass" 2>&1
    cuobjdump -res-usage "$f" 2>&1 | grep -E "REG|Function" >> "$OUT/sass/res_usage.txt"
  done
  tar czf "$OUT/sass.tar.gz" -C "$OUT" sass && rm -rf "$OUT/sass"
fi
stamp "done"

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
#   $D/bin/qopt-ecc-tests, $D/extra   optional: the exhaustive encode
#                           test and its kernels (build/test/host/kernels)
# Everything comes back as $OUT/ab.tar.gz.
# Usage: D=devrun SETS="base new" SPECS=flash_adamw,... SIZES=64 bash bench/ab_h200.sh
set -uo pipefail
OUT=${OUT:?set OUT to the results folder}
D=${D:-devrun}
SETS=${SETS-base new}
SPECS=${SPECS:-}
SIZES=${SIZES:-64}
ROUNDS=${ROUNDS:-2}
SUITES=${SUITES:-1}
start=$(date +%s)
stamp() { echo "[ab_h200 +$(( $(date +%s) - start ))s] $*"; }
# Each suite's exit status; the script exits non-zero when one failed.
failed=""
suite() { # name, then the command
  local name=$1; shift
  "$@"; local rc=$?
  [ $rc -eq 0 ] || { failed="$failed $name(rc=$rc)"; echo "SUITE FAILED: $name rc=$rc"; }
}
newest=${SUITE_SET:-${SETS##* }}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# SUITES=1: all suites; SUITES=ecc: the exhaustive encode test alone; 0: none.
if [ "$SUITES" = 1 ]; then
  stamp "guarded IEEE sequences"
  suite guarded timeout 120 "$D/bin/qopt-gpu-guarded-ieee-tests" > "$OUT/guarded_ieee.log" 2>&1
  tail -3 "$OUT/guarded_ieee.log"
  stamp "strict suite on kernels-$newest"
  QOPT_TEST_KERNEL_DIR="$D/kernels-$newest/ptx" suite strict timeout 240 "$D/bin/qopt-gpu-tests" \
    > "$OUT/strict.log" 2>&1
  tail -3 "$OUT/strict.log"
  stamp "checked-rounding suite (kernels-$newest against kernels-ieee)"
  QOPT_TEST_KERNEL_DIR="$D/kernels-$newest/ptx" QOPT_TEST_IEEE_ROUNDING_DIR="$D/kernels-ieee" \
    suite checked timeout 240 "$D/bin/qopt-gpu-checked-rounding-tests" > "$OUT/checked.log" 2>&1
  tail -3 "$OUT/checked.log"
fi
if [ "$SUITES" != 0 ]; then
  if [ -x "$D/bin/qopt-ecc-tests" ]; then
    stamp "error-bit encode on every float32 (host and CUDA)"
    LD_LIBRARY_PATH="$D/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" QOPT_TEST_EXTRA_KERNEL_DIR="$D/extra" \
      suite ecc timeout 240 "$D/bin/qopt-ecc-tests" > "$OUT/ecc.log" 2>&1
    tail -3 "$OUT/ecc.log"
  fi
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

# Optional Nsight Compute looks: NCU="set:spec:Kernel ..." (64 Mi, one launch).
# NCU_SKIP launches are skipped first: the default 6 lands on a set's first
# step; 40 lands in the timed loop (the steady state).
NCU_SKIP=${NCU_SKIP:-6}
for item in ${NCU:-}; do
  IFS=: read -r s spec kern <<< "$item"
  stamp "ncu $spec ($s)"
  timeout 90 ncu --clock-control none --kernel-name "$kern" --launch-skip "$NCU_SKIP" --launch-count 1 \
    --print-details all --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section SourceCounters \
    "$D/bin/qopt-bench" --kernels "$D/kernels-$s" --specs "$spec" --sizes 64 --no-gpt2 --no-sweep \
    --no-runtime --json /dev/null --csv /dev/null > "$OUT/ncu_${s}_$spec.log" 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Instructions  |Registers Per|Achieved Occ|Warp Cycles Per Issued" \
    "$OUT/ncu_${s}_$spec.log" | head -8
done
# Optional per-instruction executed counts (SASS): NCU_SOURCE="set:spec:Kernel ...".
for item in ${NCU_SOURCE:-}; do
  IFS=: read -r s spec kern <<< "$item"
  stamp "ncu source $spec ($s)"
  timeout 120 ncu --clock-control none --kernel-name "$kern" --launch-skip "$NCU_SKIP" --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    "$D/bin/qopt-bench" --kernels "$D/kernels-$s" --specs "$spec" --sizes 64 --no-gpt2 --no-sweep \
    --no-runtime --json /dev/null --csv /dev/null > "$OUT/ncusrc_${s}_$spec.csv" 2>&1
  echo "rc=$? $(wc -l < "$OUT/ncusrc_${s}_$spec.csv") lines"
done

if [ -d "$D/cubin" ]; then
  stamp "SASS"
  mkdir -p "$OUT/sass"
  for f in "$D"/cubin/*.cubin; do
    n=$(basename "$f" .cubin)
    cuobjdump -sass "$f" > "$OUT/sass/$n.sass" 2>&1
    cuobjdump -res-usage "$f" 2>&1 | grep -E "REG|Function" >> "$OUT/sass/res_usage.txt"
  done
fi
# Everything in one archive: the device returns at most 8 files.
mkdir -p "$OUT/ab"
mv "$OUT"/*.log "$OUT"/*.json "$OUT"/*.csv "$OUT"/env.txt "$OUT/ab/" 2>/dev/null
[ -d "$OUT/sass" ] && mv "$OUT/sass" "$OUT/ab/"
tar czf "$OUT/ab.tar.gz" -C "$OUT" ab && rm -rf "$OUT/ab"
stamp "done"
if [ -n "$failed" ]; then
  echo "suites failed:$failed"
  exit 1
fi

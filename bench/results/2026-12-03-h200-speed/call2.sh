#!/usr/bin/env bash
# Call 2: the candidate build (the saturation count at the absmax, claims of
# three tiles for 2048-element codebook blocks, 8 lanes for one-state
# codebook kernels) against today's main: the GPU suites on the candidate,
# then the changed kernels interleaved (two rounds), the realistic-gradient
# pool, and the alternatives (cnt: block2048 with claims of two; m2: the
# one-state codebook kernels at 16 lanes and two blocks per SM).
# Carried: .carry/speed/s2.tar.xz = d/{bin,kernels-*}.
set -uo pipefail
OUT=${OUT:?}
tar xJf .carry/speed/s2.tar.xz -C /tmp && D=/tmp/d
start=$(date +%s); stamp() { echo "[call2 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call2; mkdir -p "$R"
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
failed=""
suite() { local name=$1; shift; "$@"; local rc=$?; [ $rc -eq 0 ] || { failed="$failed $name(rc=$rc)"; echo "SUITE FAILED: $name rc=$rc"; }; }
stamp "guarded IEEE"
suite guarded timeout 120 "$D/bin/qopt-gpu-guarded-ieee-tests" > "$R/guarded.log" 2>&1; tail -2 "$R/guarded.log"
stamp "strict on kernels-new"
QOPT_TEST_KERNEL_DIR="$D/kernels-new/ptx" suite strict timeout 300 "$D/bin/qopt-gpu-tests" > "$R/strict.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |tests ran" "$R/strict.log" | tail -4
stamp "checked rounding on kernels-new against kernels-ieee"
QOPT_TEST_KERNEL_DIR="$D/kernels-new/ptx" QOPT_TEST_IEEE_ROUNDING_DIR="$D/kernels-ieee" \
  suite checked timeout 300 "$D/bin/qopt-gpu-checked-rounding-tests" > "$R/checked.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |tests ran" "$R/checked.log" | tail -4
CHANGED=$(cat "$D/changed.txt")
for r in 1 2; do
  for s in base new cnt m2; do
    specs=$CHANGED
    [ "$s" = cnt ] && specs=adamw8bit_block2048
    [ "$s" = m2 ] && specs=adagrad8bit,lion8bit,rmsprop8bit
    stamp "ab round $r: $s"
    timeout 150 "$D/bin/qopt-bench" --kernels "$D/kernels-$s" --specs "$specs" --sizes 1,16,64,256 --no-sweep \
      --no-runtime --json "$R/ab_${s}_$r.json" --csv "$R/ab_${s}_$r.csv" > "$R/ab_${s}_$r.log" 2>&1
    grep -E "^[a-z_0-9.]+ +[0-9]+ \(" "$R/ab_${s}_$r.log" | sed "s/^/$s  /"
  done
done
for s in base new; do
  stamp "realistic gradients: $s"
  timeout 150 "$D/bin/qopt-bench" --kernels "$D/kernels-$s" \
    --specs adamw8bit_block2048,adamw8bit_block256,flash_adamw,flash_adam,adagrad8bit,lion8bit,rmsprop8bit,ademamix8bit \
    --sizes 64 --no-sweep --no-runtime --experiments --json "$R/exp_$s.json" --csv "$R/exp_$s.csv" > "$R/exp_$s.log" 2>&1
  grep -iE "realistic|pool" "$R/exp_$s.log" | head -20
done
cd "$OUT" && tar czf call2.tar.gz call2 && rm -rf call2
stamp "done"
[ -z "$failed" ] || { echo "suites failed:$failed"; exit 1; }

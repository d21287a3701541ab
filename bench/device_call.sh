# Sourced by a device call's script (bench/results/<folder>/call.sh), which
# runs in the repository root on the GPU machine with $OUT set: the carried
# folder's layout, the GPU suites in shards, A/B rounds of qopt-bench, ncu's
# source counts, and the results archived as $OUT/<tag>.tar.gz.
#   .carry/<name>/bin/{qopt-bench,qopt-gpu-tests,qopt-gpu-checked-rounding-tests}
#   .carry/<name>/s.tar.xz   s/<set>/ptx/*.ptx + manifests, one kernel set each
#                            (unpacked to $S), and s/ieee (the IEEE builds)
# Usage: source bench/device_call.sh; device_call_begin TAG .carry/NAME; ...;
# device_call_end.

# TAG CARRIED_DIR: unpacks the kernel sets, sets C (carried), S (sets), B
# (binaries), R ($OUT/TAG) and records the machine in $R/env.txt.
device_call_begin() {
  DC_TAG=$1
  C=$PWD/$2
  S=$C/s
  B=$C/bin
  R=$OUT/$1
  [ -f "$C/s.tar.xz" ] && tar -C "$C" -xJf "$C/s.tar.xz"
  mkdir -p "$R"
  DC_START=$(date +%s)
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__)'
    ncu --version | tail -1
  } > "$R/env.txt" 2>&1
  cat "$R/env.txt"
}

stamp() { echo "[$DC_TAG +$(( $(date +%s) - DC_START ))s] $*"; }

# NAME COUNT TIMEOUT BINARY...: a GoogleTest binary in COUNT shards at once,
# each shard's log $R/NAME.<i>.log; prints the PASSED / SKIPPED / FAILED
# totals, the shards' exit codes and the first failures.
shards() {
  local name=$1 n=$2 t=$3
  shift 3
  local pids=()
  for i in $(seq 0 $((n - 1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$t" "$@" --gtest_brief=1 > "$R/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n - 1))); do
    wait "${pids[$i]}"
    echo "exit $?" >> "$R/$name.$i.log"
  done
  cat "$R"/"$name".*.log | grep -oE '(PASSED|SKIPPED|FAILED) +\] [0-9]+|^exit [0-9]+' |
    awk '{if ($1 == "exit") e[$2]++; else s[$1] += $3}
         END {for (k in s) print "'"$name"'", k, s[k]; for (k in e) print "'"$name"' exit", k, e[k]}'
  grep -h "FAILED  \]" "$R"/"$name".*.log | head -5
}

# SET IEEE_DIR: the strict suite (every kernel against the C++ reference) on
# $S/SET/ptx, then checked rounding (against the IEEE builds in IEEE_DIR).
gpu_suites() {
  stamp strict
  QOPT_TEST_KERNEL_DIR=$S/$1/ptx shards strict 10 200 "$B/qopt-gpu-tests"
  stamp checked
  QOPT_TEST_KERNEL_DIR=$S/$1/ptx QOPT_TEST_IEEE_ROUNDING_DIR=$2 \
    shards checked 12 200 "$B/qopt-gpu-checked-rounding-tests"
}

# SET IEEE_DIR FAST_DIR: every GPU suite a verification call runs: strict and
# checked rounding (gpu_suites), guarded IEEE, and fast mode on FAST_DIR's
# PTX. The call scripts before it wrote these lines out; they stay as they ran.
all_gpu_suites() {
  gpu_suites "$1" "$2"
  stamp guarded
  timeout 60 "$B/qopt-gpu-guarded-ieee-tests" --gtest_brief=1 > "$R/guarded.log" 2>&1
  echo "guarded rc=$?"; tail -2 "$R/guarded.log"
  stamp fast
  QOPT_TEST_FAST_PTX_DIR=$3 shards fast 8 100 "$B/qopt-gpu-fast-tests"
}

# PREFIX SPECS SIZES SET...: two rounds of qopt-bench, the sets alternating
# within each ($R/PREFIX-<set>-<round>.{log,csv}); a SET written set=specs
# runs those specs instead. Prints the second round's tables.
bench_rounds() {
  local prefix=$1 specs=$2 sizes=$3
  shift 3
  local rep item set these
  for rep in 1 2; do
    for item in "$@"; do
      set=${item%%=*}
      these=$specs
      [ "$item" != "$set" ] && these=${item#*=}
      timeout 150 "$B/qopt-bench" --kernels "$S/$set" --specs "$these" --sizes "$sizes" --no-sweep \
        --no-runtime --csv "$R/$prefix-$set-$rep.csv" > "$R/$prefix-$set-$rep.log" 2>&1
      echo "$set $rep rc=$?"
    done
  done
  for item in "$@"; do
    set=${item%%=*}
    echo "== $set"
    sed -n '/^GB\/s/,/^wrote/p' "$R/$prefix-$set-2.log" | grep -v '^wrote'
  done
}

# SPECS SET...: qopt-bench --experiments at 64 Mi ($R/exp-<set>.log), which
# adds the realistic-gradient pool; prints its lines.
realistic() {
  local specs=$1 set
  shift
  for set in "$@"; do
    timeout 150 "$B/qopt-bench" --kernels "$S/$set" --specs "$specs" --sizes 64 --no-sweep --no-runtime \
      --experiments > "$R/exp-$set.log" 2>&1
    echo "exp $set rc=$?"
    grep -E "shipped, realistic" "$R/exp-$set.log"
  done
}

# SPECS REALISTIC_SPECS SET...: an A/B call's measurements: bench_rounds ab
# SPECS at 16, 64 and 256 Mi (and the GPT-2 list) over the sets, then the
# realistic pool of REALISTIC_SPECS over those of the sets that hold every
# kernel (a SET written set=specs, which holds only those, is left out).
ab_realistic() {
  local specs=$1 real=$2 item
  shift 2
  bench_rounds ab "$specs" 16,64,256 "$@"
  stamp realistic
  local sets=()
  for item in "$@"; do
    [ "$item" = "${item%%=*}" ] && sets+=("$item")
  done
  realistic "$real" "${sets[@]}"
}

# SET: every kernel of SET at 64 Mi against the copy roof ($R/all-SET.{csv,log}),
# then torch.optim.AdamW(fused=True) in the same call ($R/torch.{json,log}).
roof_and_torch() {
  stamp all
  timeout 280 "$B/qopt-bench" --kernels "$S/$1" --sizes 64 --no-gpt2 --no-sweep --no-runtime --csv "$R/all-$1.csv" \
    > "$R/all-$1.log" 2>&1
  echo "all rc=$?"
  stamp torch
  timeout 200 python3 bench/torch_baselines.py --out "$R/torch.json" --sizes 64 > "$R/torch.log" 2>&1
  echo "torch rc=$?"
  tail -4 "$R/torch.log"
}

# KERNEL SET SPEC NAME: ncu's source page (SASS with executed counts) of one
# launch of KERNEL in qopt-bench's timed loop at 64 Mi, as $R/NAME.csv.gz
# (bench/ncu_source_mix.py reads it).
ncu_source() {
  timeout 100 ncu --clock-control none -k "regex:^$1\$" --launch-skip 12 --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    "$B/qopt-bench" --kernels "$S/$2" --specs "$3" --sizes 64 --no-gpt2 --no-sweep --no-runtime \
    > "$R/$4.csv" 2>&1
  echo "ncu $1 rc=$?"
  gzip -f "$R/$4.csv"
}

# TIMEOUT PARALLEL TOOL...: each test named in $R/tests.txt (one per line) of
# $B/qopt-gpu-tests under each compute-sanitizer TOOL, PARALLEL processes at
# a time, each log $R/logs/TOOL-TEST.log; one line per run in
# $R/sanitizers.txt, then the counts of exit codes and the failing runs.
sanitize_tests() {
  local limit=$1 parallel=$2 tool
  shift 2
  mkdir -p "$R/logs"
  run1() { local tool=$1 t=$2 f; f=$R/logs/$tool-$(echo "$t" | tr '/' '_').log
    timeout "$SANITIZE_LIMIT" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$B/qopt-gpu-tests" --gtest_filter="$t" --gtest_brief=1 > "$f" 2>&1
    echo "$tool $t rc=$? $(grep -o 'ERROR SUMMARY.*\|RACECHECK SUMMARY.*' "$f" | tr '\n' ' ')"; }
  export -f run1; export R B SANITIZE_LIMIT=$limit
  for tool in "$@"; do sed "s/^/$tool /" "$R/tests.txt"; done |
    xargs -P "$parallel" -L 1 bash -c 'run1 "$0" "$1"' > "$R/sanitizers.txt"
  awk '{print $1, $3}' "$R/sanitizers.txt" | sort | uniq -c
  grep -v 'rc=0' "$R/sanitizers.txt" | head
}

# $R as $OUT/TAG.tar.gz (the device returns few files).
device_call_end() {
  (cd "$OUT" && tar czf "$DC_TAG.tar.gz" "$DC_TAG" && rm -rf "$DC_TAG")
  stamp done
}

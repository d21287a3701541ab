#!/usr/bin/env bash
# Shape sweep (issue 28): the default (bf16) kernel of each spec below 0.88 of
# the copy roof, compiled under several qopt-opt shape options
# (build.sh: --threads-per-block, --elements-per-thread, --async-copy),
# measured at 64 Mi by qopt-bench, variants interleaved, two rounds.
set -uo pipefail
OUT=${OUT:?}
tar xJf .carry/sweep/s1.tar.xz -C /tmp && D=/tmp/d
start=$(date +%s); stamp() { echo "[call1 +$(( $(date +%s) - start ))s] $*"; }
R=$OUT/call1; mkdir -p "$R"
{ date -u; nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
ONE=adagrad_state32,rmsprop_state32,lion_state32,flash_lion_bf16_state32,flash_lion_ecc16_state32,flash_lion_state32,flash_sgd_bf16_state32,flash_sgd_ecc16_state32,flash_sgdw_bf16_state32,flash_sgdw_ecc16_state32,flash_sgd_state32
MORE=adam_atan2,adam_atan2_bf16,flash_adamw_linear,adamw4bit,adamw4bit_sr,flash_adamw4bit,ademamix8bit,lamb8bit,lars8bit,lamb_state32,lars_state32,stable_adamw,flash_adamw_clip
for r in 1 2; do
  for v in base t512 t128 l8 t512l8 aon256 aon512l8 t256 t1024 l16 aon aoff; do
    case $v in
      base) specs=$ONE,$MORE ;;
      t512|t128|l8|t512l8|aon256|aon512l8) specs=$ONE ;;
      *) specs=$MORE ;;
    esac
    [ $r = 2 ] && [ $(( $(date +%s) - start )) -gt 520 ] && { stamp "out of time"; break 2; }
    stamp "round $r: $v"
    timeout 200 "$D/qopt-bench" --kernels "$D/kernels-$v" --specs "$specs" --sizes 64 --no-gpt2 --no-sweep \
      --no-runtime --json "$R/sw_${v}_$r.json" --csv "$R/sw_${v}_$r.csv" > "$R/sw_${v}_$r.log" 2>&1
  done
done
cd "$OUT" && tar czf call1.tar.gz call1 && rm -rf call1
stamp done

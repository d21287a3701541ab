#!/usr/bin/env bash
# Shape sweep: each spec's default kernel under several qopt-opt shape options.
set -u
OPT=/work/wt-26/build/bin/qopt-opt
OUTD=/work/sweep/d
SPECS="adam_atan2 adam_atan2_bf16 adagrad_state32 rmsprop_state32 lion_state32 flash_lion_bf16_state32 flash_lion_ecc16_state32 flash_lion_state32 flash_sgd_bf16_state32 flash_sgd_ecc16_state32 flash_sgdw_bf16_state32 flash_sgdw_ecc16_state32 flash_sgd_state32 flash_adamw_linear adamw4bit adamw4bit_sr flash_adamw4bit ademamix8bit reductions/lamb8bit reductions/lars8bit reductions/lamb_state32 reductions/lars_state32 reductions/stable_adamw reductions/flash_adamw_clip"
declare -A V=(
 [base]=""
 [t128]="--threads-per-block=128"
 [t256]="--threads-per-block=256"
 [t512]="--threads-per-block=512"
 [t1024]="--threads-per-block=1024"
 [l8]="--elements-per-thread=8"
 [l16]="--elements-per-thread=16"
 [t512l8]="--threads-per-block=512 --elements-per-thread=8"
 [t256l8]="--threads-per-block=256 --elements-per-thread=8"
 [t256l16]="--threads-per-block=256 --elements-per-thread=16"
 [aon]="--async-copy=on"
 [aon256]="--async-copy=on --threads-per-block=256"
 [aon512l8]="--async-copy=on --threads-per-block=512 --elements-per-thread=8"
 [aoff]="--async-copy=off"
)
for v in "${!V[@]}"; do
  mkdir -p $OUTD/kernels-$v/ptx
  for s in $SPECS; do
    n=$(basename $s)
    $OPT /work/main/specs/$s.qopt ${V[$v]} --emit=ptx -o $OUTD/kernels-$v/ptx/$n.ptx 2>$OUTD/kernels-$v/ptx/$n.err || { rm -f $OUTD/kernels-$v/ptx/$n.*; echo "$v $n FAILED"; continue; }
    rm -f $OUTD/kernels-$v/ptx/$n.err
    r=$(ptxas -arch=sm_90 -O3 -v $OUTD/kernels-$v/ptx/$n.ptx -o /dev/null 2>&1 | grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | tr '\n' ' ')
    echo "$v $n $r"
  done
done

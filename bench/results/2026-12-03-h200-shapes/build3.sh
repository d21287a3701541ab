#!/usr/bin/env bash
# Sweep 3: the codebook and Flash Adam kernels under shape options not yet
# measured (bench/NOTES.md#shapes); each spec's default (bf16) kernel.
set -u
OPT=${OPT:-/work/wt-26/build/bin/qopt-opt}
OUTD=/work/sweep3/d
CB1="adagrad8bit rmsprop8bit lion8bit"
CB2="adamw8bit_block256 adamw8bit_block2048 ademamix8bit"
FL="flash_adam flash_adam_bf16 flash_adamw flash_adamw_bf16 flash_adam_ecc16 flash_adamw_ecc16 flash_adamw_linear"
build() { # set specs options...
  local v=$1 specs=$2; shift 2
  mkdir -p $OUTD/kernels-$v/ptx
  for n in $specs; do
    $OPT /work/main/specs/$n.qopt "$@" --emit=ptx -o $OUTD/kernels-$v/ptx/$n.ptx 2>/dev/null || { rm -f $OUTD/kernels-$v/ptx/$n.*; echo "$v $n FAILED"; continue; }
    echo "$v $n $(ptxas -arch=sm_90 -O3 -v $OUTD/kernels-$v/ptx/$n.ptx -o /dev/null 2>&1 | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' ')"
  done
}
build base "$CB1 $CB2 $FL"
build aon "$CB1" --async-copy=on
build aon512 "$CB1" --async-copy=on --threads-per-block=512
build t512 "$CB1" --threads-per-block=512
build t128 "$CB1 $CB2" --threads-per-block=128
build aoff "$CB2" --async-copy=off
build t256 "$FL" --threads-per-block=256
build l4 "$FL" --elements-per-thread=4
build t1024l4 "$FL" --threads-per-block=1024 --elements-per-thread=4

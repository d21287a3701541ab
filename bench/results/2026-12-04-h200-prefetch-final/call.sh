#!/usr/bin/env bash
# The L2 prefetch one tile ahead where every codebook block lies in a warp
# (fin2): the GPU suites on every spec and variant; a182d52's kernels (fin)
# against it for the kernels that changed and block2048 as a control,
# alternating; the realistic pool; every default kernel against the copy
# roof; torch's fused AdamW in the same call.
set -uo pipefail
source bench/device_call.sh
device_call_begin pfin .carry/c19
gpu_suites fin2 "$S/ieee"
stamp ab
ab_realistic lion8bit,lion8bit.f16,lion8bit.scaled,adagrad8bit,adagrad8bit.f16,rmsprop8bit,rmsprop8bit.scaled,ademamix8bit,ademamix8bit.f16,lars8bit,lars8bit.scaled,adamw8bit_block2048 lion8bit,adagrad8bit,rmsprop8bit,ademamix8bit,adamw8bit_block2048 \
  fin fin2
roof_and_torch fin2
device_call_end

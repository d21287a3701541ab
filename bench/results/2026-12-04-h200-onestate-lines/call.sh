#!/usr/bin/env bash
# The one-state codebook kernels after the line prefetch (pol2 = main at
# 429ca5a) against: inv = their descriptor loads marked invariant (LLVM then
# reuses the top's pointers at the stores), t128 = 128 threads a block,
# d2 = the lines 2 tiles ahead (also for four f32 variants). Alternating,
# two rounds; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin onest .carry/c25
bench_rounds ab lion8bit,adagrad8bit,rmsprop8bit,lion8bit.scaled 16,64,256 pol2 inv=lion8bit,adagrad8bit,rmsprop8bit,lion8bit.scaled t128=lion8bit,adagrad8bit,rmsprop8bit d2=lion8bit,adagrad8bit,rmsprop8bit
stamp abf32
bench_rounds abf32 flash_adamw.f32,adamw4bit.f32,adagrad8bit.f32,lion8bit.f32 16,64,256 pol2 d2
stamp realistic
realistic lion8bit,adagrad8bit,rmsprop8bit pol2 inv t128 d2
device_call_end

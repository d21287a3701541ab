#!/usr/bin/env bash
# The register prefetch with the codebook blocks' absmax carried too (call 3's
# profile: with p, g and the codes carried, Lion8bit's stall moved to the
# first use of the absmax, loaded at the tile's top): rpA = --register-
# prefetch=on at a build that carries every read stream but packed codes,
# rpA3 = the same at three blocks per SM, rpAN = rpA without the L2
# prefetch; base = main's, rp = call 1's. Alternating, two rounds; the
# realistic pool; ncu's source counters of Lion8bit's rpA.
set -uo pipefail
source bench/device_call.sh
device_call_begin rp4 .carry/c30
stamp abA
bench_rounds abA lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048,lars8bit 16,64,256 base rp rpA rpA3 rpAN=lion8bit,adagrad8bit,rmsprop8bit,lars8bit
stamp abB
bench_rounds abB ademamix8bit,lion8bit.f32,adagrad8bit.f32,adamw8bit_block2048.f32,adamw8bit_block256.f32 64 base rpA
stamp realistic
realistic lion8bit,adagrad8bit,rmsprop8bit,adamw8bit_block2048 base rpA rpA3
ncu_source Lion8bit rpA lion8bit src_lion8bit_rpA
device_call_end

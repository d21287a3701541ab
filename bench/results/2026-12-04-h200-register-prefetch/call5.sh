#!/usr/bin/env bash
# The one-state codebook kernels with the register prefetch (absmax carried,
# call 4's build) and the L2 prefetch further ahead: rpA2 / rpA3b = the L2
# prefetch 2 / 3 tiles ahead, rpAN = none (call 4's); base = main's.
# Alternating, two rounds; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin rp5 .carry/c31
stamp abA
bench_rounds abA lion8bit,adagrad8bit,rmsprop8bit,lars8bit 16,64,256 base rpA2 rpA3b rpAN
stamp realistic
realistic lion8bit,adagrad8bit,rmsprop8bit base rpA2 rpA3b
device_call_end

#!/usr/bin/env bash
# Why the codebook kernels lose with the register prefetch: ncu's source
# counters (SASS with executed instructions and stall samples) of one launch
# of Lion8bit and Adagrad8bit at 64 Mi, main's (base) against rp (call 1's
# --register-prefetch=on).
set -uo pipefail
source bench/device_call.sh
device_call_begin rp3 .carry/c28
ncu_source Lion8bit base lion8bit src_lion8bit_base
ncu_source Lion8bit rp lion8bit src_lion8bit_rp
ncu_source Adagrad8bit base adagrad8bit src_adagrad8bit_base
ncu_source Adagrad8bit rp adagrad8bit src_adagrad8bit_rp
device_call_end

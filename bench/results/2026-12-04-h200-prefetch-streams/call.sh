#!/usr/bin/env bash
# Which streams the one-state codebook kernels' L2 prefetch (1 tile ahead,
# d9e2ad2: fin2) should fetch: all three, the codes only (codes), the
# parameter and gradient only (pg), none (nopf); the PTX's prefetches
# removed accordingly. Alternating, two rounds; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin streams .carry/c20
ab_realistic lion8bit,adagrad8bit lion8bit,adagrad8bit \
  fin2 codes pg nopf
device_call_end

#!/usr/bin/env bash
# Lion8bit's L2 prefetch distance: a182d52's kernel (fin: 2 tiles ahead), the
# same PTX with the distance edited to 1, 3 and 4 tiles (the in-run test's
# constant and the three prefetches' offsets), and with no prefetch (nopf),
# alternating; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin dist .carry/c17
ab_realistic lion8bit lion8bit \
  fin d1 d3 d4 nopf
device_call_end

#!/usr/bin/env bash
# The unstaged kernels of a 16-bit parameter without a codebook state that
# sit below 0.88 (AdamAtan2, LAMBState32, LARSState32, StableAdamW) with the
# L2 prefetch 1 tile ahead (pf1: chooseL2PrefetchTiles taking them in)
# against c44aeef's (fin2: none), alternating; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin plain .carry/c21
ab_realistic adam_atan2,lamb_state32,lars_state32,stable_adamw adam_atan2,stable_adamw \
  fin2 pf1
device_call_end

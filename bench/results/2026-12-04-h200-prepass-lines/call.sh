#!/usr/bin/env bash
# The reduce pre-pass with each thread's line prefetch 1 tile ahead of the
# streams its reductions' operands read (rpf2) against main's (pol2, none),
# the six reduction specs, alternating, two rounds; the realistic pool.
set -uo pipefail
source bench/device_call.sh
device_call_begin prepl .carry/c27
ab_realistic flash_adamw_clip,lamb8bit,lamb_state32,lars8bit,lars_state32,stable_adamw flash_adamw_clip,lamb8bit,lamb_state32,lars8bit,lars_state32,stable_adamw pol2 rpf2
device_call_end

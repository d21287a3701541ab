#!/usr/bin/env bash
# mkset.sh OUTDIR: every reductions spec (all six forms) and flash_adamw as PTX + manifest.
set -euo pipefail
out=$1; root=/work/wt-pre; opt=${QOPT_OPT:-$root/build/bin/qopt-opt}
mkdir -p "$out"
for spec in $root/specs/reductions/*.qopt $root/specs/flash_adamw.qopt; do
  stem=$(basename "$spec" .qopt)
  for variant in "" f16 f32 scaled f16.scaled f32.scaled; do
    flags=()
    case $variant in f16*) flags+=(--param-type=f16) ;; f32*) flags+=(--param-type=f32) ;; esac
    case $variant in *scaled) flags+=(--grad-scaling) ;; esac
    name=$stem${variant:+.$variant}
    "$opt" "$spec" "${flags[@]}" --emit=ptx -o "$out/$name.ptx"
  done
done
ls $out/*.ptx | wc -l

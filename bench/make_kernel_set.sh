#!/usr/bin/env bash
# One kernel set for an A/B device call (bench/ab_h200.sh's $D/kernels-<name>/ptx):
# every spec of specs/ and each of its variants (named as specs/CMakeLists.txt
# names them: <spec>, .f16, .f32, .scaled, .f16.scaled, .f32.scaled), compiled
# to PTX and manifest with the qopt-opt options given after the folder. With
# ptxas on the PATH (or in /usr/local/cuda/bin), each kernel's registers and
# spills, and its SASS size in instructions, go to <folder>/ptxas.txt.
#   bash bench/make_kernel_set.sh build-bench/devrun/kernels-head/ptx
#   bash bench/make_kernel_set.sh build-bench/devrun/kernels-bulk/ptx --bulk-copy
# With SPECS="a b" only those specs' kernels (into a folder that may hold the
# rest already).
set -euo pipefail
out=${1:?usage: make_kernel_set.sh OUTDIR [qopt-opt options...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
opt=${QOPT_OPT:-$root/build/bin/qopt-opt}
[ -x "$opt" ] || { echo "no qopt-opt at $opt (build first, or set QOPT_OPT)" >&2; exit 1; }
mkdir -p "$out"
ptxas=$(command -v ptxas || true)
[ -z "$ptxas" ] && [ -x /usr/local/cuda/bin/ptxas ] && ptxas=/usr/local/cuda/bin/ptxas
[ -n "$ptxas" ] && : > "$out/ptxas.txt"
for spec in "$root"/specs/*.qopt; do
  stem=$(basename "$spec" .qopt)
  [ -n "${SPECS:-}" ] && [[ " $SPECS " != *" $stem "* ]] && continue
  for variant in "" f16 f32 scaled f16.scaled f32.scaled; do
    flags=()
    case $variant in f16*) flags+=(--param-type=f16) ;; f32*) flags+=(--param-type=f32) ;; esac
    case $variant in *scaled) flags+=(--grad-scaling) ;; esac
    name=$stem${variant:+.$variant}
    "$opt" "$spec" "${flags[@]}" "$@" --emit=ptx -o "$out/$name.ptx"
    if [ -n "$ptxas" ]; then
      cubin=$(mktemp)
      usage=$("$ptxas" -arch=sm_90 -O3 -v "$out/$name.ptx" -o "$cubin" 2>&1 |
        grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | tr '\n' ' ')
      # .text is 16 bytes per instruction.
      text=$(size -A "$cubin" | awk '/^\.text/ {s += $2} END {print s / 16}')
      printf '%-32s %s %s SASS instructions\n' "$name" "$usage" "$text" >> "$out/ptxas.txt"
      rm -f "$cubin"
    fi
  done
done
echo "$(ls "$out"/*.ptx | wc -l) kernels in $out"

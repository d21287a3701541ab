#!/usr/bin/env bash
# Experiment PTX for qopt-bench --experiments --exp-ptx DIR: each shipped PTX
# with `.minnctapersm N` added after its `.maxntid 256, 1, 1` (launch bounds
# (256, N): ptxas keeps registers <= 65536 / (256 N)). The shipped kernels and
# the compiler are unchanged; this only predicts what occupancy would buy.
# (-maxrregcount / CU_JIT_MAX_REGISTERS are ignored for kernels with .maxntid.)
#   bench/make_exp_ptx.sh build-bench/kernels-head/ptx build-bench/kernels-exp
set -euo pipefail
src=${1:?ptx dir}; dst=${2:?output dir}
mkdir -p "$dst"
for f in "$src"/*.ptx; do
  n=$(basename "$f" .ptx)
  for b in 2 3; do
    sed "s/^\.maxntid 256, 1, 1\$/.maxntid 256, 1, 1\n.minnctapersm $b/" "$f" > "$dst/$n.lb256x$b.ptx"
    grep -q "^.minnctapersm $b" "$dst/$n.lb256x$b.ptx" || { echo "no .maxntid line in $f" >&2; exit 1; }
    if command -v ptxas >/dev/null; then
      printf '%-22s lb256x%s: %s\n' "$n" "$b" "$(ptxas -arch=sm_90 -O3 -v "$dst/$n.lb256x$b.ptx" -o /dev/null 2>&1 |
        grep -E 'registers|spill' | tr -s ' ' | tr '\n' ' ')"
    fi
  done
done

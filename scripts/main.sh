#!/usr/bin/env bash
# The main job: build everything, compile every shipped spec to PTX (and, where
# the CUDA toolkit is present, cubin for sm_80/sm_90 and a fatbin) with its
# manifest into build/kernels/, then step the GPT-2 124M parameter list on the
# GPU when there is one (bench/qopt-main), on the host otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${QOPT_BUILD_DIR:-build}
bash scripts/build.sh
out="$build/kernels"
mkdir -p "$out"
qopt="$build/bin/qopt-opt"
# A fatbin needs both ptxas and fatbinary, found where qopt-opt looks for them.
have_toolkit() {
  local tool=$1
  if [ -n "${QOPT_CUDA_PATH:-}" ]; then [ -x "$QOPT_CUDA_PATH/bin/$tool" ]; return; fi
  for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do
    [ -n "$root" ] && [ -x "$root/bin/$tool" ] && return 0
  done
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/local/cuda/bin/$tool" ]
}
have_ptxas=0
if have_toolkit ptxas && have_toolkit fatbinary; then have_ptxas=1; fi
# One binary and one manifest per spec: a fatbin (sm_80 and sm_90 cubins and
# PTX for newer chips) where the CUDA toolkit is present, PTX otherwise.
printf '%-22s %s\n' spec kernel
for spec in specs/*.qopt; do
  name=$(basename "$spec" .qopt)
  if [ "$have_ptxas" = 1 ]; then
    "$qopt" "$spec" --emit=fatbin -o "$out/$name.fatbin"
    printf '%-22s %s\n' "$name" "$out/$name.fatbin ($(stat -c %s "$out/$name.fatbin") bytes) + $name.manifest.json"
  else
    "$qopt" "$spec" --emit=ptx -o "$out/$name.ptx"
    printf '%-22s %s\n' "$name" "$out/$name.ptx + $name.manifest.json"
  fi
done
if [ -x "$build/bin/qopt-main" ]; then
  "$build/bin/qopt-main" --kernels "$out"
else
  echo "main: $build/bin/qopt-main was not built; kernels are in $out"
fi

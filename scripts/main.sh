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
have_ptxas=0
if command -v ptxas >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/ptxas ]; then have_ptxas=1; fi
printf '%-22s %-8s %s\n' spec format output
for spec in specs/*.qopt; do
  name=$(basename "$spec" .qopt)
  "$qopt" "$spec" --emit=ptx -o "$out/$name.ptx"
  printf '%-22s %-8s %s\n' "$name" ptx "$out/$name.ptx ($(wc -l <"$out/$name.ptx") lines)"
  if [ "$have_ptxas" = 1 ]; then
    for arch in sm_80 sm_90; do
      "$qopt" "$spec" --emit=cubin --arch="$arch" -o "$out/$name.$arch.cubin"
      printf '%-22s %-8s %s\n' "$name" "$arch" "$out/$name.$arch.cubin ($(stat -c %s "$out/$name.$arch.cubin") bytes)"
    done
    "$qopt" "$spec" --emit=fatbin -o "$out/$name.fatbin"
  fi
done
if [ -x "$build/bin/qopt-main" ]; then
  "$build/bin/qopt-main" --kernels "$out"
else
  echo "main: $build/bin/qopt-main was not built; kernels are in $out"
fi

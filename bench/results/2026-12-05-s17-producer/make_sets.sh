#!/usr/bin/env bash
# The carried folder of call.sh: a verification carry of the build under test
# (bench/make_verify_carry.sh; its s/head holds the default kernels, with the
# producer warp), plus s/old/ptx: the same kernels with the specs that take a
# producer warp rebuilt with --bulk-copy-producer=false (the per-thread
# cp.async stages of the default before it; every variant, their ptxas
# registers and spills in s/old/ptx/ptxas.txt, the producer ones' in
# s/head/ptx/ptxas.txt).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=.carry/${1:-c10}
bash bench/make_verify_carry.sh "$out"
stage=$(mktemp -d)
tar -C "$stage" -xJf "$out/s.tar.xz"
mkdir -p "$stage/s/old"
cp -r "$stage/s/head/ptx" "$stage/s/old/ptx"
specs=""
for s in specs/*.qopt; do
  n=$(basename "$s" .qopt)
  grep -q producer_warps "build/kernels/ptx/$n.manifest.json" && specs="$specs $n"
done
echo "producer-warp specs:$specs"
SPECS="$specs" bash bench/make_kernel_set.sh "$stage/s/old/ptx" --bulk-copy-producer=false
SPECS="$specs" bash bench/make_kernel_set.sh "$stage/head-stats"
cp "$stage/head-stats/ptxas.txt" "$stage/s/head/ptx/ptxas.txt"
rm -rf "$stage/head-stats"
tar -C "$stage" -cJf "$out/s.tar.xz" s
rm -rf "$stage"
du -sh "$out"

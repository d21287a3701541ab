#!/usr/bin/env bash
# The carried folder of a verification call (bench/results/*-verify/call.sh)
# from a full build of the commit under test:
#   bin/            qopt-bench and the four GPU suites, stripped
#   s.tar.xz        s/head/ptx (build/kernels/ptx), s/ieee (the IEEE-rounding
#                   builds), s/fast (the fast-mode builds)
#   build.tar.xz    what pytest and the main job read: build/bin/{qopt-main,qopt-step},
#                   build/kernels/{host,host-fast,ptx}, libqopt_kernels.so,
#                   the runtime library, qopt-shipped-kernels-tests
# Usage: bash bench/make_verify_carry.sh .carry/NAME [BUILD_DIR]
set -euo pipefail
out=$(realpath -m "${1:?usage: make_verify_carry.sh .carry/NAME [BUILD_DIR]}")
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${2:-$root/build}" && pwd)
rm -rf "$out" && mkdir -p "$out/bin"
for b in bench/qopt-bench test/gpu/qopt-gpu-tests test/gpu/qopt-gpu-checked-rounding-tests \
         test/gpu/qopt-gpu-fast-tests test/gpu/qopt-gpu-guarded-ieee-tests; do
  cp "$build/$b" "$out/bin/" && strip "$out/bin/$(basename "$b")"
done
stage=$(mktemp -d)
mkdir -p "$stage/s/head" "$stage/s"
cp -r "$build/kernels/ptx" "$stage/s/head/ptx"
cp -r "$build/test/gpu/kernels-ieee-rounding" "$stage/s/ieee"
cp -r "$build/test/gpu/kernels-fast" "$stage/s/fast"
tar -C "$stage" -cJf "$out/s.tar.xz" s
rm -rf "$stage"
(cd "$build/.." && tar -cJf "$out/build.tar.xz" --transform "s,^$(basename "$build"),build," \
  "$(basename "$build")/bin/qopt-main" "$(basename "$build")/bin/qopt-step" "$(basename "$build")/kernels/host" \
  "$(basename "$build")/kernels/host-fast" "$(basename "$build")/kernels/ptx" \
  "$(basename "$build")/lib/libqopt_kernels.so" "$(basename "$build")"/runtime/libqopt_runtime.so* \
  "$(basename "$build")/test/gpu/qopt-shipped-kernels-tests")
du -sh "$out"

#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz: the spec frontend, the manifest
# reader, the safetensors reader; ASan + UBSan, clang-22) in
# ${QOPT_FUZZ_BUILD_DIR:-build-fuzz} and runs each for SECONDS (default 60),
# seeded from specs/, the frontend's lit inputs, test/fuzz/corpus, the built
# kernels' manifests and safetensors files. Needs the main build
# (${QOPT_BUILD_DIR:-build}) for the manifests and qopt-step. Each corpus
# grows in <fuzz build>/corpus/<target> from run to run; a crash, leak or
# sanitizer report fails with the reproducer in <fuzz build>/crashes/.
# Usage: bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${QOPT_BUILD_DIR:-build}
fuzz=${QOPT_FUZZ_BUILD_DIR:-build-fuzz}
cxx=${QOPT_FUZZ_CXX:-clang++-22}
cc=${QOPT_FUZZ_CC:-clang-22}
mkdir -p "$fuzz"
cmake -G Ninja -S . -B "$fuzz" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DQOPT_BUILD_FUZZERS=ON -DQOPT_ENABLE_TESTS=OFF \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit ${QOPT_CMAKE_ARGS:-} > "$fuzz/configure.log" \
  || { cat "$fuzz/configure.log"; exit 1; }
cmake --build "$fuzz" --target qopt-spec-fuzzer qopt-manifest-fuzzer qopt-safetensors-fuzzer

seeds="$fuzz/seeds"
rm -rf "$seeds" && mkdir -p "$seeds/spec" "$seeds/manifest" "$seeds/safetensors" "$fuzz/crashes"
cp specs/*.qopt test/Frontend/*.qopt test/fuzz/corpus/* "$seeds/spec/"
for d in "$build"/kernels/*/; do
  for m in "$d"*.manifest.json; do
    [ -e "$m" ] && cp "$m" "$seeds/manifest/$(basename "$d")-$(basename "$m")"
  done
done
cp test/data/golden/dynamic_map.safetensors test/data/golden/torch_optim.safetensors "$seeds/safetensors/"
for k in flash_adamw adamw8bit_block256 flash_sgd; do
  "$build/bin/qopt-step" -q --kernel "$k" --make-example "$seeds/safetensors/$k.safetensors" \
    --tensor w=40 --tensor b=3x5 --table m.qmap=dynamic-signed --table v.qmap=dynamic-unsigned \
    2>/dev/null || "$build/bin/qopt-step" -q --kernel "$k" \
    --make-example "$seeds/safetensors/$k.safetensors" --tensor w=40 --tensor b=3x5
done

run() { # target seeds max_len [options...]
  local target=$1 seedDir=$2 maxLen=$3; shift 3
  local corpus="$fuzz/corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s"
  "$fuzz/bin/$target" -max_total_time="$seconds" -max_len="$maxLen" -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$fuzz/crashes/$target-" "$@" \
    "$corpus" "$seeds/$seedDir" 2>&1 |
    sed '/Recommended dictionary/,/End of recommended dictionary/d' | tail -n 40
}
run qopt-spec-fuzzer spec 16384 -dict=test/fuzz/qopt.dict
run qopt-manifest-fuzzer manifest 65536
run qopt-safetensors-fuzzer safetensors 65536

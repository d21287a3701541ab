#!/usr/bin/env bash
# Configures and builds everything into ${QOPT_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${QOPT_BUILD_DIR:-build}
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit ${QOPT_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"

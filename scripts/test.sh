#!/usr/bin/env bash
# Builds everything and runs the whole test suite: the lit suite (frontend,
# dialect, passes, GPU lowering, PTX) and the GoogleTest suites through CTest.
# GPU tests skip with a message where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${QOPT_BUILD_DIR:-build}
bash scripts/build.sh
cmake --build "$build" --target check-qopt
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"

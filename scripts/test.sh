#!/usr/bin/env bash
# Builds everything and runs the whole test suite: the lit suite (frontend,
# dialect, passes, GPU lowering, PTX), the GoogleTest suites through CTest,
# the Python package's pytest suite (python/tests), and each libFuzzer target
# for a minute (scripts/fuzz.sh; QOPT_FUZZ_SECONDS, 0 skips it).
# GPU tests skip with a message where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${QOPT_BUILD_DIR:-build}
bash scripts/build.sh
# The compiler's size limits (docs/architecture.md): no function in lib/ over
# 150 lines, no file over 800.
python3 scripts/check-sizes.py --top 0 lib
cmake --build "$build" --target check-qopt
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
# Python package: a python3 that has torch and pytest (Debian's python3-torch is
# a CPU build; its API tests need no GPU). QOPT_PYTHON overrides the choice.
py=${QOPT_PYTHON:-}
if [ -z "$py" ]; then
  for c in python3 /usr/bin/python3; do
    if "$c" -c 'import torch, pytest' 2>/dev/null; then py=$c; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "test: no python3 with torch and pytest (run scripts/setup.sh)" >&2
  exit 1
fi
# Any non-zero exit fails, 5 ("no tests collected") included.
QOPT_BUILD_DIR="$build" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$py" -m pytest -q -p no:cacheprovider python/tests
# The fuzzers (ASan + UBSan): the spec frontend, the manifest reader and the
# safetensors reader, a minute each, seeded from specs/, the lit inputs and the
# built manifests. They need clang-22 and libFuzzer (scripts/setup.sh).
fuzzSeconds=${QOPT_FUZZ_SECONDS:-60}
if [ "$fuzzSeconds" != 0 ]; then
  if command -v "${QOPT_FUZZ_CXX:-clang++-22}" > /dev/null; then
    QOPT_BUILD_DIR="$build" bash scripts/fuzz.sh "$fuzzSeconds"
  else
    echo "test: no ${QOPT_FUZZ_CXX:-clang++-22}: the fuzzers did not run (scripts/setup.sh installs it)" >&2
    exit 1
  fi
fi

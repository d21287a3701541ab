#!/usr/bin/env bash
# main after 365a3db on a GPU: the GPU modules' embedded manifests (7e0015f,
# 427280c) under a real driver, the runtime's cross-launch checks and the host
# libraries' manifests of the fourteenth session (first GPU run), the fallback
# launch shapes (889209f) against the host lowering, the GPU suites, the FSDP
# test on torch 2.11 and the rest of pytest.
set -uo pipefail
source bench/device_call.sh
device_call_begin verify .carry/c7
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
X=$C/x/build
Q=$X/bin/qopt-step
W=$(mktemp -d)
stamp manifest
# The shipped FlashAdamW on host and GPU from one input: the same bytes.
$Q --kernel flash_adamw --kernels "$X/kernels" --make-example "$W/ex.st" --tensor w=4096x300 --tensor b=3001 --seed 5 > /dev/null
$Q --kernel flash_adamw --kernels "$X/kernels" --in "$W/ex.st" --out "$W/h.st" --steps 3 2>&1 | tail -1
$Q --kernel flash_adamw --kernels "$X/kernels" --backend cuda --in "$W/ex.st" --out "$W/c.st" --steps 3 2>&1 | tail -1
cmp "$W/h.st" "$W/c.st" && echo "flash_adamw host == cuda"
# An edited manifest beside the PTX: refused before any launch.
mkdir -p "$W/edit" && cp "$X/kernels/ptx/flash_adamw.ptx" "$X/kernels/ptx/flash_adamw.manifest.json" "$W/edit/"
python3 - "$W/edit/flash_adamw.manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["states"][0]["group"] = 64
json.dump(m, open(sys.argv[1], "w"))
PY
$Q --kernel "$W/edit/flash_adamw.manifest.json" --backend cuda --in "$W/ex.st" --out "$W/e.st" 2>&1 | cut -c1-400
echo "edited rc=${PIPESTATUS[0]} (expected nonzero); output written: $([ -e "$W/e.st" ] && echo yes || echo no)"
stamp fallback
F=$(pwd)/bench/results/2026-12-05-verify-manifest
for k in Mixed Red; do
  $Q --kernel $k --kernels "$C/fallback" --make-example "$W/$k.st" --tensor w=4096x100 --tensor b=3000 --seed 3 \
    --table v.qmap=dynamic-unsigned > /dev/null 2>&1 ||
    $Q --kernel $k --kernels "$C/fallback" --make-example "$W/$k.st" --tensor w=4096x100 --tensor b=3000 --seed 3 > /dev/null
  $Q --kernel $k --kernels "$C/fallback" --in "$W/$k.st" --out "$W/$k-h.st" --steps 3 2>&1 | tail -1
  $Q --kernel $k --kernels "$C/fallback" --backend cuda --in "$W/$k.st" --out "$W/$k-c.st" --steps 3 2>&1 | tail -1
  cmp "$W/$k-h.st" "$W/$k-c.st" && echo "$k host == cuda"
done
gpu_suites head "$S/ieee"
stamp guarded
timeout 100 "$B/qopt-gpu-guarded-ieee-tests" --gtest_brief=1 > "$R/guarded.log" 2>&1
echo "guarded rc=$?"; tail -3 "$R/guarded.log"
stamp fast
QOPT_TEST_FAST_PTX_DIR=$S/fast shards fast 8 120 "$B/qopt-gpu-fast-tests"
stamp fsdp
QOPT_BUILD_DIR=$X PYTHONPATH=$PWD/python timeout 100 python3 -m pytest -v -rfs -p no:cacheprovider \
  python/tests/test_train_fsdp.py > "$R/fsdp.log" 2>&1
echo "fsdp rc=$?"; grep -E "PASSED|FAILED|SKIPPED|ERROR" "$R/fsdp.log" | cut -c1-160 | head -20
stamp pytest-rest
QOPT_BUILD_DIR=$X PYTHONPATH=$PWD/python timeout 200 python3 -m pytest -q -rfs -p no:cacheprovider \
  --ignore=python/tests/test_train_fsdp.py python/tests > "$R/pytest.log" 2>&1
echo "pytest rc=$?"; tail -1 "$R/pytest.log"
grep -E "^(FAILED|ERROR) " "$R/pytest.log" | cut -c1-200 | head -30
device_call_end

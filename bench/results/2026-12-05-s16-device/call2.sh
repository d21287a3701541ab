#!/usr/bin/env bash
# After call.sh: test_flash_api.py's torch.optim checkpoint test (adamw, fp16)
# failed there; torch's fp16 AdamW adds eps = 1e-8 in fp16 (0), so a second
# moment that underflows divides by zero. The test's gradients are now kept
# away from 0; run it, and show torch 2.11's fp16 AdamW giving inf for a tiny
# gradient.
set -uo pipefail
source bench/device_call.sh
device_call_begin fp16 .carry/c9
mkdir -p "$C/x" && tar -C "$C/x" -xJf "$C/build.tar.xz"
export QOPT_BUILD_DIR=$C/x/build PYTHONPATH=$PWD/python
timeout 120 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_flash_api.py -k "16bit_params" 2>&1 |
  grep -E "Failed|passed|failed|off; first" | cut -c1-400
python3 - <<'PY'
import torch
w = torch.nn.Parameter(torch.tensor([0.5, 0.5], dtype=torch.float16))
o = torch.optim.AdamW([w], lr=1e-2, foreach=False)
w.grad = torch.tensor([1.0, 0.004], dtype=torch.float16)
o.step()
print(torch.__version__, "fp16 AdamW, gradients 1 and 0.004:", w.tolist(), o.state[w]["exp_avg_sq"].tolist())
PY
device_call_end

"""DDP and FSDP2 (issue 6, item 3): runs dist_check.py under torchrun on two GPUs and requires its
PASS (per-step full weights equal to a single-process run within FlashOptim's table). Skips, with
the reason, on machines with fewer than two CUDA devices (CI, 1-GPU machines)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import backend_available, skip_reason

SCRIPT = Path(__file__).with_name("dist_check.py")


def _run(extra=()):
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        pytest.skip(f"needs 2 CUDA GPUs (torch.cuda.device_count() = {n}); on a 2-GPU machine: "
                    f"torchrun --nproc_per_node=2 python/tests/dist_check.py {' '.join(extra)}")
    if not backend_available("cuda"):
        pytest.skip(skip_reason("cuda"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPT.parent.parent), env.get("PYTHONPATH")]))
    # NVLink multicast stays off (as the project runs NCCL everywhere)
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                 ("NVSHMEM_DISABLE_NVLS", "1")):
        env.setdefault(k, v)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(SCRIPT), *extra]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-8000:] + "\n" + r.stderr[-4000:])


def test_fsdp2_clip_in_the_kernel_matches_single_process():
    """FlashAdamWClip under DDP and FSDP2: its norm is a whole-step reduction whose rows FSDP2's
    ranks all-reduce between the step's phases (the split API); the single-process run clips by
    the same global norm."""
    from qopt import _capi as C
    from qopt import _runtime as R
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        try:
            R.find_manifest("flash_adamw_clip", C.BACKEND_CUDA)
        except FileNotFoundError as e:
            pytest.skip(f"no kernel flash_adamw_clip ({e})")
    _run(["--optimizer", "clip"])


def test_ddp_and_fsdp2_match_single_process():
    _run()

"""Shared fixtures: which qopt backends can step here.

API tests need only the runtime library and the manifests. Tests that step need a backend: CUDA
(torch.cuda and the qopt runtime both see a GPU) or the host backend (a kernel directory whose
manifests have a "host" field: build/kernels/host, or QOPT_KERNEL_DIR). They are parametrized by
device and skip, with the reason, where that device's backend is missing.
"""

import os
import sys
from pathlib import Path

import pytest
import torch

# Run from a source checkout without installing: python/ on the path.
_PKG_ROOT = Path(__file__).resolve().parent.parent
if str(_PKG_ROOT) not in sys.path:
    sys.path.insert(0, str(_PKG_ROOT))

import qopt  # noqa: E402
from qopt import _capi as C  # noqa: E402
from qopt import _runtime as R  # noqa: E402

_why: dict = {}


def backend_available(device: str) -> bool:
    if device in _why:
        return _why[device] is None
    reason = None
    try:
        if device == "cuda":
            if not torch.cuda.is_available():
                reason = "torch.cuda.is_available() is False (this PyTorch has no CUDA or no GPU)"
            elif R.cuda_device_count() == 0:
                reason = "the qopt runtime sees no CUDA device"
            else:
                R.kernel(R.kernel_spec("flash_adamw", C.BACKEND_CUDA), C.BACKEND_CUDA, 0)
        else:
            R.kernel(R.kernel_spec("flash_adamw", C.BACKEND_HOST), C.BACKEND_HOST, 0)
    except Exception as e:  # no kernel directory, no host implementation, no driver, ...
        reason = f"no qopt {device} backend: {e}"
    _why[device] = reason
    return reason is None


def skip_reason(device: str) -> str:
    backend_available(device)
    return _why[device] or ""


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """A device whose qopt backend can step (skips otherwise, with the reason)."""
    dev = request.param
    if not backend_available(dev):
        pytest.skip(skip_reason(dev))
    return torch.device(dev)


@pytest.fixture
def cuda():
    if not backend_available("cuda"):
        pytest.skip(skip_reason("cuda"))
    return torch.device("cuda")


def pytest_report_header(config):
    lines = [f"qopt: runtime {C.library_path()}, torch {torch.__version__}"]
    for dev in ("cpu", "cuda"):
        lines.append(f"qopt {dev} backend: " + ("available" if backend_available(dev)
                                                 else "missing (" + skip_reason(dev) + ")"))
    return lines


# PyTorch 1.13's weights-only unpickler has no float opcode (any optimizer state_dict holds an lr)
WEIGHTS_ONLY = int(torch.__version__.split(".")[0]) >= 2


def bf16_params(*shapes, seed=0):
    """Parameters of the given shapes, N(0, 1) rounded to bf16 (a seeded generator)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(torch.bfloat16)) for s in shapes]

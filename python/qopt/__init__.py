"""qopt for PyTorch: drop-in optimizers that step with qopt's fused multi-tensor kernels.

    import qopt
    optimizer = qopt.FlashAdamW(model.parameters(), lr=1e-3)   # was torch.optim.AdamW

The runtime library and the kernels are found through QOPT_RUNTIME_LIBRARY / QOPT_KERNEL_DIR, else
in the package (a bundled install), else in the build tree of the source checkout (see README.md).
"""

from __future__ import annotations

from typing import Dict

import torch

from ._capi import QoptError
from .codebook import create_dynamic_map
from .optim import (STATE_FORMAT, STATE_FORMAT_VERSION, AdamW8bit, FlashAdam, FlashAdamW, FlashLion,
                    FlashSGD, FlashSGDW, QoptOptimizer)
from . import ecc

__version__ = "0.1.0"

__all__ = ["FlashAdamW", "FlashAdam", "FlashSGD", "FlashSGDW", "FlashLion", "AdamW8bit",
           "QoptOptimizer", "QoptError", "master_weights", "fp32_state_dict", "create_dynamic_map",
           "runtime_version", "STATE_FORMAT", "STATE_FORMAT_VERSION", "__version__"]


def runtime_version() -> tuple:
    """(runtime version, manifest version) of the loaded libqopt_runtime.so."""
    from . import _capi
    return _capi.version()


@torch.no_grad()
def master_weights(optimizer: QoptOptimizer) -> Dict[torch.Tensor, torch.Tensor]:
    """float32 master weights, keyed by parameter: the bf16 parameter plus its error-bit correction
    (docs/numerics.md section 3, bit-identical to qopt_error_bits_decode) where the optimizer keeps
    error bits, else the parameter converted to float32. Same shape and device as the parameter."""
    out: Dict[torch.Tensor, torch.Tensor] = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            local = p.to_local() if hasattr(p, "to_local") else p
            rho = optimizer.state.get(p, {}).get("error_bits")
            if rho is not None:
                out[p] = ecc.decode(local.detach(), rho)
            else:
                out[p] = local.detach().float().clone()
    return out


def fp32_state_dict(optimizer: QoptOptimizer, model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """The model's state_dict in float32, with every parameter the optimizer steps replaced by its
    reconstructed master weight (for exporting or evaluating the full-precision model)."""
    masters = master_weights(optimizer)
    module = model.module if hasattr(model, "module") else model
    out = {k: v.detach().float().clone() for k, v in module.state_dict().items()}
    for name, p in module.named_parameters():
        if p in masters:
            out[name] = masters[p]
    return out

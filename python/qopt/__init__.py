"""qopt for PyTorch: drop-in optimizers that step with qopt's fused multi-tensor kernels.

    import qopt
    optimizer = qopt.FlashAdamW(model.parameters(), lr=1e-3)   # was torch.optim.AdamW

The runtime library and the kernels are found through QOPT_RUNTIME_LIBRARY / QOPT_KERNEL_DIR, else
in the package (a bundled install), else in the build tree of the source checkout (see README.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Union

import torch

from ._capi import QoptError
from .codebook import create_dynamic_map
from .optim import (STATE_FORMAT, STATE_FORMAT_VERSION, AdamW4bit, AdamW8bit, FlashAdam, FlashAdamW,
                    FlashAdamWClip, FlashLion, FlashSGD, FlashSGDW, QoptOptimizer)
from .adam_atan2 import AdamAtan2
from .blockwise import (Adagrad8bit, Adagrad32bit, AdEMAMix8bit, AdEMAMix32bit, Lion8bit, Lion32bit,
                        RMSprop8bit, RMSprop32bit)
from .trust_ratio import LAMB, LAMB8bit, LAMB32bit, LARS, LARS8bit, LARS32bit, StableAdamW
from . import ecc
from ._policy import GlobalOptimManager
from ._release import GradientReleaseHandle, enable_gradient_release
from ._reshard import fsdp2_unavailable
from .flash import (FlashOptimizer, NumericsError, cast_model, compute_ecc_bits,
                    reconstruct_fp32_param)

__version__ = "0.1.0"

__all__ = ["FlashAdamW", "FlashAdamWClip", "FlashAdam", "FlashSGD", "FlashSGDW", "FlashLion", "AdamW8bit", "AdamW4bit",
           "RMSprop8bit", "RMSprop32bit", "Adagrad8bit", "Adagrad32bit", "Lion8bit", "Lion32bit",
           "AdEMAMix8bit", "AdEMAMix32bit", "AdamAtan2", "LAMB8bit", "LAMB32bit", "LAMB",
           "LARS8bit", "LARS32bit", "LARS", "StableAdamW",
           "QoptOptimizer", "QoptError", "master_weights", "fp32_state_dict", "create_dynamic_map",
           "runtime_version", "forget_allocations", "kernel_dirs", "default_kernel_dirs", "STATE_FORMAT",
           "STATE_FORMAT_VERSION", "GlobalOptimManager", "FlashOptimizer", "NumericsError", "cast_model",
           "compute_ecc_bits", "reconstruct_fp32_param", "enable_gradient_release",
           "GradientReleaseHandle", "fsdp2_unavailable", "__version__"]


def runtime_version() -> tuple:
    """(runtime version, manifest version) of the loaded libqopt_runtime.so."""
    from . import _capi
    return _capi.version()


def forget_allocations() -> None:
    """Makes the runtime ask the CUDA driver again about the memory of every buffer at the next step
    (``qopt_context_forget_allocations`` on every CUDA context this process made). The runtime
    remembers, per allocation, that a gradient's memory is device memory of the right device and
    how far it reaches; call this after giving memory back to the driver (``torch.cuda.empty_cache()``)
    when tensors may be freed and allocated again at the same addresses between steps."""
    from . import _capi, _runtime
    with _runtime._lock:
        contexts = [c for (backend, _), c in _runtime._contexts.items()
                    if backend == _capi.BACKEND_CUDA]
    for c in contexts:
        _capi.call("qopt_context_forget_allocations", c)


def _backend(device: Optional[Union[str, torch.device]]) -> int:
    from . import _capi
    if device is None:
        return _capi.BACKEND_HOST
    kind = torch.device(device).type
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"qopt: no kernels for device '{device}' (cpu or cuda)")
    return _capi.BACKEND_CUDA if kind == "cuda" else _capi.BACKEND_HOST


def kernel_dirs(device: Optional[Union[str, torch.device]] = None) -> List[Path]:
    """The directories searched for kernels (``<spec>.manifest.json`` and binaries), in order, for
    parameters on `device` ("cpu": the host backend, "cuda"): those of ``$QOPT_KERNEL_DIR`` if it
    is set (it replaces the default search path), else :func:`default_kernel_dirs`. None: the
    host backend's list, which ends with the CUDA directories (a host manifest is taken only by
    the host backend and a CUDA one only by CUDA, so the one list serves both)."""
    from . import _runtime
    return _runtime.kernel_dirs(_backend(device))


def default_kernel_dirs(device: Optional[Union[str, torch.device]] = None) -> List[Path]:
    """The directories searched when ``$QOPT_KERNEL_DIR`` is not set: the kernels bundled in the
    package (``qopt/kernels/{host,fatbin,ptx}``), else those of the source checkout's build tree.
    To add a kernel folder of your own, keep these on the path with it::

        os.environ["QOPT_KERNEL_DIR"] = os.pathsep.join(
            ["my_kernels/cuda", "my_kernels/host"] + [str(d) for d in qopt.default_kernel_dirs()])

    (set before the optimizer first loads a kernel: kernels are looked up once per process)."""
    from . import _runtime
    return _runtime.default_kernel_dirs(_backend(device))


@torch.no_grad()
def master_weights(optimizer: QoptOptimizer) -> Dict[torch.Tensor, torch.Tensor]:
    """float32 master weights, keyed by parameter: the bf16 parameter plus its error-bit correction
    (docs/numerics.md section 3, bit-identical to qopt_error_bits_decode) where the optimizer keeps
    error bits; ``float32(p) + float32(c)`` (one float32 addition) where it keeps a Kahan
    compensation ``c`` (state key ``kahan_comp``, ``FlashAdamW(kahan_sum=True)``: the value the
    compensated sum stands for, docs/numerics.md "Kahan summation"); else the parameter converted
    to float32. Same shape and device as the parameter (its local shard under FSDP2)."""
    out: Dict[torch.Tensor, torch.Tensor] = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            local = p.to_local() if hasattr(p, "to_local") else p
            out[p] = _master_of(local.detach(), optimizer.state.get(p, {}))
    return out


def _master_of(local: torch.Tensor, st) -> torch.Tensor:
    """The float32 value a parameter's state completes it to: error bits, a Kahan compensation,
    or neither."""
    rho = st.get("error_bits")
    if rho is not None:
        return ecc.decode(local, rho)
    comp = st.get("kahan_comp")
    if comp is not None:
        return local.float() + comp.reshape(local.shape).float()
    return local.float().clone()


def fp32_state_dict(optimizer: QoptOptimizer, model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """The model's state_dict in float32, with every parameter the optimizer steps replaced by its
    reconstructed master weight (``master_weights``: error bits or a Kahan compensation added; for
    exporting or evaluating the full-precision model)."""
    masters = master_weights(optimizer)
    module = model.module if hasattr(model, "module") else model
    out = {k: v.detach().float().clone() for k, v in module.state_dict().items()}
    for name, p in module.named_parameters():
        if p in masters:
            out[name] = masters[p]
    return out

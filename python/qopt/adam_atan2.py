"""AdamAtan2: Adam with atan2 in place of the epsilon (Everett et al. 2024, arXiv 2407.05872), with the
name, defaults and state of lucidrains' adam-atan2-pytorch.

The update is ``p = p (1 - lr wd) - lr a atan2(m / bc1, b sqrt(v / bc2))`` (``m``, ``v`` Adam's moments,
``bc1``, ``bc2`` their bias corrections), one kernel launch per parameter group and dtype
(specs/adam_atan2.qopt). atan2 is qopt's float32 atan2 (docs/numerics.md, "Elementary functions").
As the reference implementations, the states take the parameter's dtype: bfloat16 states for a bf16
parameter (specs/adam_atan2_bf16.qopt), float32 states for fp32 and fp16 parameters (qopt has no fp16
state); ``state_dtype`` fixes one for all. No master weight: the parameter is updated in its dtype.
"""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

import torch

from ._base import QoptOptimizer
from ._checks import _check_betas, _check_lr, _check_wd
from ._clip import check_max_grad_norm
from ._launch import _local
from .optim import _check_decoupled_reference, _wd_for_kernel

__all__ = ["AdamAtan2"]


class AdamAtan2(QoptOptimizer):
    """Adam-atan2 (lucidrains' ``AdamAtan2``: lr 1e-4, betas (0.9, 0.99), weight decay 0, a 1.27,
    b 1). Its weight decay is decoupled and scaled by ``lr / initial_lr`` (``p *= 1 - lr / init_lr *
    wd``, as adam-atan2-pytorch); ``decouple_lr=False`` gives ``1 - lr * wd`` (the fused adam-atan2
    package's). ``state_dtype``: None (the parameter's: bf16 for a bf16 parameter, else float32),
    ``torch.float32`` or ``torch.bfloat16``. State keys ``exp_avg`` and ``exp_avg_sq``."""

    STREAM_KEYS = {"m": "exp_avg", "v": "exp_avg_sq"}
    _SPECS = {torch.float32: "adam_atan2", torch.bfloat16: "adam_atan2_bf16"}

    def __init__(self, params: Iterable, lr: float = 1e-4, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0, a: float = 1.27, b: float = 1.0, *,
                 decouple_lr: bool = True, state_dtype: Optional[torch.dtype] = None,
                 capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, a=a, b=b,
                        capturable=capturable)
        self._validate_group(defaults)
        if state_dtype is not None and state_dtype not in self._SPECS:
            raise ValueError(f"{type(self).__name__}: state_dtype={state_dtype!r}; None, "
                             f"torch.float32 or torch.bfloat16")
        self.state_dtype = state_dtype
        self._decouple_lr = decouple_lr
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(type(self).__name__, max_grad_norm)
        super().__init__(params, defaults, self._SPECS[state_dtype or torch.float32])

    def _spec_of(self, p: torch.Tensor) -> str:
        if self.state_dtype is not None:
            return self._SPECS[self.state_dtype]
        return self._SPECS[torch.bfloat16 if _local(p).dtype == torch.bfloat16 else torch.float32]

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"])
        _check_wd(group["weight_decay"])
        for key in ("a", "b"):
            v = group[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                raise ValueError(f"Invalid {key} value: {v!r}")

    def _check_group_options(self, group):
        super()._check_group_options(group)
        self._same_for_all(group, "state_dtype", self.state_dtype)
        _check_decoupled_reference(type(self).__name__, group, self._decouple_lr)

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2,
                "weight_decay": _wd_for_kernel(group, self._decouple_lr),
                "a": group["a"], "b": group["b"]}

"""Optimizers whose step reads a per-tensor norm or mean (docs/dsl.md, "Reductions"):
bitsandbytes' LAMB8bit and LARS8bit (and their 32-bit forms) and optimi's StableAdamW.

Each steps with one qopt kernel per parameter group and dtype (specs/reductions/*.qopt), whose
reductions are computed over the tensor's new values before the update: on CUDA by two more
launches on the step's stream (a pre-pass that reads what the reductions need, then one block per
tensor that reduces its chunks; docs/abi.md, "Reductions"), on the CPU by the host function itself.
Both give the same values bit for bit (docs/numerics.md §7).

LAMB and LARS are bitsandbytes' update-norm clipping (``max_unorm``): the update ``u`` is scaled by
``max_unorm * |p| / |u|`` where ``|u| > max_unorm * |p|`` (``|p|`` the parameter's norm before the
step); LAMB's ``u`` is Adam's bias-corrected ``m_hat / (sqrt(v_hat) + eps)``, LARS's the momentum
buffer. The 8-bit states are bitsandbytes' blockwise format (block 256, dynamic maps): qopt has no
per-tensor quantization, so bitsandbytes' ``block_wise=False`` (its default for these two) steps
blockwise as well. State keys as bitsandbytes': ``state1``/``absmax1``/``qmap1`` (LAMB's first
moment, LARS's momentum) and ``state2``/``absmax2``/``qmap2`` (LAMB's second moment); float32
states under ``state1``, ``state2``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

from ._base import QoptOptimizer
from ._checks import _check_betas, _check_eps, _check_lr, _check_wd
from ._clip import check_max_grad_norm
from .blockwise import _Blockwise
from .optim import _reject_bnb_options

__all__ = ["LAMB8bit", "LAMB32bit", "LAMB", "LARS8bit", "LARS32bit", "LARS", "StableAdamW"]


def _check_max_unorm(cls: str, max_unorm) -> None:
    if not 0.0 <= max_unorm:
        raise ValueError(f"{cls}: max_unorm={max_unorm!r}; a norm ratio >= 0 (0: no clipping)")


class LAMB8bit(_Blockwise):
    """bitsandbytes' LAMB8bit (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0,
    max_unorm 1): ``m, v`` as Adam, ``u = (m / bc1) / (sqrt(v / bc2) + eps)``, ``p = (p - s lr u)
    (1 - lr wd)`` with ``s = max_unorm |p| / |u|`` where that is below 1, else 1 (|.| the tensor's
    L2 norm, computed by the kernel). ``bias_correction=False``, ``adam_w_mode=False`` and
    ``amsgrad=True`` are refused."""

    STREAM_KEYS = {"m.codes": "state1", "m.absmax": "absmax1", "v.codes": "state2",
                   "v.absmax": "absmax2"}
    TABLE_KEYS = {"m.qmap": "qmap1", "v.qmap": "qmap2"}
    STREAM_KEYS32 = {"m": "state1", "v": "state2"}
    _SPEC = "lamb8bit"
    _UNSIGNED_STATES = ("v",)

    def __init__(self, params: Iterable, lr: float = 1e-3, bias_correction: bool = True,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, adam_w_mode: bool = True,
                 args=None, min_8bit_size: int = 4096, percentile_clipping: int = 100,
                 block_wise: bool = False, max_unorm: float = 1.0, *, optim_bits: int = 8,
                 capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        if not bias_correction:
            raise ValueError(f"{cls}: bias_correction=False is not supported")
        if not adam_w_mode:
            raise ValueError(f"{cls}: adam_w_mode=False is not supported")
        _check_max_unorm(cls, max_unorm)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        max_unorm=max_unorm, capturable=capturable)
        self._validate_group(defaults)
        _reject_bnb_options(cls, percentile_clipping, True, False, amsgrad=amsgrad, args=args)
        self._init_blockwise(optim_bits, min_8bit_size, skip_nonfinite, max_grad_norm)
        super().__init__(params, defaults, self._spec)

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"])
        _check_eps(group["eps"])
        _check_wd(group["weight_decay"])
        _check_max_unorm(type(self).__name__, group["max_unorm"])

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "eps": group["eps"],
                "weight_decay": group["weight_decay"], "max_unorm": group["max_unorm"]}


class LAMB32bit(LAMB8bit):
    """LAMB8bit with float32 states (bitsandbytes' LAMB32bit)."""

    def __init__(self, params: Iterable, lr: float = 1e-3, bias_correction: bool = True,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, adam_w_mode: bool = True,
                 args=None, min_8bit_size: int = 4096, percentile_clipping: int = 100,
                 block_wise: bool = False, max_unorm: float = 1.0, *, capturable: bool = False,
                 skip_nonfinite: bool = False, max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, bias_correction, betas, eps, weight_decay, amsgrad,
                         adam_w_mode, args, min_8bit_size, percentile_clipping, block_wise,
                         max_unorm, optim_bits=32, capturable=capturable,
                         skip_nonfinite=skip_nonfinite, max_grad_norm=max_grad_norm)


class LAMB(LAMB8bit):
    """bitsandbytes' LAMB: ``optim_bits`` 32 by default."""

    def __init__(self, params: Iterable, lr: float = 1e-3, bias_correction: bool = True,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, adam_w_mode: bool = True,
                 optim_bits: int = 32, args=None, min_8bit_size: int = 4096,
                 percentile_clipping: int = 100, block_wise: bool = False,
                 max_unorm: float = 1.0, *, capturable: bool = False,
                 skip_nonfinite: bool = False, max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, bias_correction, betas, eps, weight_decay, amsgrad,
                         adam_w_mode, args, min_8bit_size, percentile_clipping, block_wise,
                         max_unorm, optim_bits=optim_bits, capturable=capturable,
                         skip_nonfinite=skip_nonfinite, max_grad_norm=max_grad_norm)


class LARS8bit(_Blockwise):
    """bitsandbytes' LARS8bit (momentum 0 refused, dampening 0, weight decay 0, max_unorm 0.02;
    ``lr`` is required): ``d = g + wd p``, ``buf = d`` at step 1 else ``momentum buf + d``,
    ``p = p - s lr buf`` with ``s = max_unorm |p| / |buf|`` where that is below 1, else 1.
    ``nesterov=True`` and ``dampening`` other than 0 are refused (bitsandbytes' kernel has
    neither)."""

    STREAM_KEYS = {"buf.codes": "state1", "buf.absmax": "absmax1"}
    TABLE_KEYS = {"buf.qmap": "qmap1"}
    STREAM_KEYS32 = {"buf": "state1"}
    _SPEC = "lars8bit"

    def __init__(self, params: Iterable, lr: float, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, args=None,
                 min_8bit_size: int = 4096, percentile_clipping: int = 100,
                 max_unorm: float = 0.02, *, optim_bits: int = 8, capturable: bool = False,
                 skip_nonfinite: bool = False, max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        if momentum == 0:
            raise NotImplementedError("LARS without momentum is not supported!")
        if dampening != 0:
            raise ValueError(f"{cls}: dampening={dampening} is not supported (0 only)")
        if nesterov:
            raise ValueError(f"{cls}: nesterov=True is not supported")
        _check_max_unorm(cls, max_unorm)
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                        max_unorm=max_unorm, capturable=capturable)
        self._validate_group(defaults)
        _reject_bnb_options(cls, percentile_clipping, True, False, args=args)
        self._init_blockwise(optim_bits, min_8bit_size, skip_nonfinite, max_grad_norm)
        super().__init__(params, defaults, self._spec)

    def _validate_group(self, group):
        _check_lr(group["lr"])
        if not 0.0 <= group["momentum"] < 1.0:
            raise ValueError(f"{type(self).__name__}: momentum={group['momentum']!r} is outside "
                             f"[0, 1) (a momentum of 1 or more never forgets a gradient)")
        if group["momentum"] == 0:
            raise ValueError(f"{type(self).__name__}: momentum=0 (LARS without momentum) is not "
                             f"supported")
        _check_wd(group["weight_decay"])
        _check_max_unorm(type(self).__name__, group["max_unorm"])

    def _kernel_hypers(self, group):
        return {"lr": group["lr"], "momentum": group["momentum"],
                "weight_decay": group["weight_decay"], "max_unorm": group["max_unorm"]}


class LARS32bit(LARS8bit):
    """LARS8bit with a float32 momentum (bitsandbytes' LARS32bit)."""

    def __init__(self, params: Iterable, lr: float, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, args=None,
                 min_8bit_size: int = 4096, percentile_clipping: int = 100,
                 max_unorm: float = 0.02, *, capturable: bool = False,
                 skip_nonfinite: bool = False, max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, momentum, dampening, weight_decay, nesterov, args,
                         min_8bit_size, percentile_clipping, max_unorm, optim_bits=32,
                         capturable=capturable, skip_nonfinite=skip_nonfinite,
                         max_grad_norm=max_grad_norm)


class LARS(LARS8bit):
    """bitsandbytes' LARS: ``optim_bits`` 32 by default."""

    def __init__(self, params: Iterable, lr: float, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, optim_bits: int = 32,
                 args=None, min_8bit_size: int = 4096, percentile_clipping: int = 100,
                 max_unorm: float = 0.02, *, capturable: bool = False,
                 skip_nonfinite: bool = False, max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, momentum, dampening, weight_decay, nesterov, args,
                         min_8bit_size, percentile_clipping, max_unorm, optim_bits=optim_bits,
                         capturable=capturable, skip_nonfinite=skip_nonfinite,
                         max_grad_norm=max_grad_norm)


class StableAdamW(QoptOptimizer):
    """optimi's StableAdamW (betas (0.9, 0.99), weight decay 1e-2, eps 1e-6; optimi requires
    ``lr``, here 1e-3 by default): AdamW with debiased betas ``b_t = (b^t - b) / (b^t - 1)``
    (``m = m + (1 - b1_t)(g - m)``, ``v = b2_t v + (1 - b2_t) g^2``) and the learning rate divided
    by ``max(1, rms)``, ``rms = sqrt(mean(g^2 / max(v, eps^2)))`` over the tensor (a NaN rms
    leaves it, as Python's ``max``), ``p = p (1 - lr' wd) - lr' m / (sqrt(v) + eps)``. Float32
    states ``exp_avg`` and ``exp_avg_sq``. optimi's ``decouple_lr`` and ``max_lr`` are refused.

    Unlike optimi, no Kahan summation: optimi's default ``kahan_sum=None`` turns it on for bf16
    parameters; here ``None`` and ``False`` step without it (``True`` is refused) and the parameter
    is rounded to its dtype once per step, so a bf16 parameter loses every update smaller than
    half its ulp (an update is about lr: at lr 1e-4 a weight in [1, 2), half ulp 2^-8, never
    moves). Keep such parameters in float32, or use ``FlashAdamW(master_weight_bits=None,
    kahan_sum=True)`` (or its error-bit master weights) where the update-RMS clipping is not
    needed."""

    STREAM_KEYS = {"m": "exp_avg", "v": "exp_avg_sq"}

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 1e-2, eps: float = 1e-6, decouple_lr: bool = False,
                 max_lr: Optional[float] = None, kahan_sum: Optional[bool] = None, *,
                 capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        if decouple_lr or max_lr is not None:
            raise ValueError(f"{cls}: decouple_lr and max_lr are not supported")
        if kahan_sum:
            raise ValueError(f"{cls}: kahan_sum=True is not supported")
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, eps=eps,
                        capturable=capturable)
        self._validate_group(defaults)
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(cls, max_grad_norm)
        super().__init__(params, defaults, "stable_adamw")

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"])
        if not group["eps"] > 0.0:
            raise ValueError(f"{type(self).__name__}: eps={group['eps']!r}; must be > 0 (the "
                             f"rms divides by max(v, eps^2), which is 0 where a gradient is)")
        _check_wd(group["weight_decay"])

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "weight_decay": group["weight_decay"],
                "eps": group["eps"]}

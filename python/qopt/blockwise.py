"""bitsandbytes' element-wise 8-bit optimizers beside AdamW8bit: RMSprop8bit, Adagrad8bit, Lion8bit
and AdEMAMix8bit, with bitsandbytes' names, defaults and state keys, and their 32-bit forms.

Each steps with one qopt kernel per parameter group and dtype (specs/rmsprop8bit.qopt,
adagrad8bit.qopt, lion8bit.qopt, ademamix8bit.qopt): a uint8 code per element into bitsandbytes'
dynamic map (the signed one for every state but AdEMAMix's second moment, as bitsandbytes), a
float32 absmax per block of 256 elements, a bf16, fp16 or fp32 parameter without a master weight.
As bitsandbytes, a parameter with fewer than ``min_8bit_size`` elements, ``optim_bits=32`` or an
override keeps float32 state (specs/*_state32.qopt; _policy.py). The ``*32bit`` classes are the same
optimizers with ``optim_bits=32``.

State keys: ``state1`` / ``absmax1`` / ``qmap1`` (the one state; AdEMAMix's fast EMA),
``state2`` / ``absmax2`` / ``qmap2`` (AdEMAMix's second moment) and ``state3`` / ``absmax3`` /
``qmap3`` (AdEMAMix's slow EMA, which bitsandbytes stacks with the fast one in a ``state1`` of
shape ``(2, *p.shape)``); float32 states under ``state1``, ``state2``, ``state3``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

from ._base import QoptOptimizer
from ._checks import _check_betas, _check_eps, _check_lr, _check_wd
from ._clip import check_max_grad_norm
from ._policy import PolicyMixin
from .optim import BnbArgsMixin, _init_state_policy, _reject_bnb_options, dynamic_map

__all__ = ["RMSprop8bit", "RMSprop32bit", "Adagrad8bit", "Adagrad32bit", "Lion8bit", "Lion32bit",
           "AdEMAMix8bit", "AdEMAMix32bit"]




class _Blockwise(BnbArgsMixin, PolicyMixin, QoptOptimizer):
    """The shared part: the kernel choice by ``optim_bits`` and ``min_8bit_size``, the codebook
    tables (bitsandbytes' dynamic maps) and the options a group may not change."""

    #: the spec of the 8-bit kernel (its float32-state spec: _policy.STATE32_SPECS)
    _SPEC = ""
    #: the states that take the unsigned dynamic map (bitsandbytes' qmap2)
    _UNSIGNED_STATES: Tuple[str, ...] = ()

    def _init_blockwise(self, optim_bits: int, min_8bit_size: int, skip_nonfinite: bool,
                        max_grad_norm: Optional[float]) -> None:
        cls = type(self).__name__
        if optim_bits not in (8, 32):
            raise ValueError(f"{cls}: optim_bits={optim_bits!r}; 8 or 32")
        self._spec = self._SPEC
        _init_state_policy(self, optim_bits == 8, min_8bit_size)
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(cls, max_grad_norm)

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _reject_bnb_options(type(self).__name__, group.get("percentile_clipping", 100),
                            group.get("block_wise", True), group.get("is_paged", False))
        self._same_for_all(group, "min_8bit_size", self.min_8bit_size)

    def _host_tables(self, ks):
        return [dynamic_map(state not in self._UNSIGNED_STATES) for _, state in ks.tables]


class RMSprop8bit(_Blockwise):
    """bitsandbytes' RMSprop8bit: torch.optim.RMSprop's step (``v = alpha v + (1 - alpha) g^2``,
    ``p -= lr g / (sqrt(v) + eps)``, L2 weight decay added to the gradient) with the squared
    average in 8 bits. As bitsandbytes, ``alpha=0`` and ``centered=True`` raise
    NotImplementedError; ``momentum`` other than 0 is refused (the kernel keeps no momentum
    buffer)."""

    STREAM_KEYS = {"v.codes": "state1", "v.absmax": "absmax1"}
    TABLE_KEYS = {"v.qmap": "qmap1"}
    STREAM_KEYS32 = {"v": "state1"}
    _SPEC = "rmsprop8bit"

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, args=None,
                 min_8bit_size: int = 4096, percentile_clipping: int = 100, block_wise: bool = True,
                 *, optim_bits: int = 8, capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        if alpha == 0:
            raise NotImplementedError("RMSprop with alpha==0.0 is not supported!")
        if centered:
            raise NotImplementedError("Centered RMSprop is not supported!")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        capturable=capturable)
        self._validate_group(defaults)
        _reject_bnb_options(cls, percentile_clipping, block_wise, False, args=args)
        self._init_blockwise(optim_bits, min_8bit_size, skip_nonfinite, max_grad_norm)
        super().__init__(params, defaults, self._spec)

    def _validate_group(self, group):
        _check_lr(group["lr"])
        if not 0.0 <= group["alpha"] < 1.0:
            raise ValueError(f"Invalid alpha value: {group['alpha']}")
        _check_eps(group["eps"])
        _check_wd(group["weight_decay"])
        if group.get("momentum", 0) != 0:
            raise ValueError(f"{type(self).__name__}: momentum={group['momentum']} is not "
                             f"supported (the kernel keeps no momentum buffer; 0 only)")

    def _check_group_options(self, group):
        super()._check_group_options(group)
        if group.get("centered", False):
            raise NotImplementedError("Centered RMSprop is not supported!")

    def _kernel_hypers(self, group):
        return {"lr": group["lr"], "alpha": group["alpha"], "eps": group["eps"],
                "weight_decay": group["weight_decay"]}


class RMSprop32bit(RMSprop8bit):
    """RMSprop8bit with float32 state (bitsandbytes' RMSprop32bit)."""

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, args=None,
                 min_8bit_size: int = 4096, percentile_clipping: int = 100, block_wise: bool = True,
                 *, capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, alpha, eps, weight_decay, momentum, centered, args,
                         min_8bit_size, percentile_clipping, block_wise, optim_bits=32,
                         capturable=capturable, skip_nonfinite=skip_nonfinite,
                         max_grad_norm=max_grad_norm)


class Adagrad8bit(_Blockwise):
    """bitsandbytes' Adagrad8bit: torch.optim.Adagrad's step (``s += g^2``, ``p -= clr g /
    (sqrt(s) + eps)`` with ``clr = lr / (1 + (step - 1) lr_decay)``, L2 weight decay added to the
    gradient) with the sum of squares in 8 bits. ``lr_decay`` is torch's (bitsandbytes refuses
    it); ``initial_accumulator_value`` other than 0 is refused, as bitsandbytes does."""

    STREAM_KEYS = {"s.codes": "state1", "s.absmax": "absmax1"}
    TABLE_KEYS = {"s.qmap": "qmap1"}
    STREAM_KEYS32 = {"s": "state1"}
    _SPEC = "adagrad8bit"

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0, eps: float = 1e-10,
                 optim_bits: int = 8, args=None, min_8bit_size: int = 4096,
                 percentile_clipping: int = 100, block_wise: bool = True, *,
                 capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if initial_accumulator_value != 0.0:
            raise ValueError("Initial accumulator value != 0.0 not supported!")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, capturable=capturable)
        self._validate_group(defaults)
        _reject_bnb_options(cls, percentile_clipping, block_wise, False, args=args)
        self._init_blockwise(optim_bits, min_8bit_size, skip_nonfinite, max_grad_norm)
        super().__init__(params, defaults, self._spec)

    def _validate_group(self, group):
        _check_lr(group["lr"])
        if not 0.0 <= group["lr_decay"]:
            raise ValueError(f"Invalid lr_decay value: {group['lr_decay']}")
        _check_wd(group["weight_decay"])
        _check_eps(group["eps"])
        if group.get("initial_accumulator_value", 0.0) != 0.0:
            raise ValueError("Initial accumulator value != 0.0 not supported!")

    def _kernel_hypers(self, group):
        return {"lr": group["lr"], "lr_decay": group["lr_decay"], "eps": group["eps"],
                "weight_decay": group["weight_decay"]}


class Adagrad32bit(Adagrad8bit):
    """Adagrad8bit with float32 state (bitsandbytes' Adagrad32bit)."""

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0, eps: float = 1e-10,
                 optim_bits: int = 32, args=None, min_8bit_size: int = 4096,
                 percentile_clipping: int = 100, block_wise: bool = True, *,
                 capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, lr_decay, weight_decay, initial_accumulator_value, eps, 32,
                         args, min_8bit_size, percentile_clipping, block_wise,
                         capturable=capturable, skip_nonfinite=skip_nonfinite,
                         max_grad_norm=max_grad_norm)


class Lion8bit(_Blockwise):
    """bitsandbytes' Lion8bit: ``p = p (1 - lr wd) - lr sign(beta1 m + (1 - beta1) g)``, ``m =
    beta2 m + (1 - beta2) g``, with the momentum in 8 bits."""

    STREAM_KEYS = {"m.codes": "state1", "m.absmax": "absmax1"}
    TABLE_KEYS = {"m.qmap": "qmap1"}
    STREAM_KEYS32 = {"m": "state1"}
    _SPEC = "lion8bit"

    def __init__(self, params: Iterable, lr: float = 1e-4, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0, args=None, min_8bit_size: int = 4096,
                 percentile_clipping: int = 100, block_wise: bool = True, is_paged: bool = False,
                 *, optim_bits: int = 8, capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, capturable=capturable)
        self._validate_group(defaults)
        _reject_bnb_options(type(self).__name__, percentile_clipping, block_wise, is_paged,
                            args=args)
        self._init_blockwise(optim_bits, min_8bit_size, skip_nonfinite, max_grad_norm)
        super().__init__(params, defaults, self._spec)

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"])
        _check_wd(group["weight_decay"])

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "weight_decay": group["weight_decay"]}


class Lion32bit(Lion8bit):
    """Lion8bit with float32 state (bitsandbytes' Lion32bit)."""

    def __init__(self, params: Iterable, lr: float = 1e-4, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0, args=None, min_8bit_size: int = 4096,
                 percentile_clipping: int = 100, block_wise: bool = True, is_paged: bool = False,
                 *, capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, betas, weight_decay, args, min_8bit_size, percentile_clipping,
                         block_wise, is_paged, optim_bits=32, capturable=capturable,
                         skip_nonfinite=skip_nonfinite, max_grad_norm=max_grad_norm)


class AdEMAMix8bit(_Blockwise):
    """bitsandbytes' AdEMAMix8bit (arXiv 2409.03137): a fast EMA m1 (beta1), a slow EMA m2 (beta3)
    and a second moment nu (beta2), ``p = p (1 - lr wd) - lr (m1 / bc1 + alpha m2) / (sqrt(nu) /
    sqrt(bc2) + eps)``, with bitsandbytes' warm-ups: ``alpha_t = min(step alpha / t_alpha,
    alpha)`` over ``t_alpha`` steps and ``beta3_t = min(exp(ln(beta1) ln(beta3) / ((1 - s)
    ln(beta3) + s ln(beta1))), beta3)``, ``s = step / t_beta3`` (None: no warm-up), computed in
    float64 per launch (the host C library's exp and log, as Python's math)."""

    STREAM_KEYS = {"m1.codes": "state1", "m1.absmax": "absmax1", "nu.codes": "state2",
                   "nu.absmax": "absmax2", "m2.codes": "state3", "m2.absmax": "absmax3"}
    TABLE_KEYS = {"m1.qmap": "qmap1", "nu.qmap": "qmap2", "m2.qmap": "qmap3"}
    STREAM_KEYS32 = {"m1": "state1", "nu": "state2", "m2": "state3"}
    _SPEC = "ademamix8bit"
    _UNSIGNED_STATES = ("nu",)

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: Tuple[float, float, float] = (0.9, 0.999, 0.9999), alpha: float = 5.0,
                 t_alpha: Optional[int] = None, t_beta3: Optional[int] = None, eps: float = 1e-8,
                 weight_decay: float = 1e-2, min_8bit_size: int = 4096, is_paged: bool = False,
                 *, optim_bits: int = 8, capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        defaults = dict(lr=lr, betas=betas, alpha=alpha, t_alpha=t_alpha, t_beta3=t_beta3, eps=eps,
                        weight_decay=weight_decay, capturable=capturable)
        self._validate_group(defaults)
        _reject_bnb_options(type(self).__name__, 100, True, is_paged)
        self._init_blockwise(optim_bits, min_8bit_size, skip_nonfinite, max_grad_norm)
        super().__init__(params, defaults, self._spec)

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"], n=3)
        _check_eps(group["eps"])
        _check_wd(group["weight_decay"])
        if not 0.0 <= group["alpha"]:
            raise ValueError(f"Invalid alpha value: {group['alpha']}")
        for key in ("t_alpha", "t_beta3"):
            t = group[key]
            if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
                raise ValueError(f"Invalid {key} value: {t!r} (None or a positive number of steps)")

    def _kernel_hypers(self, group):
        b1, b2, b3 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "beta3": b3, "alpha": group["alpha"],
                "t_alpha": float(group["t_alpha"] or 0), "t_beta3": float(group["t_beta3"] or 0),
                "eps": group["eps"], "weight_decay": group["weight_decay"]}


class AdEMAMix32bit(AdEMAMix8bit):
    """AdEMAMix8bit with float32 states (bitsandbytes' AdEMAMix32bit, and AdEMAMix's default)."""

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: Tuple[float, float, float] = (0.9, 0.999, 0.9999), alpha: float = 5.0,
                 t_alpha: Optional[int] = None, t_beta3: Optional[int] = None, eps: float = 1e-8,
                 weight_decay: float = 1e-2, min_8bit_size: int = 4096, is_paged: bool = False,
                 *, capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        super().__init__(params, lr, betas, alpha, t_alpha, t_beta3, eps, weight_decay,
                         min_8bit_size, is_paged, optim_bits=32, capturable=capturable,
                         skip_nonfinite=skip_nonfinite, max_grad_norm=max_grad_norm)

"""torch.optim.Optimizer classes that step their parameters with qopt's fused multi-tensor kernels.

One launch per parameter group and parameter dtype (bf16, fp16, fp32: each has its kernel, a
variant of the same spec; more launches only when the group's parameters live on several devices or
have taken different numbers of steps), on ``torch.cuda.current_stream()``; no host sync. The
optimizer state is the kernel's own quantized state (codes, scales or absmax, error bits), created
lazily from ``qopt_manifest_state_layout`` and kept as it is in ``state_dict``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch

from ._base import _INITIAL_LR, QoptOptimizer
from ._checks import _check_betas, _check_eps, _check_lr, _check_wd
# Re-exported: the checkpoint format's name and version, as qopt.optim has always given them.
from ._checkpoint import STATE_FORMAT, STATE_FORMAT_VERSION  # noqa: F401
# Re-exported: the names of the launch machinery tests and tools reach through qopt.optim.
from ._launch import (PARAM_DTYPES, QOPT_DTYPES, TORCH_DTYPES, _backend_of,  # noqa: F401
                      _deferred_handles)
from ._clip import check_max_grad_norm
from ._policy import STATE32_SPECS, PolicyMixin
from .flash import FlashOptimizer
from .codebook import create_dynamic_map

__all__ = ["QoptOptimizer", "FlashAdamW", "FlashAdamWClip", "FlashAdam", "FlashSGD", "FlashSGDW", "FlashLion",
           "AdamW8bit", "AdamW4bit", "STATE_FORMAT", "STATE_FORMAT_VERSION"]



def _check_adam_group(group):
    """PyTorch's checks of an Adam-family param group (lr, eps, betas, weight decay)."""
    _check_lr(group["lr"])
    _check_eps(group["eps"])
    _check_betas(group["betas"])
    _check_wd(group["weight_decay"])



def _reject_flashoptim_flags(cls: str, quantize, compress_state_dict, check_numerics, fused) -> None:
    if not isinstance(quantize, bool):
        raise ValueError(f"{cls}: quantize={quantize!r}; True (8-bit states) or False (float32)")
    for name, v in (("compress_state_dict", compress_state_dict),
                    ("check_numerics", check_numerics), ("fused", fused)):
        if not isinstance(v, bool):
            raise ValueError(f"{cls}: {name}={v!r}; True or False")


def _check_flash_group(opt: "QoptOptimizer", group) -> None:
    """What a FlashOptim-style constructor refuses, or keeps for the whole optimizer, refused in
    a param group too."""
    _reject_flashoptim_flags(type(opt).__name__, group.get("quantize", True),
                             group.get("compress_state_dict", True),
                             group.get("check_numerics", False), group.get("fused", True))
    opt._same_for_all(group, "check_numerics", opt.check_numerics)
    opt._same_for_all(group, "fused", opt.fused)
    opt._same_for_all(group, "compress_state_dict", opt.compress_state_dict)
    opt._same_for_all(group, "master_weight_bits", opt.master_weight_bits)
    opt._same_for_all(group, "quantize", opt.quantize)
    opt._same_for_all(group, "min_8bit_size", opt.min_8bit_size)
    if "decouple_lr" in group and bool(group["decouple_lr"]) != bool(opt._decouple_lr):
        opt._same_for_all(group, "decouple_lr", opt._decouple_lr)
    if getattr(opt, "_DECOUPLED", False):
        _check_decoupled_reference(type(opt).__name__, group, opt._decouple_lr)


def _decoupled_reference_lr(group) -> float:
    """decouple_lr's reference: the group's lr when it was added (_INITIAL_LR; a group's own
    "initial_lr" then, else its "lr"), not a scheduler's "initial_lr"."""
    init = group.get(_INITIAL_LR, group.get("initial_lr", group["lr"]))
    return float(init) if isinstance(init, torch.Tensor) else init


def _check_decoupled_reference(cls: str, group, decouple_lr: bool) -> None:
    """A ValueError where decouple_lr would divide the weight decay by a reference lr of 0 (a
    group created at lr 0 to warm up from): the decay would be undefined."""
    if decouple_lr and group["weight_decay"] != 0 and _decoupled_reference_lr(group) == 0:
        raise ValueError(
            f"{cls}: decouple_lr=True scales weight_decay by lr / the group's initial lr, and this "
            f"group's initial lr is 0; create the optimizer with the peak lr (a scheduler's warm-up "
            f"then sets the lr of each step) or use decouple_lr=False")


def _wd_for_kernel(group, decouple_lr: bool):
    """With decouple_lr the decay is wd * lr / initial_lr (_decoupled_reference_lr); the kernel
    multiplies lr * wd, so it gets wd / initial_lr. A reference of 0 is refused by the group's
    checks (_check_decoupled_reference) before it gets here."""
    wd = group["weight_decay"]
    if decouple_lr and wd != 0:
        init = _decoupled_reference_lr(group)
        if init == 0:
            _check_decoupled_reference("qopt", group, decouple_lr)
        return wd / init
    return wd


# ------------------------------------------------------------------------- the optimizers

_FLASH_ADAM_KEYS = {"p.ecc": "error_bits", "m.codes": "exp_avg::quantized",
                    "m.scales": "exp_avg::scales", "v.codes": "exp_avg_sq::quantized",
                    "v.scales": "exp_avg_sq::scales"}
#: float32 states (quantize=False, the policy): FlashOptim's and torch's own keys
_FLASH_ADAM_KEYS32 = {"p.ecc": "error_bits", "m": "exp_avg", "v": "exp_avg_sq"}


def _init_state_policy(opt, quantize: bool, min_8bit_size: int) -> None:
    """The policy's options (_policy.py), checked: the float32-state kernel must exist where it
    may be asked for."""
    opt._init_policy(quantize, min_8bit_size)
    if not quantize or min_8bit_size > 0:
        if opt._spec not in STATE32_SPECS:
            raise ValueError(f"{type(opt).__name__}: quantize=False / min_8bit_size need a "
                             f"float32-state kernel, which spec '{opt._spec}' does not have")


class FlashAdamW(FlashOptimizer):
    """AdamW with FlashOptim's compressed state: companded 8-bit moments in groups of 32 with
    float16 scales, and a bf16 (or fp16) parameter whose error bits keep a 24- or 32-bit master
    weight; an fp32 parameter is its own master (no error bits).

    Arguments follow FlashOptim's ``FlashAdamW``. ``master_weight_bits``: 24 (int8 error bits,
    kernel ``flash_adamw``), 32 (int16, ``flash_adamw_ecc16``) or None (no master weight,
    ``flash_adamw_bf16``); fp16 and fp32 parameters use the spec's ``.f16`` / ``.f32`` variant. ``capturable`` (as torch.optim.AdamW): the step counter lives on the
    device and the per-step scalars are computed there, so the step can be captured in a CUDA
    graph; a tensor ``lr`` takes the same path (no host sync).

    ``stochastic_rounding=True`` (only with ``master_weight_bits=None``; kernel
    ``flash_adamw_sr``): a bf16 parameter is rounded stochastically from the float32 result
    instead of to nearest, with Philox4x32-10 keyed by a seed, the step and the element
    (docs/numerics.md, "Stochastic rounding"): the same bits on the GPU and the host for the same
    launch. Each launch (param group and dtype) receives its own seed, ``(seed + k * 0x3779B1) mod
    2^24`` with ``seed`` this argument (an int in [0, 2^24)) and ``k`` the state_dict index of the
    launch's first parameter, so two groups never draw the same bits; a run is reproducible with
    the same param groups. A step count of 2^24 or more is refused (ValueError, nothing stepped):
    the counter is exact only below. fp16 and fp32 parameters round to nearest (their variants
    have no stochastic rounding).

    ``kahan_sum=True`` (only with ``master_weight_bits=None``; kernel ``flash_adamw_kahan``):
    optimi's Kahan summation: a bf16 compensation buffer (state key ``kahan_comp``, 2 B/param)
    keeps what rounding the bf16 parameter loses and adds it back at the next step
    (docs/numerics.md, "Kahan summation"). fp16 and fp32 parameters round to nearest.
    """

    STREAM_KEYS = _FLASH_ADAM_KEYS
    STREAM_KEYS32 = _FLASH_ADAM_KEYS32
    _SPECS = {24: "flash_adamw", 32: "flash_adamw_ecc16", None: "flash_adamw_bf16"}
    #: the kernels of stochastic_rounding=True and kahan_sum=True (None: refused)
    _SR_SPEC: Optional[str] = "flash_adamw_sr"
    _KAHAN_SPEC: Optional[str] = "flash_adamw_kahan"
    _MIN_STEP_RELATIVE_TO_LR = 0.1   # FlashOptim's Adam heuristic (check_numerics)
    _DECOUPLED = True

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, decouple_lr: bool = False,
                 quantize: bool = True, compress_state_dict: bool = True,
                 master_weight_bits: Optional[int] = 24, check_numerics: bool = False,
                 fused: bool = True, *, capturable: bool = False, min_8bit_size: int = 0,
                 skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None, stochastic_rounding: bool = False,
                 seed: int = 0, kahan_sum: bool = False):
        cls = type(self).__name__
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        capturable=capturable)
        _check_adam_group(defaults)
        _reject_flashoptim_flags(cls, quantize, compress_state_dict, check_numerics, fused)
        if master_weight_bits not in self._SPECS:
            raise ValueError(f"{cls}: master_weight_bits={master_weight_bits!r} is not supported; "
                             f"this optimizer has kernels for {sorted(self._SPECS, key=str)}")
        self.stochastic_rounding = _check_stochastic(cls, stochastic_rounding, seed,
                                                     master_weight_bits, self._SR_SPEC)
        self.seed = int(seed)
        self.kahan_sum = _check_kahan(cls, kahan_sum, stochastic_rounding, master_weight_bits,
                                      self._KAHAN_SPEC)
        self.master_weight_bits = master_weight_bits
        self._decouple_lr = decouple_lr
        if self.stochastic_rounding:
            self._SPECS = {None: self._SR_SPEC}
        if self.kahan_sum:
            self._SPECS = {None: self._KAHAN_SPEC}
            self.STREAM_KEYS = dict(self.STREAM_KEYS, **{"p.kahan": "kahan_comp"})
        self._spec = self._SPECS[master_weight_bits]
        _init_state_policy(self, quantize, min_8bit_size)
        self._init_flash(check_numerics, fused, compress_state_dict)
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(cls, max_grad_norm)
        super().__init__(params, defaults, self._SPECS[master_weight_bits])

    def _validate_group(self, group):
        _check_adam_group(group)

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _check_flash_group(self, group)
        if group.get("amsgrad", False):
            raise ValueError(f"{type(self).__name__}: amsgrad=True is not supported")

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        wd = _wd_for_kernel(group, self._decouple_lr) if self._DECOUPLED else group["weight_decay"]
        hypers = {"lr": group["lr"], "beta1": b1, "beta2": b2, "eps": group["eps"],
                  "weight_decay": wd}
        if getattr(self, "stochastic_rounding", False):
            hypers["seed"] = float(self.seed)
        return hypers


def _check_stochastic(cls: str, stochastic_rounding, seed, master_weight_bits,
                      spec: Optional[str]) -> bool:
    """stochastic_rounding and seed, checked: a bool, no master weight, an int seed that a
    float32 uniform holds exactly."""
    if not isinstance(stochastic_rounding, bool):
        raise ValueError(f"{cls}: stochastic_rounding={stochastic_rounding!r}; True or False")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 24:
        raise ValueError(f"{cls}: seed={seed!r}; an int in [0, 2^24) (a float32 uniform of the "
                         f"kernel holds it exactly)")
    if stochastic_rounding and spec is None:
        raise ValueError(f"{cls}: stochastic_rounding=True is not supported")
    if stochastic_rounding and master_weight_bits is not None:
        raise ValueError(f"{cls}: stochastic_rounding=True replaces the master weight; pass "
                         f"master_weight_bits=None (got {master_weight_bits!r})")
    return stochastic_rounding


def _check_kahan(cls: str, kahan_sum, stochastic_rounding, master_weight_bits,
                 spec: Optional[str]) -> bool:
    """kahan_sum, checked: a bool, no master weight, not with stochastic rounding."""
    if not isinstance(kahan_sum, bool):
        raise ValueError(f"{cls}: kahan_sum={kahan_sum!r}; True or False")
    if kahan_sum and spec is None:
        raise ValueError(f"{cls}: kahan_sum=True is not supported")
    if kahan_sum and master_weight_bits is not None:
        raise ValueError(f"{cls}: kahan_sum=True replaces the master weight; pass "
                         f"master_weight_bits=None (got {master_weight_bits!r})")
    if kahan_sum and stochastic_rounding:
        raise ValueError(f"{cls}: kahan_sum and stochastic_rounding are two ways to keep small "
                         f"updates; choose one")
    return kahan_sum


class FlashAdam(FlashAdamW):
    """Adam with L2 weight decay (``grad += weight_decay * param``), FlashOptim's compressed state
    (kernels ``flash_adam``, ``flash_adam_ecc16``, ``flash_adam_bf16`` by ``master_weight_bits``)."""

    _SPECS = {24: "flash_adam", 32: "flash_adam_ecc16", None: "flash_adam_bf16"}
    _SR_SPEC = None
    _KAHAN_SPEC = None
    _DECOUPLED = False

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, quantize: bool = True,
                 compress_state_dict: bool = True, master_weight_bits: Optional[int] = 24,
                 check_numerics: bool = False, fused: bool = True, *, capturable: bool = False,
                 min_8bit_size: int = 0, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         decouple_lr=False, quantize=quantize,
                         compress_state_dict=compress_state_dict,
                         master_weight_bits=master_weight_bits, check_numerics=check_numerics,
                         fused=fused, capturable=capturable, min_8bit_size=min_8bit_size,
                         skip_nonfinite=skip_nonfinite,
                         max_grad_norm=max_grad_norm)


_FLOAT32_MAX = float(torch.finfo(torch.float32).max)


class FlashAdamWClip(FlashAdamW):
    """FlashAdamW (24-bit master weight) with global gradient clipping inside its kernel
    (``flash_adamw_clip``): the kernel reads the global L2 norm of every gradient of the step (a
    whole-step reduction, ``global_norm(g)``, docs/dsl.md) and scales each gradient by
    ``min(1, max_grad_norm / (norm + 1e-6))`` as it loads it, as
    ``torch.nn.utils.clip_grad_norm_(params, max_grad_norm)`` before ``FlashAdamW.step()`` does.
    The step is one runtime call: a norm pass over the gradients (their float64 rows, one per
    tensor), the combine of all rows into the norm, then the step (docs/abi.md, "Whole-step
    reductions"); no host sync, the gradients in memory stay as they are.

    The norm's order is docs/numerics.md's fixed tree (float64 sums of squares per 2048-element
    chunk, pairwise over chunks, tensors and launches), not torch's (float32 per-tensor norms of
    the norms): the two norms differ by float rounding (relative ~1e-7), so the clipped step
    matches ``clip_grad_norm_`` + ``FlashAdamW`` to that tolerance, not bit for bit. The norm is
    accumulated in float64, so float16 gradients whose norm exceeds 65504 are still clipped by
    their true norm (``clip_grad_norm_`` computes an infinite float16 norm there and zeroes the
    update). One NaN gradient element makes the norm NaN and so every parameter of the step NaN,
    as ``clip_grad_norm_`` + ``step()`` does; ``skip_nonfinite=True`` skips such a step on the
    device (one more read of the gradients). The norm itself is not kept: there is no
    ``last_grad_norm``.

    FlashAdamW's arguments and defaults, plus ``max_grad_norm`` (a positive float, default 1.0;
    ``float('inf')`` does not clip: the kernel is given the largest float32) and ``process_group``: where the gradients are sharded
    (FSDP2's DTensors: their mesh's sharded dimensions; else this group, for tensors sharded by
    hand), each rank's rows are all-reduced between the norm pass and the step (SUM), so every
    rank clips by the norm of the whole model; without either, one process holds every tensor.
    Every rank must step the same parameters in the same order. Only ``master_weight_bits=24``;
    no float32-state policy (``quantize=False``, ``min_8bit_size``), no stochastic rounding or
    Kahan summation; parameters of one optimizer on one device.
    """

    _SPECS = {24: "flash_adamw_clip"}
    _SR_SPEC = None
    _KAHAN_SPEC = None
    #: the kernel clips itself: no separate norm pass (_clip.py) for max_grad_norm
    _KERNEL_CLIPS = True

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, decouple_lr: bool = False,
                 quantize: bool = True, compress_state_dict: bool = True,
                 master_weight_bits: Optional[int] = 24, check_numerics: bool = False,
                 fused: bool = True, *, capturable: bool = False, min_8bit_size: int = 0,
                 skip_nonfinite: bool = False, max_grad_norm: float = 1.0,
                 process_group: Any = None):
        cls = type(self).__name__
        norm = check_max_grad_norm(cls, max_grad_norm)
        if norm is None:
            raise ValueError(f"{cls}: max_grad_norm=None; {cls} clips in its kernel, so "
                             f"max_grad_norm is a positive number (FlashAdamW does not clip)")
        self.process_group = process_group
        # max_grad_norm goes through FlashAdamW's constructor so that a param group that repeats
        # it is checked against it; _KERNEL_CLIPS keeps the torch-side norm pass off.
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         decouple_lr=decouple_lr, quantize=quantize,
                         compress_state_dict=compress_state_dict,
                         master_weight_bits=master_weight_bits, check_numerics=check_numerics,
                         fused=fused, capturable=capturable, min_8bit_size=min_8bit_size,
                         skip_nonfinite=skip_nonfinite, max_grad_norm=norm)

    def _kernel_hypers(self, group):
        # the attribute may have been changed since the constructor checked it
        cls = type(self).__name__
        if check_max_grad_norm(cls, self.max_grad_norm) is None:
            raise ValueError(f"{cls}: max_grad_norm=None; {cls} clips in its kernel, so "
                             f"max_grad_norm is a positive number (FlashAdamW does not clip)")
        hypers = super()._kernel_hypers(group)
        # inf (no clipping) as the largest float32: max_grad_norm / (norm + 1e-6) >= 1 for every
        # finite norm, so the coefficient is exactly 1 (hyperparameters are finite)
        hypers["max_grad_norm"] = min(self.max_grad_norm, _FLOAT32_MAX)
        return hypers


class AdamW4bit(FlashAdamW):
    """torchao's ``AdamW4bit`` (``torchao.optim``): AdamW with 4-bit states in groups of 128
    with float32 scales, the first moment on torchao's signed 4-bit dynamic map, the second on its
    unsigned map (k + 1) / 16 (no zero), two codes a byte (kernel ``adamw4bit``); the parameter in
    its own dtype, no master weight. torchao's arguments and defaults; ``block_size`` must be 128
    (the spec's group). ``bf16_stochastic_round=True`` rounds a bf16 parameter stochastically
    (kernel ``adamw4bit_sr``, Philox4x32-10 keyed by a seed, the step and the element; torchao
    draws from torch's generator): as FlashAdamW's ``stochastic_rounding``, each launch (param
    group and dtype) receives the seed ``(seed + k * 0x3779B1) mod 2^24``, ``k`` the state_dict
    index of its first parameter, and a step count of 2^24 or more is refused. Unlike torchao, every parameter is quantized, whatever its size
    (torchao keeps parameters under 4096 elements, or not a multiple of the block, in float32).
    ``amsgrad=True`` is refused. State keys: FlashAdamW's (``exp_avg::quantized`` holds the packed
    bytes, ``exp_avg::scales`` the float32 scales); ``state[p]["exp_avg"]``,
    ``compress_state_dict=False`` (keyword-only, FlashOptim's option: ``state_dict()`` gives the
    moments dequantized, as float32 tensors under torch's keys) and a ``torch.optim.AdamW``
    checkpoint read and write the moments in float32 as for FlashAdamW (docs/numerics.md, "4-bit
    codes and tables").
    """

    _SPECS = {None: "adamw4bit"}
    _SR_SPEC = "adamw4bit_sr"
    _KAHAN_SPEC = None

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 block_size: int = 128, bf16_stochastic_round: bool = False, seed: int = 0,
                 capturable: bool = False, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None, compress_state_dict: bool = True):
        cls = type(self).__name__
        if amsgrad:
            raise ValueError(f"{cls}: amsgrad=True is not supported")
        if block_size != 128:
            raise ValueError(f"{cls}: block_size={block_size!r}; the 4-bit kernels have groups "
                             f"of 128")
        self.block_size = block_size
        self.bf16_stochastic_round = bf16_stochastic_round
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         master_weight_bits=None, capturable=capturable,
                         skip_nonfinite=skip_nonfinite, max_grad_norm=max_grad_norm,
                         stochastic_rounding=bf16_stochastic_round, seed=seed,
                         compress_state_dict=compress_state_dict)


class FlashSGD(FlashOptimizer):
    """SGD with momentum (dampening, Nesterov) and L2 weight decay, FlashOptim's compressed
    momentum (companded int8, groups of 32) and int8 error bits (kernel ``flash_sgd``).

    As torch.optim.SGD, the first step sets the momentum buffer to the gradient (FlashOptim applies
    ``1 - dampening`` already on the first step); with ``momentum=0`` the dampening is ignored, as
    in torch. The kernel keeps a momentum buffer even when ``momentum=0``.
    """

    STREAM_KEYS = {"p.ecc": "error_bits", "buf.codes": "momentum_buffer::quantized",
                   "buf.scales": "momentum_buffer::scales"}
    STREAM_KEYS32 = {"p.ecc": "error_bits", "buf": "momentum_buffer"}
    _SPECS = {24: "flash_sgd", 32: "flash_sgd_ecc16", None: "flash_sgd_bf16"}
    _DECOUPLED = False

    def __init__(self, params: Iterable, lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 quantize: bool = True, compress_state_dict: bool = True,
                 master_weight_bits: Optional[int] = 24, check_numerics: bool = False,
                 fused: bool = True, *, capturable: bool = False, decouple_lr: bool = False,
                 min_8bit_size: int = 0, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        _check_wd(weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _reject_flashoptim_flags(cls, quantize, compress_state_dict, check_numerics, fused)
        if master_weight_bits not in self._SPECS:
            raise ValueError(f"{cls}: master_weight_bits={master_weight_bits!r} is not supported; "
                             f"this optimizer has kernels for {sorted(self._SPECS, key=str)}")
        self.master_weight_bits = master_weight_bits
        self._decouple_lr = decouple_lr
        self._spec = self._SPECS[master_weight_bits]
        _init_state_policy(self, quantize, min_8bit_size)
        self._init_flash(check_numerics, fused, compress_state_dict)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, capturable=capturable)
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(cls, max_grad_norm)
        super().__init__(params, defaults, self._SPECS[master_weight_bits])

    def _validate_group(self, group):
        _check_lr(group["lr"])
        if group["momentum"] < 0.0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        _check_wd(group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _check_flash_group(self, group)

    def _kernel_hypers(self, group):
        momentum = group["momentum"]
        wd = _wd_for_kernel(group, self._decouple_lr) if self._DECOUPLED else group["weight_decay"]
        return {"lr": group["lr"], "momentum": momentum,
                "dampening": group["dampening"] if momentum != 0 else 0.0,
                "weight_decay": wd, "nesterov": 1.0 if group["nesterov"] else 0.0}


class FlashSGDW(FlashSGD):
    """SGD with momentum and decoupled weight decay (``p *= 1 - lr * weight_decay``; with
    ``decouple_lr=True``, ``1 - weight_decay * lr / initial_lr``), kernel ``flash_sgdw``."""

    _SPECS = {24: "flash_sgdw", 32: "flash_sgdw_ecc16", None: "flash_sgdw_bf16"}
    _DECOUPLED = True

    def __init__(self, params: Iterable, lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 decouple_lr: bool = False, quantize: bool = True,
                 compress_state_dict: bool = True, master_weight_bits: Optional[int] = 24,
                 check_numerics: bool = False, fused: bool = True, *, capturable: bool = False,
                 min_8bit_size: int = 0, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov, quantize=quantize,
                         compress_state_dict=compress_state_dict,
                         master_weight_bits=master_weight_bits, check_numerics=check_numerics,
                         fused=fused, capturable=capturable, decouple_lr=decouple_lr,
                         min_8bit_size=min_8bit_size, skip_nonfinite=skip_nonfinite,
                         max_grad_norm=max_grad_norm)


class FlashLion(FlashOptimizer):
    """Lion with decoupled weight decay, FlashOptim's compressed momentum and int8 error bits
    (kernel ``flash_lion``)."""

    STREAM_KEYS = {"p.ecc": "error_bits", "m.codes": "exp_avg::quantized",
                   "m.scales": "exp_avg::scales"}
    STREAM_KEYS32 = {"p.ecc": "error_bits", "m": "exp_avg"}
    _SPECS = {24: "flash_lion", 32: "flash_lion_ecc16", None: "flash_lion_bf16"}
    _DECOUPLED = True

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0, decouple_lr: bool = False, quantize: bool = True,
                 compress_state_dict: bool = True, master_weight_bits: Optional[int] = 24,
                 check_numerics: bool = False, fused: bool = True, *, capturable: bool = False,
                 min_8bit_size: int = 0, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        _check_lr(lr)
        _check_betas(betas, upper_inclusive=True)
        _check_wd(weight_decay)
        _reject_flashoptim_flags(cls, quantize, compress_state_dict, check_numerics, fused)
        if master_weight_bits not in self._SPECS:
            raise ValueError(f"{cls}: master_weight_bits={master_weight_bits!r} is not supported; "
                             f"this optimizer has kernels for {sorted(self._SPECS, key=str)}")
        self.master_weight_bits = master_weight_bits
        self._decouple_lr = decouple_lr
        self._spec = self._SPECS[master_weight_bits]
        _init_state_policy(self, quantize, min_8bit_size)
        self._init_flash(check_numerics, fused, compress_state_dict)
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, capturable=capturable)
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(cls, max_grad_norm)
        super().__init__(params, defaults, self._SPECS[master_weight_bits])

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"], upper_inclusive=True)
        _check_wd(group["weight_decay"])

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _check_flash_group(self, group)

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2,
                "weight_decay": _wd_for_kernel(group, self._decouple_lr)}


_DYNAMIC_MAPS: Dict[bool, List[float]] = {}


def _reject_bnb_options(cls: str, percentile_clipping, block_wise, is_paged, *, amsgrad=False,
                        args=None) -> None:
    """bitsandbytes' options no qopt kernel has: refused, never ignored."""
    if args is not None:
        raise ValueError(f"{cls}: args={args!r} is not supported (pass the options as arguments)")
    if amsgrad:
        raise ValueError(f"{cls}: amsgrad=True is not supported")
    if percentile_clipping != 100:
        raise ValueError(f"{cls}: percentile_clipping={percentile_clipping} is not supported (100 only)")
    if not block_wise:
        raise ValueError(f"{cls}: block_wise=False is not supported")
    if is_paged:
        raise ValueError(f"{cls}: is_paged=True is not supported")


class BnbArgsMixin:
    """bitsandbytes' ``opt.args`` (the options its ``Optimizer8bit`` keeps beside the groups), for
    the optimizers with bitsandbytes' names: read-only, a new namespace on each access.
    ``optim_bits`` 8 or 32 and ``min_8bit_size`` as constructed; ``percentile_clipping`` 100 and
    ``skip_zeros`` False (the only values qopt takes); ``block_wise`` True (qopt's 8-bit states are
    always blockwise, LAMB's and LARS's included); ``max_unorm`` the group default's (LAMB, LARS),
    0.0 elsewhere, as bitsandbytes."""

    @property
    def args(self) -> SimpleNamespace:
        return SimpleNamespace(optim_bits=8 if self.quantize else 32,
                               min_8bit_size=self.min_8bit_size, percentile_clipping=100,
                               block_wise=True,
                               max_unorm=float(self.defaults.get("max_unorm", 0.0)),
                               skip_zeros=False)


def dynamic_map(signed: bool) -> List[float]:
    if signed not in _DYNAMIC_MAPS:
        _DYNAMIC_MAPS[signed] = create_dynamic_map(signed)
    return _DYNAMIC_MAPS[signed]


class AdamW8bit(BnbArgsMixin, PolicyMixin, QoptOptimizer):
    """bitsandbytes-style blockwise 8-bit AdamW (seed 000's step): uint8 codes into the dynamic
    maps (signed for the first moment, unsigned for the second), one float32 absmax per block of
    ``block_size`` (256, bitsandbytes since 0.44, or 2048, the seed) elements; a plain bf16, fp16
    or fp32 parameter (no master weight). State keys as bitsandbytes: ``state1``, ``absmax1``, ``qmap1``, ``state2``, ...

    As bitsandbytes, a parameter with fewer than ``min_8bit_size`` elements (default 4096; the
    whole parameter's count, also under FSDP2) keeps 32-bit state (``state1``/``state2`` float32,
    kernel ``adamw_state32``), as does every parameter with ``optim_bits=32`` or an override
    (``override_config``, ``GlobalOptimManager``; _policy.py).
    """

    STREAM_KEYS = {"m.codes": "state1", "m.absmax": "absmax1", "v.codes": "state2",
                   "v.absmax": "absmax2"}
    TABLE_KEYS = {"m.qmap": "qmap1", "v.qmap": "qmap2"}
    #: 32-bit state (min_8bit_size, optim_bits=32): bitsandbytes' keys, float32 tensors
    STREAM_KEYS32 = {"m": "state1", "v": "state2"}
    _SPECS = {256: "adamw8bit_block256", 2048: "adamw8bit_block2048"}

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False,
                 block_size: int = 256, percentile_clipping: int = 100, block_wise: bool = True,
                 is_paged: bool = False, *, capturable: bool = False, min_8bit_size: int = 4096,
                 optim_bits: int = 8, skip_nonfinite: bool = False,
                 max_grad_norm: Optional[float] = None):
        cls = type(self).__name__
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        capturable=capturable)
        _check_adam_group(defaults)
        _reject_bnb_options(cls, percentile_clipping, block_wise, is_paged, amsgrad=amsgrad)
        if block_size not in self._SPECS:
            raise ValueError(f"{cls}: block_size={block_size!r} is not supported; kernels exist "
                             f"for block sizes {sorted(self._SPECS)}")
        if optim_bits not in (8, 32):
            raise ValueError(f"{cls}: optim_bits={optim_bits!r}; 8 or 32")
        self.block_size = block_size
        self._spec = self._SPECS[block_size]
        _init_state_policy(self, optim_bits == 8, min_8bit_size)
        self.skip_nonfinite = skip_nonfinite
        self.max_grad_norm = check_max_grad_norm(cls, max_grad_norm)
        super().__init__(params, defaults, self._SPECS[block_size])

    def _validate_group(self, group):
        _check_adam_group(group)

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _reject_bnb_options(type(self).__name__, group.get("percentile_clipping", 100),
                            group.get("block_wise", True), group.get("is_paged", False),
                            amsgrad=group.get("amsgrad", False))
        self._same_for_all(group, "block_size", self.block_size)
        self._same_for_all(group, "min_8bit_size", self.min_8bit_size)

    def _host_tables(self, ks):
        return [dynamic_map(state == "m") for _, state in ks.tables]

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "eps": group["eps"],
                "weight_decay": group["weight_decay"]}

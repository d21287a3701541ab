"""Fused global gradient clipping (``max_grad_norm=``): one read of the gradients for their global
L2 norm, computed on the device as ``torch.nn.utils.clip_grad_norm_`` computes it, and a coefficient
that the kernels' GradScaler variant (``.scaled``) multiplies into each gradient as it loads it. The
gradients in memory are left as they are; no host sync.

Bit-level contract (tested against ``clip_grad_norm_`` followed by the same optimizer without
clipping, python/tests/test_clip.py):

- the total norm is torch's: ``total = ||(||g_i||_2)_i||_2`` with the per-tensor norms in each
  gradient's dtype (``torch._foreach_norm``, as ``torch.nn.utils.get_total_norm`` takes them; that
  function itself for gradients of several dtypes or devices, where torch has it),
  ``coef = clamp(max_norm / (total + 1e-6), max=1)`` in the total's dtype;
- each gradient element becomes ``(g.float() * c).to(g.dtype)`` with ``c`` the coefficient as
  torch's ``mul_`` reads it for a tensor of that dtype: the coefficient itself where it has the
  gradient's dtype (every gradient of one dtype), else rounded to the gradient's dtype first, as
  torch's CUDA kernels and torch 1.x do (torch 2.x's CPU kernel reads a float16 / bfloat16
  gradient's float32 coefficient unrounded, and so does qopt there). The kernel multiplies by
  ``float32(1 / float64(grad_scale))``; ``grad_scale`` is passed as ``1 / float64(c)``, whose
  float64 reciprocal rounds back to ``c`` exactly, and rounds the product to the gradient's dtype
  (``unscaleGrad``: one float32 multiply, one rounding), so the clipped step equals
  ``clip_grad_norm_`` + ``step()`` bit for bit;
- under a GradScaler the reference is ``unscale_`` + ``clip_grad_norm_`` + ``step()``: the
  per-tensor norms of the scaled gradients times ``inv = float32(1 / float64(scale))``, rounded to the
  gradient's dtype, stand for the norms of the unscaled ones, and the kernel multiplies once by
  ``float32(inv * c)``. With a power-of-two scale (GradScaler's default growth and backoff) and
  bfloat16 or float32 gradients every one of these products is exact, so the step is bitwise the
  reference's. Otherwise ``unscale_`` rounds twice (after ``* inv`` and after ``* c``) where the
  kernel rounds once, so an element may differ by one rounding of its dtype (float16 gradients
  also where ``g * inv`` is subnormal). The per-tensor norms of scaled float16 gradients are
  accumulated in float32 (a float16 norm of scaled gradients overflows above 65504; torch's CPU
  kernels even accumulate it in float16), so with float16 gradients under a GradScaler the norm,
  and with it the coefficient, may differ from the reference's by a few float16 roundings.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Optional, Tuple

import torch

_TORCH2 = int(torch.__version__.split(".")[0]) >= 2
_GET_TOTAL_NORM = getattr(torch.nn.utils, "get_total_norm", None)   # torch >= 2.6


def check_max_grad_norm(cls: str, value: Any) -> Optional[float]:
    """The constructor's ``max_grad_norm``: None, or a positive float (inf measures the norm
    without clipping); anything else is a ValueError naming it."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or math.isnan(float(value)) or float(value) <= 0):
        raise ValueError(f"{cls}: max_grad_norm={value!r}; None (no clipping) or a positive "
                         f"number (float('inf') measures the norm without clipping)")
    return float(value)


_FOREACH_NORM_DTYPE: List[bool] = []   # whether torch._foreach_norm takes dtype= (found once)


def _float32_norms(ts: List[torch.Tensor]) -> List[torch.Tensor]:
    """The float32 L2 norm of each tensor: torch._foreach_norm with dtype=float32 where torch has
    it (the accumulation of the norms it returns in the tensors' dtype), else one
    linalg.vector_norm per tensor."""
    if not _FOREACH_NORM_DTYPE:
        try:
            torch._foreach_norm([torch.zeros(1, dtype=torch.float16)], 2, dtype=torch.float32)
            _FOREACH_NORM_DTYPE.append(True)
        except (TypeError, RuntimeError):
            _FOREACH_NORM_DTYPE.append(False)
    if _FOREACH_NORM_DTYPE[0]:
        return list(torch._foreach_norm(ts, 2, dtype=torch.float32))
    return [torch.linalg.vector_norm(t, 2, dtype=torch.float32) for t in ts]


def _per_tensor_norms(grads: List[torch.Tensor], inv: Optional[torch.Tensor]) -> List[torch.Tensor]:
    """Each gradient's L2 norm in its own dtype, in the order of `grads`: one torch._foreach_norm
    per device and dtype. With `inv` (GradScaler's float32 inverse scale) the gradients are
    scaled ones and each norm is unscaled (float32 multiply, rounded to the gradient's dtype);
    float16 gradients then take a float32 norm first."""
    groups: Dict[Tuple[Any, torch.dtype], List[int]] = {}
    for i, g in enumerate(grads):
        groups.setdefault((g.device, g.dtype), []).append(i)
    out: List[Optional[torch.Tensor]] = [None] * len(grads)
    for (dev, dtype), idx in groups.items():
        ts = [grads[i] for i in idx]
        if inv is not None and dtype == torch.float16:
            norms = _float32_norms(ts)
        else:
            norms = list(torch._foreach_norm(ts, 2))
        if inv is not None:
            i_dev = inv.to(dev).reshape(())
            norms = [(n.float() * i_dev).to(dtype) for n in norms]
        for i, n in zip(idx, norms):
            out[i] = n
    return out  # type: ignore[return-value]


def total_norm(grads: List[torch.Tensor], inv: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The global L2 norm of `grads` as clip_grad_norm_ computes it (a 0-dim tensor on the first
    gradient's device, of the promoted dtype of the gradients); with `inv`, of the gradients
    times inv (see _per_tensor_norms). DTensor gradients (FSDP2) give the norm over all shards
    (``full_tensor()``: one all-reduce)."""
    first = grads[0]
    if (inv is None and all(type(g) is torch.Tensor and g.dtype is first.dtype
                            and g.device == first.device for g in grads)):
        # one device and dtype (the usual case): get_total_norm's own ops, without its grouping
        # and per-norm device moves (a host cost of about 2 us a tensor)
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2)), 2.0)
    if inv is None and _GET_TOTAL_NORM is not None:
        total = _GET_TOTAL_NORM(grads, 2.0)
    else:
        first = grads[0].device
        norms = _per_tensor_norms(grads, inv)
        total = torch.linalg.vector_norm(torch.stack([n.to(first) for n in norms]), 2.0)
    full = getattr(total, "full_tensor", None)
    return full() if full is not None else total


class FusedClip:
    """The clipping of one step: the coefficient, GradScaler's inverse scale (or None) and the
    flag that skips the step (GradScaler's found_inf, skip_nonfinite's, or None)."""

    def __init__(self, coef: torch.Tensor, inv: Optional[torch.Tensor],
                 found_inf: Optional[torch.Tensor]):
        self.coef, self.inv, self.found_inf = coef, inv, found_inf
        self._by: Dict[Tuple[Any, torch.dtype], Tuple[torch.Tensor, Optional[torch.Tensor]]] = {}

    def scaling(self, device: torch.device, dtype: torch.dtype):
        """(grad_scale, found_inf) for the launches of gradients of `dtype` on `device`:
        grad_scale is ``1 / float64(m)`` (float64, 0-dim), m the float32 multiplier of the
        module's docstring, so that the kernel's ``float32(1 / float64(grad_scale))`` is m."""
        key = (device, dtype)
        hit = self._by.get(key)
        if hit is None:
            coef = self.coef.to(device)
            if coef.dtype != dtype and (device.type != "cpu" or not _TORCH2):
                coef = coef.to(dtype)
            if self.inv is not None:
                coef = coef.float() * self.inv.to(device).reshape(())
            # (float64 holds every float32, bfloat16 and float16 value exactly)
            hit = (torch.reciprocal(coef.double()), self.found_inf)
            self._by[key] = hit
        return hit


def fused_clip(opt, grad_scale: Optional[torch.Tensor],
               found_inf: Optional[torch.Tensor]) -> Optional[FusedClip]:
    """The clipping of this step of `opt` (max_grad_norm set): the global norm over every param
    group's gradients (``opt.last_grad_norm``), the coefficient, and, with ``skip_nonfinite`` and no
    GradScaler's found_inf, the non-finite flag from the same norm (``opt.nonfinite_steps``
    advanced by it). None without gradients."""
    if getattr(opt, "_release", None) is not None:
        raise RuntimeError(f"{type(opt).__name__}: max_grad_norm needs every gradient before any "
                           f"step; it does not work with enable_gradient_release")
    grads = [p.grad for group in opt.param_groups for p in group["params"] if p.grad is not None]
    if not grads:
        return None
    inv = None
    if grad_scale is not None:
        inv = grad_scale.double().reciprocal().float()   # GradScaler.unscale_'s inverse
    total = total_norm(grads, inv)
    opt.last_grad_norm = total
    coef = opt.max_grad_norm / (total + 1e-6)
    if coef.dtype == torch.float16 and coef.device.type == "cpu" and not _TORCH2:
        # clamped in float32 (exact): torch 1.x has no float16 clamp on the CPU
        coef = torch.clamp(coef.float(), max=1.0).to(torch.float16)
    else:
        coef = torch.clamp(coef, max=1.0)
    if found_inf is None and getattr(opt, "skip_nonfinite", False):
        # an L2 norm is finite exactly when every element is, unless it overflows its dtype
        # (a float16 total above 65504), which skips the step too
        found_inf = torch.logical_not(torch.isfinite(total)).to(torch.float32).reshape(1)
        counter = getattr(opt, "nonfinite_steps", None)
        if counter is None or counter.device != found_inf.device:
            opt.nonfinite_steps = torch.zeros((), dtype=torch.float32, device=found_inf.device)
        opt.nonfinite_steps.add_(found_inf.reshape(()))
    return FusedClip(coef, inv, found_inf)

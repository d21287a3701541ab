"""Gradient release (FlashOptim's ``enable_gradient_release``): parameters are stepped during
backward, as their gradients become ready, and the gradients are freed right after.

qopt's step is a multi-tensor launch, so the hooks collect ready parameters into a bucket and step
the bucket once it holds ``bucket_numel`` elements (and whatever is left at the end of backward,
through an autograd engine callback): a release costs one launch per bucket and kernel variant,
not one per parameter. A parameter's update is elementwise within its own quantization groups, so
the result is bitwise that of ``backward(); step(); zero_grad()`` (tested), while at most one
bucket of gradients (plus those autograd holds) is alive at a time.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional

import torch

__all__ = ["enable_gradient_release", "GradientReleaseHandle"]


class GradientReleaseHandle:
    """Returned by :func:`enable_gradient_release`; ``remove()`` detaches the hooks and gives
    ``step()`` / ``zero_grad()`` back their usual behaviour."""

    def __init__(self, hooks: list, optimizer, keep: list):
        self._hooks = hooks
        self._optimizer = optimizer
        self._keep = keep          # the AccumulateGrad nodes hooked on torch < 2.1

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        self._keep.clear()
        self._optimizer._release = None
        # the buckets' launch caches (keyed by bucket) go; the groups' are built at the next step
        self._optimizer._cache.clear()

    @property
    def active(self) -> bool:
        return len(self._hooks) > 0


class _Release:
    def __init__(self, optimizer, pre_step, bucket_numel: int):
        self.opt = weakref.ref(optimizer)
        self.pre_step = pre_step
        self.bucket_numel = bucket_numel
        self.pending: List[torch.Tensor] = []
        self.pending_numel = 0
        self.queued = False
        self.launches = 0          # buckets stepped (for tests and measurements)
        self.keep: list = []

    def ready(self, p: torch.Tensor, group: Dict[str, Any]) -> None:
        opt = self.opt()
        if opt is None or p.grad is None:
            return
        if self.pre_step is not None and not self.pre_step(p, group):
            p.grad = None
            return
        self.pending.append(p)
        self.pending_numel += p.numel()
        if not self.queued:
            # the rest is stepped when this backward ends
            torch.autograd.Variable._execution_engine.queue_callback(self.flush)
            self.queued = True
        if self.pending_numel >= self.bucket_numel:
            self.flush(end=False)

    def flush(self, end: bool = True) -> None:
        if end:
            self.queued = False
        opt = self.opt()
        ps, self.pending, self.pending_numel = self.pending, [], 0
        if opt is None or not ps:
            return
        # every other parameter's gradient is None here (freed, or not computed yet), so the
        # step takes exactly this bucket
        others = [q for g in opt.param_groups for q in g["params"]
                  if q.grad is not None and not any(q is p for p in ps)]
        saved = [(q, q.grad) for q in others]
        for q in others:
            q.grad = None
        try:
            opt._release_step()
            self.launches += 1
        finally:
            for p in ps:
                p.grad = None
            for q, g in saved:
                q.grad = g


def enable_gradient_release(model: torch.nn.Module, optimizer, *,
                            grad_scaler: Optional[Any] = None,
                            pre_step: Optional[Callable[[torch.Tensor, Dict[str, Any]], bool]] = None,
                            bucket_numel: int = 1 << 22) -> GradientReleaseHandle:
    """Steps each parameter of `model` that `optimizer` holds during backward, in buckets of
    `bucket_numel` elements (0: every parameter alone, as FlashOptim), and frees its gradient.
    While active, ``optimizer.step()`` and ``optimizer.zero_grad()`` do nothing (with a warning).
    `pre_step(param, group)` returning False skips a parameter's step (its gradient is freed).
    Refused: a GradScaler (as FlashOptim) and an optimizer with ``max_grad_norm`` or
    ``skip_nonfinite=True`` (NotImplementedError: each needs every gradient before any step),
    DistributedDataParallel and FSDP1 models (TypeError); FSDP2 (``fully_shard``) models work."""
    from ._base import QoptOptimizer
    if not isinstance(optimizer, QoptOptimizer):
        raise TypeError(f"enable_gradient_release: a qopt optimizer is needed, got "
                        f"{type(optimizer).__name__}")
    if grad_scaler is not None:
        raise NotImplementedError("enable_gradient_release: a GradScaler is not supported (its "
                                  "inf check needs every gradient before any step); use bf16 "
                                  "without loss scaling, or step normally")
    if getattr(optimizer, "max_grad_norm", None) is not None:
        raise NotImplementedError("enable_gradient_release: max_grad_norm is not supported (the "
                                  "global norm needs every gradient before any step); clip "
                                  "without gradient release")
    if getattr(optimizer, "skip_nonfinite", False):
        raise NotImplementedError("enable_gradient_release: skip_nonfinite=True is not supported "
                                  "(skipping the whole step needs every gradient before any "
                                  "bucket is stepped: the buckets stepped before a NaN would stay "
                                  "stepped); use skip_nonfinite=False, or step normally")
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError("enable_gradient_release: DistributedDataParallel is not supported (its "
                        "reducer writes the gradients back after the hooks); use FSDP2 "
                        "(fully_shard) or step normally")
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1
    except Exception:   # torch without it (or one whose FSDP fails to import)
        FSDP1 = ()
    if FSDP1 and isinstance(model, FSDP1):
        raise TypeError("enable_gradient_release: FullyShardedDataParallel (FSDP1) is not "
                        "supported; use FSDP2 (fully_shard)")
    if not isinstance(bucket_numel, int) or bucket_numel < 0:
        raise ValueError(f"enable_gradient_release: bucket_numel={bucket_numel!r}; a "
                         f"non-negative int")
    if getattr(optimizer, "_release", None) is not None:
        raise RuntimeError("enable_gradient_release: already active on this optimizer; remove() "
                           "the first handle")
    release = _Release(optimizer, pre_step, bucket_numel)
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    hooks, keep = [], []
    post = hasattr(torch.Tensor, "register_post_accumulate_grad_hook")
    for p in model.parameters():
        group = group_of.get(id(p))
        if group is None or not p.requires_grad:
            continue
        if post:
            hooks.append(p.register_post_accumulate_grad_hook(
                lambda t, p=p, g=group: release.ready(p, g)))
        else:
            # torch < 2.1: a hook on the parameter's AccumulateGrad node runs after the gradient
            # is accumulated into p.grad
            acc = p.view_as(p).grad_fn.next_functions[0][0]
            keep.append(acc)
            hooks.append(acc.register_hook(lambda *_, p=p, g=group: release.ready(p, g)))
    # (the optimizer holds the AccumulateGrad nodes through `release`: a node nobody holds is
    # made anew by the next backward, without the hook)
    release.keep = keep
    optimizer._release = release
    return GradientReleaseHandle(hooks, optimizer, keep)


def release_active(optimizer, what: str) -> bool:
    if getattr(optimizer, "_release", None) is None:
        return False
    warnings.warn(f"optimizer.{what}() does nothing while enable_gradient_release() is active: "
                  f"the gradient hooks step the parameters and free their gradients", stacklevel=3)
    return True

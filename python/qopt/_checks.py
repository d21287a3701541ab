"""PyTorch's argument checks of the optimizers' constructors (the same messages as torch.optim),
shared by every optimizer module."""

from __future__ import annotations

import torch


def _check_lr(lr) -> None:
    if isinstance(lr, torch.Tensor):
        if lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        return
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_betas(betas, upper_inclusive=False, n=2) -> None:
    """PyTorch's beta checks, after the count: `n` values (beta1, beta2[, beta3]); the kernel
    takes each as a hyperparameter of its own."""
    if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != n:
        names = ", ".join(f"beta{i + 1}" for i in range(n))
        count = {2: "two", 3: "three"}.get(n, str(n))
        raise ValueError(f"Invalid betas: {betas!r}; expected {count} values ({names})")
    for i, b in enumerate(betas):
        ok = 0.0 <= b <= 1.0 if upper_inclusive else 0.0 <= b < 1.0
        if not ok:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")


def _check_eps(eps) -> None:
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")


def _check_wd(wd) -> None:
    if not 0.0 <= wd:
        raise ValueError(f"Invalid weight_decay value: {wd}")



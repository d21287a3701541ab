"""The manifest's uniform expressions (docs/abi.md, "Uniforms") evaluated with torch ops, for the
steps whose per-step scalars live on the device (capturable=True, a tensor lr, a GradScaler).

The runtime evaluates the same expressions on the host (qopt_manifest_evaluate_uniforms): float64,
one IEEE operation per node in source order, rounded to float32 once at the end. Here every node is
a float64 torch op, on the device for a value that depends on the step or a tensor hyperparameter
and on the CPU otherwise, so that both sides round alike (tested bit for bit against the runtime for
every shipped spec: python/tests/test_api.py). No host<->device copy is made, so a step that uses
it can be captured in a CUDA graph.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Sequence

import torch

__all__ = ["is_dynamic", "evaluate"]

_CPU = torch.device("cpu")


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:  # the C function's +inf
        return math.inf


def _log(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 else math.nan  # NaN for x < 0 and NaN, as C's log


_LIBM = {"exp": _exp, "log": _log, "tanh": math.tanh, "atan2": math.atan2}


def is_dynamic(expr, dynamic_names) -> bool:
    """Whether `expr` reads one of `dynamic_names` (the step, a tensor hyperparameter)."""
    if isinstance(expr, str):
        return expr in dynamic_names
    if isinstance(expr, list):
        return any(is_dynamic(a, dynamic_names) for a in expr[1:])
    return False


def _fold(fn, xs: Sequence[torch.Tensor]) -> torch.Tensor:
    acc = xs[0]
    for x in xs[1:]:
        acc = fn(acc, x)
    return acc


def _apply(op: str, a: Sequence[torch.Tensor]) -> torch.Tensor:
    """One operator on float64 0-dim tensors of one device."""
    if op == "add":
        return _fold(torch.add, a)
    if op == "mul":
        return _fold(torch.mul, a)
    if op == "sub":
        return a[0] - a[1]
    if op == "div":
        return torch.div(a[0], a[1])  # tensor / tensor: IEEE division, never a reciprocal
    if op == "pow":
        return torch.pow(a[0], a[1])
    if op == "neg":
        return -a[0]
    if op == "sqrt":
        return torch.sqrt(a[0])
    if op == "abs":
        return torch.abs(a[0])
    if op == "sign":
        return torch.sign(a[0]) + 0.0  # +0 for -0, and 0 for NaN, as the runtime
    if op == "min":
        return _fold(torch.minimum, a)
    if op == "max":
        return _fold(torch.maximum, a)
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return getattr(torch, op)(a[0], a[1]).to(torch.float64)
    if op == "and":
        return _fold(lambda x, y: ((x != 0) & (y != 0)).to(torch.float64), a)
    if op == "or":
        return _fold(lambda x, y: ((x != 0) | (y != 0)).to(torch.float64), a)
    if op == "not":
        return (a[0] == 0).to(torch.float64)
    if op == "select":
        return torch.where(a[0] != 0, a[1], a[2])
    if op in _LIBM:
        # On the CPU the C library's function, as the runtime's; on a device torch's (within
        # an ULP of it in float64, which the rounding to float32 nearly always hides).
        if a[0].device.type == "cpu":
            return torch.full((), _LIBM[op](*(float(x) for x in a)), dtype=torch.float64)
        return getattr(torch, op)(*a)
    raise ValueError(f"qopt: unknown uniform operator '{op}'")


def evaluate(expr, env: Dict[str, Any], device) -> Any:
    """The value of a uniform expression in float64: a 0-dim float64 tensor on `device` where it
    depends on a tensor of `env` (the step, a tensor hyperparameter), a Python float elsewhere.
    `env` maps names to Python floats or float64 tensors on `device`."""
    if isinstance(expr, bool):
        return 1.0 if expr else 0.0
    if isinstance(expr, (int, float)):
        return float(expr)
    if isinstance(expr, str):
        return env[expr]
    args = [evaluate(a, env, device) for a in expr[1:]]
    on = device if any(isinstance(a, torch.Tensor) for a in args) else _CPU
    t = [a if isinstance(a, torch.Tensor) else torch.full((), a, dtype=torch.float64, device=on)
         for a in args]
    r = _apply(expr[0], t)
    return r if on is device else float(r)

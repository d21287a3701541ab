"""Split master weights (docs/numerics.md section 3) with torch ops, on any device.

``decode(x16, rho)`` reconstructs the float32 master from a bf16 (or fp16) parameter and its int8
or int16 error bits. Every step is the float32 operation the runtime's ``qopt_error_bits_decode``
does, in the same order (the powers of two are built from their bits, so no ``pow`` rounding
enters), so the result is bit-identical to it; python/tests check that on random bits.
"""

from __future__ import annotations

import torch

__all__ = ["decode"]

_FORMATS = {torch.bfloat16: (7, 127), torch.float16: (10, 15)}  # (mbits, bias)
_NMAX = {torch.int8: 127, torch.int16: 32767}


def _pow2(k: torch.Tensor) -> torch.Tensor:
    """2**k as float32 for int32 k in the normal range [-126, 127], exactly."""
    return ((k + 127) << 23).view(torch.float32)


def decode(x16: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """float32 master weights from a 16-bit parameter and its error bits (same shape)."""
    if x16.dtype not in _FORMATS:
        raise TypeError(f"qopt.ecc.decode: parameter dtype {x16.dtype} is not bf16 or fp16")
    if rho.dtype not in _NMAX:
        raise TypeError(f"qopt.ecc.decode: error bits dtype {rho.dtype} is not int8 or int16")
    if x16.numel() != rho.numel():
        raise ValueError(f"qopt.ecc.decode: {x16.numel()} parameter elements but {rho.numel()} error bits")
    mbits, bias = _FORMATS[x16.dtype]
    x16c = x16.contiguous().reshape(-1)
    rho = rho.contiguous().reshape(-1).to(x16c.device)
    p = x16c.float()
    bits = x16c.view(torch.int16).to(torch.int32) & 0x7FFF
    exp_field = bits >> mbits
    e = torch.where(exp_field == 0, torch.full_like(exp_field, 1 - bias), exp_field - bias)
    l = e - mbits - 1  # log2 of half an ULP
    h = torch.div(l, 2, rounding_mode="floor")
    finite = torch.isfinite(p)
    # Non-finite parameters decode to themselves; keep their exponents in range for _pow2.
    h = torch.where(finite, h, torch.zeros_like(h))
    lh = torch.where(finite, l - h, torch.zeros_like(l))
    q = rho.float() / torch.full_like(p, float(_NMAX[rho.dtype]))  # IEEE division, as the runtime
    corr = (q * _pow2(h)) * _pow2(lh)
    out = torch.where(finite, p + corr, p)
    return out.reshape(x16.shape)

"""Seed reference implementations, TRANSCRIBED from the seed documents.

    /work/shared/seeds/000_2e530b34b635d46f.txt  (blockwise 8-bit AdamW reference: _requantise,
                                                  quantized_adamw_step)
    /work/shared/seeds/003_7691edfdd13efba8.txt  (flashsim companded group quantization: quantize,
                                                  dequantize, roundtrip, nmse and named configurations)

These are SPECIFICATIONS, copied here only so that scripts/golden/make_golden.py can generate test data
(test/data/golden/) for qopt's independent C++ reference (test/reference/). They are not part of the
product and nothing in the product imports them. The function bodies are the seeds' code, unchanged
except that both seeds live in one module (seed 003's names keep their own prefix-free names, seed 000's
BLOCK is kept as is). Do not "fix" anything here: a behaviour of these functions is, by definition, the
behaviour the golden data records.
"""

from __future__ import annotations

import torch

# --------------------------------------------------------------------------------------------------
# Seed 000: tasks/quantization-gemm/quantized-optimizer-state/environment/reference.py
# --------------------------------------------------------------------------------------------------

BLOCK = 2048            # quantisation block: one fp32 absmax per 2048 consecutive parameters


def _requantise(x, qmap):
    """x -> (dequantised round trip, per-block absmax). Nearest entry of the ascending 256-point map."""
    nb = x.numel() // BLOCK
    xb = x.view(nb, BLOCK)
    absmax = xb.abs().amax(-1)                                  # the NEW scale of this block
    c = xb / absmax.clamp(min=1e-30).unsqueeze(-1)              # normalised into the map's range
    mid = (qmap[:-1] + qmap[1:]) * 0.5                          # 255 midpoints, ascending
    code = torch.bucketize(c, mid)                              # index of the nearest map entry
    return (qmap[code] * absmax.unsqueeze(-1)).reshape(-1), absmax


def quantized_adamw_step(params, grads, m_code, m_absmax, v_code, v_absmax, qmap1, qmap2, step,
                         lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01):
    """8-bit blockwise AdamW, in fp32.

    Correct and simple — it is the numerical SPECIFICATION, not a performance target. Every line
    materialises another full-size fp32 temporary in HBM.
    """
    m = qmap1[m_code.long()] * m_absmax.repeat_interleave(BLOCK)     # dequantise the first moment
    v = qmap2[v_code.long()] * v_absmax.repeat_interleave(BLOCK)     # dequantise the second moment
    g = grads.float()

    m_new = beta1 * m + (1.0 - beta1) * g
    v_new = beta2 * v + (1.0 - beta2) * g * g

    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    denom = (v_new / bc2).sqrt() + eps
    upd = (lr / bc1) * m_new / denom
    p_out = params.float() * (1.0 - lr * wd) - upd                   # DECOUPLED weight decay

    m_out, m_absmax_out = _requantise(m_new, qmap1)                  # the state that gets stored back
    v_out, v_absmax_out = _requantise(v_new, qmap2)
    return p_out.to(torch.bfloat16), m_out, v_out, m_absmax_out, v_absmax_out


# --------------------------------------------------------------------------------------------------
# Seed 003: code/flashsim/quantization.py
# --------------------------------------------------------------------------------------------------

GROUP = 32


def _grouped(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Flatten and pad x to a multiple of GROUP; return (groups, orig_numel)."""
    flat = x.reshape(-1)
    n = flat.numel()
    pad = (-n) % GROUP
    if pad:
        flat = torch.cat([flat, torch.zeros(pad, dtype=flat.dtype, device=flat.device)])
    return flat.reshape(-1, GROUP), n


def quantize(x: torch.Tensor, signed: bool = True, sqrt: bool = False,
             softsign: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-32 absmax INT8/UINT8 quantization with optional companding."""
    g, n = _grouped(x.to(torch.float32))
    if sqrt:
        g = torch.sqrt(g)
    if signed:
        scales = g.abs().amax(dim=1, keepdim=True)
    else:
        scales = g.amax(dim=1, keepdim=True)
    scales_f16 = scales.to(torch.float16)
    safe = torch.where(scales_f16 == 0, torch.ones_like(scales_f16), scales_f16).to(torch.float32)
    y = g / safe
    if softsign:
        y = 2.0 * y / (1.0 + y.abs())
    if signed:
        q = torch.clamp(torch.round(y * 127.0), -127, 127).to(torch.int8)
    else:
        q = torch.clamp(torch.round(y * 255.0), 0, 255).to(torch.uint8)
    return q.reshape(-1)[:n], scales_f16.reshape(-1)


def dequantize(q: torch.Tensor, scales: torch.Tensor, signed: bool = True,
               sqrt: bool = False, softsign: bool = True) -> torch.Tensor:
    g, n = _grouped(q.to(torch.float32))
    s = scales.to(torch.float32).reshape(-1, 1)
    y = g / (127.0 if signed else 255.0)
    if softsign:
        y = y / (2.0 - y.abs())
    out = y * s
    if sqrt:
        out = out * out
    return out.reshape(-1)[:n]


def roundtrip(x: torch.Tensor, signed: bool = True, sqrt: bool = False,
              softsign: bool = True) -> torch.Tensor:
    q, s = quantize(x, signed=signed, sqrt=sqrt, softsign=softsign)
    return dequantize(q, s, signed=signed, sqrt=sqrt, softsign=softsign).reshape(x.shape)


# Named configurations used in experiments
def momentum_companded(x):
    return roundtrip(x, signed=True, sqrt=False, softsign=True)


def momentum_linear(x):
    return roundtrip(x, signed=True, sqrt=False, softsign=False)


def variance_companded(x):
    return roundtrip(x, signed=False, sqrt=True, softsign=False)


def variance_linear(x):
    return roundtrip(x, signed=False, sqrt=False, softsign=False)


def nmse(orig: torch.Tensor, recon: torch.Tensor) -> float:
    """Normalized MSE, as in paper §4.5."""
    denom = float((orig.double() ** 2).mean())
    if denom == 0:
        return 0.0
    return float(((orig.double() - recon.double()) ** 2).mean()) / denom

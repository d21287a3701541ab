"""bitsandbytes' dynamic quantization map (``create_dynamic_map``), computed exactly.

bitsandbytes builds the table from ``torch.linspace`` and float32 tensor arithmetic, so its values
depend on how a PyTorch version evaluates ``linspace``. This module fixes PyTorch 2.11's CPU rule
(every element ``fma(step, i, start)`` below ``steps // 2`` and ``fma(-step, steps - 1 - i, end)``
from there on, docs/../test/data/golden/README.md) and does every float32 operation with exact
rational arithmetic and one round-to-nearest-even, so the table is the same on every machine and
every PyTorch version. It equals the C++ reference's ``createDynamicMap`` (test/reference) value for
value; python/tests/test_codebook.py checks it against the golden file made with PyTorch 2.11.
"""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import List

__all__ = ["create_dynamic_map", "zero_code"]


def _bits32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _from_bits32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def _next32(x: float, up: bool) -> float:
    """The float32 neighbour of the (finite, float32) x towards +inf (up) or -inf."""
    if x == 0.0:
        tiny = _from_bits32(1)
        return tiny if up else -tiny
    b = _bits32(x)
    away = (x > 0) == up  # moving away from zero
    return _from_bits32(b + 1 if away else b - 1)


def round_f32(q) -> float:
    """Round an exact value (Fraction, int or float) to the nearest float32, ties to even."""
    q = Fraction(q)
    if q == 0:
        return 0.0
    f = struct.unpack("<f", struct.pack("<f", float(q)))[0]  # within one float32 step of q
    fq = Fraction(f)
    if fq == q:
        return f
    other = _next32(f, up=fq < q)
    d_f, d_o = abs(q - fq), abs(q - Fraction(other))
    if d_o < d_f or (d_o == d_f and (_bits32(other) & 1) == 0):
        return other
    return f


def _f32(x: float) -> float:
    return round_f32(Fraction(x))


def torch_linspace_f32(start: float, end: float, steps: int) -> List[float]:
    """float32 ``torch.linspace(start, end, steps)`` as PyTorch 2.11 computes it on the CPU."""
    start, end = _f32(start), _f32(end)
    if steps <= 0:
        return []
    if steps == 1:
        return [start]
    step = round_f32(Fraction(round_f32(Fraction(end) - Fraction(start))) / (steps - 1))
    halfway = steps // 2
    out = []
    for i in range(steps):
        if i < halfway:
            out.append(round_f32(Fraction(step) * i + Fraction(start)))
        else:
            out.append(round_f32(-Fraction(step) * (steps - 1 - i) + Fraction(end)))
    return out


def create_dynamic_map(signed: bool = True, max_exponent_bits: int = 7, total_bits: int = 8) -> List[float]:
    """bitsandbytes' dynamic map: 256 ascending float32 values (as Python floats).

    Signed: an exact 0 and +1.0 but no -1.0; unsigned: starts at 0 and ends at 1.0.
    """
    if not (1 <= max_exponent_bits <= total_bits - 1 and 2 <= total_bits <= 8):
        raise ValueError("create_dynamic_map: need 1 <= max_exponent_bits <= total_bits - 1 <= 7")
    data: List[float] = []
    fraction_bits = total_bits - 1
    extra = 2 ** (fraction_bits - max_exponent_bits) - 1

    def add_level(items: int, level: int) -> None:
        edges = torch_linspace_f32(0.1, 1.0, items + 1)
        e10 = level - (max_exponent_bits - 1)
        scale = float(10 ** e10) if e10 >= 0 else 10.0 ** e10  # Python's int / float pow
        s = Fraction(_f32(scale))
        for k in range(items):
            mean = round_f32(Fraction(edges[k]) + Fraction(edges[k + 1])) / 2.0  # exact halving
            data.append(round_f32(s * Fraction(mean)))
            if signed:
                data.append(round_f32(-s * Fraction(mean)))

    for level in range(max_exponent_bits):
        add_level(2 ** (level + fraction_bits - max_exponent_bits + (0 if signed else 1)), level)
    if extra > 0:
        add_level(extra, max_exponent_bits - 1)
    data.append(0.0)
    data.append(1.0)
    if len(data) != 2 ** total_bits:
        raise AssertionError(f"create_dynamic_map: {len(data)} values, expected {2 ** total_bits}")
    data += [0.0] * (256 - len(data))
    data.sort()
    return data


def zero_code(qmap: List[float]) -> int:
    """The code the codebook quantizer gives 0.0: #{k : f32((qmap[k] + qmap[k+1]) * 0.5) < 0}."""
    count = 0
    for k in range(255):
        mid = round_f32(Fraction(qmap[k]) + Fraction(qmap[k + 1])) * 0.5
        if mid < 0:
            count += 1
    return count

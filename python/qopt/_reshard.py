"""The mesh-independent ("logical") form of a parameter's optimizer state, for
``torch.distributed.checkpoint`` (DCP) and resharding between meshes (FSDP2, DTensor parameters).

The kernel keeps each rank's state for its local shard: per-element streams (error bits, 8-bit
codes, plain states) laid out like the shard, and per-group streams (a float16 scale per group of
32 elements, a float32 absmax per block of 256/2048) whose groups are those of the local flat
index, so they depend on where the mesh cut the parameter. The logical form drops that
dependence: every per-element stream as it is, and every per-group stream expanded to one value
per element (the scale or absmax of the group the element was in) and packed 4-bit codes (two a
byte) unpacked to one code per element (int8 for signed codes, uint8 for unsigned ones and table
indices), each a tensor of the parameter's local shape, which ``state_dict`` wraps as a DTensor with the parameter's mesh and
placements (so DCP saves each element once and hands any other mesh its own elements). A stream of a
dtype that torch.distributed's collectives lack (int16: 16-bit error bits; gloo and NCCL have no
int16, so DCP's ``full_state_dict`` gather and ``broadcast_from_rank0`` of it fail with "Invalid
scalar type") is widened to int32 in this form, value for value, and narrowed back on load.

Loading a logical state into a local shard (``local_state``) keeps every per-element stream
bit for bit, and regroups the per-group ones: a group of the new shard whose elements all carry
one saved scale takes that scale and their codes as they are (their dequantized values are the
saved ones, bit for bit: always so at the mesh the state was saved at, and at any mesh for a
parameter whose dim-0 rows are a multiple of the group size); a group that gathers elements of
saved groups with different scales is requantized from the elements' dequantized values with the
kernel's own formulas (shared/docs/numerics.md section 2 and docs/numerics.md "4-bit codes and
tables", the reference's groupQuantize / codebookQuantize; the scheme is the manifest's), which
rounds those elements' codes again; 4-bit codes are packed again.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from . import _capi as C
from . import _runtime as R
from ._launch import TORCH_DTYPES, _local


_DTENSOR: list = []


def fsdp2_unavailable() -> str:
    """Why FSDP2 training with DCP checkpoints of qopt state cannot run with this PyTorch, or "" if
    it can: it needs ``torch.distributed``, FSDP2 (``torch.distributed.fsdp.fully_shard`` with
    ``MixedPrecisionPolicy``) and DCP's state_dict API
    (``torch.distributed.checkpoint.state_dict.get_optimizer_state_dict``), i.e. torch >= 2.6.
    Imports nothing at qopt's import time; never raises."""
    import importlib
    import torch.distributed as dist
    if not dist.is_available():
        return "torch.distributed is not available in this PyTorch"
    try:
        from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy  # noqa: F401
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict  # noqa: F401
        importlib.import_module("torch.distributed.checkpoint")
    except Exception as e:   # ImportError; torch 1.13's FSDP fails to import on Python 3.11
        return (f"torch {torch.__version__} lacks FSDP2 (torch.distributed.fsdp.fully_shard) or "
                f"DCP's state_dict API (torch >= 2.6 needed): {type(e).__name__}: {e}")
    return ""


def dtensor_class():
    """torch's DTensor class, or None where this torch has none (torch < 2.0)."""
    if not _DTENSOR:
        cls = None
        if torch.distributed.is_available():
            for mod in ("torch.distributed.tensor", "torch.distributed._tensor"):
                try:
                    cls = getattr(__import__(mod, fromlist=["DTensor"]), "DTensor")
                    break
                except Exception:   # ImportError; an old torch that fails to import it
                    continue
        _DTENSOR.append(cls)
    return _DTENSOR[0]


def is_dtensor(t: Any) -> bool:
    cls = dtensor_class()
    return cls is not None and isinstance(t, cls)


_SCHEMES: Dict[Any, Dict[str, dict]] = {}


def _schemes(ks: R.KernelSpec) -> Dict[str, dict]:
    """state name -> the manifest's "states" entry (scheme, group or block, companding, ...)."""
    out = _SCHEMES.get(ks.path)
    if out is None:
        out = {s["name"]: s for s in R.read_manifest(ks.path).get("states", [])}
        _SCHEMES[ks.path] = out
    return out


def _grouped_keys(opt, ks: R.KernelSpec):
    """[(codes key, scales key, group size, state scheme)] of the kernel's per-group streams, and
    the state keys of every per-element stream."""
    keys = opt._stream_keys(ks)
    by_state: Dict[str, Dict[int, Any]] = {}
    element = []
    for s in ks.streams:
        if s.role in (C.ROLE_PARAM, C.ROLE_GRAD):
            continue
        if s.per == C.PER_ELEMENT:
            element.append(keys[s.name])
        by_state.setdefault(s.state, {})[s.role] = s
    grouped = []
    for state, streams in by_state.items():
        scale = streams.get(C.ROLE_STATE_SCALES) or streams.get(C.ROLE_STATE_ABSMAX)
        if scale is None:
            continue
        codes = streams[C.ROLE_STATE_CODES]
        grouped.append((keys[codes.name], keys[scale.name], int(scale.per_size),
                        _schemes(ks)[state]))
    return grouped, element


#: dtypes the collectives of gloo and NCCL lack -> the dtype the logical form holds them in (every
#: value kept: the widening is exact and load narrows it back)
WIDENED = {torch.int16: torch.int32}


def _widened(t: torch.Tensor) -> torch.Tensor:
    wide = WIDENED.get(t.dtype)
    return t.to(wide) if wide is not None else t


def _narrowed(t: torch.Tensor, dtype: torch.dtype, key: str, where: str) -> torch.Tensor:
    """`t` (the logical form's widened dtype) back in the kernel's `dtype`; a value out of its
    range is a ValueError (no checkpoint written by qopt has one)."""
    info = torch.iinfo(dtype)
    if t.numel() and (int(t.min()) < info.min or int(t.max()) > info.max):
        raise ValueError(f"{where}: '{key}' is {t.dtype} with values outside {dtype}'s range "
                         f"[{info.min}, {info.max}] (the kernel keeps it as {dtype})")
    return t.to(dtype)


def _is_widened(t: Any, dtype: torch.dtype) -> bool:
    return (isinstance(t, torch.Tensor) and WIDENED.get(dtype) is not None
            and t.dtype == WIDENED[dtype])


def expand(scales: torch.Tensor, group: int, n: int) -> torch.Tensor:
    """One value per element: element i gets scales[i // group]."""
    return scales.repeat_interleave(group)[:n] if n else scales[:0]


def logical_state(opt, p: torch.Tensor, st: Dict[str, Any], wrap: bool = True) -> Dict[str, Any]:
    """p's state in the mesh-independent form: per-element streams as they are (int16 ones widened
    to int32, ``WIDENED``), per-group streams expanded to one value per element, packed 4-bit codes
    unpacked (``unpack_codes``), each of p's local shape; with `wrap`, DTensors with p's mesh and placements (global shape p.shape). Other entries
    (step, codebook tables) as they are."""
    lp = _local(p)
    ks = opt._param_kernel_spec(p)
    grouped, element = _grouped_keys(opt, ks)
    out = dict(st)
    for key in element:
        if key in st:
            out[key] = _widened(st[key].reshape(lp.shape))
    packed = []
    for ckey, skey, group, scheme in grouped:
        if skey in st:
            out[skey] = expand(st[skey], group, lp.numel()).reshape(lp.shape)
        if is_packed(scheme) and ckey in st:
            # 4-bit codes: one per element (an int8 or uint8 code), like 8-bit ones
            out[ckey] = unpack_codes(st[ckey], lp.numel(), scheme).reshape(lp.shape)
            packed.append(ckey)
    if wrap:
        D = dtensor_class()
        for key in element + [g[1] for g in grouped] + packed:
            if key in out:
                out[key] = D.from_local(out[key], p.device_mesh, p.placements, run_check=False,
                                        shape=p.shape, stride=p.stride())
    return out


def is_logical(opt, p: torch.Tensor, saved: Any) -> bool:
    """Whether `saved` (one parameter's state) is in the logical form: some tensor of it is a
    DTensor, a per-element stream is in its widened dtype (``WIDENED``), or a per-group stream has
    one value per element of p's local shard."""
    if not isinstance(saved, dict):
        return False
    if any(is_dtensor(v) for v in saved.values()):
        return True
    lp = _local(p)
    ks = opt._param_kernel_spec(p)
    grouped, element = _grouped_keys(opt, ks)
    expected = opt._expected_state(p, ks)
    if any(_is_widened(saved.get(k), expected[k][1]) for k in element if k in expected):
        return True
    for _, skey, group, _ in grouped:
        t = saved.get(skey)
        # (a per-group tensor has ceil(n / group) values: the two forms differ in shape unless
        # n <= 1, where they are the same state)
        if isinstance(t, torch.Tensor) and tuple(t.shape) == tuple(lp.shape):
            return True
    return False


def local_state(opt, p: torch.Tensor, saved: Dict[str, Any], where: str) -> Dict[str, Any]:
    """The kernel's local state of p from the logical form `saved` (DTensors are taken as their
    local shard, which must be p's: a ValueError otherwise): per-element streams as they are
    (narrowed back from ``WIDENED``; a value out of range is a ValueError), per-group streams
    regrouped (``regroup``); a per-group stream already in the kernel's form (one value per group
    of the local shard, as a float32 state quantized on load leaves it) is kept. Other entries as
    they are; the result is then checked as any loaded state."""
    lp = _local(p)
    ks = opt._param_kernel_spec(p)
    grouped, element = _grouped_keys(opt, ks)
    expected = opt._expected_state(p, ks)
    out = {}
    for k, v in saved.items():
        if is_dtensor(v):
            # (its global shape is not compared: DTensor.from_local without a shape, as DCP's
            # full_state_dict load makes them, computes an even one for an uneven shard; the local
            # sizes are checked below)
            v = v.to_local()
        out[k] = v
    n = lp.numel()
    for key in element:
        t = out.get(key)
        if isinstance(t, torch.Tensor):
            if t.numel() != n:
                raise ValueError(f"{where}: '{key}' has {t.numel()} elements, the parameter's "
                                 f"local shard {n} (a logical state of another shard)")
            if key in expected and _is_widened(t, expected[key][1]):
                t = _narrowed(t, expected[key][1], key, where)
            out[key] = t.reshape(lp.shape)
    tables = {}
    for key, table in zip(opt._table_keys(ks), opt._device_tables(ks, lp.device)):
        tables[key] = table
    for ckey, skey, group, scheme in grouped:
        c, e = out.get(ckey), out.get(skey)
        if not isinstance(c, torch.Tensor) or not isinstance(e, torch.Tensor):
            continue   # missing: refused by the checks that follow
        if (e.numel() == -(-n // group) and c.numel() == code_count(n, scheme)
                and (e.numel() != n or (is_packed(scheme) and c.dtype == torch.uint8))):
            # the kernel's own grouping of this shard, checked as it is (n <= 1: one group, and
            # packed bytes are uint8, the form of an unsigned code too)
            continue
        if e.numel() != n:
            raise ValueError(f"{where}: '{skey}' has {e.numel()} values, expected one per element "
                             f"of the local shard ({n}) in the logical form")
        qmap = None
        if scheme["scheme"] == "codebook":
            qmap = tables[_table_key_of(opt, ks, scheme["name"])]
        if is_packed(scheme):
            if c.numel() != n or c.dtype != _code_dtype(scheme):
                raise ValueError(f"{where}: '{ckey}' is {c.dtype} with {c.numel()} elements; the "
                                 f"logical form holds one {_code_dtype(scheme)} 4-bit code per "
                                 f"element of the local shard ({n})")
            codes, scales = regroup(c.reshape(-1), e.reshape(-1), group, scheme, qmap)
            out[ckey] = pack_codes(codes, n)
        else:
            codes, scales = regroup(c.reshape(-1), e.reshape(-1), group, scheme, qmap)
            out[ckey] = codes.reshape(lp.shape)
        out[skey] = scales
    return out


def _table_key_of(opt, ks: R.KernelSpec, state: str) -> str:
    for (name, st), key in zip(ks.tables, opt._table_keys(ks)):
        if st == state:
            return key
    raise ValueError(f"qopt: kernel {ks.kernel} has no codebook table for state '{state}'")


# ------------------------------------------------------------------- regrouping

def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32}[t.element_size()])


def regroup(codes: torch.Tensor, per_elem: torch.Tensor, group: int, scheme: dict,
            qmap: Optional[torch.Tensor] = None):
    """(codes, scales) of groups of `group` consecutive elements from per-element codes and the
    scale (or absmax) each element carried. A group whose elements carry one value (bitwise) keeps
    it and its codes; any other group is requantized from its dequantized values."""
    n = codes.numel()
    ng = -(-n // group)
    if n == 0:
        return codes.clone(), per_elem.new_empty((0,))
    pad = ng * group - n
    e = per_elem
    c = codes
    if pad:
        # pad with each last group's first value (keeps a uniform group uniform) and code 0 (a
        # value 0, which no absmax sees)
        first_of_last = e[(ng - 1) * group:(ng - 1) * group + 1]
        e = torch.cat([e, first_of_last.expand(pad)])
        c = torch.cat([c, c.new_zeros(pad)])
    eg, cg = e.view(ng, group), c.view(ng, group)
    bits = _bits(eg)
    uniform = (bits == bits[:, :1]).all(dim=1)
    scales = eg[:, 0].clone()
    out_codes = cg.clone()
    mixed = (~uniform).nonzero().flatten()
    if mixed.numel():
        rows_c, rows_e = cg[mixed], eg[mixed]
        valid = torch.ones_like(rows_c, dtype=torch.bool)
        if pad and mixed[-1].item() == ng - 1:
            valid[-1, group - pad:] = False
        if scheme["scheme"] == "codebook":
            x = _codebook_dequantize(rows_c, rows_e, qmap)
            x = torch.where(valid, x, torch.zeros_like(x))
            q, s = _codebook_quantize(x, qmap)
        else:
            x = _group_dequantize(rows_c, rows_e, scheme)
            x = torch.where(valid, x, torch.zeros_like(x))
            q, s = _group_quantize(x, scheme, rows_e.dtype)
        out_codes[mixed] = torch.where(valid, q, rows_c)
        scales[mixed] = s
    return out_codes.reshape(-1)[:n].clone(), scales


def is_packed(scheme: dict) -> bool:
    """Whether a group scheme keeps 4-bit codes, two a byte (docs/abi.md, "Packed 4-bit codes")."""
    return int(scheme.get("bits", 8)) == 4


def _is_table(scheme: dict) -> bool:
    return scheme.get("companding") in ("dynamic", "nonzero")


def _code_dtype(scheme: dict) -> torch.dtype:
    """The dtype of one unpacked code: int8 for signed codes (-127..127, -7..7), uint8 for
    unsigned ones and for a 4-bit table's entry index (0..15)."""
    return torch.int8 if scheme["storage"] == "int8" and not _is_table(scheme) else torch.uint8


def packed_count(n: int) -> int:
    return (n + 1) // 2


def code_count(n: int, scheme: dict) -> int:
    """Entries of the kernel's codes stream for n elements: n, or ceil(n / 2) bytes when packed."""
    return packed_count(n) if is_packed(scheme) else n


def unpack_codes(packed: torch.Tensor, n: int, scheme: dict) -> torch.Tensor:
    """n codes (``_code_dtype``) from the ceil(n / 2) bytes of a packed stream: element 2j in the
    low nibble of byte j, 2j + 1 in the high one; a signed nibble is two's complement."""
    b = packed.reshape(-1).to(torch.int16) & 0xFF
    codes = torch.stack([b & 0xF, b >> 4], dim=1).reshape(-1)[:n]
    if _code_dtype(scheme) == torch.int8:
        codes = torch.where(codes >= 8, codes - 16, codes)
    return codes.to(_code_dtype(scheme))


def pack_codes(codes: torch.Tensor, n: int) -> torch.Tensor:
    """The ceil(n / 2) bytes of n 4-bit codes (an odd count's last high nibble 0)."""
    c = codes.reshape(-1)[:n].to(torch.int16) & 0xF
    if n % 2:
        c = torch.cat([c, c.new_zeros(1)])
    return (c[0::2] | (c[1::2] << 4)).to(torch.uint8)


_TABLES: Dict[str, list] = {}


def four_bit_table(companding: str) -> list:
    """The 16 ascending float32 entries of a 4-bit table (docs/numerics.md, "4-bit codes and
    tables"), as Python floats: ``dynamic`` is torchao's create_dynamic_map(signed=True,
    max_exponent_bits=3, total_bits=4) computed in float64 and rounded once; ``nonzero`` is
    (k + 1) / 16."""
    t = _TABLES.get(companding)
    if t is None:
        if companding == "dynamic":
            v = []
            for i in range(3):
                items = (1 << i) + 1
                scale = 10.0 ** (i - 2)
                for j in range(items - 1):
                    lo = 0.1 + 0.9 * j / (items - 1)
                    hi = 0.1 + 0.9 * (j + 1) / (items - 1)
                    v += [scale * (lo + hi) / 2, -scale * (lo + hi) / 2]
            v += [0.0, 1.0]
        elif companding == "nonzero":
            v = [k / 16.0 for k in range(1, 17)]
        else:
            raise ValueError(f"qopt: '{companding}' is not a 4-bit table")
        t = torch.tensor(sorted(v), dtype=torch.float32).tolist()
        _TABLES[companding] = t
    return t


def _ranges(scheme: dict):
    """(signed range, unsigned range): 127 and 255 for 8-bit codes, 7 and 15 for 4-bit ones."""
    return (7.0, 15.0) if is_packed(scheme) else (127.0, 255.0)


def _group_dequantize(q: torch.Tensor, s: torch.Tensor, scheme: dict) -> torch.Tensor:
    """Unpacked codes (``_code_dtype``) and each element's scale -> float32 values
    (docs/numerics.md section 2 and "4-bit codes and tables"; the reference's groupDequantize)."""
    s = s.float()
    if _is_table(scheme):
        table = torch.tensor(four_bit_table(scheme["companding"]), dtype=torch.float32,
                             device=q.device)
        return table[q.long()] * s
    srange, urange = _ranges(scheme)
    if scheme["storage"] == "int8":
        z = q.float() / srange
        y = z / (2.0 - z.abs()) if scheme.get("companding") == "softsign" else z
        return y * s
    u = (q.float() / urange) * s
    return u * u if scheme.get("companding") == "sqrt" else u


#: float32's largest finite value, and the largest one whose square is finite (2^64 (1 - 2^-24))
_FLT_MAX = 3.4028234663852886e38
_SQRT_SAFE_MAX = float.fromhex("0x1.fffffep63")


def _saturated(am: torch.Tensor, scheme: dict, scale_dtype: torch.dtype) -> torch.Tensor:
    """docs/numerics.md "Overflow", saturate: an absmax the scale type cannot hold (or NaN) is
    taken as that type's largest value; a positive one that a float16 scale rounds to 0 (at most
    2^-25) as 2^-24, its smallest positive value."""
    if scheme.get("overflow", "ieee") != "saturate":
        return am
    if scale_dtype == torch.float16:
        fits, largest = am < 65520.0, 65504.0
    elif scheme.get("companding") == "sqrt":
        fits, largest = am < 2.0 ** 64, _SQRT_SAFE_MAX
    else:
        fits, largest = torch.isfinite(am), _FLT_MAX
    am = torch.where(fits, am, torch.full_like(am, largest))
    if scale_dtype == torch.float16:
        tiny = (am > 0) & (am <= 2.0 ** -25)
        am = torch.where(tiny, torch.full_like(am, 2.0 ** -24), am)
    return am


def _group_quantize(x: torch.Tensor, scheme: dict, scale_dtype: torch.dtype):
    """Rows of float32 values -> (unpacked codes, scales): the reference's groupQuantize for 8-
    and 4-bit codes, companded or on a 4-bit table, with the scheme's rounding, divisor and
    overflow policy."""
    signed = scheme["storage"] == "int8"
    table = _is_table(scheme)
    saturate = scheme.get("overflow", "ieee") == "saturate"
    srange, urange = _ranges(scheme)
    t = x.sqrt() if scheme.get("companding") == "sqrt" else x
    a = t.abs() if signed else t
    am = a.amax(dim=1).clamp_min(0.0)
    am = torch.where(torch.isnan(a).any(dim=1), torch.full_like(am, float("nan")), am)
    am = _saturated(am, scheme, scale_dtype)
    if scheme.get("scale_divisor", "absmax") == "absmax":
        floor = am.new_tensor(1e-12)   # float32, on the values' device
        sdiv = torch.where(torch.isnan(am) | (am >= floor), am, floor)
        stored = sdiv.to(scale_dtype)
    else:
        stored = am.to(scale_dtype)
        sdiv = torch.where(stored == 0, torch.ones_like(am), stored.float())
    sdiv = sdiv[:, None]
    if table:
        # the count of float32 midpoints strictly below x / s; NaN: the entry nearest 0
        entries = torch.tensor(four_bit_table(scheme["companding"]), dtype=torch.float32,
                               device=x.device)
        mid = (entries[:-1] + entries[1:]) * 0.5
        c = x / sdiv
        count = (mid.view(1, 1, -1) < c.unsqueeze(-1)).sum(dim=-1)
        nearest0 = int(entries.abs().argmin())
        count = torch.where(torch.isnan(c), torch.full_like(count, nearest0), count)
        return count.to(torch.uint8), stored
    if signed:
        y = t / sdiv
        if saturate:
            y = torch.where(torch.isnan(y), y, y.clamp(-1.0, 1.0))
        z = (2.0 * y) / (1.0 + y.abs()) if scheme.get("companding") == "softsign" else y
        r = srange * z
    elif scheme.get("scale_divisor", "absmax") == "absmax":
        r = (urange * t) / sdiv
    else:
        r = (t / sdiv) * urange
    q = torch.floor(r + 0.5) if scheme.get("rounding", "half_up") == "half_up" else torch.round(r)
    q = torch.where(torch.isnan(q), torch.zeros_like(q), q)
    if signed:
        return q.clamp(-srange, srange).to(torch.int8), stored
    return q.clamp(0, urange).to(torch.uint8), stored


def _codebook_dequantize(q: torch.Tensor, a: torch.Tensor, qmap: torch.Tensor) -> torch.Tensor:
    return qmap.to(a.device)[q.long()] * a


def _codebook_quantize(x: torch.Tensor, qmap: torch.Tensor):
    """Rows of float32 values -> (uint8 codes, float32 absmax): the reference's codebookQuantize
    (a code counts the midpoints strictly below x / max(absmax, 1e-30); NaN: 255)."""
    qmap = qmap.to(x.device, torch.float32)
    mid = (qmap[:-1] + qmap[1:]) * 0.5
    am = x.abs().amax(dim=1)
    am = torch.where(torch.isnan(x).any(dim=1), torch.full_like(am, float("nan")), am)
    floor = am.new_tensor(1e-30)
    d = torch.where(torch.isnan(am) | (am >= floor), am, floor)
    c = x / d[:, None]
    count = (mid[None, None, :] < c[:, :, None]).sum(dim=2)
    count = torch.where(torch.isnan(c), torch.full_like(count, 255), count)
    return count.to(torch.uint8), am


__all__ = ["logical_state", "local_state", "is_logical", "regroup", "expand", "dtensor_class",
           "is_dtensor", "TORCH_DTYPES", "pack_codes", "unpack_codes", "is_packed", "code_count",
           "four_bit_table"]

"""The float32 forms of 4-bit states (AdamW4bit's tables, and the companded i4/u4 schemes of
specs/flash_adamw4bit.qopt): ``state[p]["exp_avg"]``, ``compress_state_dict=False`` and loading a
``torch.optim.AdamW`` checkpoint, on the host backend. Expected codes and values come from torch
code written here from docs/abi.md ("Packed 4-bit codes") and docs/numerics.md (section 2 and "4-bit
codes and tables"), not from qopt's."""

from __future__ import annotations

import pytest
import torch

import qopt
from qopt import _reshard

from conftest import backend_available, skip_reason

DYNAMIC = torch.tensor([-0.8875, -0.6625, -0.4375, -0.2125, -0.0775, -0.0325, -0.0055, 0.0, 0.0055,
                        0.0325, 0.0775, 0.2125, 0.4375, 0.6625, 0.8875, 1.0], dtype=torch.float32)
NONZERO = torch.arange(1, 17, dtype=torch.float32) / 16
G4 = 128


@pytest.fixture(autouse=True)
def _host_backend():
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))


class FlashAdamW4bit(qopt.FlashAdamW):
    """FlashAdamW on specs/flash_adamw4bit.qopt: group<i4, 128, softsign> and group<u4, 128, sqrt>
    with float16 scales and int8 error bits."""
    _SPECS = {24: "flash_adamw4bit"}
    _SR_SPEC = None
    _KAHAN_SPEC = None


# ------------------------------------------------------------------ independent 4-bit formulas

def nibbles(packed: torch.Tensor, n: int, signed: bool) -> torch.Tensor:
    """Element 2j in the low nibble of byte j, 2j + 1 in the high one; signed: two's complement."""
    b = packed.reshape(-1).to(torch.int64)
    out = []
    for i in range(n):
        v = int(b[i // 2]) >> (4 * (i % 2)) & 0xF
        out.append(v - 16 if signed and v >= 8 else v)
    return torch.tensor(out, dtype=torch.int64)


def pack(codes: torch.Tensor) -> torch.Tensor:
    c = [int(v) & 0xF for v in codes.reshape(-1)]
    if len(c) % 2:
        c.append(0)
    return torch.tensor([c[j] | (c[j + 1] << 4) for j in range(0, len(c), 2)], dtype=torch.uint8)


def dequant(packed, scales, n, scheme):
    s = scales.float().reshape(-1).repeat_interleave(G4)[:n]
    if scheme == "dynamic":
        return DYNAMIC[nibbles(packed, n, False)] * s
    if scheme == "nonzero":
        return NONZERO[nibbles(packed, n, False)] * s
    if scheme == "softsign":
        z = nibbles(packed, n, True).float() / 7.0
        return (z / (2.0 - z.abs())) * s
    u = (nibbles(packed, n, False).float() / 15.0) * s        # sqrt
    return u * u


def quant(x: torch.Tensor, scheme: str, scale_dtype=torch.float32):
    """(packed codes, scales) of float32 values x: groups of 128, s = max(absmax, 1e-12) (absmax
    of |x|, of x from 0 for nonzero, of sqrt(x) for sqrt), stored in scale_dtype; a table's code
    counts the midpoints strictly below x / s; companded: floor(7 z + 0.5), floor(15 u / s + 0.5)."""
    x = x.reshape(-1).float()
    n = x.numel()
    codes = []
    scales = []
    for g0 in range(0, n, G4):
        xs = x[g0:g0 + G4]
        t = xs.sqrt() if scheme == "sqrt" else xs
        am = float(t.abs().max()) if scheme in ("dynamic", "softsign") else max(float(t.max()), 0.0)
        s = torch.tensor(max(am, 1e-12), dtype=torch.float32)
        scales.append(s)
        if scheme in ("dynamic", "nonzero"):
            table = DYNAMIC if scheme == "dynamic" else NONZERO
            mids = (table[:-1] + table[1:]) * 0.5
            codes.append((mids.view(1, -1) < (xs / s).view(-1, 1)).sum(1))
        elif scheme == "softsign":
            y = t / s
            z = (2.0 * y) / (1.0 + y.abs())
            codes.append(torch.floor(7.0 * z + 0.5).clamp(-7, 7).long())
        else:
            codes.append(torch.floor((15.0 * t) / s + 0.5).clamp(0, 15).long())
    return pack(torch.cat(codes)), torch.stack(scales).to(scale_dtype)


def _step(opt, params, gen, times):
    for _ in range(times):
        for p in params:
            p.grad = (1e-2 * torch.randn(p.shape, generator=gen)).to(p.dtype)
        opt.step()


CASES = [
    ("AdamW4bit", lambda ps: qopt.AdamW4bit(ps, lr=1e-2), ("dynamic", "nonzero"), torch.float32),
    ("FlashAdamW4bit", lambda ps: FlashAdamW4bit(ps, lr=1e-2), ("softsign", "sqrt"),
     torch.float16),
]
IDS = [c[0] for c in CASES]
SHAPES = [(301,), (7, 33), (1,)]


def _stepped_uncompressed(make, seed):
    """bf16 parameters of SHAPES, two steps of `make`'s optimizer, and its state_dict() with
    compress_state_dict=False."""
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter((0.5 * torch.randn(s, generator=gen)).to(torch.bfloat16))
              for s in SHAPES]
    opt = make(params)
    _step(opt, params, gen, 2)
    opt.compress_state_dict = False
    return params, opt, opt.state_dict()


@pytest.mark.parametrize("name,make,schemes,sdt", CASES, ids=IDS)
def test_float32_keys_read_the_packed_codes(name, make, schemes, sdt):
    """state[p]["exp_avg"] (FlashOptim's keys) and state_dict() with compress_state_dict=False:
    float32 tensors of the parameter's shape, the dequantized packed codes."""
    params, opt, sd = _stepped_uncompressed(make, seed=1)
    for i, p in enumerate(params):
        st = opt.state[p]
        n = p.numel()
        for key, scheme in zip(("exp_avg", "exp_avg_sq"), schemes):
            want = dequant(st[f"{key}::quantized"], st[f"{key}::scales"], n, scheme)
            want = want.reshape(p.shape)
            assert key not in st
            assert st[key].dtype == torch.float32 and st[key].shape == p.shape
            assert torch.equal(st[key], want), (name, key, p.shape)
            assert torch.equal(st.get(key), want)
            assert sd["state"][i][key].shape == p.shape
            assert torch.equal(sd["state"][i][key], want), (name, key, p.shape)
            assert f"{key}::quantized" not in sd["state"][i]
        assert bool((st["exp_avg_sq::quantized"] != 0).any() or n == 1)


@pytest.mark.parametrize("name,make,schemes,sdt", CASES, ids=IDS)
def test_torch_adamw_state_is_quantized_into_packed_codes(name, make, schemes, sdt):
    """A torch.optim.AdamW checkpoint loads: each moment quantized with the kernel's 4-bit scheme
    (an odd tensor's last high nibble 0), and the optimizer steps on from it."""
    gen = torch.Generator().manual_seed(2)
    ps = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    ref = torch.optim.AdamW(ps, lr=1e-2)
    for _ in range(2):
        for p in ps:
            p.grad = torch.randn(p.shape, generator=gen)
        ref.step()
    qs = [torch.nn.Parameter(p.detach().clone()) for p in ps]
    opt = make(qs)
    opt.load_state_dict(ref.state_dict())
    for p, q in zip(ps, qs):
        st = opt.state[q]
        for key, scheme in zip(("exp_avg", "exp_avg_sq"), schemes):
            codes, scales = quant(ref.state[p][key], scheme, sdt)
            assert torch.equal(st[f"{key}::quantized"], codes), (name, key, p.shape)
            assert st[f"{key}::scales"].dtype == sdt
            assert torch.equal(st[f"{key}::scales"], scales), (name, key, p.shape)
        assert int(st["step"]) == 2
        if p.numel() % 2:
            assert int(st["exp_avg_sq::quantized"][-1]) >> 4 == 0
    for q in qs:
        q.grad = torch.randn(q.shape, generator=gen)
    opt.step()
    assert all(bool(torch.isfinite(q).all()) for q in qs)


@pytest.mark.parametrize("name,make,schemes,sdt", CASES, ids=IDS)
def test_uncompressed_state_dict_round_trip(name, make, schemes, sdt):
    """compress_state_dict=False, loaded into a fresh optimizer: each state quantized again from
    the saved float32 values."""
    params, opt, sd = _stepped_uncompressed(make, seed=3)
    qs = [torch.nn.Parameter(p.detach().clone()) for p in params]
    other = make(qs)
    other.load_state_dict(sd)
    for i, q in enumerate(qs):
        for key, scheme in zip(("exp_avg", "exp_avg_sq"), schemes):
            codes, scales = quant(sd["state"][i][key], scheme, sdt)
            assert torch.equal(other.state[q][f"{key}::quantized"], codes), (name, key)
            assert torch.equal(other.state[q][f"{key}::scales"].float(), scales.float())


def test_adamw4bit_takes_compress_state_dict():
    """AdamW4bit's docstring named compress_state_dict=False, which its constructor refused
    (TypeError): accepted, the moments come out in float32 (dequantized here from the codes)."""
    gen = torch.Generator().manual_seed(4)
    params = [torch.nn.Parameter((0.5 * torch.randn(s, generator=gen)).to(torch.bfloat16))
              for s in SHAPES]
    opt = qopt.AdamW4bit(params, lr=1e-2, compress_state_dict=False)
    assert opt.compress_state_dict is False
    _step(opt, params, gen, 2)
    sd = opt.state_dict()
    for i, p in enumerate(params):
        st, n = opt.state[p], p.numel()
        assert set(sd["state"][i]) == {"exp_avg", "exp_avg_sq", "step"}
        for key, scheme in (("exp_avg", "dynamic"), ("exp_avg_sq", "nonzero")):
            want = dequant(st[f"{key}::quantized"], st[f"{key}::scales"], n, scheme)
            assert torch.equal(sd["state"][i][key].reshape(-1), want), key
    with pytest.raises(ValueError, match="compress_state_dict='no'; True or False"):
        qopt.AdamW4bit(params, compress_state_dict="no")


@pytest.mark.parametrize("scheme,storage,comp", [
    ("dynamic", "int8", "dynamic"), ("nonzero", "uint8", "nonzero"),
    ("softsign", "int8", "softsign"), ("sqrt", "uint8", "sqrt")])
def test_group_functions_on_4bit_schemes(scheme, storage, comp):
    """_reshard's quantize and dequantize of one manifest scheme, with the packing, against the
    formulas above; a NaN takes the entry nearest 0 on a table."""
    man = {"scheme": "group", "bits": 4, "storage": storage, "companding": comp,
           "group": G4, "rounding": "half_up", "scale_divisor": "absmax", "overflow": "saturate"}
    sdt = torch.float16 if comp in ("softsign", "sqrt") else torch.float32
    gen = torch.Generator().manual_seed(4)
    n = 3 * G4 - 5
    x = torch.randn(n, generator=gen) * 3
    if storage == "uint8":
        x = x * x
    rows = torch.cat([x, torch.zeros(3 * G4 - n)]).view(3, G4)
    q, s = _reshard._group_quantize(rows, man, sdt)
    packed = _reshard.pack_codes(q.reshape(-1)[:n], n)
    want_codes, want_scales = quant(x, scheme, sdt)
    assert torch.equal(packed, want_codes)
    assert torch.equal(s.float(), want_scales.float())
    back = _reshard.unpack_codes(packed, n, man)
    assert torch.equal(back.long(), q.reshape(-1)[:n].long())
    assert torch.equal(_reshard._group_dequantize(back, s.repeat_interleave(G4)[:n], man),
                       dequant(want_codes, want_scales, n, scheme))
    if comp in ("dynamic", "nonzero"):
        y = rows.clone()
        y[1, 3] = float("nan")
        q2, s2 = _reshard._group_quantize(y, man, sdt)
        table = DYNAMIC if comp == "dynamic" else NONZERO
        assert float(table[int(q2[1, 3])]) == float(table[table.abs().argmin()])
        assert float(s2[1]) == 3.4028234663852886e38     # saturate: a NaN absmax stored as MAX


def test_uncompressed_state_of_a_dtensor_parameter(monkeypatch):
    """compress_state_dict=False for a DTensor (FSDP2) parameter, with test_reshard's stand-in
    DTensor class: the float32 moments are DTensors of the parameter's shape holding the
    dequantized packed codes, and loading them quantizes each into packed codes again."""
    from test_reshard import _FakeDTensor
    marked = set()
    monkeypatch.setattr(_reshard, "dtensor_class", lambda: _FakeDTensor)
    monkeypatch.setattr(_reshard, "is_dtensor",
                        lambda t: isinstance(t, _FakeDTensor) or id(t) in marked)
    gen = torch.Generator().manual_seed(6)
    shape = (33, 24)
    p = torch.nn.Parameter((0.5 * torch.randn(shape, generator=gen)).to(torch.bfloat16))
    opt = qopt.AdamW4bit([p], lr=1e-2)
    _step(opt, [p], gen, 2)
    p.device_mesh, p.placements = "mesh", ("Shard(0)",)
    marked.add(id(p))
    opt.compress_state_dict = False
    sd = opt.state_dict()
    st = opt.state[p]
    q = torch.nn.Parameter(p.detach().clone())
    q.device_mesh, q.placements = "mesh", ("Shard(0)",)
    marked.add(id(q))
    other = qopt.AdamW4bit([q], lr=1e-2)
    other.load_state_dict(sd)
    for key, scheme in (("exp_avg", "dynamic"), ("exp_avg_sq", "nonzero")):
        v = sd["state"][0][key]
        assert isinstance(v, _FakeDTensor) and tuple(v.shape) == shape
        local = v.to_local()
        assert local.dtype == torch.float32 and local.shape == shape
        want = dequant(st[f"{key}::quantized"], st[f"{key}::scales"], p.numel(), scheme)
        assert torch.equal(local.reshape(-1), want)
        codes, scales = quant(local, scheme)
        assert torch.equal(other.state[q][f"{key}::quantized"], codes), key
        assert torch.equal(other.state[q][f"{key}::scales"], scales), key

"""AdamW4bit and stochastic rounding on the host backend against torch formulas written here
(torchao's 4-bit maps from their definition, Philox4x32-10 from Salmon et al. 2011), byte for
byte: the packed 4-bit codes, the float32 scales and the bf16 parameter."""

import json

import pytest
import torch

import qopt

from conftest import backend_available

M32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Philox4x32-10 (Salmon et al. 2011, section 4.3) on Python ints."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
    return c0, c1, c2, c3


def test_philox_known_answers():
    # Random123's kat_vectors, philox4x32 10.
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)
    assert philox4x32_10((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
                         (0xa4093822, 0x299f31d0)) == (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)


def stochastic_bf16(x32: torch.Tensor, seed: int, step: int, first: int) -> torch.Tensor:
    """docs/numerics.md "Stochastic rounding": element i of the launch (global index first + i)
    takes 16 bits of Philox block index // 8, word (index % 8) // 2, its low half for an even
    index; bf16 = the high half of bits(x) + those bits; NaN -> 0x7FC0."""
    bits = x32.contiguous().view(torch.int32).to(torch.int64) & M32
    out = torch.empty(x32.numel(), dtype=torch.int64)
    words = {}
    for i in range(x32.numel()):
        g = first + i
        b = g // 8
        if b not in words:
            words[b] = philox4x32_10((b & M32, b >> 32, step, 0), (seed, 0))
        w = words[b][(g % 8) // 2]
        r = (w >> 16) if g % 2 else (w & 0xFFFF)
        out[i] = ((int(bits[i]) + r) & M32) >> 16
    out[torch.isnan(x32)] = 0x7FC0
    return out.to(torch.int16).view(torch.bfloat16)


DYNAMIC = torch.tensor([-0.8875, -0.6625, -0.4375, -0.2125, -0.0775, -0.0325, -0.0055, 0.0, 0.0055,
                        0.0325, 0.0775, 0.2125, 0.4375, 0.6625, 0.8875, 1.0], dtype=torch.float32)
NONZERO = torch.arange(1, 17, dtype=torch.float32) / 16


def dynamic_map_from_torchao_definition():
    """torchao create_dynamic_map(signed=True, max_exponent_bits=3, total_bits=4) in float64."""
    data = []
    for i in range(3):
        items = 2 ** i + 1
        b = [0.1 + 0.9 * j / (items - 1) for j in range(items)]
        means = [(b[j] + b[j + 1]) / 2 for j in range(items - 1)]
        data += [10 ** (i - 2) * m for m in means] + [-(10 ** (i - 2)) * m for m in means]
    return sorted(data + [0.0, 1.0])


def test_dynamic_table_is_torchaos_definition():
    assert torch.equal(torch.tensor(dynamic_map_from_torchao_definition(), dtype=torch.float32),
                       DYNAMIC)


def dequant(codes: torch.Tensor, scales: torch.Tensor, table: torch.Tensor, n: int):
    idx = torch.stack([codes & 0xF, codes >> 4], dim=-1).reshape(-1)[:n].long()
    return table[idx] * scales.repeat_interleave(128)[:n]


def quant(x: torch.Tensor, table: torch.Tensor, signed: bool):
    n = x.numel()
    groups = (n + 127) // 128
    pad = torch.zeros(groups * 128 - n)
    mag = torch.cat([x.abs() if signed else x, pad]).reshape(groups, 128)
    absmax = mag.amax(1) if signed else torch.clamp(mag.amax(1), min=0.0)
    scale = torch.clamp(absmax, min=1e-12)
    c = x / scale.repeat_interleave(128)[:n]
    mids = (table[:-1] + table[1:]) * 0.5
    code = (mids.view(1, -1) < c.view(-1, 1)).sum(1)
    code = torch.cat([code, torch.zeros(n % 2, dtype=code.dtype)])
    packed = (code[0::2] | (code[1::2] << 4)).to(torch.uint8)
    return packed, scale


def adamw_step(p32, g, m, v, step, hp):
    lr, (b1, b2), eps, wd = hp["lr"], hp["betas"], hp["eps"], hp["weight_decay"]
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
    denom = torch.sqrt(v / bc2) + eps
    p32 = p32 * (1 - lr * wd) - (lr / bc1) * m / denom
    return p32, m, v


HP = dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
SHAPES = [(1001,), (7, 33), (384,), (1,)]


def tile_elements(spec: str) -> int:
    """The host kernel's launch.tile_elements: a launch's tensor k starts at global element
    firstTile_k * tile_elements (docs/abi.md)."""
    for d in qopt.kernel_dirs("cpu"):
        path = d / f"{spec}.manifest.json"
        if path.is_file():
            return json.loads(path.read_text())["launch"]["tile_elements"]
    raise AssertionError(f"no manifest of {spec}")


def make(seed):
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter((0.5 * torch.randn(s, generator=g)).to(torch.bfloat16))
              for s in SHAPES]
    return params, g


@pytest.mark.parametrize("stochastic", [False, True])
def test_adamw4bit_matches_torch_formula(stochastic):
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    params, gen = make(0)
    opt = qopt.AdamW4bit(params, **HP, bf16_stochastic_round=stochastic, seed=321)
    tile = tile_elements("adamw4bit_sr" if stochastic else "adamw4bit")
    want = [dict(p=p.detach().clone(), m=None, v=None) for p in params]
    for step in range(1, 4):
        grads = [(1e-2 * torch.randn(p.shape, generator=gen)).to(torch.bfloat16) for p in params]
        first = 0
        for p, g, w in zip(params, grads, want):
            p.grad = g.clone()
            n = p.numel()
            m = torch.zeros(n) if w["m"] is None else dequant(*w["m"], DYNAMIC, n)
            v = torch.zeros(n) if w["v"] is None else dequant(*w["v"], NONZERO, n)
            p32, m, v = adamw_step(w["p"].float().reshape(-1), g.float().reshape(-1), m, v, step, HP)
            w["m"], w["v"] = quant(m, DYNAMIC, True), quant(v, NONZERO, False)
            w["p"] = (stochastic_bf16(p32, 321, step, first) if stochastic
                      else p32.to(torch.bfloat16)).reshape(p.shape)
            first += (n + tile - 1) // tile * tile
        opt.step()
        for p, w in zip(params, want):
            st = opt.state[p]
            assert torch.equal(p.detach().view(torch.int16), w["p"].view(torch.int16)), step
            assert torch.equal(st["exp_avg::quantized"].reshape(-1), w["m"][0]), step
            assert torch.equal(st["exp_avg::scales"].reshape(-1), w["m"][1]), step
            assert torch.equal(st["exp_avg_sq::quantized"].reshape(-1), w["v"][0]), step
            assert torch.equal(st["exp_avg_sq::scales"].reshape(-1), w["v"][1]), step


def test_stochastic_rounding_takes_a_neighbour_and_differs_from_nearest():
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    results = {}
    for sr in (False, True):
        params, gen = make(1)
        opt = qopt.FlashAdamW(params, **HP, master_weight_bits=None, stochastic_rounding=sr, seed=5)
        grads = [(1e-2 * torch.randn(p.shape, generator=gen)).to(torch.bfloat16) for p in params]
        for p, g in zip(params, grads):
            p.grad = g
        p0 = [p.detach().clone() for p in params]
        opt.step()
        results[sr] = [p.detach().clone() for p in params]
    # One step from zero states: p' in float32 as the spec computes it (m, v unquantized); the
    # nearest kernel stores its rounding to nearest, the stochastic one its truncation toward
    # zero or the next bf16 away from zero.
    for p_start, near, rand, g in zip(p0, results[False], results[True], grads):
        p32, _, _ = adamw_step(p_start.float(), g.float(), torch.zeros(p_start.shape),
                               torch.zeros(p_start.shape), 1, HP)
        assert torch.equal(near.view(torch.int16), p32.to(torch.bfloat16).view(torch.int16))
        toward_zero = (p32.view(torch.int32).to(torch.int64) & M32) >> 16
        got = rand.view(torch.int16).to(torch.int64) & 0xFFFF
        assert bool(((got == toward_zero) | (got == toward_zero + 1)).all())
    changed = sum(int((a != b).sum()) for a, b in zip(results[False], results[True]))
    total = sum(p.numel() for p in results[True])
    assert 0.1 * total < changed < 0.9 * total


def test_options_are_checked():
    p = [torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))]
    with pytest.raises(ValueError, match="master_weight_bits=None"):
        qopt.FlashAdamW(p, stochastic_rounding=True)
    with pytest.raises(ValueError, match="seed"):
        qopt.FlashAdamW(p, master_weight_bits=None, stochastic_rounding=True, seed=2 ** 24)
    with pytest.raises(ValueError, match="block_size"):
        qopt.AdamW4bit(p, block_size=64)
    with pytest.raises(ValueError, match="amsgrad"):
        qopt.AdamW4bit(p, amsgrad=True)


def test_kahan_first_step_matches_torch_formula():
    """optimi's Kahan summation in float32 (docs/numerics.md, "Kahan summation"), one step from
    zero states and a zero compensation: s = (x - p), p' = bf16(p + s), c = bf16(s - (p' - p))."""
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    params, gen = make(2)
    opt = qopt.FlashAdamW(params, **HP, master_weight_bits=None, kahan_sum=True)
    grads = [(1e-2 * torch.randn(p.shape, generator=gen)).to(torch.bfloat16) for p in params]
    p0 = [p.detach().clone() for p in params]
    for p, g in zip(params, grads):
        p.grad = g
    opt.step()
    for p, start, g in zip(params, p0, grads):
        old = start.float()
        x, _, _ = adamw_step(old, g.float(), torch.zeros(old.shape), torch.zeros(old.shape), 1, HP)
        s = torch.zeros(old.shape) + (x - old)
        want_p = (old + s).to(torch.bfloat16)
        want_c = (s - (want_p.float() - old)).to(torch.bfloat16)
        assert torch.equal(p.detach().view(torch.int16), want_p.view(torch.int16))
        assert torch.equal(opt.state[p]["kahan_comp"].reshape(p.shape).view(torch.int16),
                           want_c.view(torch.int16))


def test_kahan_options_are_checked():
    p = [torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))]
    with pytest.raises(ValueError, match="master_weight_bits=None"):
        qopt.FlashAdamW(p, kahan_sum=True)
    with pytest.raises(ValueError, match="choose one"):
        qopt.FlashAdamW(p, master_weight_bits=None, kahan_sum=True, stochastic_rounding=True)


def test_kahan_fp32_parameter_takes_the_variant_without_compensation():
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    p = torch.nn.Parameter(torch.ones(300))
    opt = qopt.FlashAdamW([p], **HP, master_weight_bits=None, kahan_sum=True)
    p.grad = torch.full((300,), 0.5)
    opt.step()
    assert "kahan_comp" not in opt.state[p]
    assert bool((p.detach() < 1).all())


def test_kahan_master_weights_add_the_compensation():
    """qopt.master_weights / fp32_state_dict / get_fp32_model_state_dict of a Kahan optimizer:
    float32(p) + float32(c), with p and c from optimi's recurrence in float32 (one step from zero
    states, as test_kahan_first_step_matches_torch_formula); set_fp32_model_state_dict stores v as
    p = bf16(v), c = bf16(v - p)."""
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    gen = torch.Generator().manual_seed(8)
    model = torch.nn.Linear(33, 7).to(torch.bfloat16)
    hp = dict(HP, lr=1e-4)       # small updates: much of each is kept in the compensation
    opt = qopt.FlashAdamW(model.parameters(), **hp, master_weight_bits=None, kahan_sum=True)
    p0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    grads = {}
    for n, p in model.named_parameters():
        grads[n] = (1e-2 * torch.randn(p.shape, generator=gen)).to(torch.bfloat16)
        p.grad = grads[n].clone()
    opt.step()
    masters = qopt.master_weights(opt)
    full = qopt.fp32_state_dict(opt, model)
    flash = opt.get_fp32_model_state_dict(model)
    for n, p in model.named_parameters():
        old = p0[n].float()
        x, _, _ = adamw_step(old, grads[n].float(), torch.zeros(old.shape), torch.zeros(old.shape),
                             1, hp)
        s = x - old
        want_p = (old + s).to(torch.bfloat16)
        want_c = (s - (want_p.float() - old)).to(torch.bfloat16)
        want = want_p.float() + want_c.float()
        assert bool((want_c != 0).any())        # the compensation holds something: a real test
        assert torch.equal(masters[p], want), n
        assert torch.equal(full[n], want), n
        assert torch.equal(flash[n], want), n
        assert (want - x).abs().sum() < (want_p.float() - x).abs().sum()
    v = {n: torch.randn(p.shape, generator=gen) for n, p in model.named_parameters()}
    opt.set_fp32_model_state_dict(model, v)
    for n, p in model.named_parameters():
        b = v[n].to(torch.bfloat16)
        c = (v[n] - b.float()).to(torch.bfloat16)
        assert torch.equal(p.detach().view(torch.int16), b.view(torch.int16))
        assert torch.equal(opt.state[p]["kahan_comp"].reshape(p.shape).view(torch.int16),
                           c.view(torch.int16))
        assert torch.equal(qopt.master_weights(opt)[p], b.float() + c.float())


def _seed_of_launch(seed, index):
    """docs/numerics.md "Stochastic rounding": the launch whose first parameter has state_dict
    index `index` receives (seed + index * 0x3779B1) mod 2^24."""
    return (seed + index * 0x3779B1) % (1 << 24)


@pytest.mark.parametrize("make", [
    lambda groups: qopt.FlashAdamW(groups, **HP, master_weight_bits=None, stochastic_rounding=True,
                                   seed=11),
    lambda groups: qopt.AdamW4bit(groups, **HP, bf16_stochastic_round=True, seed=11)],
    ids=["FlashAdamW", "AdamW4bit"])
def test_stochastic_rounding_draws_other_bits_in_each_launch(make):
    """Two param groups (two launches) with equal tensors, gradients and seed: the second launch's
    bits come from its own seed, so the roundings differ; each equals the Philox formula with its
    launch's seed (the first launch keeps the user's)."""
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    gen = torch.Generator().manual_seed(9)
    base = (0.5 * torch.randn(3000, generator=gen)).to(torch.bfloat16)
    g = (1e-2 * torch.randn(3000, generator=gen)).to(torch.bfloat16)
    c = torch.nn.Parameter(torch.ones(5, dtype=torch.bfloat16))      # group 0's first parameter
    a = torch.nn.Parameter(base.clone())
    b = torch.nn.Parameter(base.clone())
    opt = make([{"params": [a]}, {"params": [c, b]}])
    a.grad, b.grad = g.clone(), g.clone()          # c has no gradient: group 1's launch starts at b
    opt.step()
    x, _, _ = adamw_step(base.float(), g.float(), torch.zeros(3000), torch.zeros(3000), 1, HP)
    want_a = stochastic_bf16(x, _seed_of_launch(11, 0), 1, 0)
    want_b = stochastic_bf16(x, _seed_of_launch(11, 2), 1, 0)
    assert torch.equal(a.detach().view(torch.int16), want_a.view(torch.int16))
    assert torch.equal(b.detach().view(torch.int16), want_b.view(torch.int16))
    same = int((a.detach() == b.detach()).sum())
    assert same < 0.9 * 3000           # about 70% agree (two independent draws), not all


def test_stochastic_rounding_refuses_step_2_to_the_24():
    """The step reaches the Philox counter as a float32: a step count of 2^24 or more is refused
    before anything is stepped; round-to-nearest optimizers go on."""
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    for sr in (True, False):
        p = torch.nn.Parameter(torch.ones(64, dtype=torch.bfloat16))
        opt = qopt.FlashAdamW([p], **HP, master_weight_bits=None, stochastic_rounding=sr)
        p.grad = torch.full((64,), 0.5, dtype=torch.bfloat16)
        opt.step()
        sd = opt.state_dict()
        sd["state"][0]["step"] = torch.tensor((1 << 24) - 2)
        opt.load_state_dict(sd)
        opt.step()                               # step 2^24 - 1: exact
        assert int(opt.state[p]["step"]) == (1 << 24) - 1
        before = p.detach().clone()
        if sr:
            with pytest.raises(ValueError, match=r"step 16777216 .* reaches 2\^24.*nothing was "
                                                 r"stepped"):
                opt.step()
            assert torch.equal(p.detach(), before)
            assert int(opt.state[p]["step"]) == (1 << 24) - 1
        else:
            opt.step()
            assert int(opt.state[p]["step"]) == 1 << 24


def test_torch_adamw_state_loads_into_kahan_with_a_zero_compensation():
    """A torch.optim.AdamW checkpoint has no compensation: FlashAdamW(kahan_sum=True) starts it
    at 0 (a bf16 tensor of the parameter's elements), as a fresh optimizer does."""
    if not backend_available("cpu"):
        pytest.skip("no host backend")
    gen = torch.Generator().manual_seed(12)
    p = torch.nn.Parameter(torch.randn(300, generator=gen).to(torch.bfloat16))
    ref = torch.optim.AdamW([p], lr=1e-3)
    p.grad = torch.randn(300, generator=gen).to(torch.bfloat16)
    ref.step()
    opt = qopt.FlashAdamW([p], lr=1e-3, master_weight_bits=None, kahan_sum=True)
    opt.load_state_dict(ref.state_dict())
    comp = opt.state[p]["kahan_comp"]
    assert comp.dtype == torch.bfloat16 and comp.numel() == 300
    assert bool((comp == 0).all())
    assert int(opt.state[p]["step"]) == 1
    opt.step()
    assert int(opt.state[p]["step"]) == 2 and bool(torch.isfinite(p).all())

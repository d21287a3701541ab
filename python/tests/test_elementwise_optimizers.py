"""RMSprop8bit, Adagrad8bit, Lion8bit, AdEMAMix8bit (bitsandbytes' names and defaults) and AdamAtan2
against torch.optim or the published formulas, written out here in float32 torch: the 32-bit forms
within float rounding, the 8-bit ones within bitsandbytes' blockwise quantization error; their state
keys, the options they refuse, checkpoints in lockstep. On the host backend (CPU) and on CUDA, each
skipped with the reason where that backend is missing (conftest.py).
"""

import copy
import math

import pytest
import torch

import qopt
from qopt.optim import dynamic_map

from test_step import bits


def f32_params(device, *shapes, seed=0, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((scale * torch.randn(s, generator=g)).to(device)) for s in shapes]


def f32_grads(shapes, step, device, scale=1e-2):
    g = torch.Generator().manual_seed(1000 + step)
    return [(scale * torch.randn(s, generator=g)).to(device) for s in shapes]


def run(opt, params, steps, ref_step=None, ref_params=None):
    """`steps` steps of `opt` (and of `ref_step` on `ref_params`, float32 copies) on the same
    float32 gradients."""
    shapes = [p.shape for p in params]
    for step in range(1, steps + 1):
        grads = f32_grads(shapes, step, params[0].device)
        for p, g in zip(params, grads):
            p.grad = g.to(p.dtype)
        opt.step()
        if ref_step is not None:
            ref_step(step, ref_params, [g.to(p.dtype).float() for p, g in zip(params, grads)])


def assert_close_to(params, ref_params, rtol, atol):
    for p, r in zip(params, ref_params):
        torch.testing.assert_close(p.detach().float(), r, rtol=rtol, atol=atol)


def block_absmax(x):
    """Each element's block absmax (blocks of 256, bitsandbytes' 8-bit scale)."""
    n = x.numel()
    flat = torch.cat([x.reshape(-1).abs(), x.new_zeros((-n) % 256)]).reshape(-1, 256)
    return flat.amax(1).repeat_interleave(256)[:n]


def dequantized(state, codes, absmax, qmap):
    """bitsandbytes' blockwise dequantization (block 256): qmap[code] * absmax[block]."""
    c = state[codes].reshape(-1).long()
    table = state[qmap].float()
    scale = state[absmax].float().repeat_interleave(256)[: c.numel()]
    return table[c] * scale


# ------------------------------------------------------------------------- RMSprop and Adagrad

def torch_twin(cls, params, **kw):
    ref = [torch.nn.Parameter(p.detach().float().clone()) for p in params]
    opt = cls(ref, **kw)

    def step(_, ps, grads):
        for q, g in zip(ps, grads):
            q.grad = g.clone()
        opt.step()
    return ref, opt, step


@pytest.mark.parametrize("qcls,tcls,kw", [
    (qopt.RMSprop32bit, torch.optim.RMSprop, dict(lr=3e-3, alpha=0.95, eps=1e-6, weight_decay=0.01)),
    (qopt.Adagrad32bit, torch.optim.Adagrad, dict(lr=2e-2, lr_decay=0.01, eps=1e-8, weight_decay=0.01)),
], ids=["rmsprop", "adagrad"])
def test_32bit_state_equals_torch_within_rounding(device, qcls, tcls, kw):
    params = f32_params(device, (1024, 32), (4097,), (1,), seed=1)
    ref, topt, step = torch_twin(tcls, params, **kw)
    opt = qcls(params, **kw)
    run(opt, params, 50, step, ref)
    # one rounding per operation in either; orders differ (torch fuses some), 50 steps apart
    assert_close_to(params, ref, rtol=1e-5, atol=1e-7)
    key = "square_avg" if tcls is torch.optim.RMSprop else "sum"
    for p, r in zip(params, ref):
        torch.testing.assert_close(opt.state[p]["state1"], topt.state[r][key], rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("qcls,tcls,kw", [
    (qopt.RMSprop8bit, torch.optim.RMSprop, dict(lr=1e-3, alpha=0.99, eps=1e-8)),
    (qopt.Adagrad8bit, torch.optim.Adagrad, dict(lr=1e-2, eps=1e-10)),
], ids=["rmsprop", "adagrad"])
def test_8bit_state_equals_torch_within_quantization(device, qcls, tcls, kw):
    """50 steps on 1024 x 32 and 4097 elements: the dequantized state against torch's within the
    blockwise 8-bit error that 50 requantizations accumulate on the signed dynamic map (bitsandbytes'
    choice for a 1-state optimizer, whose positive half holds these states), the parameters' mean
    error within 2% of their travel (measured on the host: at most 0.075 of the block's absmax,
    0.047 at the 99th percentile, 0.9% of the travel; the bounds are twice that)."""
    params = f32_params(device, (1024, 32), (4097,), seed=2)
    ref, topt, step = torch_twin(tcls, params, **kw)
    start = [r.detach().clone() for r in ref]
    opt = qcls(params, min_8bit_size=0, **kw)
    run(opt, params, 50, step, ref)
    key = "square_avg" if tcls is torch.optim.RMSprop else "sum"
    for p, r, s in zip(params, ref, start):
        st = opt.state[p]
        assert st["state1"].dtype == torch.uint8
        got = dequantized(st, "state1", "absmax1", "qmap1")
        want = topt.state[r][key].reshape(-1)
        rel = (got - want).abs() / block_absmax(want)
        assert rel.max().item() < 0.15 and rel.quantile(0.99).item() < 0.1, rel.max().item()
        err = (p.detach().float() - r.detach()).abs().mean().item()
        moved = (r.detach() - s).abs().mean().item()
        assert err < 0.02 * moved, (err, moved)


def test_rmsprop_and_adagrad_refuse_what_their_kernels_lack():
    (p,) = f32_params("cpu", (4,))
    with pytest.raises(NotImplementedError, match="alpha==0.0"):
        qopt.RMSprop8bit([p], alpha=0.0)
    with pytest.raises(NotImplementedError, match="Centered"):
        qopt.RMSprop8bit([p], centered=True)
    with pytest.raises(ValueError, match="momentum=0.9"):
        qopt.RMSprop8bit([p], momentum=0.9)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        qopt.RMSprop8bit([p], lr=-1)
    with pytest.raises(ValueError, match="Initial accumulator value"):
        qopt.Adagrad8bit([p], initial_accumulator_value=0.1)
    with pytest.raises(ValueError, match="Invalid lr_decay value: -0.5"):
        qopt.Adagrad8bit([p], lr_decay=-0.5)
    with pytest.raises(ValueError, match="percentile_clipping"):
        qopt.Adagrad8bit([p], percentile_clipping=5)
    with pytest.raises(ValueError, match="optim_bits=4"):
        qopt.Lion8bit([p], optim_bits=4)
    with pytest.raises(ValueError, match="is_paged"):
        qopt.Lion8bit([p], is_paged=True)


# ---------------------------------------------------------------------------------------- Lion

def lion_reference(lr, betas, wd):
    """Lion (Chen et al. 2023, bitsandbytes' Lion): the published update in float32."""
    state = {}

    def step(_, ps, grads):
        b1, b2 = betas
        for q, g in zip(ps, grads):
            m = state.setdefault(id(q), torch.zeros_like(q))
            c = b1 * m + (1 - b1) * g
            q.mul_(1 - lr * wd).add_(torch.sign(c), alpha=-lr)
            m.mul_(b2).add_(g, alpha=1 - b2)
    return step, state


def test_lion32bit_equals_the_published_update(device):
    params = f32_params(device, (1024, 32), (7,), seed=3)
    ref = [p.detach().float().clone() for p in params]
    step, state = lion_reference(1e-3, (0.9, 0.99), 0.1)
    opt = qopt.Lion32bit(params, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    run(opt, params, 30, step, ref)
    # sign() flips where c is within rounding of 0: rare, each one 2 lr
    for p, r in zip(params, ref):
        diff = (p.detach() - r).abs()
        assert (diff > 1e-6).float().mean().item() < 1e-3
        torch.testing.assert_close(opt.state[p]["state1"], state[id(r)], rtol=1e-5, atol=1e-9)


def test_lion8bit_defaults_and_quantized_momentum(device):
    params = f32_params(device, (1024, 32), seed=4)
    ref = [p.detach().float().clone() for p in params]
    start = [r.clone() for r in ref]
    step, state = lion_reference(1e-4, (0.9, 0.99), 0.0)  # bitsandbytes' defaults
    opt = qopt.Lion8bit(params)
    assert opt.defaults["lr"] == 1e-4 and opt.defaults["betas"] == (0.9, 0.99)
    run(opt, params, 20, step, ref)
    st = opt.state[params[0]]
    assert st["state1"].dtype == torch.uint8 and st["absmax1"].shape == (128,)
    assert torch.equal(st["qmap1"].cpu(), torch.tensor(dynamic_map(True)))
    # within the 8-bit error 20 requantizations accumulate, relative to each block's absmax;
    # the parameters within 3% of their travel (measured on the host: 0.086, 0.030 at the 99th
    # percentile, 1.4%; the bounds are about twice that)
    m = dequantized(st, "state1", "absmax1", "qmap1")
    want = state[id(ref[0])].reshape(-1)
    rel = (m - want).abs() / block_absmax(want)
    assert rel.max().item() < 0.2 and rel.quantile(0.99).item() < 0.06, rel.max().item()
    moved = (ref[0] - start[0]).abs().mean().item()
    assert (params[0].detach() - ref[0]).abs().mean().item() < 0.03 * moved


# ------------------------------------------------------------------------------------ AdEMAMix

def ademamix_reference(lr, betas, alpha, t_alpha, t_beta3, eps, weight_decay):
    """bitsandbytes' AdEMAMix (optim/ademamix.py, its schedulers), decoupled weight decay as its
    8-bit kernel applies it, in float32."""
    state = {}

    def step(t, ps, grads):
        b1, b2, b3 = betas
        a = min(t * alpha / t_alpha, alpha) if t_alpha else alpha
        if t_beta3:
            s = t / t_beta3
            l1, l3 = math.log(b1), math.log(b3)
            b3 = min(math.exp(l1 * l3 / ((1 - s) * l3 + s * l1)), b3)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        for q, g in zip(ps, grads):
            m1, m2, nu = state.setdefault(id(q), [torch.zeros_like(q) for _ in range(3)])
            m1.mul_(b1).add_(g, alpha=1 - b1)
            m2.mul_(b3).add_(g, alpha=1 - b3)
            nu.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = nu.sqrt() / math.sqrt(bc2) + eps
            q.mul_(1 - lr * weight_decay).sub_(lr * ((m1 / bc1 + a * m2) / denom))
    return step, state


@pytest.mark.parametrize("warm", [False, True], ids=["plain", "warmup"])
def test_ademamix32bit_equals_bitsandbytes_formula(device, warm):
    kw = dict(lr=2e-3, betas=(0.9, 0.999, 0.999), alpha=4.0, eps=1e-8, weight_decay=0.05,
              t_alpha=20 if warm else None, t_beta3=20 if warm else None)
    params = f32_params(device, (1024, 32), (33,), seed=5)
    ref = [p.detach().float().clone() for p in params]
    step, state = ademamix_reference(**kw)
    opt = qopt.AdEMAMix32bit(params, **kw)
    run(opt, params, 30, step, ref)
    assert_close_to(params, ref, rtol=1e-5, atol=1e-6)
    st = opt.state[params[0]]
    for key, i in (("state1", 0), ("state3", 1), ("state2", 2)):
        torch.testing.assert_close(st[key], state[id(ref[0])][i], rtol=1e-4, atol=1e-9)


def test_ademamix8bit_three_quantized_states(device):
    kw = dict(lr=1e-3, t_alpha=10, t_beta3=10)
    params = f32_params(device, (1024, 32), seed=6)
    ref = [p.detach().float().clone() for p in params]
    start = [r.clone() for r in ref]
    step, state = ademamix_reference(betas=(0.9, 0.999, 0.9999), alpha=5.0, eps=1e-8,
                                     weight_decay=1e-2, **kw)
    opt = qopt.AdEMAMix8bit(params, **kw)
    run(opt, params, 20, step, ref)
    st = opt.state[params[0]]
    assert {k for k in st if k.startswith(("state", "absmax", "qmap"))} == {
        "state1", "state2", "state3", "absmax1", "absmax2", "absmax3", "qmap1", "qmap2", "qmap3"}
    assert torch.equal(st["qmap2"].cpu(), torch.tensor(dynamic_map(False)))  # nu: unsigned
    assert torch.equal(st["qmap3"].cpu(), torch.tensor(dynamic_map(True)))
    # each state within the 8-bit error of 20 requantizations, relative to its block's absmax;
    # the parameters within 3% of their travel (measured on the host: at most 0.124 (the slow
    # EMA), 0.042 at the 99th percentile, 1.5%; the bounds are about twice that)
    m1, m2, nu = state[id(ref[0])]
    for codes, want in (("1", m1), ("3", m2), ("2", nu)):
        got = dequantized(st, "state" + codes, "absmax" + codes, "qmap" + codes)
        want = want.reshape(-1)
        rel = (got - want).abs() / block_absmax(want)
        assert rel.max().item() < 0.25 and rel.quantile(0.99).item() < 0.1, (codes, rel.max().item())
    moved = (ref[0] - start[0]).abs().mean().item()
    assert (params[0].detach() - ref[0]).abs().mean().item() < 0.03 * moved


def test_ademamix_refuses_bad_schedules_and_betas():
    (p,) = f32_params("cpu", (4,))
    with pytest.raises(ValueError, match="t_alpha"):
        qopt.AdEMAMix8bit([p], t_alpha=0)
    with pytest.raises(ValueError, match="three"):
        qopt.AdEMAMix8bit([p], betas=(0.9, 0.999))
    with pytest.raises(ValueError, match="Invalid beta parameter at index 2: 1.0"):
        qopt.AdEMAMix8bit([p], betas=(0.9, 0.999, 1.0))


# ----------------------------------------------------------------------------------- AdamAtan2

def adam_atan2_reference(lr, betas, weight_decay, a, b):
    """lucidrains' adam-atan2-pytorch (AdamAtan2.step) in float32, its initial lr the lr."""
    state = {}

    def step(t, ps, grads):
        b1, b2 = betas
        for q, g in zip(ps, grads):
            if weight_decay > 0:
                q.mul_(1.0 - lr / lr * weight_decay)
            m, v = state.setdefault(id(q), [torch.zeros_like(q), torch.zeros_like(q)])
            bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
            m.lerp_(g, 1.0 - b1)
            v.lerp_(g * g, 1.0 - b2)
            den = v.mul(b * b / bc2).sqrt()
            update = m.mul(1.0 / bc1).atan2(den)
            q.add_(update, alpha=-lr * a)
    return step, state


def test_adam_atan2_equals_the_reference_implementation(device):
    kw = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.01, a=1.27, b=1.0)
    params = f32_params(device, (1024, 32), (5,), seed=7)
    ref = [p.detach().float().clone() for p in params]
    step, state = adam_atan2_reference(**kw)
    opt = qopt.AdamAtan2(params, **kw)
    run(opt, params, 30, step, ref)
    # torch's lerp and atan2 (within its ULP) against qopt's Adam form and correctly rounded atan2
    assert_close_to(params, ref, rtol=1e-5, atol=2e-6)
    st = opt.state[params[0]]
    assert st["exp_avg"].dtype == torch.float32
    # lerp's m + w (g - m) against beta1 m + (1 - beta1) g: apart by a few roundings of g's size
    torch.testing.assert_close(st["exp_avg"], state[id(ref[0])][0], rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(st["exp_avg_sq"], state[id(ref[0])][1], rtol=1e-5, atol=1e-12)


def test_adam_atan2_states_take_the_parameters_dtype(device):
    (p,) = f32_params(device, (300,), seed=8)
    q = torch.nn.Parameter(p.detach().to(torch.bfloat16))
    opt = qopt.AdamAtan2([p, q])
    assert opt.defaults["lr"] == 1e-4 and opt.defaults["betas"] == (0.9, 0.99)
    assert opt.defaults["a"] == 1.27 and opt.defaults["b"] == 1.0
    run(opt, [p, q], 3)
    assert opt.state[p]["exp_avg"].dtype == torch.float32
    assert opt.state[q]["exp_avg"].dtype == torch.bfloat16
    assert opt.state[q]["exp_avg_sq"].dtype == torch.bfloat16
    # the bf16 parameter moved as the f32 one did, within bf16 rounding
    assert (q.detach().float() - p.detach()).abs().max().item() < 2e-2
    forced = qopt.AdamAtan2([torch.nn.Parameter(q.detach().clone())], state_dtype=torch.float32)
    forced.init_state()
    assert next(iter(forced.state.values()))["exp_avg"].dtype == torch.float32
    with pytest.raises(ValueError, match="state_dtype"):
        qopt.AdamAtan2([p], state_dtype=torch.float16)


def test_atan2_update_is_bounded_where_adam_divides_by_zero(device):
    """atan2 in place of eps: a zero second moment (a gradient that was 0, then not) gives an
    update of at most a * pi / 2 per unit lr, and zero gradients move nothing."""
    (p,) = f32_params(device, (64,), seed=9)
    before = p.detach().clone()
    opt = qopt.AdamAtan2([p], lr=1.0, betas=(0.9, 0.99))
    p.grad = torch.zeros_like(p)
    opt.step()
    assert torch.equal(bits(p), bits(before))
    p.grad = torch.full_like(p, 1e-30)
    opt.step()
    moved = (p.detach() - before).abs()
    assert moved.max().item() <= 1.27 * math.pi / 2 + 1e-6 and moved.min().item() > 0.5


# ------------------------------------------------------------------------ shared optimizer checks

ALL = [(qopt.RMSprop8bit, {}), (qopt.Adagrad8bit, {}), (qopt.Lion8bit, {}),
       (qopt.AdEMAMix8bit, dict(t_alpha=5, t_beta3=5)), (qopt.AdamAtan2, dict(weight_decay=0.1))]


@pytest.mark.parametrize("cls,kw", ALL, ids=lambda x: getattr(x, "__name__", ""))
def test_checkpoint_resume_is_bitwise_in_lockstep(device, cls, kw):
    params = [torch.nn.Parameter(p.detach().to(torch.bfloat16))
              for p in f32_params(device, (33, 65), (4097,), (3,), seed=10)]
    opt = cls(params, lr=1e-3, **kw)
    if cls is not qopt.AdamAtan2:
        assert [opt.uses_8bit_state(p) for p in params] == [False, True, False]  # min_8bit_size
    run(opt, params, 6)
    sd = copy.deepcopy(opt.state_dict())
    clones = [torch.nn.Parameter(p.detach().clone()) for p in params]
    resumed = cls(clones, lr=1.0, **kw)
    resumed.load_state_dict(sd)
    for step in range(4):
        grads = f32_grads([p.shape for p in params], 50 + step, device)
        for p, q, g in zip(params, clones, grads):
            p.grad = g.to(p.dtype)
            q.grad = g.to(q.dtype)
        opt.step()
        resumed.step()
        for p, q in zip(params, clones):
            assert torch.equal(bits(p), bits(q)), step


@pytest.mark.parametrize("cls,kw", ALL, ids=lambda x: getattr(x, "__name__", ""))
def test_negative_control_another_hyperparameter_moves_differently(device, cls, kw):
    base = f32_params(device, (2048,), seed=11)
    outs = []
    for lr in (1e-3, 1.01e-3):
        params = [torch.nn.Parameter(p.detach().clone()) for p in base]
        opt = cls(params, lr=lr, **kw)
        run(opt, params, 3)
        outs.append(params[0].detach().clone())
    assert not torch.equal(outs[0], outs[1])

"""Tests that step: on the host backend (CPU) and on CUDA, each skipped with the reason where that
backend is missing (see conftest.py).

The first step of every optimizer against a float64 computation (torch.optim in float64 where it
has the optimizer), param groups, grad=None, shapes, non-contiguous parameters, least squares,
checkpoints in lockstep, tensor lr and schedulers, capturable mode, zero gradients.
"""

import copy
import io
import math

import pytest
import torch

import qopt

WEIGHTS_ONLY = int(torch.__version__.split(".")[0]) >= 2


def params_on(device, *shapes, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((scale * torch.randn(s, generator=g)).to(torch.bfloat16).to(device))
            for s in shapes]


def grads_for(params, seed, scale=1e-2):
    g = torch.Generator().manual_seed(seed)
    return [(scale * torch.randn(p.shape, generator=g)).to(torch.bfloat16).to(p.device) for p in params]


def set_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad = g.clone()


def bits(t):
    t = t.detach().cpu().contiguous()
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1).to(torch.uint8)


def ulp_bf16(x: torch.Tensor) -> torch.Tensor:
    """The bf16 spacing at |x| (float64)."""
    a = x.abs().clamp(min=2.0 ** -126)
    return torch.exp2(torch.floor(torch.log2(a)) - 7)


# ----------------------------------------------------------------- first step vs float64

def reference_first_step(name, p0, g, hp):
    """float64 parameter after one step from the zero state."""
    p, g = p0.double().clone(), g.double()
    if name in ("FlashAdamW", "FlashAdam", "AdamW8bit"):
        cls = torch.optim.Adam if name == "FlashAdam" else torch.optim.AdamW
        q = p.clone().requires_grad_()
        q.grad = g
        cls([q], lr=hp["lr"], betas=hp["betas"], eps=hp["eps"], weight_decay=hp["weight_decay"]).step()
        return q.detach()
    if name in ("FlashSGD", "FlashSGDW"):
        d = g if name == "FlashSGDW" else g + hp["weight_decay"] * p
        u = d + hp["momentum"] * d if hp["nesterov"] else d  # first step: buf = d
        if name == "FlashSGDW":
            p = p * (1 - hp["lr"] * hp["weight_decay"])
        return p - hp["lr"] * u
    if name == "FlashLion":
        return p * (1 - hp["lr"] * hp["weight_decay"]) - hp["lr"] * torch.sign(g)
    raise AssertionError(name)


ADAM_HP = dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
SGD_HP = dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=True)
CASES = [
    ("FlashAdamW", qopt.FlashAdamW, dict(ADAM_HP), {}),
    ("FlashAdamW", qopt.FlashAdamW, dict(ADAM_HP), dict(master_weight_bits=32)),
    ("FlashAdamW", qopt.FlashAdamW, dict(ADAM_HP), dict(master_weight_bits=None)),
    ("FlashAdam", qopt.FlashAdam, dict(ADAM_HP), {}),
    ("FlashSGD", qopt.FlashSGD, dict(SGD_HP), {}),
    ("FlashSGDW", qopt.FlashSGDW, dict(SGD_HP), {}),
    ("FlashLion", qopt.FlashLion, dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1), {}),
    ("AdamW8bit", qopt.AdamW8bit, dict(ADAM_HP), {}),
    ("AdamW8bit", qopt.AdamW8bit, dict(ADAM_HP), dict(block_size=2048)),
]
CASE_IDS = ["adamw", "adamw_ecc16", "adamw_bf16", "adam", "sgd", "sgdw", "lion", "adamw8bit_256",
            "adamw8bit_2048"]


@pytest.mark.parametrize("name,cls,hp,extra", CASES, ids=CASE_IDS)
def test_first_step_matches_float64(device, name, cls, hp, extra):
    params = params_on(device, (64, 65), (4097,), (1,), seed=1, scale=0.5)
    grads = grads_for(params, seed=2)
    p0 = [p.detach().clone() for p in params]
    opt = cls(params, **hp, **extra)
    set_grads(params, grads)
    opt.step()
    masters = qopt.master_weights(opt)
    nmax = {24: 127, 32: 32767}.get(getattr(opt, "master_weight_bits", None))
    for p, start, g in zip(params, p0, grads):
        ref = reference_first_step(name, start.cpu(), g.cpu(), hp)
        got = p.detach().cpu().double()
        # the bf16 parameter is the reference rounded to bf16, give or take one bf16 step
        assert ((got - ref).abs() <= ulp_bf16(ref)).all(), (got - ref).abs().max()
        if nmax is not None:
            # the master weight keeps the rest: within half a bf16 step / nmax and float32 arithmetic
            m = masters[p].cpu().double()
            s0 = start.cpu().double()
            tol = (ulp_bf16(ref) / (2 * nmax)
                   + 8 * 2.0 ** -24 * (ref.abs() + s0.abs() + (ref - s0).abs()) + 1e-30)
            assert ((m - ref).abs() <= tol).all(), ((m - ref).abs() - tol).max()
        assert int(opt.state[p]["step"]) == 1


def test_negative_control(device):
    """A different hyperparameter gives a measurably different parameter."""
    outs = []
    for lr in (1e-2, 2e-2):
        (p,) = params_on(device, (256,), seed=3)
        opt = qopt.FlashAdamW([p], lr=lr)
        set_grads([p], grads_for([p], seed=4))
        opt.step()
        outs.append(p.detach().clone())
    assert not torch.equal(outs[0], outs[1])


# ------------------------------------------------------------------------- param groups

@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashSGD, qopt.FlashLion, qopt.AdamW8bit])
def test_group_with_tiny_lr_stays_bitwise_unchanged(device, cls):
    a = params_on(device, (33, 7), (100,), seed=5)
    b = params_on(device, (33, 7), (100,), seed=6)
    before_a = [p.detach().clone() for p in a]
    before_b = [p.detach().clone() for p in b]
    kw = dict(momentum=0.9) if cls is qopt.FlashSGD else {}
    opt = cls([{"params": a, "lr": 1e-28}, {"params": b, "lr": 1e-2}], **kw)
    for step in range(3):
        set_grads(a + b, grads_for(a + b, seed=10 + step))
        opt.step()
    for p, q in zip(a, before_a):
        assert torch.equal(bits(p), bits(q))
    assert all(not torch.equal(p.detach(), q) for p, q in zip(b, before_b))


def test_per_group_weight_decay(device):
    a, b = params_on(device, (64,), (64,), seed=7)
    a.data.copy_(b.data)
    p0 = a.detach().float().clone()
    opt = qopt.FlashAdamW([{"params": [a], "weight_decay": 0.0}, {"params": [b], "weight_decay": 0.5}],
                          lr=1e-2)
    g = grads_for([a], seed=8)[0]
    a.grad, b.grad = g.clone(), g.clone()
    opt.step()
    assert not torch.equal(a.detach(), b.detach())
    # no decay: p0 - upd; decay 0.5: p0 * (1 - lr * 0.5) - upd, the same update
    masters = qopt.master_weights(opt)
    # (int8 error bits keep the master to about a 254th of a bf16 step: 3e-5 near 1)
    assert torch.allclose(masters[b], masters[a] - p0 * 5e-3, rtol=0, atol=1e-4)


def test_grad_none_params_are_skipped(device):
    a, b, c = params_on(device, (10,), (20,), (30,), seed=9)
    opt = qopt.FlashAdamW([a, b, c], lr=1e-2)
    b_before = b.detach().clone()
    for step in range(2):
        set_grads([a, c], grads_for([a, c], seed=20 + step))
        b.grad = None
        opt.step()
    assert b not in opt.state or len(opt.state[b]) == 0
    assert torch.equal(b.detach(), b_before)
    assert int(opt.state[a]["step"]) == 2 and int(opt.state[c]["step"]) == 2


def test_frozen_layer_resumes_with_its_own_step_count(device):
    """A parameter without gradient for two steps starts at step 1 when it gets one (as torch),
    and its update equals a fresh optimizer's first step, bitwise."""
    a, b = params_on(device, (40,), (50,), seed=11)
    b_twin = torch.nn.Parameter(b.detach().clone())
    opt = qopt.FlashAdamW([a, b], lr=1e-2)
    for step in range(2):
        set_grads([a], grads_for([a], seed=30 + step))
        opt.step()
    gb = grads_for([b], seed=40)[0]
    set_grads([a], grads_for([a], seed=32))
    b.grad = gb.clone()
    opt.step()
    assert int(opt.state[a]["step"]) == 3 and int(opt.state[b]["step"]) == 1
    twin = qopt.FlashAdamW([b_twin], lr=1e-2)
    b_twin.grad = gb.clone()
    twin.step()
    assert torch.equal(bits(b), bits(b_twin))
    for k in opt.state[b]:
        assert torch.equal(bits(opt.state[b][k]), bits(twin.state[b_twin][k])), k


# ------------------------------------------------------------------------------- shapes

SHAPES = [(), (0,), (1, 1), (1, 2), (17, 23), (1, 1000), (4097,)]


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.AdamW8bit, qopt.FlashSGD])
def test_shapes_in_one_launch_equal_each_stepped_alone(device, cls):
    together = params_on(device, *SHAPES, seed=12)
    alone = [torch.nn.Parameter(p.detach().clone()) for p in together]
    kw = dict(momentum=0.9) if cls is qopt.FlashSGD else {}
    opt = cls(together, lr=1e-2, **kw)
    singles = [cls([p], lr=1e-2, **kw) for p in alone]
    for step in range(3):
        grads = grads_for(together, seed=50 + step)
        set_grads(together, grads)
        set_grads(alone, grads)
        opt.step()
        for o in singles:
            o.step()
    for p, q, o in zip(together, alone, singles):
        assert p.shape == q.shape
        assert torch.equal(bits(p), bits(q))
        for k in opt.state[p]:
            assert torch.equal(bits(opt.state[p][k]), bits(o.state[q][k])), k


def test_non_contiguous_parameter_gives_the_contiguous_result(device):
    base = params_on(device, (24, 40), seed=13)[0].detach()
    nc = torch.nn.Parameter(base.t())            # a transposed (non-contiguous) parameter
    assert not nc.is_contiguous()
    cont = torch.nn.Parameter(base.t().contiguous())
    o1, o2 = qopt.FlashAdamW([nc], lr=1e-2), qopt.FlashAdamW([cont], lr=1e-2)
    for step in range(3):
        g = grads_for([cont], seed=60 + step)[0]
        nc.grad = g.clone()
        cont.grad = g.clone()
        o1.step()
        o2.step()
    assert not nc.is_contiguous()
    assert torch.equal(nc.detach().contiguous(), cont.detach())


def test_non_contiguous_gradient(device):
    (p,) = params_on(device, (16, 32), seed=14)
    q = torch.nn.Parameter(p.detach().clone())
    o1, o2 = qopt.FlashAdamW([p], lr=1e-2), qopt.FlashAdamW([q], lr=1e-2)
    g = grads_for([q], seed=15)[0]
    p.grad = g.t().contiguous().t()  # same values, column-major
    assert not p.grad.is_contiguous()
    q.grad = g.clone()
    o1.step()
    o2.step()
    assert torch.equal(p.detach(), q.detach())


# ------------------------------------------------------------------------ least squares

LSQ = [
    (qopt.FlashAdamW, dict(lr=1e-2)),
    (qopt.FlashAdamW, dict(lr=1e-2, master_weight_bits=32)),
    (qopt.FlashAdamW, dict(lr=1e-2, master_weight_bits=None)),
    (qopt.FlashAdam, dict(lr=1e-2)),
    (qopt.FlashSGD, dict(lr=1e-3, momentum=0.9)),
    (qopt.FlashSGDW, dict(lr=1e-3, momentum=0.9, nesterov=True)),
    (qopt.FlashLion, dict(lr=1e-2)),
    (qopt.AdamW8bit, dict(lr=1e-2)),
    (qopt.AdamW8bit, dict(lr=1e-2, block_size=2048)),
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("cls,kw", LSQ, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(LSQ)])
def test_least_squares_loss_strictly_decreases(device, cls, kw, seed):
    g = torch.Generator().manual_seed(seed)
    A = (torch.randn(64, 32, generator=g) / math.sqrt(32)).to(device)
    x_star = torch.randn(32, 1, generator=g).to(device)
    b = A @ x_star
    x = torch.nn.Parameter(torch.zeros(32, 1, dtype=torch.bfloat16, device=device))
    opt = cls([x], **kw)

    def loss_fn():
        return ((A @ x.float() - b) ** 2).sum()

    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        losses.append(loss.item())
        opt.step()
    losses.append(loss_fn().item())
    assert all(b_ < a for a, b_ in zip(losses, losses[1:])), losses


# -------------------------------------------------------------------------- checkpoints

@pytest.mark.parametrize("cls,kw", [(qopt.FlashAdamW, {}), (qopt.FlashSGD, dict(momentum=0.9)),
                                    (qopt.FlashLion, {}), (qopt.AdamW8bit, {}),
                                    (qopt.FlashAdamW, dict(master_weight_bits=32))],
                         ids=["adamw", "sgd", "lion", "adamw8bit", "adamw_ecc16"])
def test_checkpoint_resume_is_bitwise_in_lockstep(device, cls, kw):
    params = params_on(device, (33, 65), (4097,), (3,), seed=16)
    opt = cls([{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}], lr=1e-2, **kw)
    for step in range(10):
        set_grads(params, grads_for(params, seed=100 + step))
        opt.step()
    sd = opt.state_dict()
    saved = copy.deepcopy(sd)
    clones = [torch.nn.Parameter(p.detach().clone()) for p in params]
    resumed = cls([{"params": clones[:2]}, {"params": clones[2:]}], lr=1.0, **kw)
    resumed.load_state_dict(copy.deepcopy(sd))
    for step in range(10):
        grads = grads_for(params, seed=200 + step)
        set_grads(params, grads)
        set_grads(clones, grads)
        opt.step()
        resumed.step()
        for p, q in zip(params, clones):
            assert torch.equal(bits(p), bits(q)), step
    a, b = opt.state_dict(), resumed.state_dict()
    assert a["param_groups"] == b["param_groups"]
    for i in a["state"]:
        for k in a["state"][i]:
            assert torch.equal(bits(a["state"][i][k]), bits(b["state"][i][k])), (i, k)
    # the dict that was saved (and loaded) did not change
    for i in saved["state"]:
        for k in saved["state"][i]:
            assert torch.equal(bits(saved["state"][i][k]), bits(copy.deepcopy(saved)["state"][i][k]))


def test_two_loads_of_one_checkpoint_give_the_same_update(device):
    params = params_on(device, (100,), seed=17)
    opt = qopt.FlashAdamW(params, lr=1e-2)
    for step in range(3):
        set_grads(params, grads_for(params, seed=300 + step))
        opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    outs = []
    for _ in range(2):
        buf.seek(0)
        sd = torch.load(buf, weights_only=WEIGHTS_ONLY)
        q = torch.nn.Parameter(params[0].detach().clone())
        o = qopt.FlashAdamW([q])
        o.load_state_dict(sd)
        set_grads([q], grads_for([q], seed=400))
        o.step()
        assert torch.isfinite(q.detach().float()).all()
        outs.append(bits(q))
    assert torch.equal(outs[0], outs[1])


# --------------------------------------------------------------------- lr and schedulers

def test_float64_tensor_lr_equals_float_lr(device):
    a = params_on(device, (300,), (5000,), seed=18)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = qopt.FlashAdamW(a, lr=3e-3)
    ob = qopt.FlashAdamW(b, lr=torch.tensor(3e-3, dtype=torch.float64, device=device))
    for step in range(4):
        grads = grads_for(a, seed=500 + step)
        set_grads(a, grads)
        set_grads(b, grads)
        oa.step()
        ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))


def test_scheduler_changes_lr_without_rebuild(device):
    a = params_on(device, (300,), seed=19)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = qopt.FlashAdamW(a, lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(oa, step_size=2, gamma=0.5)
    ob = qopt.FlashAdamW(b, lr=1e-2)
    for step in range(5):
        grads = grads_for(a, seed=600 + step)
        set_grads(a, grads)
        set_grads(b, grads)
        oa.step()
        sched.step()
        ob.step()
        ob.param_groups[0]["lr"] = 1e-2 * 0.5 ** ((step + 1) // 2)
    assert oa.param_groups[0]["lr"] == ob.param_groups[0]["lr"]
    assert torch.equal(bits(a[0]), bits(b[0]))


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashSGD, qopt.FlashLion, qopt.AdamW8bit])
def test_capturable_eager_equals_default(device, cls):
    """capturable=True (step counter on the device, uniforms computed there) steps exactly as the
    default path (uniforms evaluated by the runtime on the host)."""
    a = params_on(device, (1000,), (77,), seed=20)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    kw = dict(momentum=0.9) if cls is qopt.FlashSGD else {}
    oa, ob = cls(a, lr=1e-2, **kw), cls(b, lr=1e-2, capturable=True, **kw)
    for step in range(4):
        grads = grads_for(a, seed=700 + step)
        set_grads(a, grads)
        set_grads(b, grads)
        oa.step()
        ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
    assert ob.state[b[0]]["step"].device == b[0].device and float(ob.state[b[0]]["step"]) == 4


# ------------------------------------------------------------------------ zero gradients

@pytest.mark.parametrize("cls,key", [(qopt.FlashAdamW, "exp_avg::quantized"),
                                     (qopt.FlashSGD, "momentum_buffer::quantized"),
                                     (qopt.FlashLion, "exp_avg::quantized")])
def test_zero_gradients_keep_momentum_zero_and_param_still(device, cls, key):
    params = params_on(device, (500,), seed=21)
    before = params[0].detach().clone()
    opt = cls(params, lr=1e-2, weight_decay=0.0)
    for _ in range(5):
        params[0].grad = torch.zeros_like(params[0])
        opt.step()
    assert not opt.state[params[0]][key].any()
    assert torch.equal(bits(params[0]), bits(before))
    assert not opt.state[params[0]]["error_bits"].any()


def test_state_matches_torch_adamw_over_20_steps(device):
    """Against torch.optim.AdamW in float32 on the master weights: the parameter error stays a
    small fraction of the distance travelled (8-bit states, 24-bit masters)."""
    (p,) = params_on(device, (1024, 32), seed=22, scale=0.1)
    ref = torch.nn.Parameter(p.detach().float().clone())
    opt = qopt.FlashAdamW([p], lr=1e-3, weight_decay=0.01)
    topt = torch.optim.AdamW([ref], lr=1e-3, weight_decay=0.01)
    start = ref.detach().clone()
    for step in range(20):
        g = grads_for([p], seed=800 + step)[0]
        p.grad = g.clone()
        ref.grad = g.float()
        opt.step()
        topt.step()
    master = qopt.master_weights(opt)[p]
    err = (master - ref.detach()).abs().mean().item()
    moved = (ref.detach() - start).abs().mean().item()
    assert err < 0.05 * moved, (err, moved)
    # the dequantized first moment against torch's exp_avg: within the 8-bit group error
    from qopt.optim import TORCH_DTYPES  # noqa: F401
    q = opt.state[p]["exp_avg::quantized"].float().reshape(-1, 32) / 127.0
    s = opt.state[p]["exp_avg::scales"].float().reshape(-1, 1)
    m = (q / (2 - q.abs())) * s
    m_ref = topt.state[ref]["exp_avg"].reshape(-1, 32)
    assert ((m - m_ref).abs() <= 0.02 * m_ref.abs().amax(1, keepdim=True) + 1e-12).float().mean() > 0.99


def test_one_launch_per_group(device):
    params = params_on(device, *[(i + 1, 17) for i in range(50)], seed=9)
    opt = qopt.FlashAdamW([{"params": params[:20]}, {"params": params[20:]}])
    set_grads(params, grads_for(params, seed=10))
    opt.step()
    assert [len(opt._cache[i].launches) for i in (0, 1)] == [1, 1]
    assert [opt._cache[i].launches[0].n for i in (0, 1)] == [20, 30]

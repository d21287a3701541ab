"""LAMB8bit, LARS8bit (bitsandbytes' names, defaults and update-norm clipping), their 32-bit forms
and StableAdamW (optimi's) against the published formulas written out here in float32 torch: the
32-bit forms within float rounding, the 8-bit ones within the blockwise quantization error, on the
CPU (the host backend) and on CUDA (the reduce pre-pass, the finish and the step; skipped without a
GPU). Their kernels read per-tensor norms and means (specs/reductions).
"""

import copy

import pytest
import torch

import qopt

from test_elementwise_optimizers import assert_close_to, f32_params, run


def clip_scale(max_unorm, p, u):
    """bitsandbytes' max_unorm: max_unorm |p| / |u| where |u| exceeds max_unorm |p|, else 1."""
    limit = max_unorm * p.norm().item()
    unorm = u.norm().item()
    return limit / unorm if max_unorm > 0 and unorm > limit else 1.0


def lamb_twin(params, lr, betas, eps, weight_decay, max_unorm):
    ref = [p.detach().float().clone() for p in params]
    m = [torch.zeros_like(r) for r in ref]
    v = [torch.zeros_like(r) for r in ref]
    b1, b2 = betas

    def step(t, ps, grads):
        for p, g, mi, vi in zip(ps, grads, m, v):
            mi.mul_(b1).add_((1 - b1) * g)
            vi.mul_(b2).add_((1 - b2) * g * g)
            u = (mi / (1 - b1 ** t)) / ((vi / (1 - b2 ** t)).sqrt() + eps)
            s = clip_scale(max_unorm, p, u)
            p.sub_(s * lr * u).mul_(1 - lr * weight_decay)
    return ref, step


def lars_twin(params, lr, momentum, weight_decay, max_unorm):
    ref = [p.detach().float().clone() for p in params]
    buf = [None] * len(ref)

    def step(t, ps, grads):
        for i, (p, g) in enumerate(zip(ps, grads)):
            d = g + weight_decay * p
            buf[i] = d.clone() if t == 1 else momentum * buf[i] + d
            p.sub_(clip_scale(max_unorm, p, buf[i]) * lr * buf[i])
    return ref, step


def stable_adamw_twin(params, lr, betas, weight_decay, eps):
    """optimi's _single_param_stableadamw (debiased betas, lr / max(1, rms), decoupled decay)."""
    ref = [p.detach().float().clone() for p in params]
    m = [torch.zeros_like(r) for r in ref]
    v = [torch.zeros_like(r) for r in ref]

    def debias(beta, t):
        return (beta ** t - beta) / (beta ** t - 1)

    def step(t, ps, grads):
        b1, b2 = debias(betas[0], t), debias(betas[1], t)
        for p, g, mi, vi in zip(ps, grads, m, v):
            mi.lerp_(g, 1 - b1)
            vi.mul_(b2).addcmul_(g, g, value=1 - b2)
            rms = g.pow(2).div(vi.maximum(torch.tensor(eps * eps))).mean().sqrt()
            lr_t = lr / max(1, rms.item())
            p.mul_(1 - lr_t * weight_decay)
            p.addcdiv_(mi, vi.sqrt().add(eps), value=-lr_t)
    return ref, step


SHAPES = ((1024, 32), (4097,), (3,))


@pytest.mark.parametrize("steps", [1, 20])
def test_lamb32bit_equals_the_formula(device, steps):
    """The clipping is active (|u| is about twice max_unorm |p| here), so a kernel without it, or
    with the norms of the wrong values, is off by a factor of about two."""
    kw = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, max_unorm=1.0)
    params = f32_params(device, *SHAPES, seed=3)
    ref, step = lamb_twin(params, **kw)
    opt = qopt.LAMB32bit(params, **kw)
    run(opt, params, steps, step, ref)
    assert_close_to(params, ref, rtol=1e-5, atol=1e-6)
    assert opt.state[params[0]]["state1"].dtype == torch.float32


@pytest.mark.parametrize("steps", [1, 20])
def test_lars32bit_equals_the_formula(device, steps):
    kw = dict(lr=0.1, momentum=0.9, weight_decay=0.01, max_unorm=0.02)
    params = f32_params(device, *SHAPES, seed=4)
    ref, step = lars_twin(params, **kw)
    opt = qopt.LARS32bit(params, **kw)
    run(opt, params, steps, step, ref)
    assert_close_to(params, ref, rtol=1e-5, atol=1e-6)


def test_stable_adamw_equals_optimi(device):
    """The RMS exceeds 1 on some steps and tensors (the lr division matters: without it the
    parameters differ beyond the tolerance)."""
    kw = dict(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.01, eps=1e-6)
    params = f32_params(device, *SHAPES, seed=5)
    ref, step = stable_adamw_twin(params, **kw)
    opt = qopt.StableAdamW(params, **kw)
    run(opt, params, 20, step, ref)
    assert_close_to(params, ref, rtol=1e-5, atol=1e-6)
    assert set(opt.state[params[0]]) >= {"exp_avg", "exp_avg_sq"}


@pytest.mark.parametrize("qcls,twin,kw", [
    (qopt.LAMB8bit, lamb_twin, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                    max_unorm=1.0)),
    (qopt.LARS8bit, lars_twin, dict(lr=0.05, momentum=0.9, weight_decay=0.0, max_unorm=0.02)),
], ids=["lamb", "lars"])
def test_8bit_state_follows_the_formula_within_quantization(device, qcls, twin, kw):
    """20 steps with 8-bit blockwise states: the parameters' mean error within 5% of their
    travel (the clipping makes each step's size |p|-relative, so the error does not grow with
    it)."""
    params = f32_params(device, (1024, 32), (4097,), seed=6)
    ref, step = twin(params, **kw)
    start = [r.clone() for r in ref]
    opt = qcls(params, min_8bit_size=0, **kw)
    run(opt, params, 20, step, ref)
    assert opt.state[params[0]]["state1"].dtype == torch.uint8
    for p, r, s in zip(params, ref, start):
        err = (p.detach().float() - r).abs().mean().item()
        moved = (r - s).abs().mean().item()
        assert moved > 0 and err < 0.05 * moved, (err, moved)


def test_defaults_are_the_peers():
    p = [torch.nn.Parameter(torch.zeros(4))]
    lamb = qopt.LAMB8bit(p).defaults
    assert (lamb["lr"], lamb["betas"], lamb["eps"], lamb["weight_decay"], lamb["max_unorm"]) == \
        (1e-3, (0.9, 0.999), 1e-8, 0, 1.0)
    lars = qopt.LARS8bit(p, lr=0.1, momentum=0.9).defaults
    assert (lars["weight_decay"], lars["max_unorm"]) == (0, 0.02)
    stable = qopt.StableAdamW(p).defaults
    assert (stable["betas"], stable["weight_decay"], stable["eps"]) == ((0.9, 0.99), 1e-2, 1e-6)


def test_refuse_what_their_kernels_lack():
    p = [torch.nn.Parameter(torch.zeros(4))]
    with pytest.raises(NotImplementedError, match="LARS without momentum"):
        qopt.LARS8bit(p, lr=0.1)
    with pytest.raises(ValueError, match="nesterov"):
        qopt.LARS8bit(p, lr=0.1, momentum=0.9, nesterov=True)
    with pytest.raises(ValueError, match="amsgrad"):
        qopt.LAMB8bit(p, amsgrad=True)
    with pytest.raises(ValueError, match="adam_w_mode"):
        qopt.LAMB(p, adam_w_mode=False)
    with pytest.raises(ValueError, match="max_unorm"):
        qopt.LAMB32bit(p, max_unorm=-1.0)
    with pytest.raises(ValueError, match="kahan_sum"):
        qopt.StableAdamW(p, kahan_sum=True)


@pytest.mark.parametrize("cls,kw", [
    (qopt.LAMB8bit, {}), (qopt.LARS8bit, dict(lr=0.1, momentum=0.9)), (qopt.StableAdamW, {}),
], ids=["lamb8bit", "lars8bit", "stable_adamw"])
def test_checkpoint_resumes_bit_for_bit(device, cls, kw):
    """Two steps, a state_dict round trip into a new optimizer, two more: the same bits as four
    uninterrupted steps (a bf16 tensor with 8-bit states and a small float32 one that keeps
    float32 states by min_8bit_size)."""
    def make():
        g = torch.Generator().manual_seed(7)
        return [torch.nn.Parameter((0.5 * torch.randn(5000, generator=g)).to(device, torch.bfloat16)),
                torch.nn.Parameter((0.5 * torch.randn(300, generator=g)).to(device))]
    a, b = make(), make()
    oa, ob = cls(a, **kw), cls(b, **kw)
    g = torch.Generator().manual_seed(8)
    grads = [[(1e-2 * torch.randn(p.shape, generator=g)).to(device, p.dtype) for p in a]
             for _ in range(4)]
    for step in range(4):
        if step == 2:
            state = copy.deepcopy(ob.state_dict())
            ob = cls(b, **kw)
            ob.load_state_dict(state)
        for params, opt in ((a, oa), (b, ob)):
            for p, gr in zip(params, grads[step]):
                p.grad = gr.clone()
            opt.step()
    for p, q in zip(a, b):
        assert torch.equal(p, q)




@pytest.mark.parametrize("cls,kw", [
    (qopt.LAMB8bit, {}), (qopt.LAMB32bit, {}), (qopt.LARS8bit, dict(lr=0.1, momentum=0.9)),
    (qopt.LARS32bit, dict(lr=0.1, momentum=0.9)), (qopt.StableAdamW, {}),
], ids=["lamb8bit", "lamb32bit", "lars8bit", "lars32bit", "stable_adamw"])
def test_cuda_equals_the_host_backend_bit_for_bit(cuda, cls, kw):
    """The same parameters and gradients stepped on CUDA (pre-pass, finish, step) and on the CPU
    (the host function): the reductions' fixed order (docs/numerics.md §7) makes every parameter
    and state bit the same. Tensors of one element, of a partial chunk, of several tiles and of
    more chunks than a finish block has threads (a thread's run of several partials)."""
    sizes = [1, 2047, 3 * 4096 + 5, 600 * 2048 + 3]
    g = torch.Generator().manual_seed(11)
    start = [(0.5 * torch.randn(n, generator=g)).to(torch.bfloat16) for n in sizes]
    grads = [[(1e-2 * torch.randn(n, generator=g)).to(torch.bfloat16) for n in sizes]
             for _ in range(3)]
    stepped = {}
    for dev in ("cpu", "cuda"):
        params = [torch.nn.Parameter(s.clone().to(dev)) for s in start]
        opt = cls(params, **kw)
        for gs in grads:
            for p, gr in zip(params, gs):
                p.grad = gr.to(dev)
            opt.step()
        stepped[dev] = (params, opt)
    for p, q in zip(stepped["cpu"][0], stepped["cuda"][0]):
        assert torch.equal(p.detach(), q.detach().cpu())
    for p, q in zip(stepped["cpu"][0], stepped["cuda"][0]):
        for key, value in stepped["cpu"][1].state[p].items():
            other = stepped["cuda"][1].state[q][key]
            if torch.is_tensor(value):
                assert torch.equal(value, other.cpu()), key


@pytest.mark.parametrize("cls,kw", [
    (qopt.LAMB32bit, {}), (qopt.LARS32bit, dict(lr=0.1, momentum=0.9)),
], ids=["lamb32bit", "lars32bit"])
def test_host_threads_keep_whole_tensors(monkeypatch, cls, kw):
    """The host backend splits a step's tiles over threads (QOPT_HOST_THREADS); a kernel with
    reductions computes a tensor's from the whole tensor before its first tile in a range, so its
    ranges end where tensors do: eight threads give the bits of one (a range that split a tensor
    would read elements another thread is writing)."""
    sizes = [3000, 600 * 2048 + 3, 5000]
    g = torch.Generator().manual_seed(12)
    start = [(0.5 * torch.randn(n, generator=g)).to(torch.bfloat16) for n in sizes]
    grads = [[(1e-2 * torch.randn(n, generator=g)).to(torch.bfloat16) for n in sizes]
             for _ in range(3)]
    stepped = []
    for threads in ("1", "8"):
        monkeypatch.setenv("QOPT_HOST_THREADS", threads)
        params = [torch.nn.Parameter(s.clone()) for s in start]
        opt = cls(params, **kw)
        for gs in grads:
            for p, gr in zip(params, gs):
                p.grad = gr.clone()
            opt.step()
        stepped.append(params)
    for p, q in zip(*stepped):
        assert torch.equal(p.detach(), q.detach())

"""max_grad_norm=: global gradient clipping fused into the step, on the host backend (CPU) and on
CUDA (each skipped with the reason where missing).

The reference is what a trainer writes: ``clip_grad_norm_(params, max_norm)`` and
then the same qopt optimizer without clipping (under a GradScaler: ``unscale_`` written out as in
test_amp.py, then ``clip_grad_norm_``, then the step). The fused step must equal it bit for bit:
parameters, every state byte, and ``last_grad_norm`` against the norm ``clip_grad_norm_`` returns.
Where the contract is not bitwise (float16 gradients under a GradScaler, python/qopt/_clip.py) the
test states the bound it checks.
"""

import pytest
import torch

import qopt
from test_amp import (DTYPE_IDS, DTYPES, OPT_IDS, OPTIMIZERS, assert_same_state, fused_step,
                      make_params, scaled_grads, unscale_like_grad_scaler)
from test_step import bits


def grads_of(params, seed, scale=1e-2):
    g = torch.Generator().manual_seed(seed)
    return [(scale * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device) for p in params]


def clones(params):
    return [torch.nn.Parameter(p.detach().clone()) for p in params]


def set_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad = None if g is None else g.clone()


def assert_same(oa, a, ob, b):
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
        if q in ob.state:
            assert_same_state(oa, p, ob, q)
        else:
            assert p not in oa.state or not oa.state[p]


def clip_grad_norm_(params, max_norm):
    """torch.nn.utils.clip_grad_norm_; where this torch has no float16 clamp on the CPU (torch
    1.x refuses the float16 case with "not implemented for 'Half'" before touching a gradient),
    torch 1.x's own code written out with the clamp taken in float32 (exact)."""
    try:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    except RuntimeError as e:
        if "not implemented for 'Half'" not in str(e):
            raise
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.norm(torch.stack([torch.norm(g.detach(), 2.0) for g in grads]), 2.0)
    coef = torch.clamp((max_norm / (total + 1e-6)).float(), max=1.0).to(total.dtype)
    for g in grads:
        g.detach().mul_(coef)
    return total


def assert_same_norm(got, want):
    """last_grad_norm against clip_grad_norm_'s return: dtype and bits."""
    assert got.dtype == want.dtype and torch.equal(bits(got), bits(want.to(got.device))), \
        (got, want)


@pytest.mark.parametrize("clips", [True, False], ids=["above", "below"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=OPT_IDS)
def test_fused_clip_equals_clip_grad_norm_then_step_bitwise(device, dtype, cls, kw, clips):
    a = make_params(device, dtype, seed=1)
    b, c = clones(a), clones(a)
    # the gradients' global norm is about 1.3: 0.25 clips every step, 1e3 none
    max_norm = 0.25 if clips else 1e3
    oa = cls(a, lr=1e-2, max_grad_norm=max_norm, **kw)
    ob, oc = cls(b, lr=1e-2, **kw), cls(c, lr=1e-2, **kw)
    for step in range(3):
        grads = grads_of(a, seed=10 + step)
        for ps in (a, b, c):
            set_grads(ps, grads)
        oa.step()
        total = clip_grad_norm_(b, max_norm)
        ob.step()
        oc.step()
        assert_same_norm(oa.last_grad_norm, total)
        assert (float(total) > max_norm) == clips
        for p, g in zip(a, grads):   # the gradients in memory are left unclipped
            assert torch.equal(bits(p.grad), bits(g))
    assert_same(oa, a, ob, b)
    # negative control: clipping changes the run (so the comparison above can fail)
    differs = any(not torch.equal(bits(p), bits(q)) for p, q in zip(a, c))
    assert differs == clips


def test_param_groups_mixed_dtypes_and_a_parameter_without_gradient(device):
    """One norm over every group (bf16, fp32 and fp16 parameters, each with its own launch) and a
    parameter without a gradient (no state, unchanged, not in the norm), as clip_grad_norm_ over
    the same parameters. With mixed dtypes the coefficient is float32 and each launch reads it
    as torch's mul_ does for its gradients' dtype."""
    g = torch.Generator().manual_seed(3)

    def param(shape, dtype):
        return torch.nn.Parameter((0.5 * torch.randn(shape, generator=g)).to(dtype).to(device))

    a = [param((4097,), torch.bfloat16), param((33, 7), torch.bfloat16),
         param((300,), torch.float32), param((1,), torch.float32), param((2000,), torch.float16)]
    b = clones(a)

    def groups(ps):
        return [{"params": ps[:2]}, {"params": ps[2:4], "lr": 3e-3, "weight_decay": 0.0},
                {"params": ps[4:], "lr": 5e-3}]

    oa = qopt.FlashAdamW(groups(a), lr=1e-2, max_grad_norm=0.1)
    ob = qopt.FlashAdamW(groups(b), lr=1e-2)
    for step in range(3):
        grads = grads_of(a, seed=20 + step)
        grads[1] = None   # a frozen parameter
        set_grads(a, grads)
        set_grads(b, grads)
        oa.step()
        total = clip_grad_norm_(b, 0.1)
        ob.step()
        assert_same_norm(oa.last_grad_norm, total)
        assert float(total) > 0.1
    assert_same(oa, a, ob, b)
    assert a[1] not in oa.state or not oa.state[a[1]]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=OPT_IDS)
def test_with_a_grad_scaler_equals_unscale_clip_step_bitwise(device, dtype, cls, kw):
    """GradScaler's power-of-two scales: the fused step equals unscale_ + clip_grad_norm_ + step;
    a found_inf step moves nothing, and the run continues as the reference's."""
    a = make_params(device, dtype, seed=2)
    b = clones(a)
    oa = cls(a, lr=1e-2, max_grad_norm=1.0, **kw)
    ob = cls(b, lr=1e-2, **kw)
    zero = torch.zeros((1,), dtype=torch.float32, device=device)
    for step, s in enumerate([65536.0, 0.125, 1024.0]):
        scale = torch.full((1,), s, dtype=torch.float32, device=device)
        grads = scaled_grads(a, s, seed=30 + step)
        set_grads(a, grads)
        set_grads(b, unscale_like_grad_scaler(grads, scale))
        fused_step(oa, scale, zero)
        total = clip_grad_norm_(b, 1.0)
        ob.step()
        assert_same_norm(oa.last_grad_norm, total)
        assert float(total) > 1.0
        if step == 1:
            # a step GradScaler found non-finite: skipped on the device
            before = [(bits(p), {k: bits(v) for k, v in oa.state[p].items()}) for p in a]
            bad = scaled_grads(a, s, seed=99)
            bad[0].view(-1)[5] = float("inf")
            set_grads(a, bad)
            fused_step(oa, scale, torch.ones((1,), device=device))
            for p, (pb, sb) in zip(a, before):
                assert torch.equal(bits(p), pb)
                assert all(torch.equal(bits(v), sb[k]) for k, v in oa.state[p].items())
    assert_same(oa, a, ob, b)


def test_float16_under_a_grad_scaler_takes_float32_norms(device):
    """float16 gradients scaled by 65536: a float16 norm of the scaled gradients would overflow
    (about 84000 > 65504). The norm is taken in float32 and unscaled: within two float16
    roundings of the exact norm (float64 over the unscaled values), where torch's own CPU norm
    of float16 accumulates in float16 and is further off. Given that norm, the step is exact:
    each gradient times float32(inv * coef), rounded once to float16 (the unscaled values here
    are normal float16 numbers, so unscale_'s first rounding is exact)."""
    a = make_params(device, torch.float16, seed=4)
    b = clones(a)
    oa = qopt.FlashAdamW(a, lr=1e-2, max_grad_norm=0.5)
    ob = qopt.FlashAdamW(b, lr=1e-2)
    s = 65536.0
    scale = torch.full((1,), s, device=device)
    for step in range(2):
        unscaled = grads_of(a, seed=40 + step)
        grads = [(u.float() * s).to(torch.float16) for u in unscaled]
        assert torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g.float()) for g in grads])) > 65504
        set_grads(a, grads)
        fused_step(oa, scale, torch.zeros((1,), device=device))
        exact = torch.cat([g.double().reshape(-1) / s for g in grads]).norm()
        got = oa.last_grad_norm
        assert got.dtype == torch.float16 and torch.isfinite(got)
        assert abs(float(got) - float(exact)) <= 2 ** -9 * float(exact)
        coef = torch.clamp((0.5 / (got + 1e-6)).float(), max=1.0)   # float16, held in float32
        m = scale.double().reciprocal().float() * coef
        set_grads(b, [(g.float() * m).to(torch.float16) for g in grads])
        ob.step()
    assert_same(oa, a, ob, b)


@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_skip_nonfinite_takes_its_flag_from_the_same_norm(device, bad):
    """With max_grad_norm, skip_nonfinite adds no read of its own (the ord-inf pass is not
    called): a non-finite norm skips the step on the device and counts it; the next step is the
    one a clipped run that never saw the bad gradients takes."""
    a = make_params(device, torch.bfloat16, seed=5)
    b = clones(a)
    oa = qopt.FlashAdamW(a, lr=1e-2, max_grad_norm=0.25, skip_nonfinite=True)
    ob = qopt.FlashAdamW(b, lr=1e-2)

    def no_second_pass():
        raise AssertionError("the ord-inf pass ran beside the norm")

    oa._nonfinite_flag = no_second_pass
    for step in range(3):
        grads = grads_of(a, seed=50 + step)
        if step == 1:
            bad_grads = [g.clone() for g in grads]
            bad_grads[-1].view(-1)[77] = float(bad)
            before = [(bits(p), {k: bits(v) for k, v in oa.state[p].items()}) for p in a]
            set_grads(a, bad_grads)
            oa.step()
            assert not torch.isfinite(oa.last_grad_norm)
            for p, (pb, sb) in zip(a, before):
                assert torch.equal(bits(p), pb)
                for k, v in oa.state[p].items():
                    assert torch.equal(bits(v), sb[k]) if k != "step" else float(v) == 1, k
            assert float(oa.nonfinite_steps) == 1
            continue
        set_grads(a, grads)
        set_grads(b, grads)
        oa.step()
        assert_same_norm(oa.last_grad_norm, clip_grad_norm_(b, 0.25))
        ob.step()
    assert_same(oa, a, ob, b)
    assert float(oa.nonfinite_steps) == 1


def test_a_float16_norm_that_overflows_skips_under_skip_nonfinite(device):
    """Finite float16 gradients whose L2 norm exceeds 65504: clip_grad_norm_ returns inf for them
    (and would zero every gradient); with skip_nonfinite the fused step is skipped instead."""
    a = make_params(device, torch.float16, seed=6)
    b = clones(a)
    opt = qopt.FlashAdamW(a, lr=1e-2, max_grad_norm=1.0, skip_nonfinite=True)
    grads = grads_of(a, seed=60, scale=1000.0)
    assert all(torch.isfinite(g).all() for g in grads)
    set_grads(a, grads)
    set_grads(b, grads)
    assert torch.isinf(clip_grad_norm_(b, 1.0))
    before = [bits(p) for p in a]
    opt.step()
    assert all(torch.equal(bits(p), pb) for p, pb in zip(a, before))
    assert float(opt.nonfinite_steps) == 1


def test_infinite_max_grad_norm_measures_without_clipping(device):
    a = make_params(device, torch.bfloat16, seed=7)
    b = clones(a)
    oa = qopt.FlashAdamW(a, lr=1e-2, max_grad_norm=float("inf"))
    ob = qopt.FlashAdamW(b, lr=1e-2)
    grads = grads_of(a, seed=70, scale=10.0)
    set_grads(a, grads)
    set_grads(b, grads)
    oa.step()
    ob.step()
    total = clip_grad_norm_(b, float("inf"))
    assert_same_norm(oa.last_grad_norm, total)
    assert float(total) > 100
    assert_same(oa, a, ob, b)


def test_the_kernel_reads_back_the_multiplier_exactly():
    """The grad_scale passed for a coefficient c (and GradScaler's inverse scale) makes the
    .scaled kernel's uniform float32(1 / float64(grad_scale)), as the runtime evaluates it,
    exactly float32(inv * c): for coefficients across 60 binades, 1 and 0."""
    from qopt import _capi as C
    from qopt import _runtime as R
    from qopt._clip import FusedClip
    ks = R.kernel_spec("flash_adamw.scaled", C.BACKEND_HOST)
    names = list(ks.hypers)
    keep = [n.encode() for n in names]
    hypers = (C.Hyper * len(names))()
    for i, n in enumerate(names):
        hypers[i].name, hypers[i].value = keep[i], ks.hypers[n][0]
    at = names.index("grad_scale")
    where = [e for e in ks.uniform_exprs].index(["div", 1, "grad_scale"])
    g = torch.Generator().manual_seed(11)
    binades = torch.randint(0, 60, (3000,), generator=g).float()
    coefs = torch.rand(3000, generator=g) * torch.exp2(-binades)
    coefs = torch.cat([coefs, torch.tensor([1.0, 0.0, 2.0 ** -126])])
    for inv in (None, torch.tensor([2.0 ** -16]), torch.tensor([1 / 3.0])):
        for c in coefs:
            clip = FusedClip(c.to(torch.float32), inv, None)
            grad_scale, found = clip.scaling(torch.device("cpu"), torch.float32)
            assert grad_scale.dtype == torch.float64 and found is None
            hypers[at].value = float(grad_scale)
            got = ks.evaluate_uniforms(hypers, len(names), 1)[where]
            want = c if inv is None else (inv.reshape(()) * c)
            assert torch.equal(torch.tensor(got, dtype=torch.float32).view(torch.int32),
                               want.to(torch.float32).view(torch.int32)), (float(c), inv)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "1.0", True])
def test_a_bad_max_grad_norm_is_refused(value):
    with pytest.raises(ValueError, match="max_grad_norm="):
        qopt.FlashAdamW([torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))],
                        max_grad_norm=value)


def test_max_grad_norm_is_one_for_the_whole_optimizer(device):
    ps = make_params(device, torch.bfloat16, seed=8)
    with pytest.raises(ValueError, match="max_grad_norm=2.0 in a param group"):
        qopt.AdamW8bit([{"params": ps[:2]}, {"params": ps[2:], "max_grad_norm": 2.0}],
                       max_grad_norm=1.0)


def test_gradient_release_refuses_max_grad_norm(device):
    model = torch.nn.Linear(8, 8).to(torch.bfloat16).to(device)
    opt = qopt.FlashAdamW(model.parameters(), max_grad_norm=1.0)
    with pytest.raises(NotImplementedError, match="max_grad_norm"):
        qopt.enable_gradient_release(model, opt)


# ---------------------------------------------------------------------------------------- CUDA

def test_a_clipped_step_needs_no_host_sync(cuda):
    """After the first step (which builds the launches), clipped steps, with skip_nonfinite and
    under a GradScaler, run with torch's sync debug mode set to error."""
    a = make_params(cuda, torch.bfloat16, seed=9)
    opt = qopt.FlashAdamW(a, lr=1e-2, max_grad_norm=0.25, skip_nonfinite=True)
    set_grads(a, grads_of(a, seed=90))
    opt.step()
    torch.cuda.synchronize()
    scale = torch.full((1,), 1024.0, device=cuda)
    zero = torch.zeros((1,), device=cuda)
    grads = grads_of(a, seed=91)   # (made from host data: a copy that syncs)
    torch.cuda.set_sync_debug_mode("error")
    try:
        set_grads(a, grads)
        opt.step()
        fused_step(opt, scale, zero)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert float(opt.state[a[0]]["step"]) == 3


def test_cuda_graph_capture_of_a_clipped_step(cuda):
    """3 warm-up steps, capture, 3 replays (the second with a NaN gradient, skipped): parameters,
    state and last_grad_norm equal an eager run."""
    shapes = ((1000,), (4097,), (64, 65))
    graphed = make_params(cuda, torch.bfloat16, seed=10, shapes=shapes)
    eager = clones(graphed)
    opt = qopt.FlashAdamW(graphed, lr=1e-2, capturable=True, max_grad_norm=0.25,
                          skip_nonfinite=True)
    ref = qopt.FlashAdamW(eager, lr=1e-2, capturable=True, max_grad_norm=0.25,
                          skip_nonfinite=True)
    all_grads = [grads_of(graphed, seed=100 + i) for i in range(6)]
    all_grads[4][1].view(-1)[9] = float("nan")
    for p in graphed:
        p.grad = torch.zeros_like(p)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            for p, g in zip(graphed, all_grads[i]):
                p.grad.copy_(g)
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    norms = []
    for i in (3, 4, 5):
        for p, g in zip(graphed, all_grads[i]):
            p.grad.copy_(g)
        graph.replay()
        norms.append(opt.last_grad_norm.clone())
    ref_norms = []
    for i in range(6):
        set_grads(eager, all_grads[i])
        ref.step()
        ref_norms.append(ref.last_grad_norm.clone())
    torch.cuda.synchronize()
    for got, want in zip(norms, ref_norms[3:]):
        assert torch.equal(bits(got), bits(want))
    assert not torch.isfinite(norms[1])
    assert_same(opt, graphed, ref, eager)
    assert float(opt.state[graphed[0]]["step"]) == 5
    assert float(opt.nonfinite_steps) == 1

"""GradScaler fused into the step, on the host backend (CPU) and on CUDA (each skipped with the reason
where missing).

torch >= 2.0's GradScaler hands an optimizer with ``_step_supports_amp_scaling`` its scale and
found_inf as the attributes ``grad_scale`` and ``found_inf`` and calls ``step()``; qopt's kernels
(the ``.scaled`` variants) unscale each gradient as they load it and skip the whole step on the
device when found_inf is set. The contract is emulated here (it works on any torch), and the real
``torch.amp.GradScaler`` drives a small model where torch has one for the device (torch >= 2.3 on
the CPU).

The reference for the fused unscale is GradScaler.unscale_ written out with torch ops:
``inv = scale.double().reciprocal().float()``, each gradient ``(g.float() * inv).to(g.dtype)`` (what
``_amp_foreach_non_finite_check_and_unscale_`` stores), then an ordinary step.
"""

import copy

import pytest
import torch

import qopt
from test_step import bits

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
DTYPE_IDS = ["bf16", "fp16", "fp32"]
OPTIMIZERS = [(qopt.FlashAdamW, {}), (qopt.FlashAdamW, dict(master_weight_bits=32)),
              (qopt.FlashAdam, dict(weight_decay=0.01)),
              (qopt.FlashSGD, dict(momentum=0.9, weight_decay=0.01)),
              (qopt.FlashSGDW, dict(momentum=0.9, nesterov=True, weight_decay=0.1)),
              (qopt.FlashLion, dict(weight_decay=0.1)), (qopt.AdamW8bit, {}),
              (qopt.AdamW8bit, dict(block_size=2048)), (qopt.RMSprop8bit, dict(weight_decay=0.01)),
              (qopt.Adagrad8bit, dict(lr_decay=0.01)), (qopt.Lion8bit, dict(weight_decay=0.1)),
              (qopt.AdEMAMix8bit, dict(t_alpha=5, t_beta3=5)),
              (qopt.AdamAtan2, dict(weight_decay=0.1))]
OPT_IDS = ["adamw", "adamw_ecc16", "adam", "sgd", "sgdw", "lion", "adamw8bit", "adamw8bit_2048",
           "rmsprop8bit", "adagrad8bit", "lion8bit", "ademamix8bit", "adam_atan2"]
HAS_TORCH_AMP_CPU = hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler")


def make_params(device, dtype, seed, shapes=((33, 7), (4097,), (1,), (3 * 4096 + 17,))):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((0.5 * torch.randn(s, generator=g)).to(dtype).to(device))
            for s in shapes]


def scaled_grads(params, scale, seed):
    """Gradients as a scaled backward leaves them: scale * g, in the parameter's dtype, spread over
    many binades (unscaled fp16 values land in fp16 subnormals and round there)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for p in params:
        x = 1e-3 * torch.randn(p.shape, generator=g) * torch.exp(2 * torch.randn(p.shape, generator=g))
        out.append((scale * x).to(p.dtype).to(p.device))
    return out


def unscale_like_grad_scaler(grads, scale: torch.Tensor):
    """GradScaler.unscale_, written out: float32 inverse from float64, float32 multiply, stored in
    the gradient's dtype."""
    inv = scale.double().reciprocal().float()
    return [(g.float() * inv.to(g.device)).to(g.dtype) for g in grads]


def state_bits(opt, p):
    return {k: bits(v) for k, v in opt.state[p].items()}


def assert_same_state(oa, p, ob, q):
    """Every state tensor bit for bit; the step count by value (with a GradScaler on CUDA the fused
    optimizer keeps it on the device as float32, as capturable=True does)."""
    sa, sb = oa.state[p], ob.state[q]
    assert sa.keys() == sb.keys()
    for k in sa:
        if k == "step":
            assert float(sa[k]) == float(sb[k])
        else:
            assert torch.equal(bits(sa[k]), bits(sb[k])), k


def fused_step(opt, grad_scale, found_inf):
    """What GradScaler.step does for an optimizer with _step_supports_amp_scaling (torch >= 2.0)."""
    opt.grad_scale = grad_scale
    opt.found_inf = found_inf
    try:
        opt.step()
    finally:
        del opt.grad_scale
        del opt.found_inf


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=OPT_IDS)
def test_fused_unscale_equals_unscale_then_step_bitwise(device, dtype, cls, kw):
    a = make_params(device, dtype, seed=1)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa, ob = cls(a, lr=1e-2, **kw), cls(b, lr=1e-2, **kw)
    # GradScaler's powers of two, and a scale whose inverse is rounded
    for step, s in enumerate([65536.0, 0.125, 3.0, 1024.0]):
        scale = torch.full((1,), s, dtype=torch.float32, device=device)
        grads = scaled_grads(a, s, seed=10 + step)
        for p, g in zip(a, grads):
            p.grad = g.clone()
        for q, g in zip(b, unscale_like_grad_scaler(grads, scale)):
            q.grad = g
        fused_step(oa, scale, torch.zeros((1,), dtype=torch.float32, device=device))
        ob.step()
        for p, g in zip(a, grads):
            assert torch.equal(bits(p.grad), bits(g))  # the gradients are left as they were
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
        assert_same_state(oa, p, ob, q)
        assert float(oa.state[p]["step"]) == 4


@pytest.mark.parametrize("capturable", [False, True], ids=["default", "capturable"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=OPT_IDS)
def test_found_inf_leaves_every_tensor_and_the_step_count_unchanged(device, dtype, cls, kw, capturable):
    a = make_params(device, dtype, seed=2)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = cls(a, lr=1e-2, capturable=capturable, **kw)
    ob = cls(b, lr=1e-2, capturable=capturable, **kw)
    one = torch.ones((1,), dtype=torch.float32, device=device)
    zero = torch.zeros((1,), dtype=torch.float32, device=device)
    for step in range(2):
        grads = scaled_grads(a, 1.0, seed=20 + step)
        for p, q, g in zip(a, b, grads):
            p.grad, q.grad = g.clone(), g.clone()
        fused_step(oa, one, zero)
        ob.step()
    before = [(bits(p), state_bits(oa, p)) for p in a]
    # a step with inf and NaN gradients (found by GradScaler): nothing moves
    for p in a:
        g = torch.full_like(p, 1e-2)
        g.view(-1)[::3] = float("inf")
        g.view(-1)[1::3] = float("nan")
        p.grad = g
    for found in (1.0, 2.0):  # 2.0: found_inf summed over two devices
        fused_step(oa, torch.full((1,), 65536.0, device=device), torch.full((1,), found, device=device))
        for p, (pb, sb) in zip(a, before):
            assert torch.equal(bits(p), pb)
            now = state_bits(oa, p)
            assert now.keys() == sb.keys() and all(torch.equal(now[k], sb[k]) for k in sb)
            assert float(oa.state[p]["step"]) == 2
    # the next step is the third of the one that never saw the skipped step
    grads = scaled_grads(a, 1.0, seed=30)
    for p, q, g in zip(a, b, grads):
        p.grad, q.grad = g.clone(), g.clone()
    fused_step(oa, one, zero)
    ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
        assert_same_state(oa, p, ob, q)
        assert float(oa.state[p]["step"]) == 3


def test_grad_scale_none_after_unscale_only_skips(device):
    """GradScaler leaves grad_scale None when the user called unscale_ already (e.g. to clip): the
    step uses the gradients as they are and still honours found_inf."""
    a = make_params(device, torch.float32, seed=3)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa, ob = qopt.FlashAdamW(a), qopt.FlashAdamW(b)
    grads = scaled_grads(a, 1.0, seed=31)
    for p, q, g in zip(a, b, grads):
        p.grad, q.grad = g.clone(), g.clone()
    fused_step(oa, None, torch.zeros((1,), device=device))
    ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
    before = [bits(p) for p in a]
    fused_step(oa, None, torch.ones((1,), device=device))
    assert all(torch.equal(bits(p), x) for p, x in zip(a, before))
    assert float(oa.state[a[0]]["step"]) == 1


def test_bad_scaler_attributes_are_refused():
    (p,) = make_params("cpu", torch.bfloat16, seed=4, shapes=((8,),))
    opt = qopt.FlashAdamW([p])
    p.grad = torch.ones_like(p)
    before = bits(p)
    for bad in (2.0, torch.ones(2)):
        with pytest.raises(TypeError, match="found_inf must be a one-element tensor"):
            fused_step(opt, torch.ones(1), bad)
    assert torch.equal(bits(p), before) and not opt.state.get(p)


def test_optimizers_declare_amp_scaling_on_torch_2():
    want = int(torch.__version__.split(".")[0]) >= 2
    for cls, _ in OPTIMIZERS:
        assert getattr(cls, "_step_supports_amp_scaling", False) is want


# ------------------------------------------------------------------------ the real GradScaler

def _train(device, fused: bool, steps=8, inf_at=(2, 5)):
    """A tiny fp32 model under torch.amp.GradScaler; the loss is made infinite at `inf_at`. With
    fused=False the optimizer hides _step_supports_amp_scaling, so GradScaler unscales, checks and
    skips by itself (the reference)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    model = model.to(device)
    opt = qopt.FlashAdamW(model.parameters(), lr=1e-2)
    if not fused:
        opt._step_supports_amp_scaling = False
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10, growth_interval=3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(steps, 8, 16, generator=g).to(device)
    y = torch.randn(steps, 8, 4, generator=g).to(device)
    scales, steps_taken = [], []
    for i in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[i]), y[i])
        if i in inf_at:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        steps_taken.append(int(float(opt.state[next(model.parameters())]["step"])))
    return model, opt, scales, steps_taken


@pytest.mark.skipif(not HAS_TORCH_AMP_CPU, reason="torch.amp.GradScaler (torch >= 2.3) is needed")
def test_grad_scaler_end_to_end_equals_unfused(device):
    fm, fo, fscales, fsteps = _train(device, fused=True)
    rm, ro, rscales, rsteps = _train(device, fused=False)
    # the skipped steps back the scale off and leave the step count; growth after 3 good steps
    assert fscales == rscales
    assert fscales[2] == 2.0 ** 9 and fscales[5] < fscales[4]
    assert fsteps == rsteps == [1, 2, 2, 3, 4, 4, 5, 6]
    for p, q in zip(fm.parameters(), rm.parameters()):
        assert torch.equal(bits(p), bits(q))
        assert_same_state(fo, p, ro, q)


def test_layer_unfrozen_under_grad_scaler_joins_after_its_first_step(device):
    """A layer frozen while the others' step counters moved to the device under GradScaler starts
    with a host counter when it gets gradients: it is stepped in a launch of its own (its own step
    count, as torch), moves its counter too, and equals an optimizer that saw the same steps."""
    a = make_params(device, torch.float32, seed=5, shapes=((100,), (37,)))
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa, ob = qopt.FlashAdamW(a), qopt.FlashAdamW(b)
    one = torch.ones((1,), device=device)
    zero = torch.zeros((1,), device=device)
    for step in range(4):
        grads = scaled_grads(a, 1.0, seed=50 + step)
        for i, (p, q, g) in enumerate(zip(a, b, grads)):
            if i == 1 and step < 2:  # frozen for the first two steps: no state yet
                p.grad = q.grad = None
                continue
            p.grad, q.grad = g.clone(), g.clone()
        fused_step(oa, one, zero)
        ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
        assert_same_state(oa, p, ob, q)
    assert float(oa.state[a[0]]["step"]) == 4 and float(oa.state[a[1]]["step"]) == 2

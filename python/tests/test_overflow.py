"""A loss spike does not kill the model (docs/numerics.md, "Overflow"; issue 26): one step whose
gradients are 1e6 or 1e10 times N(0, 1), or hold infinities, then three ordinary steps leave every
state tensor finite and every parameter finite (but those whose own gradient was infinite, where
the update itself is NaN or infinite, as in torch.optim), and the kernels count the groups they
saturated in ``optimizer.saturated_groups`` / ``nonfinite_groups`` on the device.
"""

import pytest
import torch

import qopt
from test_amp import OPT_IDS, OPTIMIZERS, make_params


def normal_grads(params, seed, scale=1e-2):
    g = torch.Generator().manual_seed(seed)
    return [(scale * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device) for p in params]


SPIKED = slice(5, None, 97)   # the elements given an infinite gradient


def spike_grads(params, seed, spike):
    if spike == "inf":
        gs = normal_grads(params, seed)
        for g in gs:
            flat = g.view(-1)
            flat[SPIKED] = float("inf")
            flat[6::194] = float("-inf")
        return gs
    return normal_grads(params, seed, scale=spike)


def float_state(opt, p):
    return {k: v for k, v in opt.state[p].items()
            if isinstance(v, torch.Tensor) and v.is_floating_point() and k != "step"}


@pytest.mark.parametrize("spike", [1e6, 1e10, "inf"], ids=["1e6", "1e10", "inf"])
@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=OPT_IDS)
def test_a_gradient_spike_leaves_the_model_finite(device, cls, kw, spike):
    ps = make_params(device, torch.bfloat16, seed=3, shapes=((4096,), (33, 7)))
    codebook = cls in (qopt.AdamW8bit, qopt.RMSprop8bit, qopt.Adagrad8bit, qopt.Lion8bit,
                       qopt.AdEMAMix8bit)
    plain = cls is qopt.AdamAtan2   # float states: the policy does not apply, as torch.optim's
    if codebook:
        # every parameter 8-bit (the float32 states that bitsandbytes' policy gives small ones are
        # IEEE, as torch.optim's)
        kw = dict(kw, min_8bit_size=0)
    opt = cls(ps, lr=1e-3, **kw)
    for step in range(4):
        gs = spike_grads(ps, 10, spike) if step == 0 else normal_grads(ps, 20 + step)
        for p, g in zip(ps, gs):
            p.grad = g
        opt.step()
    for p in ps:
        for k, v in float_state(opt, p).items():
            if plain and spike == "inf":
                continue   # an infinite gradient leaves an infinite float state, as torch.optim's
            assert bool(torch.isfinite(v).all()), f"{k} holds {v[~torch.isfinite(v)][:4]}"
        x = p.detach().float().view(-1)
        finite = torch.isfinite(x)
        if spike == "inf":
            finite[SPIKED] = True   # AdamW's inf / inf is NaN there, as torch.optim.AdamW's
            finite[6::194] = True
        assert bool(finite.all()), f"{int((~finite).sum())} parameters not finite"
    saturated, nonfinite = int(opt.saturated_groups), int(opt.nonfinite_groups)
    # What the spike must have saturated, from the states' formats: an infinity in every
    # quantized state; 1e10 beyond every float16 group scale (m ~ 1e9, Lion's 1e8; the codebook
    # optimizers' float32 absmax holds it).
    if plain:
        assert saturated == 0 and nonfinite == 0   # no quantized state, nothing counted
    elif spike == "inf":
        assert nonfinite > 0 and saturated == 0
    elif spike == 1e10:
        assert (saturated > 0) == (not codebook) and nonfinite == 0
    else:
        assert nonfinite == 0
    assert opt.saturated_groups.dtype == torch.int64
    assert opt.saturated_groups.device == ps[0].device


def test_counters_count_groups_and_reset(device):
    """FlashAdamW, 4096 parameters, every gradient 1e6 N(0, 1): m ~ 1e5 exceeds the float16
    scale in all 128 groups of m, and sqrt(v) ~ 3.2e4 N(0, 1) in those groups whose largest
    |g| passes 65504 / (1e6 sqrt(1e-3)) = 2.07 (counted here from the gradient); zero_()
    resets the counters, which are views of the device counters."""
    ps = make_params(device, torch.bfloat16, seed=3, shapes=((4096,),))
    opt = qopt.FlashAdamW(ps, lr=1e-3)
    assert opt.saturated_groups is None
    g = normal_grads(ps, 10, scale=1e6)[0]
    ps[0].grad = g
    opt.step()
    # v = (1 - beta2) g^2 in float32, sqrt(v) is the group's scale: saturated where >= 65520
    v = (torch.tensor(0.001, dtype=torch.float32) * g.float().cpu()) * g.float().cpu()
    v_groups = int((v.sqrt().view(-1, 32).amax(dim=1) >= 65520).sum())
    m = torch.tensor(0.1, dtype=torch.float32) * g.float().cpu()
    m_groups = int((m.abs().view(-1, 32).amax(dim=1) >= 65520).sum())
    assert m_groups == 128 and v_groups > 0
    assert int(opt.saturated_groups) == m_groups + v_groups
    assert int(opt.nonfinite_groups) == 0
    counter = opt.saturated_groups
    counter.zero_()
    ps[0].grad = normal_grads(ps, 11)[0]
    opt.step()
    assert int(opt.saturated_groups) == 0 and int(counter) == 0


def test_skip_nonfinite_skips_the_spike_and_counts_no_group(device):
    ps = make_params(device, torch.bfloat16, seed=3, shapes=((4096,),))
    opt = qopt.FlashAdamW(ps, lr=1e-3, skip_nonfinite=True)
    ps[0].grad = normal_grads(ps, 1)[0]
    opt.step()
    before = ps[0].detach().clone()
    ps[0].grad = spike_grads(ps, 2, "inf")[0]
    opt.step()
    assert torch.equal(ps[0].detach(), before)
    assert float(opt.nonfinite_steps) == 1
    assert int(opt.nonfinite_groups) == 0 and int(opt.saturated_groups) == 0


@pytest.mark.parametrize("scale", [2e-7, 1e-8])
def test_tiny_gradients_do_not_zero_the_second_moment(device, scale):
    """A float16 scale's underflow (docs/numerics.md "Overflow"): gradients of 2e-7 give v's group
    absmax (sqrt(v) = sqrt(1 - beta2) |g|, about 6e-9 at the first step) below 2^-25, which a
    float16 scale rounds to 0. Stored as 0, v dequantized to 0 under a nonzero m and the update was
    m / eps: parameters moved up to 40 times lr against torch's 5 after five steps. Saturated, v's
    scale is 2^-24 (stored as float16's smallest subnormal): the displacement stays within twice
    torch.optim.AdamW's. The underflow is not counted: it rounds, it clips nothing."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g)
    p = torch.nn.Parameter(x.to(torch.bfloat16).to(device))
    x0 = p.detach().float().clone()
    q = torch.nn.Parameter(x0.clone())
    lr = 1e-3
    opt = qopt.FlashAdamW([p], lr=lr, weight_decay=0.0)
    ref = torch.optim.AdamW([q], lr=lr, weight_decay=0.0)
    for _ in range(5):
        grad = (scale * torch.randn(4096, generator=g)).to(torch.bfloat16)
        p.grad = grad.to(device)
        q.grad = grad.float().to(device)
        opt.step()
        ref.step()
    ours = (qopt.master_weights(opt)[p].float() - x0).abs().max() / lr
    theirs = (q.detach() - x0).abs().max() / lr
    assert theirs.item() <= 5.0 + 1e-3
    assert ours.item() <= 2.0 * theirs.item(), (ours.item(), theirs.item())
    v_scales = opt.state[p]["exp_avg_sq::scales"]
    assert (v_scales.view(torch.int16) == 1).any(), "no scale of v took 2^-24"
    assert int(opt.saturated_groups) == 0
    assert int(opt.nonfinite_groups) == 0

"""skip_nonfinite=True: a step whose gradients hold a NaN or an infinity is skipped on the device
(parameters, state and step counts stay as they were; ``nonfinite_steps`` counts it), with no host
sync, through the kernels' GradScaler variant; the next step is the one an optimizer that never
saw the bad gradients takes. Without the option the kernels step with what they are given.
"""

import pytest
import torch

import qopt
from test_amp import DTYPE_IDS, DTYPES, OPT_IDS, OPTIMIZERS, assert_same_state, fused_step, make_params
from test_step import bits


def grads_of(params, seed):
    g = torch.Generator().manual_seed(seed)
    return [(1e-2 * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device) for p in params]


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=OPT_IDS)
def test_a_nonfinite_gradient_skips_the_whole_step(device, dtype, cls, kw, bad):
    a = make_params(device, dtype, seed=4)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = cls(a, lr=1e-2, skip_nonfinite=True, **kw)
    ob = cls(b, lr=1e-2, **kw)
    for step in range(2):
        for p, q, g in zip(a, b, grads_of(a, seed=40 + step)):
            p.grad, q.grad = g.clone(), g.clone()
        oa.step()
        ob.step()
    before = [(bits(p).clone(), {k: bits(v).clone() for k, v in oa.state[p].items()}) for p in a]
    # one element of one gradient of the last tensor is not finite: nothing moves, anywhere
    gs = grads_of(a, seed=50)
    gs[-1].view(-1)[123] = float(bad)
    for p, g in zip(a, gs):
        p.grad = g
    oa.step()
    for p, (pb, sb) in zip(a, before):
        assert torch.equal(bits(p), pb)
        for k, v in oa.state[p].items():
            assert torch.equal(bits(v), sb[k]) if k != "step" else float(v) == 2, k
    assert float(oa.nonfinite_steps) == 1
    # the next step is the third of an optimizer that never saw the bad one
    for p, q, g in zip(a, b, grads_of(a, seed=60)):
        p.grad, q.grad = g.clone(), g.clone()
    oa.step()
    ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
        assert_same_state(oa, p, ob, q)
    assert float(oa.nonfinite_steps) == 1


def test_without_skip_nonfinite_the_step_takes_the_gradient_as_it_is(device):
    """The default: no extra read of the gradients, no skip; a NaN reaches its parameter at once.
    Its 32-element groups of FlashAdamW's moments saturate (docs/numerics.md, "Overflow": the
    scales stay finite, the NaN's codes 0) and are counted, so at the next step the rest of the
    group stays finite."""
    ps = make_params(device, torch.bfloat16, seed=5, shapes=((256,),))
    opt = qopt.FlashAdamW(ps, lr=1e-2)
    g = grads_of(ps, seed=1)[0]
    g[40] = float("nan")
    ps[0].grad = g
    opt.step()
    nan = torch.isnan(ps[0].float())
    assert bool(nan[40]) and int(opt.state[ps[0]]["step"]) == 1
    ps[0].grad = grads_of(ps, seed=2)[0]
    opt.step()
    nan = torch.isnan(ps[0].float())
    assert bool(nan[40]) and int(nan.sum()) == 1
    assert int(opt.nonfinite_groups) == 2   # m's and v's group of element 40
    assert getattr(opt, "nonfinite_steps", None) is None


def test_with_a_grad_scaler_its_found_inf_decides(device):
    """Under a GradScaler the scaler's found_inf skips the step; skip_nonfinite adds no check of its
    own (the scaler already read every gradient)."""
    a = make_params(device, torch.bfloat16, seed=6)
    opt = qopt.FlashAdamW(a, lr=1e-2, skip_nonfinite=True)
    for p, g in zip(a, grads_of(a, seed=7)):
        p.grad = g
    before = [bits(p).clone() for p in a]
    fused_step(opt, None, torch.ones(1, device=device))
    assert all(torch.equal(bits(p), b) for p, b in zip(a, before))
    assert getattr(opt, "nonfinite_steps", None) is None
    fused_step(opt, None, torch.zeros(1, device=device))
    assert not all(torch.equal(bits(p), b) for p, b in zip(a, before))


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.AdamW8bit, qopt.FlashSGD, qopt.StableAdamW])
def test_an_empty_gradient_takes_no_part_in_the_flag(device, cls):
    """A parameter of no element (an FSDP2 rank's empty shard, a 0-size layer) has no element to
    be non-finite: beside it the step is the one without skip_nonfinite, and a NaN elsewhere
    still skips the whole step."""
    shapes = [(300,), (0,), (4, 0)]
    g = torch.Generator().manual_seed(6)
    a = [torch.nn.Parameter(torch.randn(s, generator=g).to(torch.bfloat16).to(device))
         for s in shapes]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = cls(a, lr=1e-2, skip_nonfinite=True)
    ob = cls(b, lr=1e-2)
    for p, q in zip(a, b):
        p.grad = (1e-2 * torch.randn(p.shape, generator=g)).to(p.dtype).to(device)
        q.grad = p.grad.clone()
    oa.step()
    ob.step()
    for p, q in zip(a, b):
        assert torch.equal(p.detach(), q.detach())
    assert float(oa.nonfinite_steps) == 0
    a[0].grad[7] = float("nan")
    before = [p.detach().clone() for p in a]
    oa.step()
    assert all(torch.equal(p.detach(), u) for p, u in zip(a, before))
    assert float(oa.nonfinite_steps) == 1

"""The step's host path: pointers patched when tensors move, the shared step counters, and the checks
that run over whole lists (each refusal still named, with nothing stepped).

Every test compares against a second optimizer fed the same values in a way the host path cannot
take a shortcut on (the same gradient tensor refilled in place), or against torch.optim.
"""

import pytest
import torch

import qopt

OPTIMIZERS = [(qopt.FlashAdamW, {}), (qopt.AdamW8bit, {}), (qopt.FlashSGD, {"momentum": 0.9}),
              (qopt.FlashLion, {})]
IDS = ["FlashAdamW", "AdamW8bit", "FlashSGD", "FlashLion"]
SHAPES = [(33, 17), (4096,), (7,), (3, 5, 11), (1,)]


def params(device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(device, torch.bfloat16))
            for s in SHAPES]


def grads(ps, seed):
    g = torch.Generator().manual_seed(seed)
    return [(1e-2 * torch.randn(p.shape, generator=g)).to(p.device, torch.bfloat16) for p in ps]


def bits(t):
    return t.detach().view(torch.int16) if t.element_size() == 2 else t.detach()


@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=IDS)
def test_new_gradient_tensors_each_step_step_with_their_own_values(device, cls, kw):
    """Gradients set to None and made anew each step (new tensors at new addresses) are stepped
    with their values: equal, bit for bit, to an optimizer whose gradients stay the same tensors and
    are refilled in place."""
    a, b = params(device), params(device)
    oa, ob = cls(a, lr=1e-2, **kw), cls(b, lr=1e-2, **kw)
    for q in b:
        q.grad = torch.zeros_like(q)
    keep = []
    for step in range(6):
        gs = grads(a, seed=100 + step)
        for p, g in zip(a, gs):
            p.grad = g.clone()
        keep.append([p.grad for p in a])  # earlier gradients stay alive: every address is new
        oa.step()
        oa.zero_grad(set_to_none=True)
        for q, g in zip(b, gs):
            q.grad.copy_(g)
        ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))


@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=IDS)
def test_a_parameter_whose_storage_moves_is_stepped_where_it_is_now(device, cls, kw):
    """`param.data` replaced by a tensor of the same size and dtype: the next step writes the new
    storage and leaves the old one alone."""
    a, b = params(device), params(device)
    oa, ob = cls(a, lr=1e-2, **kw), cls(b, lr=1e-2, **kw)
    for step in range(2):
        for p, q, g in zip(a, b, grads(a, seed=10 + step)):
            p.grad, q.grad = g.clone(), g.clone()
        oa.step()
        ob.step()
    old = a[1].data
    before = bits(old).clone()
    a[1].data = old.clone()
    for p, q, g in zip(a, b, grads(a, seed=20)):
        p.grad, q.grad = g.clone(), g.clone()
    oa.step()
    ob.step()
    assert torch.equal(bits(old), before)
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))


def test_step_counters_advance_together_and_by_value(device):
    """Every parameter's state['step'] counts the steps it took, read as a tensor as torch's own
    optimizers keep it, and a state_dict saved mid-run resumes the count."""
    ps = params(device)
    opt = qopt.FlashAdamW(ps, lr=1e-3)
    for step in range(3):
        for p, g in zip(ps, grads(ps, seed=step)):
            p.grad = g
        opt.step()
        assert [int(opt.state[p]["step"]) for p in ps] == [step + 1] * len(ps)
    sd = opt.state_dict()
    saved = [int(sd["state"][i]["step"]) for i in range(len(ps))]
    assert saved == [3] * len(ps)
    opt2 = qopt.FlashAdamW(ps, lr=1e-3)
    opt2.load_state_dict(sd)
    for p, g in zip(ps, grads(ps, seed=9)):
        p.grad = g
    opt2.step()
    assert [int(opt2.state[p]["step"]) for p in ps] == [4] * len(ps)
    # the saved state_dict is not advanced by the resumed optimizer's step
    assert [int(sd["state"][i]["step"]) for i in range(len(ps))] == [3] * len(ps)


def test_a_replaced_step_tensor_is_the_count_from_then_on(device):
    ps = params(device)
    opt = qopt.FlashAdamW(ps, lr=1e-3)
    for p, g in zip(ps, grads(ps, seed=1)):
        p.grad = g
    opt.step()
    for p in ps:
        opt.state[p]["step"] = torch.tensor(41)
    opt.step()
    assert [int(opt.state[p]["step"]) for p in ps] == [42] * len(ps)


@pytest.mark.parametrize("bad", ["dtype", "numel", "sparse"])
def test_list_wide_checks_still_name_the_parameter(device, bad):
    """One parameter of a list failing a check that runs over the whole list is refused with its
    name, and nothing is stepped."""
    ps = params(device)
    opt = qopt.FlashAdamW([{"params": ps[:2]}, {"params": ps[2:]}], lr=1e-2)
    for p, g in zip(ps, grads(ps, seed=3)):
        p.grad = g
    opt.step()
    before = [bits(p).clone() for p in ps]
    if bad == "dtype":  # the parameter (and so its gradient) cast after the state was made
        ps[3].data = ps[3].data.float()
        ps[3].grad = torch.zeros_like(ps[3].data)
        err, where = TypeError, r"param_groups\[1\]\[1\] \[3, 5, 11\] is torch.float32 now"
    elif bad == "numel":  # the parameter's data replaced by a tensor of another size
        ps[3].data = torch.zeros(5, dtype=torch.bfloat16, device=device)
        ps[3].grad = torch.zeros(5, dtype=torch.bfloat16, device=device)
        err, where = RuntimeError, r"param_groups\[1\]\[1\] \[5\] has 5 elements, but its optimizer state was made for 165"
    else:
        ps[3].grad = ps[3].grad.to_sparse()
        err, where = RuntimeError, "does not support sparse gradients"
    with pytest.raises(err, match=where):
        opt.step()
    for i, (p, b) in enumerate(zip(ps, before)):
        if i != 3:
            assert torch.equal(bits(p), b)


def test_forget_allocations_then_step(device):
    """After qopt.forget_allocations() (every driver fact asked anew) the step is the same."""
    a, b = params(device), params(device)
    oa, ob = qopt.FlashAdamW(a, lr=1e-2), qopt.FlashAdamW(b, lr=1e-2)
    for step in range(3):
        for p, q, g in zip(a, b, grads(a, seed=step)):
            p.grad, q.grad = g.clone(), g.clone()
        oa.step()
        qopt.forget_allocations()
        ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))

"""lr as torch.optim has it (issue 25, defects 1 and 5): an lr set on a param group after the
optimizer is made and before a scheduler is made is the lr the scheduler starts from, as with
torch.optim.AdamW; a tensor lr that is not one element is refused at the step, naming lr, the
group and the shape, before anything is launched."""

import pytest
import torch

import qopt

OPTIMIZERS = [qopt.FlashAdamW, qopt.FlashAdam, qopt.AdamW8bit, qopt.FlashSGD, qopt.FlashSGDW,
              qopt.FlashLion]

SCHEDULERS = {
    "LambdaLR": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e),
    "StepLR": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.1),
    "MultiplicativeLR": lambda o: torch.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.9),
}


def bf16_params(*shapes, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(torch.bfloat16).to(device))
            for s in shapes]


def lrs(opt, key="lr"):
    return [g[key] for g in opt.param_groups]


@pytest.mark.parametrize("sched", list(SCHEDULERS))
@pytest.mark.parametrize("cls", OPTIMIZERS, ids=lambda c: c.__name__)
def test_lr_set_before_the_scheduler_is_kept_as_torch_adamw_keeps_it(cls, sched):
    """Was: add_param_group set "initial_lr" to the constructor's lr, and the scheduler, which
    only sets it where it is missing, went back to that lr from its first value on."""
    make = SCHEDULERS[sched]
    ref = torch.optim.AdamW([{"params": [torch.nn.Parameter(torch.zeros(4))]},
                             {"params": [torch.nn.Parameter(torch.zeros(4))], "lr": 0.2}], lr=0.1)
    a, b = bf16_params((4,), (4,))
    opt = cls([{"params": [a]}, {"params": [b], "lr": 0.2}], lr=0.1)
    for o in (ref, opt):
        o.param_groups[0]["lr"] = 0.03
        o.param_groups[1]["lr"] = 0.07
    ref_sched, qopt_sched = make(ref), make(opt)
    assert lrs(opt) == lrs(ref)
    assert lrs(opt, "initial_lr") == lrs(ref, "initial_lr")
    assert qopt_sched.get_last_lr() == ref_sched.get_last_lr()
    for _ in range(5):
        ref.step()          # no gradients: nothing to step, for the scheduler's order check
        opt.step()
        ref_sched.step()
        qopt_sched.step()
        assert lrs(opt) == lrs(ref)
        assert qopt_sched.get_last_lr() == ref_sched.get_last_lr()
    # a group added later starts from its own lr too, as torch's does
    c = bf16_params((4,), seed=1)[0]
    opt.add_param_group({"params": [c], "lr": 0.5})
    ref.add_param_group({"params": [torch.nn.Parameter(torch.zeros(4))], "lr": 0.5})
    assert lrs(opt) == lrs(ref)
    assert ("initial_lr" in opt.param_groups[2]) == ("initial_lr" in ref.param_groups[2])


def test_decouple_lr_keeps_the_lr_the_group_was_added_with():
    """decouple_lr's reference lr is qopt's own key, untouched by an lr set later or by a
    scheduler; a checkpoint of an older qopt (which kept it as "initial_lr") still gives it."""
    (a,) = bf16_params((4,))
    opt = qopt.FlashAdamW([a], lr=0.01, weight_decay=0.1, decouple_lr=True)
    opt.param_groups[0]["lr"] = 0.04
    torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    assert opt.param_groups[0]["initial_lr"] == 0.04
    # kernel weight decay wd / initial_lr: the decay per step is wd * lr / 0.01
    assert opt._kernel_hypers(opt.param_groups[0])["weight_decay"] == pytest.approx(0.1 / 0.01)
    sd = opt.state_dict()
    old = {**sd, "param_groups": [dict(g) for g in sd["param_groups"]]}
    for g in old["param_groups"]:
        del g["_qopt_initial_lr"]
        g["initial_lr"] = 0.02
    (b,) = bf16_params((4,))
    other = qopt.FlashAdamW([b], lr=0.01, weight_decay=0.1, decouple_lr=True)
    other.load_state_dict(old)
    assert other._kernel_hypers(other.param_groups[0])["weight_decay"] == pytest.approx(0.1 / 0.02)


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashSGDW, qopt.FlashLion, qopt.AdamAtan2])
def test_decouple_lr_with_a_reference_lr_of_zero_is_refused(cls):
    """decouple_lr scales the decay by lr / the group's initial lr: a group added at lr 0 (to
    warm up from it by hand) would divide by zero. It is refused where the group is added, and
    at the step where its weight decay is set nonzero later (nothing stepped); without weight
    decay the reference is never used."""
    (a,) = bf16_params((8,), seed=5)
    kw = {} if cls is qopt.AdamAtan2 else {"decouple_lr": True}
    with pytest.raises(ValueError, match="initial lr is 0"):
        cls([a], lr=0.0, weight_decay=0.1, **kw)
    opt = cls([a], lr=0.0, weight_decay=0.0, **kw)
    opt.param_groups[0]["lr"] = 1e-2
    opt.param_groups[0]["weight_decay"] = 0.1
    a.grad = torch.full_like(a, 0.5)
    a0 = a.detach().clone()
    with pytest.raises(ValueError, match="initial lr is 0"):
        opt.step()
    assert torch.equal(a.detach(), a0) and int(opt.state.get(a, {}).get("step", 0)) == 0
    opt.param_groups[0]["weight_decay"] = 0.0
    opt.step()
    assert not torch.equal(a.detach(), a0)


def _every_bit(opt, params):
    out = [p.detach().clone() for p in params]
    for p in params:
        for k, v in sorted(opt.state.get(p, {}).items()):
            out.append(v.detach().clone() if isinstance(v, torch.Tensor) else v)
    return out


def _same(xs, ys):
    return len(xs) == len(ys) and all(
        torch.equal(x.cpu().reshape(-1).view(torch.uint8) if x.numel() else x.cpu(),
                    y.cpu().reshape(-1).view(torch.uint8) if y.numel() else y.cpu())
        if isinstance(x, torch.Tensor) else x == y for x, y in zip(xs, ys))


@pytest.mark.parametrize("shape", [(2,), (0,), (1, 2)])
@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashSGD, qopt.AdamW8bit],
                         ids=lambda c: c.__name__)
def test_tensor_lr_of_another_shape_is_refused_naming_lr_before_any_launch(device, cls, shape):
    """Was: `shape '[]' is invalid for input of size 2` from inside the step (with the earlier
    groups already stepped), without naming lr or the group."""
    a, b = bf16_params((40,), (24,), device=device, seed=2)
    opt = cls([{"params": [a]}, {"params": [b]}], lr=1e-2)
    g = torch.Generator().manual_seed(3)
    a.grad = (1e-2 * torch.randn(40, generator=g)).to(torch.bfloat16).to(device)
    b.grad = (1e-2 * torch.randn(24, generator=g)).to(torch.bfloat16).to(device)
    opt.step()
    opt.param_groups[1]["lr"] = torch.full(shape, 1e-2, dtype=torch.float64, device=device)
    before = _every_bit(opt, [a, b])
    with pytest.raises(ValueError) as e:
        opt.step()
    msg = str(e.value)
    assert "param_groups[1]: lr is a tensor of shape " + str(list(shape)) in msg, msg
    assert "one element" in msg and "nothing was stepped" in msg
    assert _same(_every_bit(opt, [a, b]), before)
    # torch.optim's own 1-element shapes step as the float lr does
    for ok in ((), (1,)):
        x, y = bf16_params((40,), device=device, seed=4) + bf16_params((40,), device=device, seed=4)
        ox = cls([x], lr=1e-2)
        oy = cls([y], lr=torch.full(ok, 1e-2, dtype=torch.float64, device=device))
        x.grad = a.grad.clone()
        y.grad = a.grad.clone()
        ox.step()
        oy.step()
        assert torch.equal(x.detach().cpu().view(torch.int16), y.detach().cpu().view(torch.int16))

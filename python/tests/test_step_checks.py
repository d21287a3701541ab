"""What step() refuses, or rebuilds from, before it launches anything: a parameter whose size
changed since its state was made (`param.data = ...`), a state changed under the optimizer's
launch cache (`optimizer.state[p][k] = t`, `optimizer.state.clear()`, a new `optimizer.state`), a
NaN or infinite hyperparameter in any group, a sparse gradient, and what the runtime refuses in any
launch of the step (qopt_validate: overlapping buffers, a gradient aliasing its parameter; a NaN
uniform; a kernel the backend cannot run). A refused step steps no group.

On the host backend (CPU) and on CUDA, each skipped with the reason where that backend is missing
(see conftest.py).
"""

import collections
import json
import math
import warnings

import pytest
import torch

import qopt

BF16 = torch.bfloat16


def params_on(device, *shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(BF16).to(device)) for s in shapes]


def grad_like(p, seed, n=None):
    g = torch.Generator().manual_seed(seed)
    shape = p.shape if n is None else (n,)
    return (1e-2 * torch.randn(shape, generator=g)).to(p.dtype).to(p.device)


def snapshot(opt, params):
    """Every parameter and every state tensor, copied."""
    out = [p.detach().clone() for p in params]
    for p in params:
        for k, v in sorted(opt.state.get(p, {}).items()):
            if isinstance(v, torch.Tensor):
                out.append(v.detach().clone())
    return out


def same(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def bits(t):
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8) if t.numel() else t.to(torch.uint8)


_bits = bits


# ------------------------------------------------------------- a parameter's size changed

def _resized_setup(device):
    a, p = params_on(device, (64,), (64,), seed=1)
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [p]}], lr=0.1)
    a.grad, p.grad = grad_like(a, 2), grad_like(p, 3)
    opt.step()
    return a, p, opt


def test_shrunk_parameter_is_refused_and_nothing_is_written(device):
    """`p.data = <a smaller tensor>` after a step: the step used to write the cached 64 elements
    into a 16-element parameter (past its end)."""
    a, p, opt = _resized_setup(device)
    buf = torch.zeros(128, dtype=BF16, device=device)
    p.data = buf[:16]
    a.grad, p.grad = grad_like(a, 4), torch.ones(16, dtype=BF16, device=device)
    before = snapshot(opt, [a])
    with pytest.raises(RuntimeError) as e:
        opt.step()
    msg = str(e.value)
    assert "param_groups[1][0] [16]" in msg and "16 elements" in msg and "made for 64" in msg
    assert "optimizer.state.pop" in msg
    assert not buf.any(), "written past (or into) the resized parameter"
    assert same(snapshot(opt, [a]), before), "group 0 was stepped by a refused step"
    assert int(opt.state[a]["step"]) == 1 and int(opt.state[p]["step"]) == 1
    # dropping the parameter's state, as the message says, starts it afresh at its new size
    opt.state.pop(p)
    opt.step()
    assert buf[:16].ne(0).all() and not buf[16:].any()
    assert int(opt.state[p]["step"]) == 1 and opt.state[p]["error_bits"].numel() == 16
    assert int(opt.state[a]["step"]) == 2


def test_grown_parameter_is_refused(device):
    a, p, opt = _resized_setup(device)
    p.data = torch.randn(1024).to(BF16).to(device)
    p.grad = torch.ones(1024, dtype=BF16, device=device)
    before = snapshot(opt, [a, p])
    with pytest.raises(RuntimeError, match=r"param_groups\[1\]\[0\] \[1024\] has 1024 elements, "
                                           r"but its optimizer state was made for 64"):
        opt.step()
    assert same(snapshot(opt, [a, p]), before)


@pytest.mark.parametrize("how", ["grad_none", "add_param_group", "state_replaced"])
def test_resized_parameter_is_refused_when_the_launch_cache_is_rebuilt(device, how):
    """A rebuilt cache (another set of gradients, a new group, a replaced state tensor) takes the
    parameter's new size: the state, made for the old one, must still refuse it."""
    a, p, opt = _resized_setup(device)
    p.data = torch.zeros(16, dtype=BF16, device=device)
    p.grad = torch.ones(16, dtype=BF16, device=device)
    if how == "grad_none":
        a.grad = None
    elif how == "add_param_group":
        (c,) = params_on(device, (8,), seed=5)
        opt.add_param_group({"params": [c]})
    else:
        opt.state[p]["exp_avg::scales"] = opt.state[p]["exp_avg::scales"].clone()
    before = snapshot(opt, [a, p])
    with pytest.raises(RuntimeError, match=r"\[16\] has 16 elements, but its optimizer state was "
                                           r"made for 64"):
        opt.step()
    assert same(snapshot(opt, [a, p]), before)
    assert not p.detach().any()


# ------------------------------------------------------ the state changed under the cache

@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.AdamW8bit, qopt.FlashSGD])
def test_replaced_state_tensors_are_the_ones_stepped(device, cls):
    """`optimizer.state[p][k] = optimizer.state[p][k].clone()` for every key: the next step must
    read and write the new tensors (it used to keep the old pointers: with the old tensors freed,
    a use after free). The result equals an optimizer whose state was left alone, bit for bit."""
    ps = params_on(device, (300,), (17, 5), seed=6)
    twins = [torch.nn.Parameter(p.detach().clone()) for p in ps]
    kw = dict(lr=1e-2, momentum=0.9) if cls is qopt.FlashSGD else dict(lr=1e-2)
    opt, ref = cls(ps, **kw), cls(twins, **kw)
    for seed in (10, 11):
        for p, t in zip(ps, twins):
            p.grad, t.grad = grad_like(p, seed), grad_like(p, seed)
        if seed == 11:
            old = {p: dict(opt.state[p]) for p in ps}   # kept alive: no use after free here
            old_copies = {p: {k: v.clone() for k, v in opt.state[p].items()} for p in ps}
            for p in ps:
                for k in list(opt.state[p]):
                    opt.state[p][k] = opt.state[p][k].clone()
        opt.step()
        ref.step()
    for p, t in zip(ps, twins):
        assert torch.equal(bits(p), bits(t))
        for k in ref.state[t]:
            assert torch.equal(bits(opt.state[p][k]), bits(ref.state[t][k])), k
            if k not in ("qmap1", "qmap2"):
                assert torch.equal(bits(old[p][k]), bits(old_copies[p][k])), \
                    f"the replaced tensor {k} was still written"
    assert int(opt.state[ps[0]]["step"]) == 2


def test_replaced_state_tensors_freed_old_ones(device):
    """The reviewer's repro: replace, drop the old tensors, reuse their memory, step 20 times."""
    ps = params_on(device, (4096,), (4096,), seed=7)
    opt = qopt.FlashAdamW(ps)
    for p in ps:
        p.grad = grad_like(p, 8)
    opt.step()
    for p in ps:
        for k in list(opt.state[p]):
            if k != "step":
                opt.state[p][k] = opt.state[p][k].clone()
    junk = [torch.zeros(4096, dtype=torch.int8, device=device) for _ in range(50)]
    for _ in range(20):
        opt.step()
    assert not any(j.any() for j in junk)
    assert all(int(opt.state[p]["step"]) == 21 for p in ps)


@pytest.mark.parametrize("how", ["clear", "reassign", "pop_one"])
def test_cleared_state_starts_afresh(device, how):
    """`optimizer.state.clear()` (or a new `optimizer.state`, or one parameter's state popped): the
    next step creates the state as at a first step and steps that one, and state_dict shows it (the
    kernel used to go on with the hidden old state while state_dict came out empty)."""
    ps = params_on(device, (100,), (37,), seed=12)
    opt = qopt.FlashAdamW(ps, lr=1e-2)
    for p in ps:
        p.grad = grad_like(p, 13)
    opt.step()
    opt.step()
    dropped = ps if how != "pop_one" else ps[:1]
    if how == "clear":
        opt.state.clear()
    elif how == "reassign":
        opt.state = collections.defaultdict(dict)
    else:
        opt.state.pop(ps[0])
    twins = [torch.nn.Parameter(p.detach().clone()) for p in dropped]
    fresh = qopt.FlashAdamW(twins, lr=1e-2)
    for t in twins:
        t.grad = grad_like(t, 14)
    fresh.step()
    for p in ps:
        p.grad = grad_like(p, 14)
    opt.step()
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1]
    for p, t in zip(dropped, twins):
        assert int(opt.state[p]["step"]) == 1
        assert torch.equal(bits(p), bits(t))
        for k in fresh.state[t]:
            assert torch.equal(bits(opt.state[p][k]), bits(fresh.state[t][k])), k
    if how == "pop_one":
        assert int(opt.state[ps[1]]["step"]) == 3


def test_replaced_step_counter_is_used(device):
    """A replaced step tensor is the step count from then on (bias corrections follow it)."""
    (p,) = params_on(device, (64,), seed=15)
    (q,) = params_on(device, (64,), seed=15)
    opt, ref = qopt.FlashAdamW([p], lr=1e-2), qopt.FlashAdamW([q], lr=1e-2)
    for seed in range(16, 21):    # ref: five steps
        q.grad = grad_like(q, seed)
        ref.step()
        if seed < 20:             # opt: four steps, then its counter set to 4 by hand ...
            p.grad = grad_like(p, seed)
            opt.step()
    opt.state[p]["step"] = torch.tensor(4)
    p.grad = grad_like(p, 20)     # ... and the fifth step
    opt.step()
    assert int(opt.state[p]["step"]) == 5
    assert torch.equal(bits(p), bits(q))


@pytest.mark.parametrize("capturable", [False, True], ids=["host-counter", "capturable"])
def test_step_counter_edited_in_place_is_the_count_stepped_with(device, capturable):
    """`state[p]["step"].copy_(0)` used to change the reported count but not the kernel's: the
    bias corrections went on from the launch's own count. The edited counter is the count from
    then on, as torch.optim.AdamW reads it: here one of two parameters of a launch is reset, and
    both step as torch's do (float32 parameters and states)."""
    gen = torch.Generator().manual_seed(37)
    init = [torch.randn(64, generator=gen) for _ in range(2)]
    grads = [[torch.randn(64, generator=gen) for _ in range(2)] for _ in range(7)]
    ps = [torch.nn.Parameter(t.clone().to(device)) for t in init]
    qs = [torch.nn.Parameter(t.clone()) for t in init]
    opt = qopt.FlashAdamW(ps, lr=0.1, quantize=False, capturable=capturable)
    ref = torch.optim.AdamW(qs, lr=0.1, foreach=False)
    for k, gs in enumerate(grads):
        if k == 5:   # after five steps: the first parameter's counter edited in place
            opt.state[ps[0]]["step"].copy_(torch.tensor(0))
            ref.state[qs[0]]["step"].copy_(torch.tensor(0))
        for p, q, g in zip(ps, qs, gs):
            p.grad, q.grad = g.to(device), g.clone()
        opt.step()
        ref.step()
    assert [int(opt.state[p]["step"]) for p in ps] == [2, 7]
    for p, q in zip(ps, qs):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change,match", [
    (lambda st: st.__setitem__("exp_avg::scales", st["exp_avg::scales"].float()),
     r"'exp_avg::scales' is torch.float32 of shape \[4\], the kernel FlashAdamW needs torch.float16"),
    (lambda st: st.__setitem__("exp_avg::scales", st["exp_avg::scales"][:2].clone()),
     r"'exp_avg::scales' is torch.float16 of shape \[2\]"),
    (lambda st: st.__setitem__("exp_avg::quantized", st["exp_avg::quantized"][::2].clone()),
     r"has 128 elements, but its optimizer state was made for 64"),
    (lambda st: st.__setitem__("exp_avg_sq::quantized",
                               torch.zeros(256, dtype=torch.uint8,
                                           device=st["exp_avg_sq::quantized"].device)[::2]),
     r"contiguous"),
    (lambda st: st.pop("exp_avg::scales"), r"missing state keys \['exp_avg::scales'\]"),
    (lambda st: st.__setitem__("extra", torch.zeros(1)), r"unexpected state keys \['extra'\]"),
    (lambda st: st.__setitem__("step", torch.tensor(-1)), r"step -1 is not a non-negative"),
], ids=["dtype", "shape", "size", "noncontiguous", "missing", "unknown", "step"])
def test_replaced_state_is_checked_before_any_launch(device, change, match):
    """A state tensor replaced by one the kernel cannot step is refused, as load_state_dict
    refuses it, before any group is launched."""
    a, p = params_on(device, (64,), (128,), seed=21)
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [p]}])
    a.grad, p.grad = grad_like(a, 22), grad_like(p, 23)
    opt.step()
    change(opt.state[p])
    before = snapshot(opt, [a])
    with pytest.raises((ValueError, RuntimeError), match=match) as e:
        opt.step()
    assert "param_groups[1][0] [128]" in str(e.value)
    assert same(snapshot(opt, [a]), before)
    assert int(opt.state[a]["step"]) == 1


def test_state_tensor_on_another_device_is_refused(cuda):
    (p,) = params_on(cuda, (64,), seed=24)
    opt = qopt.FlashAdamW([p])
    p.grad = grad_like(p, 25)
    opt.step()
    opt.state[p]["error_bits"] = opt.state[p]["error_bits"].cpu()
    with pytest.raises(ValueError, match="'error_bits' is on cpu, the parameter on cuda"):
        opt.step()


# ------------------------------------------------------------------ hyperparameters

@pytest.mark.parametrize("cls,key,value,hyper", [
    (qopt.FlashAdamW, "lr", math.nan, "lr"),
    (qopt.FlashAdamW, "lr", math.inf, "lr"),
    (qopt.FlashAdamW, "betas", (0.9, math.nan), "beta2"),
    (qopt.FlashAdamW, "eps", math.nan, "eps"),
    (qopt.FlashAdamW, "weight_decay", math.inf, "weight_decay"),
    (qopt.AdamW8bit, "betas", (math.nan, 0.999), "beta1"),
    (qopt.FlashSGD, "momentum", math.inf, "momentum"),
    (qopt.FlashSGD, "dampening", math.nan, "dampening"),
    (qopt.FlashLion, "lr", -math.inf, "lr"),
])
def test_non_finite_hyperparameter_in_a_later_group_steps_no_group(device, cls, key, value, hyper):
    """A NaN or infinite hyperparameter set in a group after construction is refused before any
    launch: the earlier groups are not stepped (they used to be, before the runtime refused the
    later group's launch)."""
    a, b = params_on(device, (40,), (50,), seed=26)
    kw = dict(momentum=0.5) if cls is qopt.FlashSGD else {}
    opt = cls([{"params": [a]}, {"params": [b]}], **kw)
    a.grad, b.grad = grad_like(a, 27), grad_like(b, 28)
    opt.step()
    opt.param_groups[1][key] = value
    before = snapshot(opt, [a, b])
    with pytest.raises(ValueError, match=rf"param_groups\[1\]: hyperparameter '{hyper}' is "):
        opt.step()
    assert same(snapshot(opt, [a, b]), before)
    assert int(opt.state[a]["step"]) == 1 and int(opt.state[b]["step"]) == 1


@pytest.mark.parametrize("update,match", [
    (dict(betas=(1.0, 0.999)), r"Invalid beta parameter at index 0: 1.0"),
    (dict(betas=(0.9, 0.999, 0.5)), r"Invalid betas: \(0.9, 0.999, 0.5\); expected two values"),
    (dict(eps=-1.0), r"Invalid epsilon value: -1.0"),
    (dict(lr=-1.0), r"Invalid learning rate: -1.0"),
    (dict(maximize=True), r"maximize=True is not supported"),
    (dict(skip_nonfinite=True), r"skip_nonfinite=True in a param group is not supported"),
    (dict(weight_decay=1e40), r"hyperparameter 'weight_decay' is 1e\+40, which is infinite in "
                              r"float32"),
    (dict(lr=1e30, weight_decay=1e10), r"the per-step value 1 - \(lr \* weight_decay\) of "
                                       r"kernel FlashAdamW is -inf in float32 at step 2"),
    (dict(lr=1e37, betas=(0.9999999, 0.999)), r"the per-step value lr / \(1 - \(beta1 \^ "
                                               r"step\)\) of kernel FlashAdamW is inf"),
], ids=["beta1=1", "three-betas", "eps", "lr", "maximize", "skip_nonfinite", "wd-f32",
        "lr*wd", "lr/bc1"])
@pytest.mark.parametrize("capturable", [False, True], ids=["host-counter", "capturable"])
def test_group_value_set_after_construction_is_checked_at_the_step(device, update, match,
                                                                   capturable):
    """A group value set after construction (`param_groups[g][k] = v`) is checked at the step as
    add_param_group checks it, and a per-step value that is infinite in float32 is refused: beta1
    = 1 used to step every parameter to NaN (lr / (1 - beta1^t) is infinite), weight_decay 1e40
    to step with an infinite float32 decay. Nothing is stepped, in any group."""
    a, b = params_on(device, (40,), (50,), seed=34)
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [b]}], lr=0.1, capturable=capturable)
    a.grad, b.grad = grad_like(a, 35), grad_like(b, 36)
    opt.step()
    opt.param_groups[1].update(update)
    before = snapshot(opt, [a, b])
    if "lr / " in match and capturable:
        pytest.skip("with the step counter on the device the bias correction is computed there "
                    "(reading it would be a host sync)")
    with pytest.raises(ValueError, match=r"FlashAdamW: param_groups\[1\]: " + match):
        opt.step()
    assert same(snapshot(opt, [a, b]), before)
    assert int(opt.state[a]["step"]) == 1 and int(opt.state[b]["step"]) == 1


def test_non_number_hyperparameter_is_a_type_error_before_any_launch(device):
    a, b = params_on(device, (40,), (50,), seed=29)
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [b]}])
    a.grad, b.grad = grad_like(a, 30), grad_like(b, 31)
    opt.param_groups[1]["eps"] = "1e-8"
    a0 = a.detach().clone()
    with pytest.raises(TypeError, match=r"param_groups\[1\]: hyperparameter 'eps' is '1e-8'"):
        opt.step()
    assert torch.equal(a.detach(), a0)
    assert int(opt.state[a].get("step", 0)) == 0   # nothing launched


# ------------------------------------------------------------------------ sparse gradients

def test_sparse_gradient_is_refused_before_any_launch(device):
    (a,) = params_on(device, (40,), seed=32)
    e = torch.nn.Parameter(torch.randn(10, 4).to(device))
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [e]}])
    a.grad = grad_like(a, 33)
    e.grad = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 4), (10, 4)).to(device)
    a0 = a.detach().clone()
    with pytest.raises(RuntimeError, match="FlashAdamW does not support sparse gradients"):
        opt.step()
    assert torch.equal(a.detach(), a0)


@pytest.mark.parametrize("option", [{"max_grad_norm": 1.0}, {"skip_nonfinite": True}],
                         ids=["max_grad_norm", "skip_nonfinite"])
def test_gradient_refusals_come_before_the_norm_options(device, option):
    """With max_grad_norm or skip_nonfinite the gradients' norms are taken before the launches;
    a gradient the step refuses still gets the step's own error (not one of torch's norm
    kernels), and nothing is stepped: no parameter, step count or counter moves."""
    (a,) = params_on(device, (40,), seed=34)
    e = torch.nn.Parameter(torch.randn(10, 4).to(device))
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [e]}], **option)
    bad = {"sparse": (RuntimeError, "FlashAdamW does not support sparse gradients",
                      torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 4), (10, 4))),
           "int32": (TypeError, "gradient dtype torch.int32",
                     torch.ones(10, 4, dtype=torch.int32))}
    for kind, (error, match, grad) in bad.items():
        a.grad = grad_like(a, 35)
        if grad.is_sparse:
            e.grad = grad.to(device)
        else:   # (torch refuses such a .grad; its .data takes any)
            e.grad = torch.zeros_like(e)
            e.grad.data = grad.to(device)
        a0, e0 = a.detach().clone(), e.detach().clone()
        with pytest.raises(error, match=match):
            opt.step()
        assert torch.equal(a.detach(), a0) and torch.equal(e.detach(), e0), kind
        assert all(int(opt.state.get(p, {}).get("step", 0)) == 0 for p in (a, e)), kind
        assert getattr(opt, "last_grad_norm", None) is None, kind
        assert getattr(opt, "nonfinite_steps", None) is None, kind


# ---------------------------------------------------------- what the runtime refuses

def every_bit(opt, tensors):
    """The bits, dtype and device of every tensor, gradient and state value (step included) of
    `tensors`, copied, for a bit-exact comparison."""
    def bits(t):
        return _bits(t).clone()
    out = []
    for t in tensors:
        out.append(("param", t.dtype, t.device, bits(t)))
        out.append(("grad", None if t.grad is None else (t.grad.dtype, bits(t.grad))))
        for k, v in sorted(opt.state.get(t, {}).items()):
            if isinstance(v, torch.Tensor):
                out.append((k, v.dtype, v.device, tuple(v.shape), bits(v)))
            else:
                out.append((k, v))
    return out


def same_bits(a, b):
    def eq(x, y):
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        if isinstance(x, tuple):
            return isinstance(y, tuple) and len(x) == len(y) and all(map(eq, x, y))
        return x == y
    return len(a) == len(b) and all(map(eq, a, b))


class _UncheckedAdamW(qopt.FlashAdamW):
    def _validate_group(self, group):
        pass


def _refused_later_group(device, kind):
    """Group 0 stepped twice; group 1 (no gradients until now) gets gradients that the runtime
    refuses (its validation, or its uniforms): (optimizer, group 0's params, group 1's params,
    what the message names)."""
    a, c = params_on(device, (40,), (33,), seed=40)
    if kind == "duplicate":
        (b,) = params_on(device, (24,), seed=41)
        later, named = [b, b], r"param_groups\[1\]\[[01]\] \[24\]"
    elif kind == "overlapping_views":
        base = torch.randn(96, generator=torch.Generator().manual_seed(42)).to(BF16).to(device)
        later = [torch.nn.Parameter(base[:64]), torch.nn.Parameter(base[32:])]
        named = r"param_groups\[1\]\[[01]\] \[64\]"
    elif kind == "grad_aliases_param":
        later = params_on(device, (24,), seed=43)
        named = r"param_groups\[1\]\[0\] \[24\]' \(#0\), stream 'g'"
    elif kind == "nan_uniform":
        later = params_on(device, (24,), seed=44)
        named = r"uniform 7 of kernel 'FlashAdamW' is NaN"
    else:
        raise AssertionError(kind)
    # FlashAdamW refuses beta1 = 1 itself (its group check, at the step too): the NaN uniform is
    # made by a subclass that does not check its groups, as a spec of one's own might not
    cls = _UncheckedAdamW if kind == "nan_uniform" else qopt.FlashAdamW
    with warnings.catch_warnings():   # torch warns about a parameter listed twice in a group
        warnings.simplefilter("ignore")
        opt = cls([{"params": [a, c]}, {"params": later}], lr=0.1)
    a.grad, c.grad = grad_like(a, 45), grad_like(c, 46)
    opt.step()
    opt.step()
    for i, q in enumerate(later):
        q.grad = q.detach() if kind == "grad_aliases_param" else grad_like(q, 47 + i)
    if kind == "nan_uniform":   # lr / (1 - beta1^step) = 0 / 0
        opt.param_groups[1]["lr"], opt.param_groups[1]["betas"] = 0.0, (1.0, 0.999)
    return opt, [a, c], later, named


@pytest.mark.parametrize("kind", ["duplicate", "overlapping_views", "grad_aliases_param",
                                  "nan_uniform"])
def test_runtime_refusal_in_a_later_group_steps_no_group(device, kind):
    """A launch the runtime refuses (qopt_validate: overlapping buffers, a gradient aliasing its
    parameter; the uniforms' evaluation: a NaN uniform) in a later group used to be found only at
    that group's launch, after the earlier groups were stepped and their step counts advanced.
    Every launch is checked by the runtime before any runs: nothing changes, bit for bit."""
    opt, earlier, later, named = _refused_later_group(device, kind)
    before = every_bit(opt, earlier)
    later_before = [(bits(q).clone(), bits(q.grad).clone()) for q in later]
    with pytest.raises(qopt.QoptError, match=named) as e:
        opt.step()
    assert e.value.status in ("QOPT_ERROR_VALIDATION", "QOPT_ERROR_INVALID_ARGUMENT")
    assert same_bits(every_bit(opt, earlier), before), "a refused step changed an earlier group"
    assert [int(opt.state[p]["step"]) for p in earlier] == [2, 2]
    for q, (pb, gb) in zip(later, later_before):
        assert torch.equal(bits(q), pb) and torch.equal(bits(q.grad), gb)
        assert int(opt.state[q]["step"]) == 0   # the state its first step made, not stepped
    # without the later group's gradients the step goes through
    for q in later:
        q.grad = None
    opt.step()
    assert [int(opt.state[p]["step"]) for p in earlier] == [3, 3]
    assert not torch.equal(bits(earlier[0]), before[0][3])


def _expanded(device):
    return torch.nn.Parameter(torch.zeros(1, device=device).expand(10)), r"strides \[0\]"


def _inference(device):
    with torch.inference_mode():
        t = torch.zeros(4, 8, device=device)
    return torch.nn.Parameter(t[:, :4], requires_grad=False), "non-contiguous inference tensor"


def _strided_overlap(device):
    # offsets i + j: elements (0, 1) and (1, 0) at one address (no stride is 0)
    return (torch.nn.Parameter(torch.zeros(8, device=device).as_strided((2, 3), (1, 1))),
            r"strides \[1, 1\]")


@pytest.mark.parametrize("make", [_expanded, _inference, _strided_overlap],
                         ids=["expanded", "inference", "strided-overlap"])
def test_parameter_that_cannot_be_written_back_is_refused_before_any_launch(device, make):
    """A non-contiguous parameter is stepped through a contiguous copy that is written back after
    the launch. Where that copy back fails (elements at one address; an inference tensor), the
    step used to raise after launching: the other parameters updated, their states changed, the
    step count not advanced. Refused before anything is launched."""
    (a,) = params_on(device, (16,), seed=70)
    a = torch.nn.Parameter(a.detach().float())
    p, match = make(device)
    a.grad, p.grad = torch.ones_like(a), torch.ones(p.shape, device=device)
    opt = qopt.FlashAdamW([a, p], lr=0.1, quantize=False)
    before = [(bits(q).clone(), bits(q.grad).clone()) for q in (a, p)]
    with pytest.raises(qopt.QoptError, match=r"param_groups\[0\]\[1\] \[\d+(, \d+)?\] .*" + match):
        opt.step()
    for q, (pb, gb) in zip((a, p), before):
        assert torch.equal(bits(q), pb) and torch.equal(bits(q.grad), gb)
    # the fresh state of a first step, not stepped
    assert int(opt.state[a]["step"]) == 0 and float(opt.state[a]["exp_avg"].abs().max()) == 0


@pytest.mark.parametrize("layout", ["columns", "across-groups", "transposed"])
def test_parameters_sharing_memory_are_refused_naming_both(device, layout):
    """Overlapping views that are not contiguous (column blocks of one matrix) and overlapping
    views in two groups (two launches) used to step the shared elements twice: FlashSGD(lr=1)
    left -1 in the overlap where torch's SGD leaves -2. Refused before anything is written,
    naming both parameters."""
    big = torch.zeros(4, 8, device=device)
    if layout == "columns":
        a, b = torch.nn.Parameter(big[:, :6]), torch.nn.Parameter(big[:, 2:])
        groups, names = [{"params": [a, b]}], (r"param_groups\[0\]\[0\] \[4, 6\]",
                                               r"param_groups\[0\]\[1\] \[4, 6\]")
    elif layout == "across-groups":
        flat = big.view(-1)
        a, b = torch.nn.Parameter(flat[:20]), torch.nn.Parameter(flat[16:])
        groups, names = [{"params": [a]}, {"params": [b]}], (r"param_groups\[0\]\[0\] \[20\]",
                                                             r"param_groups\[1\]\[0\] \[16\]")
    else:
        a, b = torch.nn.Parameter(big.t()), torch.nn.Parameter(big[1:3, 3:5])
        groups, names = [{"params": [a, b]}], (r"param_groups\[0\]\[0\] \[8, 4\]",
                                               r"param_groups\[0\]\[1\] \[2, 2\]")
    a.grad, b.grad = torch.ones(a.shape, device=device), torch.ones(b.shape, device=device)
    opt = qopt.FlashSGD(groups, lr=1.0)
    with pytest.raises(qopt.QoptError, match=names[0] + " and " + names[1] + " share memory") as e:
        opt.step()
    assert e.value.status == "QOPT_ERROR_VALIDATION"
    assert torch.equal(big, torch.zeros_like(big))
    assert all(int(opt.state[q]["step"]) == 0 for q in (a, b))
    # views that interleave without sharing an element still step
    _disjoint_views_step(device)


def _disjoint_views_step(device):
    """Column blocks of one matrix and views whose strides interleave (offsets 0, 2, 4, 1, 3, 5)
    share no element: they step, each element by -lr * grad (SGD, lr 1, gradient 1: -1, computed
    here by hand), as torch's SGD steps them."""
    big = torch.zeros(4, 8, device=device)
    flat = torch.zeros(6, device=device)
    a, b = torch.nn.Parameter(big[:, :3]), torch.nn.Parameter(big[:, 3:])
    c = torch.nn.Parameter(flat.as_strided((2, 3), (1, 2)))
    for q in (a, b, c):
        q.grad = torch.ones(q.shape, device=device)
    opt = qopt.FlashSGD([a, b, c], lr=1.0)
    opt.step()
    assert torch.equal(big, torch.full_like(big, -1.0))
    assert torch.equal(flat, torch.full_like(flat, -1.0))


def test_runtime_refusal_of_the_first_launch_under_a_grad_scaler_keeps_the_counters(device):
    """The first launch of a step is validated by its own qopt_step; under a GradScaler its host
    step counters are moved to the device first. A refused launch leaves them as they were (the
    same int64 tensors), and changes nothing else."""
    (a,) = params_on(device, (40,), seed=50)
    later = params_on(device, (24,), seed=51)
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": later}], lr=0.1)
    a.grad = grad_like(a, 52)
    opt.step()
    a.grad = a.detach()   # the first launch of the step is refused
    later[0].grad = grad_like(later[0], 53)
    opt.grad_scale = torch.ones((), device=device)
    opt.found_inf = torch.zeros((), device=device)
    counter = opt.state[a]["step"]
    before = every_bit(opt, [a])
    try:
        with pytest.raises(qopt.QoptError, match=r"param_groups\[0\]\[0\] \[40\]"):
            opt.step()
    finally:
        del opt.grad_scale, opt.found_inf
    assert opt.state[a]["step"] is counter and counter.dtype == torch.int64
    assert same_bits(every_bit(opt, [a]), before)


def test_kernel_the_backend_cannot_run_in_a_later_group_steps_no_group(tmp_path, monkeypatch):
    """A later group whose kernel the host backend cannot run (its manifest has no "host" field:
    qopt_kernel_create refuses it) is refused before the earlier groups are launched."""
    from qopt import _runtime as R
    from conftest import backend_available, skip_reason
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))
    src = R.find_manifest("flash_adamw", qopt._capi.BACKEND_HOST).parent
    for name in ("flash_adamw", "flash_adamw.f16"):
        doc = json.loads((src / f"{name}.manifest.json").read_text())
        if name == "flash_adamw":
            (tmp_path / doc["host"]["library"]).symlink_to(src / doc["host"]["library"])
        else:
            del doc["host"]
        (tmp_path / f"{name}.manifest.json").write_text(json.dumps(doc))
    monkeypatch.setenv("QOPT_KERNEL_DIR", str(tmp_path))
    monkeypatch.setattr(R, "_specs", {})
    (a,) = params_on("cpu", (40,), seed=60)
    h = torch.nn.Parameter(torch.randn(24).to(torch.float16))
    opt = qopt.FlashAdamW([{"params": [a]}, {"params": [h]}], lr=0.1)
    a.grad, h.grad = grad_like(a, 61), grad_like(h, 62)
    before = every_bit(opt, [a, h])
    with pytest.raises(qopt.QoptError, match="QOPT_ERROR_UNSUPPORTED.*has no host implementation"):
        opt.step()
    assert int(opt.state[a]["step"]) == 0 and torch.equal(bits(a), before[0][3])

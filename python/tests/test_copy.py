"""copy.deepcopy and pickle of an optimizer (torch.save(opt), as torch's test_optim and the peers'
suites use them): the copy keeps every option the optimizer was given (max_grad_norm,
skip_nonfinite, state_dtype, per-parameter overrides) and steps bit for bit as the original does
from there on; the original is untouched by the copy's steps. torch's state_dict hooks (torch >= 2.1)
run around qopt's own state_dict and load_state_dict.
"""

import copy
import io
from collections import OrderedDict

import pytest
import torch

import qopt
from test_step import bits

EVERY = [
    (qopt.FlashAdamW, {}), (qopt.FlashAdam, {}), (qopt.FlashAdamWClip, {"max_grad_norm": 0.05}),
    (qopt.AdamW4bit, {}), (qopt.FlashSGD, {"momentum": 0.9}), (qopt.FlashSGDW, {"momentum": 0.9}),
    (qopt.FlashLion, {}), (qopt.AdamW8bit, {}), (qopt.RMSprop8bit, {}), (qopt.RMSprop32bit, {}),
    (qopt.Adagrad8bit, {}), (qopt.Adagrad32bit, {}), (qopt.Lion8bit, {}), (qopt.Lion32bit, {}),
    (qopt.AdEMAMix8bit, {}), (qopt.AdEMAMix32bit, {}), (qopt.AdamAtan2, {}),
    (qopt.LAMB8bit, {}), (qopt.LAMB32bit, {}), (qopt.LAMB, {}), (qopt.LARS8bit, {"momentum": 0.9}),
    (qopt.LARS32bit, {"momentum": 0.9}), (qopt.LARS, {"momentum": 0.9}), (qopt.StableAdamW, {}),
]
IDS = [c.__name__ for c, _ in EVERY]


def make_params(device, n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(64, 40), (4097,), (7,)][:n]
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(torch.bfloat16).to(device))
            for s in shapes]


def set_grads(params, seed, scale=1e-2, bad=None):
    g = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = (scale * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device)
    if bad is not None:
        params[0].grad.view(-1)[5] = bad


def snapshot(opt):
    out = []
    for g in opt.param_groups:
        for p in g["params"]:
            st = {k: bits(v).clone() if isinstance(v, torch.Tensor) else v
                  for k, v in opt.state[p].items()}
            out.append((bits(p).clone(), st))
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for (pa, sa), (pb, sb) in zip(a, b):
        assert torch.equal(pa, pb)
        assert sa.keys() == sb.keys()
        for k in sa:
            if isinstance(sa[k], torch.Tensor):
                assert torch.equal(sa[k], sb[k]), k
            else:
                assert sa[k] == sb[k], k


def params_of(opt):
    return [p for g in opt.param_groups for p in g["params"]]


def step_in_lockstep(opt, other, steps):
    """Both optimizers step with the same gradients (their parameters are distinct tensors);
    parameters and state stay bit for bit equal."""
    mine, theirs = params_of(opt), params_of(other)
    for step in steps:
        set_grads(mine, seed=step)
        set_grads(theirs, seed=step)
        opt.step()
        other.step()
        assert_same(snapshot(opt), snapshot(other))


def pickled(opt):
    buf = io.BytesIO()
    torch.save(opt, buf)
    buf.seek(0)
    # a whole optimizer is not weights-only data (torch >= 2.6 loads weights only by default)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("cls,kw", EVERY, ids=IDS)
def test_a_copy_steps_as_the_original(device, cls, kw, how):
    params = make_params(device)
    opt = cls(params, lr=1e-2, skip_nonfinite=True, **kw)
    set_grads(params, seed=1)
    opt.step()
    other = copy.deepcopy(opt) if how == "deepcopy" else pickled(opt)
    assert other.skip_nonfinite is True
    for k, v in kw.items():
        assert (getattr(other, k) if hasattr(other, k) else other.defaults[k]) == v
    theirs = params_of(other)
    assert all(q is not p for p, q in zip(params, theirs))
    step_in_lockstep(opt, other, range(2, 4))
    # skip_nonfinite travels with the copy: a NaN gradient moves neither
    before = snapshot(other)
    set_grads(params, seed=9, bad=float("nan"))
    set_grads(theirs, seed=9, bad=float("nan"))
    opt.step()
    other.step()
    assert_same(snapshot(other), before)
    assert float(other.nonfinite_steps) == float(opt.nonfinite_steps) == 1


def test_the_copys_steps_leave_the_original_alone(device):
    params = make_params(device)
    opt = qopt.AdamW8bit(params, lr=1e-2)
    set_grads(params, seed=1)
    opt.step()
    before = snapshot(opt)
    other = copy.deepcopy(opt)
    theirs = params_of(other)
    set_grads(theirs, seed=2)
    other.step()
    assert_same(snapshot(opt), before)


def test_max_grad_norm_travels_with_the_copy(device):
    # One tensor's gradient far above the norm: the copy clips as the original does, and unlike
    # an optimizer without the clip.
    params = make_params(device)
    opt = qopt.FlashAdamW(params, lr=1e-2, max_grad_norm=1e-3)
    set_grads(params, seed=1)
    opt.step()
    other = copy.deepcopy(opt)
    plain = copy.deepcopy(opt)
    plain.max_grad_norm = None
    copies = [params_of(o) for o in (other, plain)]
    for ps in [params] + copies:
        set_grads(ps, seed=2, scale=10.0)
    for o in (opt, other, plain):
        o.step()
    assert other.max_grad_norm == 1e-3
    assert_same(snapshot(opt), snapshot(other))
    assert not torch.equal(bits(copies[0][0]), bits(copies[1][0]))


@pytest.mark.parametrize("cls", [qopt.AdamW8bit, qopt.Lion8bit, qopt.FlashAdamW])
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_per_parameter_overrides_travel_with_the_copy(device, cls, how):
    # The override puts the first tensor's state in float32 (bitsandbytes' optim_bits=32, or
    # FlashOptim's quantize=False); the copy's tensors are new objects, and it keeps the layout.
    params = make_params(device)
    kw = {"min_8bit_size": 0} if cls is not qopt.FlashAdamW else {}
    opt = cls(params, lr=1e-2, **kw)
    if cls is qopt.FlashAdamW:
        opt.override_config(params[0], "quantize", False)
    else:
        opt.override_config(params[0], "optim_bits", 32)
    set_grads(params, seed=1)
    opt.step()
    other = copy.deepcopy(opt) if how == "deepcopy" else pickled(opt)
    assert not other.uses_8bit_state(params_of(other)[0])
    step_in_lockstep(opt, other, range(2, 4))


def test_global_overrides_become_the_copys_own(device):
    params = make_params(device)
    manager = qopt.GlobalOptimManager.get_instance()
    manager.override_config(params[1], "optim_bits", 32)
    try:
        opt = qopt.AdamW8bit(params, lr=1e-2, min_8bit_size=0)
        set_grads(params, seed=1)
        opt.step()
        other = copy.deepcopy(opt)
    finally:
        qopt.GlobalOptimManager.get_instance().initialize()
    theirs = params_of(other)
    assert not other.uses_8bit_state(theirs[1]) and other.uses_8bit_state(theirs[0])
    set_grads(params, seed=2)
    set_grads(theirs, seed=2)
    opt.step()
    other.step()
    assert sorted(other.state[theirs[1]]) == sorted(opt.state[params[1]])


def test_a_process_group_is_shared_by_a_copy_and_refused_by_pickle():
    group = object()     # stands for a torch.distributed ProcessGroup (not picklable)
    opt = qopt.FlashAdamWClip(make_params("cpu", n=1), lr=1e-2, process_group=group)
    assert copy.deepcopy(opt).process_group is group
    with pytest.raises(TypeError, match="process_group cannot be pickled"):
        torch.save(opt, io.BytesIO())


def _install(opt, name, hook):
    """torch >= 2.1's register_* hooks where this torch has them, else the same dictionaries
    they fill (torch 1.13 has neither: qopt runs whatever the dictionaries hold)."""
    register = getattr(opt, "register_" + name, None)
    if register is not None:
        return register(hook)
    table = opt.__dict__.setdefault("_optimizer_" + name + "s", OrderedDict())
    table[len(table)] = hook


def test_state_dict_hooks_run_around_qopts_own(device):
    params = make_params(device)
    opt = qopt.AdamW8bit(params, lr=1e-2)
    set_grads(params, seed=1)
    opt.step()
    calls = []
    _install(opt, "state_dict_pre_hook", lambda o: calls.append(("pre", o is opt)))
    _install(opt, "state_dict_post_hook",
             lambda o, sd: (calls.append(("post", "qopt" in sd)), {**sd, "extra": 1})[1])
    sd = opt.state_dict()
    assert calls == [("pre", True), ("post", True)] and sd["extra"] == 1

    fresh = qopt.AdamW8bit(make_params(device), lr=1e-2)
    seen = []

    def pre(o, given):
        seen.append(("pre", "extra" in given))
        given.pop("extra")        # a shallow copy: the caller's dict keeps its key
    _install(fresh, "load_state_dict_pre_hook", pre)
    _install(fresh, "load_state_dict_post_hook", lambda o: seen.append(("post", len(o.state))))
    fresh.load_state_dict(sd)
    assert seen == [("pre", True), ("post", 3)] and "extra" in sd

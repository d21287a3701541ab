"""Per-parameter state policy (issue 25, item 2): min_8bit_size, quantize=False, overrides by
parameter, module type and name, bitsandbytes' GlobalOptimManager; one launch per kernel variant.

Float32-state steps are checked against torch.optim (AdamW, SGD) and a float64 Lion written here."""

from __future__ import annotations

import copy

import pytest
import torch

import qopt

from conftest import backend_available, skip_reason


def _params(device, dtype, *shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((0.5 * torch.randn(s, generator=g)).to(dtype).to(device))
            for s in shapes]


def _grads(params, seed):
    g = torch.Generator().manual_seed(seed)
    return [(1e-2 * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device) for p in params]


@pytest.fixture(autouse=True)
def _fresh_global_manager():
    qopt.GlobalOptimManager.get_instance().initialize()
    yield
    qopt.GlobalOptimManager.get_instance().initialize()


# ------------------------------------------------------------------ no backend needed

def test_adamw8bit_min_8bit_size_default_is_bitsandbytes():
    small, big = _params("cpu", torch.bfloat16, (4095,), (64, 64))
    opt = qopt.AdamW8bit([small, big])
    assert opt.min_8bit_size == 4096
    opt.init_state()
    assert {k: v.dtype for k, v in opt.state[small].items()} == {
        "state1": torch.float32, "state2": torch.float32, "step": torch.int64}
    assert opt.state[small]["state1"].shape == small.shape
    assert opt.state[big]["state1"].dtype == torch.uint8 and "absmax1" in opt.state[big]
    assert not opt.uses_8bit_state(small) and opt.uses_8bit_state(big)
    opt = qopt.AdamW8bit([small, big], min_8bit_size=0)
    assert opt.uses_8bit_state(small)
    assert not qopt.AdamW8bit([small, big], optim_bits=32).uses_8bit_state(big)


@pytest.mark.parametrize("cls,keys", [
    (qopt.FlashAdamW, {"error_bits", "exp_avg", "exp_avg_sq"}),
    (qopt.FlashAdam, {"error_bits", "exp_avg", "exp_avg_sq"}),
    (qopt.FlashSGD, {"error_bits", "momentum_buffer"}),
    (qopt.FlashSGDW, {"error_bits", "momentum_buffer"}),
    (qopt.FlashLion, {"error_bits", "exp_avg"})])
def test_quantize_false_keeps_flashoptims_float32_keys(cls, keys):
    (p,) = _params("cpu", torch.bfloat16, (7, 5))
    opt = cls([p], quantize=False)
    opt.init_state()
    st = opt.state[p]
    assert set(st) == keys | {"step"}
    for k in keys - {"error_bits"}:
        assert st[k].dtype == torch.float32 and st[k].shape == p.shape
    assert opt.state_dict()["param_groups"][0]["_qopt_kernel"] == opt.kernel_name


@pytest.mark.parametrize("mwb", [24, 32, None])
def test_flash_adamw_quantize_false_for_every_master(mwb):
    (p,) = _params("cpu", torch.bfloat16, (40,))
    opt = qopt.FlashAdamW([p], quantize=False, master_weight_bits=mwb)
    opt.init_state()
    assert opt.state[p]["exp_avg"].dtype == torch.float32
    assert ("error_bits" in opt.state[p]) == (mwb is not None)
    if mwb == 32:
        assert opt.state[p]["error_bits"].dtype == torch.int16


def test_flash_optimizers_quantize_everything_by_default():
    (p,) = _params("cpu", torch.bfloat16, (3,))
    opt = qopt.FlashAdamW([p])
    assert opt.min_8bit_size == 0 and opt.uses_8bit_state(p)


@pytest.mark.parametrize("bad,match", [
    (dict(min_8bit_size=-1), "min_8bit_size=-1"), (dict(min_8bit_size=1.5), "min_8bit_size=1.5"),
    (dict(quantize="no"), "quantize='no'")])
def test_policy_options_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        qopt.FlashAdamW(_params("cpu", torch.bfloat16, (3,)), **bad)


def test_adamw8bit_optim_bits_refused():
    with pytest.raises(ValueError, match="optim_bits=16; 8 or 32"):
        qopt.AdamW8bit(_params("cpu", torch.bfloat16, (3,)), optim_bits=16)


def test_overrides_by_parameter_module_type_and_name():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.Linear(64, 128),
                                torch.nn.LayerNorm(128)).to(torch.bfloat16)
    opt = qopt.AdamW8bit(model.parameters(), min_8bit_size=0)
    emb, lin_w, lin_b, ln_w, ln_b = model.parameters()
    assert all(opt.uses_8bit_state(p) for p in model.parameters())
    assert opt.override_module_type(model, torch.nn.Embedding, {"optim_bits": 32}) == 1
    assert not opt.uses_8bit_state(emb)
    assert opt.override_by_name(model, "*.bias", {"quantize": False}) == 2
    assert not opt.uses_8bit_state(lin_b) and not opt.uses_8bit_state(ln_b)
    opt.override_config(ln_w, "optim_bits", 32)
    assert not opt.uses_8bit_state(ln_w)
    assert opt.uses_8bit_state(lin_w)
    opt.register_module_override(model[1], "weight", {"optim_bits": 32})
    assert not opt.uses_8bit_state(lin_w)
    opt.override_config([lin_w], key_value_dict={"optim_bits": 8})
    assert opt.uses_8bit_state(lin_w)


def test_global_manager_and_instance_precedence():
    a, b = _params("cpu", torch.bfloat16, (64, 64), (64, 64))
    mng = qopt.GlobalOptimManager.get_instance()
    assert mng is qopt.GlobalOptimManager.get_instance()
    mng.register_parameters([a, b])
    mng.override_config(a, "optim_bits", 32)
    mng.override_config(b, "optim_bits", 32)
    opt = qopt.AdamW8bit([a, b])
    opt.override_config(b, "optim_bits", 8)       # the optimizer's own override wins
    assert not opt.uses_8bit_state(a) and opt.uses_8bit_state(b)


@pytest.mark.parametrize("call,match", [
    (lambda o, m: o.override_config(m[0].weight, "lr", 1e-3), "override key 'lr' is not supported"),
    (lambda o, m: o.override_config(m[0].weight, "optim_bits", 16), "optim_bits=16; 8 or 32"),
    (lambda o, m: o.override_config(m[0].weight, "quantize", 1), "quantize=1; True or False"),
    (lambda o, m: o.register_module_override(m[0], "nope", {"optim_bits": 32}),
     "Linear has no parameter 'nope'"),
    (lambda o, m: qopt.GlobalOptimManager.get_instance().override_config(
        m[0].weight, "betas", (0.9, 0.99)), "GlobalOptimManager.override_config: override key")])
def test_override_errors(call, match):
    m = torch.nn.Sequential(torch.nn.Linear(4, 4)).to(torch.bfloat16)
    opt = qopt.AdamW8bit(m.parameters())
    with pytest.raises(ValueError, match=match):
        call(opt, m)


def test_policy_group_options_refused():
    p, q = _params("cpu", torch.bfloat16, (3,), (3,))
    opt = qopt.FlashAdamW([p])
    with pytest.raises(ValueError, match="quantize=False in a param group is not supported"):
        opt.add_param_group({"params": [q], "quantize": False})
    with pytest.raises(ValueError, match="min_8bit_size=5 in a param group is not supported"):
        qopt.AdamW8bit([p]).add_param_group({"params": [q], "min_8bit_size": 5})


# ------------------------------------------------------------------ stepping

@pytest.fixture
def device_cpu():
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))
    return torch.device("cpu")


def test_one_launch_per_kernel_variant_not_per_parameter(device_cpu):
    """Small and overridden parameters share the float32-state launch, the rest the 8-bit one;
    each parameter steps exactly as in an optimizer of its policy alone."""
    shapes = [(64, 64), (10,), (128, 64), (5, 5), (3,)]
    ps = _params("cpu", torch.bfloat16, *shapes)
    opt = qopt.AdamW8bit(ps, lr=1e-2)
    opt.override_config(ps[2], "optim_bits", 32)
    alone8 = [torch.nn.Parameter(ps[0].detach().clone())]
    alone32 = [torch.nn.Parameter(ps[i].detach().clone()) for i in (1, 2, 3, 4)]
    o8, o32 = qopt.AdamW8bit(alone8, lr=1e-2), qopt.AdamW8bit(alone32, lr=1e-2, optim_bits=32)
    for s in range(3):
        gs = _grads(ps, seed=s)
        for p, g in zip(ps, gs):
            p.grad = g.clone()
        alone8[0].grad = gs[0].clone()
        for q, i in zip(alone32, (1, 2, 3, 4)):
            q.grad = gs[i].clone()
        opt.step(), o8.step(), o32.step()
    launches = opt._cache[0].launches
    assert sorted(ln.n for ln in launches) == [1, 4]
    for p, q in zip(ps, [alone8[0]] + alone32):
        assert torch.equal(p.detach().view(torch.int16), q.detach().view(torch.int16))


def test_adamw8bit_32bit_state_matches_torch_adamw(device_cpu):
    """A parameter under min_8bit_size steps as bitsandbytes' 32-bit AdamW: torch.optim.AdamW on
    float32 parameters (within float32 rounding of the different operation order)."""
    (p,) = _params("cpu", torch.float32, (37, 3))
    q = torch.nn.Parameter(p.detach().clone())
    opt = qopt.AdamW8bit([p], lr=1e-2, weight_decay=0.1)
    ref = torch.optim.AdamW([q], lr=1e-2, weight_decay=0.1, foreach=False)
    for s in range(10):
        (g,) = _grads([p], seed=s)
        p.grad, q.grad = g.clone(), g.clone()
        opt.step(), ref.step()
    st, rs = opt.state[p], ref.state[q]
    assert torch.allclose(st["state1"], rs["exp_avg"], rtol=1e-5, atol=1e-9)
    assert torch.allclose(st["state2"], rs["exp_avg_sq"], rtol=1e-5, atol=1e-12)
    assert torch.allclose(p, q, rtol=1e-6, atol=1e-7)


def test_flash_sgd_quantize_false_matches_torch_sgd(device_cpu):
    (p,) = _params("cpu", torch.float32, (50,))
    q = torch.nn.Parameter(p.detach().clone())
    opt = qopt.FlashSGD([p], lr=0.1, momentum=0.9, weight_decay=1e-2, quantize=False)
    ref = torch.optim.SGD([q], lr=0.1, momentum=0.9, weight_decay=1e-2, foreach=False)
    for s in range(10):
        (g,) = _grads([p], seed=s)
        p.grad, q.grad = g.clone(), g.clone()
        opt.step(), ref.step()
    assert torch.allclose(opt.state[p]["momentum_buffer"], ref.state[q]["momentum_buffer"],
                          rtol=1e-5, atol=1e-8)
    assert torch.allclose(p, q, rtol=1e-6, atol=1e-7)


def test_flash_lion_quantize_false_matches_float64(device_cpu):
    (p,) = _params("cpu", torch.float32, (64,))
    x = p.detach().double().clone()
    m = torch.zeros_like(x)
    opt = qopt.FlashLion([p], lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1, quantize=False)
    for s in range(5):
        (g,) = _grads([p], seed=s)
        p.grad = g.clone()
        opt.step()
        gd = g.double()
        u = torch.sign(0.9 * m + 0.1 * gd)
        x = x * (1 - 1e-2 * 0.1) - 1e-2 * u
        m = 0.99 * m + 0.01 * gd
    assert torch.allclose(p.double(), x, rtol=0, atol=1e-6)
    assert torch.allclose(opt.state[p]["exp_avg"].double(), m, rtol=1e-5, atol=1e-9)


def test_flash_adamw_quantize_false_tracks_torch_adamw(device_cpu):
    (p,) = _params("cpu", torch.float32, (33, 7))
    q = torch.nn.Parameter(p.detach().clone())
    opt = qopt.FlashAdamW([p], lr=1e-2, quantize=False)
    ref = torch.optim.AdamW([q], lr=1e-2, foreach=False)
    for s in range(10):
        (g,) = _grads([p], seed=s)
        p.grad, q.grad = g.clone(), g.clone()
        opt.step(), ref.step()
    assert torch.allclose(opt.state[p]["exp_avg"], ref.state[q]["exp_avg"], rtol=1e-5, atol=1e-9)
    assert torch.allclose(p, q, rtol=1e-6, atol=1e-7)


def test_mixed_policy_checkpoint_resumes_bitwise(device_cpu):
    ps = _params("cpu", torch.bfloat16, (64, 64), (10,), (33,))
    opt = qopt.FlashAdamW(ps, lr=1e-2, min_8bit_size=100)
    for s in range(3):
        for p, g in zip(ps, _grads(ps, seed=s)):
            p.grad = g
        opt.step()
    assert "exp_avg::quantized" in opt.state[ps[0]] and "exp_avg" in opt.state[ps[1]]
    qs = [torch.nn.Parameter(p.detach().clone()) for p in ps]
    other = qopt.FlashAdamW(qs, lr=1e-2, min_8bit_size=100)
    other.load_state_dict(copy.deepcopy(opt.state_dict()))
    for s in range(3, 6):
        gs = _grads(ps, seed=s)
        for p, q, g in zip(ps, qs, gs):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step(), other.step()
    for p, q in zip(ps, qs):
        assert torch.equal(p.detach().view(torch.int16), q.detach().view(torch.int16))
        for k, v in opt.state[p].items():
            assert torch.equal(v, other.state[q][k]), k
    # float32 states load into a quantizing policy (quantized on load); quantized ones into a
    # float32 policy are refused, naming the keys
    third = qopt.FlashAdamW([torch.nn.Parameter(p.detach().clone()) for p in ps], lr=1e-2)
    third.load_state_dict(opt.state_dict())
    assert "exp_avg::quantized" in third.state[third.param_groups[0]["params"][1]]
    fourth = qopt.FlashAdamW([torch.nn.Parameter(p.detach().clone()) for p in ps], lr=1e-2,
                             quantize=False)
    with pytest.raises(ValueError, match=r"unexpected state keys \['exp_avg::quantized'"):
        fourth.load_state_dict(opt.state_dict())


def test_override_after_the_state_exists_is_refused_at_the_step(device_cpu):
    ps = _params("cpu", torch.bfloat16, (64, 64))
    opt = qopt.AdamW8bit(ps)
    ps[0].grad = _grads(ps, 0)[0]
    opt.step()
    before = ps[0].detach().clone()
    opt.override_config(ps[0], "optim_bits", 32)
    with pytest.raises(ValueError, match=r"unexpected state keys \['absmax1'"):
        opt.step()
    assert torch.equal(before, ps[0].detach())
    opt.state.pop(ps[0])                     # dropping the state starts it afresh, in 32 bits
    opt.step()
    assert opt.state[ps[0]]["state1"].dtype == torch.float32


# ------------------------------------------------------------------ master widths

FLASH = [(qopt.FlashAdamW, {}), (qopt.FlashAdam, {}), (qopt.FlashSGD, dict(momentum=0.9)),
         (qopt.FlashSGDW, dict(momentum=0.9)), (qopt.FlashLion, {})]


@pytest.mark.parametrize("cls,kw", FLASH, ids=[c.__name__ for c, _ in FLASH])
@pytest.mark.parametrize("mwb", [24, 32, None])
@pytest.mark.parametrize("quantize", [True, False])
def test_every_flash_optimizer_has_every_master_width(cls, kw, mwb, quantize):
    (p,) = _params("cpu", torch.bfloat16, (40,))
    opt = cls([p], master_weight_bits=mwb, quantize=quantize, **kw)
    opt.init_state()
    eb = opt.state[p].get("error_bits")
    assert (eb is None) == (mwb is None)
    if eb is not None:
        assert eb.dtype == (torch.int8 if mwb == 24 else torch.int16)
    assert any(k.endswith("::quantized") for k in opt.state[p]) == quantize


def _lion64(x, m, g, lr, b1, b2, wd):
    u = torch.sign(b1 * m + (1 - b1) * g)
    return x * (1 - lr * wd) - lr * u, b2 * m + (1 - b2) * g


@pytest.mark.parametrize("cls", [qopt.FlashLion, qopt.FlashSGD])
def test_32_bit_and_no_master_track_float64(device_cpu, cls):
    """float32 states: with a 32-bit master (int16 error bits) the reconstructed master follows
    the float64 update within float32 rounding; without a master the bf16 parameter within a few
    bf16 roundings."""
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(256, generator=g) * 0.5
    grads = [torch.randn(256, generator=g) * 0.1 for _ in range(5)]
    for mwb, tol in ((32, 2e-6), (None, 5 * 2 ** -8)):   # None: up to 5 bf16 roundings
        p = torch.nn.Parameter(x0.to(torch.bfloat16))
        if cls is qopt.FlashLion:
            opt = cls([p], lr=1e-2, weight_decay=0.1, master_weight_bits=mwb, quantize=False)
        else:
            opt = cls([p], lr=0.1, momentum=0.9, master_weight_bits=mwb, quantize=False)
        x = p.detach().double().clone()
        m = torch.zeros_like(x)
        for i, gr in enumerate(grads):
            gb = gr.to(torch.bfloat16)
            p.grad = gb.clone()
            opt.step()
            gd = gb.double()
            if cls is qopt.FlashLion:
                x, m = _lion64(x, m, gd, 1e-2, 0.9, 0.99, 0.1)
            else:
                m = gd if i == 0 else 0.9 * m + gd
                x = x - 0.1 * m
        got = qopt.master_weights(opt)[p].double()
        assert float(((got - x).abs() / x.abs().clamp_min(0.05)).max()) <= tol, mwb

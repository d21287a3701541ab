"""FlashOptim's public API (issue 25, item 5): the names of flashoptim 0.1.3's ``__all__`` that qopt
has, FlashOptimizer, check_numerics / NumericsError, compute_ecc_bits / reconstruct_fp32_param
against the runtime's C implementation, cast_model, get/set_fp32_model_state_dict, fused=False."""

from __future__ import annotations

import ctypes
import math

import pytest
import torch

import qopt
from qopt import _capi as C

from conftest import backend_available, skip_reason

FLASHOPTIM_ALL = ["FlashAdam", "FlashAdamW", "FlashLion", "FlashOptimizer", "FlashSGD", "FlashSGDW",
                  "NumericsError", "cast_model", "compute_ecc_bits", "reconstruct_fp32_param",
                  "enable_gradient_release", "GradientReleaseHandle"]


def test_flashoptim_names_are_importable_from_qopt():
    for name in FLASHOPTIM_ALL:
        assert name in qopt.__all__ and hasattr(qopt, name), name
    for cls in (qopt.FlashAdam, qopt.FlashAdamW, qopt.FlashLion, qopt.FlashSGD, qopt.FlashSGDW):
        assert issubclass(cls, qopt.FlashOptimizer) and issubclass(cls, torch.optim.Optimizer)
    assert not issubclass(qopt.AdamW8bit, qopt.FlashOptimizer)
    assert issubclass(qopt.NumericsError, RuntimeError)


# --------------------------------------------------------------- error bits vs the runtime

def _c_init(x32: torch.Tensor, pdtype, edtype):
    n = x32.numel()
    x16 = torch.empty(n, dtype=pdtype)
    rho = torch.empty(n, dtype=edtype)
    pd = C.DTYPE_BF16 if pdtype == torch.bfloat16 else C.DTYPE_F16
    ed = C.DTYPE_INT8 if edtype == torch.int8 else C.DTYPE_INT16
    x = x32.contiguous()
    C.call("qopt_error_bits_init", pd, ed, ctypes.c_void_p(x.data_ptr()), n,
           ctypes.c_void_p(x16.data_ptr()), ctypes.c_void_p(rho.data_ptr()))
    return x16, rho


def _c_decode(x16: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """float32 masters of bf16 values and their error bits, by the runtime's decoder."""
    out = torch.empty(x16.numel(), dtype=torch.float32)
    x, r = x16.contiguous(), rho.contiguous()
    ed = C.DTYPE_INT8 if rho.dtype == torch.int8 else C.DTYPE_INT16
    C.call("qopt_error_bits_decode", C.DTYPE_BF16, ed, ctypes.c_void_p(x.data_ptr()),
           ctypes.c_void_p(r.data_ptr()), x16.numel(), ctypes.c_void_p(out.data_ptr()))
    return out


def _floats(n, seed):
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(-2 ** 31, 2 ** 31, (n,), generator=g, dtype=torch.int64).to(torch.int32)
    x = bits.view(torch.float32)
    normal = torch.randn(n, generator=g) * 10.0 ** torch.randint(-6, 6, (n,), generator=g).float()
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, 65504.0, 1e-8, 3.0e38, float("inf"),
                            float("-inf"), float("nan"), 1.00390625, 2.0 ** -130])
    return torch.cat([x, normal, special])


@pytest.mark.parametrize("pdtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("edtype", [torch.int8, torch.int16])
def test_compute_ecc_bits_equals_the_runtime_encoder(pdtype, edtype):
    x32 = _floats(1 << 15, seed=1)
    x16, want = _c_init(x32, pdtype, edtype)
    nbytes = 2 + (1 if edtype == torch.int8 else 2)
    got = qopt.compute_ecc_bits(x32, x16, master_bytewidth=nbytes)
    assert got.dtype == edtype
    mism = (got != want).nonzero().flatten()
    assert mism.numel() == 0, (x32[mism[:5]], got[mism[:5]], want[mism[:5]])
    # and the decoder gives the runtime's decode of the same bits
    back = qopt.reconstruct_fp32_param(x16, got)
    out = torch.empty(x16.numel(), dtype=torch.float32)
    C.call("qopt_error_bits_decode", C.DTYPE_BF16 if pdtype == torch.bfloat16 else C.DTYPE_F16,
           C.DTYPE_INT8 if edtype == torch.int8 else C.DTYPE_INT16,
           ctypes.c_void_p(x16.data_ptr()), ctypes.c_void_p(got.data_ptr()), x16.numel(),
           ctypes.c_void_p(out.data_ptr()))
    assert torch.equal(back.view(torch.int32)[~torch.isnan(back)],
                       out.view(torch.int32)[~torch.isnan(out)])


@pytest.mark.parametrize("call,match", [
    (lambda: qopt.reconstruct_fp32_param(torch.zeros(3), torch.zeros(3, dtype=torch.int8)),
     "float32 already"),
    (lambda: qopt.reconstruct_fp32_param(torch.zeros(3, dtype=torch.bfloat16), torch.zeros(3)),
     "error_bits dtype torch.float32"),
    (lambda: qopt.compute_ecc_bits(torch.zeros(3, dtype=torch.float64),
                                   torch.zeros(3, dtype=torch.bfloat16)), "expected float32"),
    (lambda: qopt.compute_ecc_bits(torch.zeros(3), torch.zeros(3)), "bf16 or fp16"),
    (lambda: qopt.compute_ecc_bits(torch.zeros(3), torch.zeros(3, dtype=torch.bfloat16),
                                   master_bytewidth=5), "master_bytewidth=5")])
def test_error_bit_helpers_refuse_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------- cast_model

def test_cast_model_as_flashoptim():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 8)
    model = torch.nn.Sequential(emb, torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Linear(8, 4), torch.nn.Linear(4, 10, bias=False))
    model[4].weight = torch.nn.Parameter(torch.randn(10, 4))
    head = model[3]
    qopt.cast_model(model, full_precision_recast_layers=[head], full_precision_layers=["4"])
    assert model[1].weight.dtype == torch.bfloat16 and emb.weight.dtype == torch.bfloat16
    assert model[2].weight.dtype == torch.float32 and model[2].running_mean.dtype == torch.float32
    assert model[2].num_batches_tracked.dtype == torch.int64
    assert head.weight.dtype == torch.float32 and model[4].weight.dtype == torch.float32
    x = torch.randn(5, 8).to(torch.bfloat16)
    assert head(x).dtype == torch.bfloat16          # input cast to fp32, output back
    assert model[4](x[:, :4]).dtype == torch.float32   # input cast, fp32 output kept
    # FlashOptim's marker on the modules whose inputs are cast (its test_cast_model reads it)
    assert head._has_fp32_input_hook is True and model[4]._has_fp32_input_hook is True
    assert not any(getattr(model[i], "_has_fp32_input_hook", False) for i in (0, 1, 2))
    # tied parameters stay tied
    lin = torch.nn.Linear(4, 4)
    tied = torch.nn.Sequential(lin, torch.nn.Linear(4, 4))
    tied[1].weight = lin.weight
    qopt.cast_model(tied)
    assert tied[1].weight is lin.weight and lin.weight.dtype == torch.bfloat16
    model2 = torch.nn.Sequential(torch.nn.BatchNorm1d(3))
    qopt.cast_model(model2, selective=False)
    assert model2[0].weight.dtype == torch.bfloat16


def test_cast_model_keeps_each_parameters_shape_and_values():
    """Zero-size parameters (all at data_ptr 0) and views that start at one address used to share
    the first one's cast tensor: each keeps its own shape and values; only the same tensor seen
    the same way (a tied parameter, an identical view) shares one."""
    m = torch.nn.Module()
    m.a, m.b = torch.nn.Parameter(torch.randn(0, 5)), torch.nn.Parameter(torch.randn(3, 0))
    qopt.cast_model(m)
    assert m.a.shape == (0, 5) and m.b.shape == (3, 0)
    assert m.a.dtype == m.b.dtype == torch.bfloat16
    base = torch.arange(10, dtype=torch.float32) + 0.25
    m = torch.nn.Module()
    m.a, m.b = torch.nn.Parameter(base[:4]), torch.nn.Parameter(base[:8])
    m.c = torch.nn.Parameter(base.view(2, 5)[:, 0])          # a strided view at the same address
    m.d = torch.nn.Parameter(base[:4])                        # the same view as a: shares its cast
    qopt.cast_model(m)
    assert m.a.shape == (4,) and m.b.shape == (8,) and m.c.shape == (2,)
    assert m.a.tolist() == [0.25, 1.25, 2.25, 3.25]
    assert m.b.tolist() == [0.25, 1.25, 2.25, 3.25, 4.25, 5.25, 6.25, 7.25]
    assert m.c.tolist() == [0.25, 5.25]
    assert m.d.data_ptr() == m.a.data_ptr() and m.d.shape == (4,)


# --------------------------------------------------------------- stepping

@pytest.fixture
def host():
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))


def _model(dtype=torch.bfloat16):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)).to(dtype)


def _train(model, opt, steps=3):
    g = torch.Generator().manual_seed(9)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g).to(next(model.parameters()).dtype)
        opt.zero_grad(set_to_none=True)
        model(x).float().square().mean().backward()
        opt.step()


def test_fused_false_is_accepted_and_steps_alike(host):
    a, b = _model(), _model()
    oa = qopt.FlashAdamW(a.parameters(), lr=1e-2)
    ob = qopt.FlashAdamW(b.parameters(), lr=1e-2, fused=False)
    assert ob.fused is False
    _train(a, oa), _train(b, ob)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.view(torch.int16), q.view(torch.int16))


def _resolution_lr(dtype, master_bits, maxabs, rel):
    """The smallest lr check_numerics accepts, from FlashOptim's formula (written out here)."""
    width = 4 if dtype == torch.float32 else max(2, {None: 0, 24: 3, 32: 4}[master_bits])
    exp_bits = {torch.bfloat16: 8, torch.float16: 5, torch.float32: 8}[dtype]
    needed = math.floor(math.log2(maxabs)) - (width * 8 - 1 - exp_bits + math.log2(0.49))
    return 2.0 ** needed / rel


@pytest.mark.parametrize("cls,kw,rel", [(qopt.FlashAdamW, {}, 0.1),
                                        (qopt.FlashAdamW, dict(master_weight_bits=None), 0.1),
                                        (qopt.FlashAdamW, dict(master_weight_bits=32), 0.1),
                                        (qopt.FlashLion, {}, 1.0),
                                        (qopt.FlashSGD, dict(momentum=0.9), 1.0)])
def test_check_numerics_raises_numerics_error_below_the_resolution(host, cls, kw, rel):
    model = _model()
    with torch.no_grad():
        model[0].weight[0, 0] = 3.0              # maxabs 3: exponent 1
    limit = _resolution_lr(torch.bfloat16, kw.get("master_weight_bits", 24), 3.0, rel)
    opt = cls(model.parameters(), lr=limit * 0.9, check_numerics=True, **kw)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(qopt.NumericsError, match=r"param_groups\[0\]: learning rate .* too small"):
        _train(model, opt, steps=1)
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p, b)                 # nothing stepped
    opt.param_groups[0]["lr"] = limit * 1.1
    _train(model, opt, steps=1)                  # accepted
    # without check_numerics the small lr steps
    cls(model.parameters(), lr=limit * 0.9, **kw).step()


def test_check_numerics_uses_cached_stats_until_recomputed(host):
    model = _model()
    limit = _resolution_lr(torch.bfloat16, 24, float(model[0].weight.abs().max()), 0.1)
    opt = qopt.FlashAdamW(model.parameters(), lr=limit * 1.5, check_numerics=True)
    _train(model, opt, steps=1)
    with torch.no_grad():
        model[0].weight.mul_(64)                 # 6 binades up: the cached maxabs is stale
    _train(model, opt, steps=1)
    opt.recompute_param_stats()
    with pytest.raises(qopt.NumericsError):
        _train(model, opt, steps=1)
    opt.param_groups[0]["lr"] = 0.0              # lr 0 is never refused (as FlashOptim)
    _train(model, opt, steps=1)


def test_fp32_model_state_dict_round_trip(host):
    model = _model()
    opt = qopt.FlashAdamW(model.parameters(), lr=1e-2, master_weight_bits=32)
    _train(model, opt)
    sd = opt.get_fp32_model_state_dict(model)
    masters = qopt.master_weights(opt)
    for name, p in model.named_parameters():
        assert sd[name].dtype == torch.float32 and torch.equal(sd[name], masters[p])
    # perturbed fp32 weights loaded back: the bf16 parameter is their rounding and the int16
    # error bits the runtime's encoding of the rest
    new = {k: v + 1e-3 for k, v in sd.items()}
    opt.set_fp32_model_state_dict(model, new)
    for name, p in model.named_parameters():
        x16, rho = _c_init(new[name].reshape(-1), torch.bfloat16, torch.int16)
        assert torch.equal(p.detach().reshape(-1).view(torch.int16), x16.view(torch.int16))
        assert torch.equal(opt.state[p]["error_bits"].reshape(-1), rho)
    with pytest.raises(ValueError, match="expected torch.float32"):
        opt.set_fp32_model_state_dict(model, {"0.weight": new["0.weight"].double()})


def test_fp32_model_state_dict_refusals_write_nothing(host):
    """set_fp32_model_state_dict checks every entry before it writes any, as
    Module.load_state_dict: a key the model's state_dict lacks, a value of another shape (also a
    broadcastable one) are ValueErrors naming the key, and the parameters and their error bits
    stay as they were. Buffers' keys (a BatchNorm's running stats) are accepted and left alone."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)).to(torch.bfloat16)
    opt = qopt.FlashAdamW(model.parameters(), lr=1e-2)
    x = torch.randn(16, 8).to(torch.bfloat16)
    model(x).float().square().mean().backward()
    opt.step()
    sd = opt.get_fp32_model_state_dict(model)

    def snapshot():
        return ([p.detach().clone() for p in model.parameters()]
                + [opt.state[p]["error_bits"].clone() for p in model.parameters()]
                + [b.detach().clone() for b in model.buffers()])

    before = snapshot()
    cases = {"unknown key": ({**sd, "typo.weight": sd["0.weight"]}, r"\['typo.weight'\]"),
             "wrong shape": ({**sd, "0.weight": sd["0.bias"] + 1}, r"'0.weight' has shape \[8\]"),
             "broadcastable": ({**sd, "0.bias": torch.tensor([3.0])}, r"'0.bias' has shape \[1\]")}
    for name, (bad, match) in cases.items():
        with pytest.raises(ValueError, match=match):
            opt.set_fp32_model_state_dict(model, bad)
        after = snapshot()
        assert all(torch.equal(u, v) for u, v in zip(before, after)), name
    new = {k: v + 1e-3 if k.endswith(("weight", "bias")) else v for k, v in sd.items()}
    opt.set_fp32_model_state_dict(model, new)
    for name, p in model.named_parameters():
        x16, _ = _c_init(new[name].reshape(-1), torch.bfloat16, torch.int8)
        assert torch.equal(p.detach().reshape(-1).view(torch.int16), x16.view(torch.int16)), name
    assert torch.equal(model[1].running_mean, before[-3])


@pytest.mark.parametrize("bits,edtype", [(24, torch.int8), (32, torch.int16)])
def test_fp32_model_state_dict_set_before_the_first_step_keeps_the_masters(host, bits, edtype):
    """set_fp32_model_state_dict before the first step used to write no error bits (the state did
    not exist yet) and the first step started them at 0, losing what the bf16 rounding dropped.
    The state is created first: parameters and error bits are the runtime's encoding of the
    float32 values, and a step with lr 0 keeps the masters (decoded by the runtime) within their
    precision (bf16's 8 significant bits plus the error bits'), far below bf16's rounding."""
    model = _model()
    opt = qopt.FlashAdamW(model.parameters(), lr=0.0, weight_decay=0.0, master_weight_bits=bits)
    g = torch.Generator().manual_seed(3)
    new = {k: torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}
    opt.set_fp32_model_state_dict(model, new)
    for name, p in model.named_parameters():
        x16, rho = _c_init(new[name].reshape(-1), torch.bfloat16, edtype)
        assert torch.equal(p.detach().reshape(-1).view(torch.int16), x16.view(torch.int16))
        assert torch.equal(opt.state[p]["error_bits"].reshape(-1), rho)
        assert int(opt.state[p]["step"]) == 0
    _train(model, opt, steps=1)
    rel = 2.0 ** -14 if bits == 24 else 2.0 ** -22
    for name, p in model.named_parameters():
        master = _c_decode(p.detach().reshape(-1), opt.state[p]["error_bits"].reshape(-1))
        want = new[name].reshape(-1)
        assert bool(((master - want).abs() <= rel * want.abs()).all()), name
        assert int(opt.state[p]["step"]) == 1


# --------------------------------------------------------------- float32 checkpoints

def _deq(codes, scales, signed):
    """numerics.md section 2's inverse, written here: per element, scale of its group of 32."""
    s = scales.float().repeat_interleave(32)[:codes.numel()].reshape(codes.shape)
    if signed:
        z = codes.float() / 127.0
        return (z / (2.0 - z.abs())) * s
    u = (codes.float() / 255.0) * s
    return u * u


def _fp32_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(16, 40), torch.nn.Linear(40, 3))


def test_compress_state_dict_false_gives_float32_states_that_requantize_exactly(host):
    model = _model()
    opt = qopt.FlashAdamW(model.parameters(), lr=1e-2, compress_state_dict=False)
    _train(model, opt)
    sd = opt.state_dict()
    for i, p in enumerate(model.parameters()):
        st, live = sd["state"][i], opt.state[p]
        assert set(st) == {"error_bits", "exp_avg", "exp_avg_sq", "step"}
        assert st["exp_avg"].dtype == torch.float32 and st["exp_avg"].shape == p.shape
        assert torch.equal(st["exp_avg"], _deq(live["exp_avg::quantized"],
                                               live["exp_avg::scales"], True))
        assert torch.equal(st["exp_avg_sq"], _deq(live["exp_avg_sq::quantized"],
                                                  live["exp_avg_sq::scales"], False))
    # loaded (quantized again) into a fresh optimizer: the codes and scales come back bit for bit
    clone = _model()
    clone.load_state_dict(model.state_dict())
    fresh = qopt.FlashAdamW(clone.parameters(), lr=1e-2)
    fresh.load_state_dict(sd)
    for p, q in zip(model.parameters(), clone.parameters()):
        for k, v in opt.state[p].items():
            assert torch.equal(v, fresh.state[q][k]), k


@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_torch_optim_checkpoint_loads_quantized_and_exports_back(host, name):
    ref_model, model = _fp32_model(), _fp32_model()
    if name == "adamw":
        ref = torch.optim.AdamW(ref_model.parameters(), lr=1e-2, foreach=False)
        opt = qopt.FlashAdamW(model.parameters(), lr=1e-2, compress_state_dict=False)
        keys = [("exp_avg", True), ("exp_avg_sq", False)]
    else:
        ref = torch.optim.SGD(ref_model.parameters(), lr=1e-1, momentum=0.9, foreach=False)
        opt = qopt.FlashSGD(model.parameters(), lr=1e-1, momentum=0.9,
                            compress_state_dict=False)
        keys = [("momentum_buffer", True)]
    _train(ref_model, ref)
    model.load_state_dict(ref_model.state_dict())
    tsd = ref.state_dict()
    opt.load_state_dict(tsd)
    for i, p in enumerate(model.parameters()):
        st = opt.state[p]
        assert int(st["step"]) == (3 if name == "adamw" else 1)   # torch's SGD keeps no count
        for k, signed in keys:
            want = tsd["state"][i][k]
            got = _deq(st[k + "::quantized"], st[k + "::scales"], signed)
            s = st[k + "::scales"].float().repeat_interleave(32)[:p.numel()].reshape(p.shape)
            tol = s * (1 / 127 + 2 ** -9) if signed else s * s * (2 / 255 + 2 ** -8)
            assert bool(((got - want).abs() <= tol).all()), k
    # the export loads into torch.optim again, which steps on from there
    back = torch.optim.AdamW(ref_model.parameters(), lr=1e-2) if name == "adamw" else \
        torch.optim.SGD(ref_model.parameters(), lr=1e-1, momentum=0.9)
    export = opt.state_dict()
    back.load_state_dict(export)
    for i, p in enumerate(ref_model.parameters()):
        for k, _ in keys:
            assert torch.equal(back.state[p][k], export["state"][i][k])
    _train(ref_model, back, steps=1)
    _train(model, opt, steps=2)


def test_torch_sgd_checkpoint_without_momentum_loads_and_steps_as_torch(host):
    """torch.optim.SGD with momentum 0 keeps momentum_buffer=None (no buffer yet): its checkpoint
    used to be refused ("missing state keys ['momentum_buffer::quantized', ...]"). It loads as no
    state, and the parameters step on as torch's SGD steps them."""
    ref_model, model = _fp32_model(), _fp32_model()
    ref = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    _train(ref_model, ref, steps=2)
    tsd = ref.state_dict()
    if not tsd["state"]:
        pytest.skip("this torch keeps no SGD state without momentum")
    assert all(st.get("momentum_buffer", 0) is None for st in tsd["state"].values())
    model.load_state_dict(ref_model.state_dict())
    opt = qopt.FlashSGD(model.parameters(), lr=0.5, momentum=0.9)
    opt.load_state_dict(tsd)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0
    assert len(opt.state) == 0           # no momentum state yet, as in torch
    g = torch.Generator().manual_seed(21)
    for _ in range(2):
        x = torch.randn(8, 16, generator=g)
        for m, o in ((ref_model, ref), (model, opt)):
            o.zero_grad(set_to_none=True)
            m(x).square().mean().backward()
            o.step()
    for p, q in zip(ref_model.parameters(), model.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7)
    assert all(int(opt.state[q]["step"]) == 2 for q in model.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("master_weight_bits", [None, 24, 32])
@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_torch_optim_checkpoint_of_16bit_params_loads_with_float32_states(host, name, dtype,
                                                                          master_weight_bits):
    """quantize=False (float32 states) with bf16/fp16 parameters: torch.optim keeps its states in
    the parameter's dtype and has no error bits, and such a checkpoint used to be refused ("'exp_avg'
    is torch.bfloat16 ..., the kernel ... needs torch.float32", "missing state keys ['error_bits']")
    where quantize=True loaded it (FlashOptim's test_vanilla_checkpoint_interop loads both). The
    states are widened exactly, the error bits start at 0, and the next step is torch's update of
    the float32 values, rounded to the parameter's dtype."""
    if name == "adamw" and dtype == torch.float16:
        try:
            torch.zeros(2, dtype=dtype).addcmul_(torch.ones(2, dtype=dtype), torch.ones(2, dtype=dtype))
        except RuntimeError:
            pytest.skip("this torch has no float16 AdamW on the CPU (the reference)")
    ref_model, model = _fp32_model().to(dtype), _fp32_model().to(dtype)
    if name == "adamw":
        ref = torch.optim.AdamW(ref_model.parameters(), lr=1e-2, foreach=False)
        opt = qopt.FlashAdamW(model.parameters(), lr=1e-2, quantize=False,
                              master_weight_bits=master_weight_bits)
        keys = ["exp_avg", "exp_avg_sq"]
    else:
        ref = torch.optim.SGD(ref_model.parameters(), lr=1e-1, momentum=0.9, foreach=False)
        opt = qopt.FlashSGD(model.parameters(), lr=1e-1, momentum=0.9, quantize=False,
                            master_weight_bits=master_weight_bits)
        keys = ["momentum_buffer"]
    g = torch.Generator().manual_seed(4)
    for _ in range(3):      # gradients set directly: this torch may have no fp16 matmul on the CPU
        for p in ref_model.parameters():
            # |g| in [0.5, 2]: torch's fp16 AdamW adds eps = 1e-8 in fp16, where it is 0, so a
            # second moment that underflows (|g| below about 0.005) divides by zero (inf weights)
            r = torch.randn(p.shape, generator=g)
            p.grad = (r.sign() * (0.5 + 1.5 * torch.rand(p.shape, generator=g))).to(dtype)
        ref.step()
    assert all(bool(torch.isfinite(p).all()) for p in ref_model.parameters())
    model.load_state_dict(ref_model.state_dict())
    tsd = ref.state_dict()
    assert tsd["state"][0][keys[0]].dtype == dtype          # torch's states: the parameter's dtype
    opt.load_state_dict(tsd)
    params = list(model.parameters())
    for i, p in enumerate(params):
        st = opt.state[p]
        for k in keys:
            assert st[k].dtype == torch.float32
            assert torch.equal(st[k], tsd["state"][i][k].float()), k
        if master_weight_bits is None:
            assert "error_bits" not in st
        else:
            want = torch.int8 if master_weight_bits == 24 else torch.int16
            assert st["error_bits"].dtype == want and not st["error_bits"].any()
    # one more step from the loaded state, against torch's update of the same float32 values
    g = torch.Generator().manual_seed(5)
    grads = [torch.randn(p.shape, generator=g).to(dtype) for p in params]
    expect = []
    for i, (p, gr) in enumerate(zip(params, grads)):
        st = {k: tsd["state"][i][k].double() for k in keys}
        x, gd = p.detach().double(), gr.double()
        if name == "adamw":
            t = int(tsd["state"][i]["step"]) + 1
            m = 0.9 * st["exp_avg"] + 0.1 * gd
            v = 0.999 * st["exp_avg_sq"] + 0.001 * gd * gd
            x = x * (1 - 1e-2 * 1e-2) - 1e-2 / (1 - 0.9 ** t) * m / (
                (v / (1 - 0.999 ** t)).sqrt() + 1e-8)
        else:
            x = x - 1e-1 * (0.9 * st["momentum_buffer"] + gd)
        expect.append(x)
    for p, gr in zip(params, grads):
        p.grad = gr
    opt.step()
    for p, x in zip(params, expect):
        # within one rounding to the parameter's dtype of the float64 value (and float32's error)
        ulp = torch.finfo(dtype).eps * x.abs().clamp_min(torch.finfo(dtype).tiny)
        bad = (p.double() - x).abs() > ulp + 1e-6
        if bad.any():
            i = tuple(bad.nonzero()[0].tolist())
            pytest.fail(f"{int(bad.sum())} of {p.numel()} elements of {tuple(p.shape)} off; first {i}: "
                        f"got {float(p.double()[i])!r}, want {float(x[i])!r} (ulp {float(ulp[i])!r})")


def test_torch_optim_checkpoint_refusals(host):
    model = _fp32_model()
    ref = torch.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
    _train(model, ref, steps=1)
    opt = qopt.FlashAdamW(_fp32_model().parameters())
    with pytest.raises(ValueError, match="amsgrad=True, which FlashAdamW does not do"):
        opt.load_state_dict(ref.state_dict())
    ada = torch.optim.Adagrad(model.parameters())
    _train(model, ada, steps=1)
    with pytest.raises(ValueError, match="not a qopt optimizer state"):
        opt.load_state_dict(ada.state_dict())
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train(model, sgd, steps=1)
    with pytest.raises(ValueError, match="not a qopt optimizer state"):
        opt.load_state_dict(sgd.state_dict())    # momentum_buffer is not an Adam state


def test_flashoptim_state_keys_read_dequantized(host):
    model = _model()
    opt = qopt.FlashAdamW(model.parameters(), lr=1e-2)
    _train(model, opt)
    p = model[0].weight
    st = opt.state[p]
    want = _deq(st["exp_avg::quantized"], st["exp_avg::scales"], True)
    assert torch.equal(st["exp_avg"], want) and torch.equal(st.get("exp_avg"), want)
    assert torch.equal(st["exp_avg_sq"], _deq(st["exp_avg_sq::quantized"],
                                              st["exp_avg_sq::scales"], False))
    assert "exp_avg" not in st and "exp_avg" not in st.keys()
    assert "exp_avg" not in opt.state_dict()["state"][0]
    assert st.get("momentum_buffer") is None
    with pytest.raises(KeyError):
        st["momentum_buffer"]
    # still after a checkpoint is loaded, and for SGD's buffer
    clone = _model()
    clone.load_state_dict(model.state_dict())
    other = qopt.FlashAdamW(clone.parameters(), lr=1e-2)
    other.load_state_dict(opt.state_dict())
    assert torch.equal(other.state[clone[0].weight]["exp_avg"], want)
    sgd_model = _model()
    sgd = qopt.FlashSGD(sgd_model.parameters(), lr=1e-2, momentum=0.9)
    _train(sgd_model, sgd)
    s2 = sgd.state[sgd_model[0].weight]
    assert torch.equal(s2["momentum_buffer"], _deq(s2["momentum_buffer::quantized"],
                                                   s2["momentum_buffer::scales"], True))

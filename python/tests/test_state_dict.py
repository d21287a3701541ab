"""The state layout and the state_dict format of the optimizers (state created with init_state(),
which needs only the manifests: no backend), round trips through torch.save, and every refusal of
load_state_dict (nothing is loaded when one is refused).
"""

import copy
import io

import pytest
import torch

import qopt
from qopt.codebook import zero_code
from qopt.optim import dynamic_map

from conftest import WEIGHTS_ONLY, bf16_params


# ------------------------------------------------------------------ state layout and state_dict

EXPECTED_KEYS = {
    qopt.FlashAdamW: {"error_bits": torch.int8, "exp_avg::quantized": torch.int8,
                      "exp_avg::scales": torch.float16, "exp_avg_sq::quantized": torch.uint8,
                      "exp_avg_sq::scales": torch.float16, "step": torch.int64},
    qopt.FlashSGD: {"error_bits": torch.int8, "momentum_buffer::quantized": torch.int8,
                    "momentum_buffer::scales": torch.float16, "step": torch.int64},
    qopt.FlashLion: {"error_bits": torch.int8, "exp_avg::quantized": torch.int8,
                     "exp_avg::scales": torch.float16, "step": torch.int64},
    qopt.AdamW8bit: {"state1": torch.uint8, "absmax1": torch.float32, "qmap1": torch.float32,
                     "state2": torch.uint8, "absmax2": torch.float32, "qmap2": torch.float32,
                     "step": torch.int64},
}


@pytest.mark.parametrize("cls", list(EXPECTED_KEYS))
def test_state_layout(cls):
    p, q = bf16_params((17, 23), (4097,))
    opt = cls([p, q], **_q8(cls))
    opt.init_state()
    st = opt.state[p]
    assert {k: v.dtype for k, v in st.items()} == EXPECTED_KEYS[cls]
    for k, v in st.items():
        if k.endswith("::quantized") or k in ("error_bits", "state1", "state2"):
            assert v.shape == p.shape, k
            if cls is not qopt.AdamW8bit:
                assert not v.any(), k  # zero codes, rho = 0 (the master is the bf16 value)
    if cls is qopt.AdamW8bit:
        assert st["absmax1"].shape == (2,)  # ceil(391 / 256)
        assert opt.state[q]["absmax1"].shape == (17,)  # ceil(4097 / 256)
        # codes start at the code of 0.0: the entry nearest 0 (the signed map has an exact 0)
        z1, z2 = zero_code(dynamic_map(True)), zero_code(dynamic_map(False))
        assert (st["state1"] == z1).all() and (st["state2"] == z2).all()
        assert dynamic_map(True)[z1] == 0.0 and dynamic_map(False)[z2] == 0.0
    else:
        scales = [k for k in st if k.endswith("::scales")]
        assert all(st[k].shape == (13,) for k in scales)  # ceil(391 / 32)
        assert all(opt.state[q][k].shape == (129,) for k in scales)  # ceil(4097 / 32)


def test_bytes_per_parameter():
    (p,) = bf16_params((4096,))
    o = qopt.FlashAdamW([p]); o.init_state()
    assert o.state_bytes() / 4096 == 1 + 1 + 1 + 2 * 2 / 32  # rho, m, v codes + f16 scales
    o = qopt.FlashAdamW([p], master_weight_bits=32); o.init_state()
    assert o.state_bytes() / 4096 == 2 + 1 + 1 + 2 * 2 / 32
    o = qopt.FlashAdamW([p], master_weight_bits=None); o.init_state()
    assert o.state_bytes() / 4096 == 1 + 1 + 2 * 2 / 32
    o = qopt.AdamW8bit([p]); o.init_state()
    assert o.state_bytes() == 4096 * 2 + 2 * 16 * 4 + 2 * 1024  # codes, absmax, two tables


def _q8(cls):
    """AdamW8bit quantizes tensors under bitsandbytes' min_8bit_size (4096) too: these tests are
    about its 8-bit layout."""
    return dict(min_8bit_size=0) if cls is qopt.AdamW8bit else {}


def filled_optimizer(cls=qopt.FlashAdamW, seed=0, **kw):
    """An optimizer whose state holds random bits (no backend needed)."""
    kw = {**_q8(cls), **kw}
    params = bf16_params((17, 23), (5,), (0,), (), seed=seed)
    opt = cls([{"params": params[:2]}, {"params": params[2:], "lr": 0.5}], **kw)
    opt.init_state()
    g = torch.Generator().manual_seed(seed + 100)
    for st in opt.state.values():
        for k, v in st.items():
            if k == "step":
                v.fill_(7)
            elif not k.startswith("qmap"):
                v.view(torch.uint8).copy_(torch.randint(0, 256, v.view(torch.uint8).shape, generator=g,
                                                         dtype=torch.uint8))
    return params, opt


def assert_state_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].keys() == b[k].keys()
        for key in a[k]:
            x, y = a[k][key], b[k][key]
            assert x.dtype == y.dtype and x.shape == y.shape, key
            assert torch.equal(x.cpu().view(torch.uint8) if x.dim() else x.cpu().reshape(1).view(torch.uint8),
                               y.cpu().view(torch.uint8) if y.dim() else y.cpu().reshape(1).view(torch.uint8)), key


@pytest.mark.parametrize("cls", list(EXPECTED_KEYS))
def test_state_dict_format(cls):
    _, opt = filled_optimizer(cls)
    sd = opt.state_dict()
    assert sd["qopt"] == {"format": "qopt-optimizer-state", "version": 1, "optimizer": cls.__name__,
                          "kernel": opt.kernel_name, "spec": opt.spec}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2, 3]]
    assert sd["param_groups"][1]["lr"] == 0.5
    assert set(sd["state"]) == {0, 1, 2, 3}
    assert {k: v.dtype for k, v in sd["state"][0].items()} == EXPECTED_KEYS[cls]


@pytest.mark.parametrize("cls", list(EXPECTED_KEYS))
def test_state_dict_round_trip_is_exact_and_copies(cls):
    params, opt = filled_optimizer(cls)
    sd = opt.state_dict()
    saved = copy.deepcopy(sd)
    clones = [torch.nn.Parameter(p.detach().clone()) for p in params]
    fresh = cls([{"params": clones[:2]}, {"params": clones[2:], "lr": 0.1}], **_q8(cls))
    fresh.load_state_dict(sd)
    assert fresh.param_groups[1]["lr"] == 0.5
    assert_state_equal(fresh.state_dict()["state"], saved["state"])
    # the optimizer owns copies: changing its state does not touch the loaded dict
    for st in fresh.state.values():
        for k, v in st.items():
            if not k.startswith("qmap") and k != "step" and v.numel():
                v.view(torch.uint8).add_(1)
    assert_state_equal(sd["state"], saved["state"])


@pytest.mark.parametrize("cls", list(EXPECTED_KEYS))
def test_torch_save_load_weights_only_keeps_every_bit(cls):
    params, opt = filled_optimizer(cls)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=WEIGHTS_ONLY)
    assert_state_equal(sd["state"], opt.state_dict()["state"])
    fresh = cls([{"params": [torch.nn.Parameter(p.detach().clone()) for p in params[:2]]},
                 {"params": [torch.nn.Parameter(p.detach().clone()) for p in params[2:]]}],
                **_q8(cls))
    fresh.load_state_dict(sd)
    assert_state_equal(fresh.state_dict()["state"], opt.state_dict()["state"])


def _fresh_like(params, cls=qopt.FlashAdamW, **kw):
    kw = {**_q8(cls), **kw}
    return cls([{"params": [torch.nn.Parameter(p.detach().clone()) for p in params[:2]]},
                {"params": [torch.nn.Parameter(p.detach().clone()) for p in params[2:]]}], **kw)


def test_load_refuses_wrong_shape_and_nothing_is_loaded():
    params, opt = filled_optimizer()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][0]["exp_avg::scales"] = torch.zeros(12, dtype=torch.float16)
    fresh = _fresh_like(params)
    with pytest.raises(ValueError, match=r"parameter 0 \(shape \[17, 23\]\): 'exp_avg::scales' is "
                                         r"torch.float16 of shape \[12\], the kernel FlashAdamW needs "
                                         r"torch.float16 of shape \[13\]"):
        fresh.load_state_dict(sd)
    assert len(fresh.state) == 0


def test_load_refuses_wrong_dtype():
    params, opt = filled_optimizer()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][1]["error_bits"] = sd["state"][1]["error_bits"].to(torch.bfloat16)
    with pytest.raises(ValueError, match="'error_bits' is torch.bfloat16 of shape \\[5\\], the kernel "
                                         "FlashAdamW needs torch.int8"):
        _fresh_like(params).load_state_dict(sd)


def test_load_refuses_missing_and_unknown_keys():
    params, opt = filled_optimizer()
    sd = copy.deepcopy(opt.state_dict())
    del sd["state"][0]["exp_avg_sq::quantized"]
    with pytest.raises(ValueError, match=r"missing state keys \['exp_avg_sq::quantized'\]"):
        _fresh_like(params).load_state_dict(sd)
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][0]["exp_avg"] = torch.zeros(17, 23)
    with pytest.raises(ValueError, match=r"unexpected state keys \['exp_avg'\]"):
        _fresh_like(params).load_state_dict(sd)


def test_load_refuses_another_kernel():
    params, opt = filled_optimizer()
    with pytest.raises(ValueError, match="saved by FlashAdamW with kernel FlashAdamW, this optimizer "
                                         "uses kernel FlashAdamW_ecc16"):
        _fresh_like(params, master_weight_bits=32).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="kernel FlashAdamW, this optimizer uses kernel FlashLion"):
        _fresh_like(params, cls=qopt.FlashLion).load_state_dict(opt.state_dict())


def test_load_refuses_foreign_and_future_formats():
    params, opt = filled_optimizer()
    torch_sd = torch.optim.AdamW([torch.zeros(2, requires_grad=True)]).state_dict()
    with pytest.raises(ValueError, match="not a qopt optimizer state"):
        _fresh_like(params).load_state_dict(torch_sd)
    sd = opt.state_dict()
    sd["qopt"] = dict(sd["qopt"], version=2)
    with pytest.raises(ValueError, match="state format version 2 is not supported"):
        _fresh_like(params).load_state_dict(sd)


def test_load_refuses_group_mismatch():
    params, opt = filled_optimizer()
    other = qopt.FlashAdamW([torch.nn.Parameter(p.detach().clone()) for p in params])
    with pytest.raises(ValueError, match="different number of parameter groups"):
        other.load_state_dict(opt.state_dict())


LOADED_GROUP_REFUSALS = [
    (dict(maximize=True), "maximize=True is not supported"),
    (dict(master_weight_bits=32), "master_weight_bits=32 in a param group is not supported"),
    (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (dict(betas=(2.0, 0.5)), "Invalid beta parameter at index 0: 2.0"),
    (dict(amsgrad=True), "amsgrad=True is not supported"),
    (dict(skip_nonfinite=True), "skip_nonfinite=True in a param group is not supported"),
    (dict(weight_decay=1e40), "hyperparameter 'weight_decay' is 1e\\+40, which is infinite in "
                              "float32"),
    (dict(capturable="no"), "capturable='no'; True or False"),
]


@pytest.mark.parametrize("update,match", LOADED_GROUP_REFUSALS,
                         ids=[next(iter(u)) for u, _ in LOADED_GROUP_REFUSALS])
def test_load_refuses_group_values_the_constructor_refuses(update, match):
    """load_state_dict used to take group values that the constructor and add_param_group refuse
    (maximize=True then ignored, eps=-1 stepped with): each is refused naming the group, and
    nothing is loaded (the groups and the state stay as they were)."""
    params, opt = filled_optimizer()
    fresh = _fresh_like(params)
    fresh.init_state()
    before_groups = copy.deepcopy(fresh.param_groups)
    before_state = copy.deepcopy(fresh.state_dict()["state"])
    sd = copy.deepcopy(opt.state_dict())
    sd["param_groups"][1].update(update)
    with pytest.raises(ValueError, match=r"FlashAdamW.load_state_dict: param_groups\[1\]: " + match):
        fresh.load_state_dict(sd)
    assert [{k: v for k, v in g.items() if k != "params"} for g in fresh.param_groups] == \
        [{k: v for k, v in g.items() if k != "params"} for g in before_groups]
    assert_state_equal(fresh.state_dict()["state"], before_state)
    assert int(fresh.state[fresh.param_groups[0]["params"][0]]["step"]) == 0


@pytest.mark.parametrize("step", [2.5, torch.tensor(2.5), -1, True, float("nan"), "3"],
                         ids=["float", "tensor", "negative", "bool", "nan", "str"])
def test_load_refuses_a_step_that_is_not_a_count(step):
    """A float step of 2.5 used to be truncated to 2 (a tensor 2.5 was refused)."""
    params, opt = filled_optimizer()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][1]["step"] = step
    fresh = _fresh_like(params)
    with pytest.raises(ValueError, match=r"parameter 1 \(shape \[5\]\): step .* is not a "
                                         r"non-negative integer"):
        fresh.load_state_dict(sd)
    assert len(fresh.state) == 0
    sd["state"][1]["step"] = 3.0         # an integral float is a count
    fresh.load_state_dict(sd)
    assert fresh.state[fresh.param_groups[0]["params"][1]]["step"].item() == 3


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.AdamW8bit])
def test_load_refuses_a_state_dict_without_state_or_params(cls):
    """A state_dict without 'state' used to be a bare KeyError('state'), and a param group
    without 'params' another KeyError: each is a ValueError naming the key."""
    params, opt = filled_optimizer(cls)
    sd = copy.deepcopy(opt.state_dict())
    del sd["state"]
    with pytest.raises(ValueError, match=f"{cls.__name__}.load_state_dict: the state_dict has no "
                                         f"'state'"):
        _fresh_like(params, cls).load_state_dict(sd)
    sd = copy.deepcopy(opt.state_dict())
    del sd["param_groups"][1]["params"]
    with pytest.raises(ValueError, match=r"param_groups\[1\] has no 'params'"):
        _fresh_like(params, cls).load_state_dict(sd)
    sd = copy.deepcopy(opt.state_dict())
    del sd["param_groups"]
    with pytest.raises(ValueError, match="the state_dict has no 'param_groups'"):
        _fresh_like(params, cls).load_state_dict(sd)
    with pytest.raises(TypeError, match="a state_dict is a dict"):
        _fresh_like(params, cls).load_state_dict([("state", {})])


@pytest.mark.parametrize("cls,key,value", [(qopt.FlashAdamW, "exp_avg::scales", float("nan")),
                                           (qopt.FlashAdamW, "exp_avg_sq::scales", float("inf")),
                                           (qopt.AdamW8bit, "absmax1", float("nan")),
                                           (qopt.AdamW8bit, "absmax2", float("-inf"))])
def test_load_refuses_non_finite_scales(cls, key, value):
    """A checkpoint whose group scales (absmax) hold NaN or inf used to load (every code of such a
    group then decodes to NaN or inf; the kernels store scales saturated, never so): refused,
    nothing loaded. A float32 state itself may hold NaN (a parameter whose gradient was NaN)."""
    params, opt = filled_optimizer(cls)
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][0][key].view(-1)[1] = value
    fresh = _fresh_like(params, cls)
    with pytest.raises(ValueError, match=rf"parameter 0 \(shape \[17, 23\]\): '{key}' holds NaN "
                                         rf"or infinite values"):
        fresh.load_state_dict(sd)
    assert len(fresh.state) == 0
    ps = bf16_params((40,))
    f32 = qopt.FlashAdamW(ps, quantize=False)
    f32.init_state()
    sd = copy.deepcopy(f32.state_dict())
    sd["state"][0]["exp_avg"][0] = float("nan")
    f32.load_state_dict(sd)
    assert torch.isnan(f32.state[ps[0]]["exp_avg"][0])


def test_load_refuses_another_codebook():
    params, opt = filled_optimizer(qopt.AdamW8bit)
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][0]["qmap1"] = sd["state"][0]["qmap1"] * 0.5
    with pytest.raises(ValueError, match="codebook table 'qmap1' differs"):
        _fresh_like(params, cls=qopt.AdamW8bit).load_state_dict(sd)


def test_optimizer_deepcopy_and_pickle():
    params, opt = filled_optimizer()
    o2 = copy.deepcopy(opt)
    assert o2.kernel_name == opt.kernel_name
    buf = io.BytesIO()
    torch.save(opt, buf)

"""API tests that need no backend (no GPU, no host kernels): they run in CI on Debian's CPU PyTorch.

Construction, argument validation and PyTorch's error wording, dtype errors, the kernel chosen for
each option, the error-bit decoder, the dynamic map and the runtime's mirrors (the state layout,
the state_dict format and checkpoint refusals: test_state_dict.py).
"""

import copy
import ctypes
import json
import os
import re
import struct
from pathlib import Path

import pytest
import torch

import qopt
from qopt import _capi as C
from qopt.codebook import create_dynamic_map, torch_linspace_f32, zero_code

from conftest import bf16_params
from test_state_dict import filled_optimizer

ALL = [qopt.FlashAdamW, qopt.FlashAdam, qopt.FlashSGD, qopt.FlashSGDW, qopt.FlashLion, qopt.AdamW8bit]
REPO = Path(__file__).resolve().parents[2]


def test_import_and_runtime_version():
    rt, manifest = qopt.runtime_version()
    assert rt >= 100 and manifest == 2
    assert qopt.__version__


@pytest.mark.parametrize("cls", ALL)
def test_is_a_torch_optimizer_with_param_groups(cls):
    a, b = bf16_params((3, 4), (5,))
    opt = cls([{"params": [a]}, {"params": [b], "lr": 0.5}])
    assert isinstance(opt, torch.optim.Optimizer)
    assert [len(g["params"]) for g in opt.param_groups] == [1, 1]
    assert opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[0]["lr"] == opt.defaults["lr"]


@pytest.mark.parametrize("cls", ALL)
def test_invalid_learning_rate(cls):
    with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
        cls(bf16_params((2,)), lr=-1)
    with pytest.raises(ValueError, match="^Invalid learning rate: nan$"):
        cls(bf16_params((2,)), lr=float("nan"))


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashAdam, qopt.AdamW8bit, qopt.FlashLion])
def test_invalid_betas(cls):
    bad = 1.5 if cls is qopt.FlashLion else 1.0
    with pytest.raises(ValueError, match=f"^Invalid beta parameter at index 0: {bad}$"):
        cls(bf16_params((2,)), betas=(bad, 0.99))
    with pytest.raises(ValueError, match="^Invalid beta parameter at index 1: -0.1$"):
        cls(bf16_params((2,)), betas=(0.9, -0.1))


@pytest.mark.parametrize("cls,n", [(qopt.FlashAdamW, 2), (qopt.FlashAdam, 2), (qopt.AdamW8bit, 2),
                                   (qopt.FlashLion, 2), (qopt.AdamW4bit, 2), (qopt.Lion8bit, 2),
                                   (qopt.AdEMAMix8bit, 3), (qopt.StableAdamW, 2)])
def test_betas_of_another_length_are_refused(cls, n):
    """betas of another length than the kernel's betas used to be accepted (the first step then
    failed unpacking them, or ignored the extra ones): refused at construction, in a group added
    later (not kept) and in a loaded group (nothing loaded)."""
    names = ", ".join(f"beta{i + 1}" for i in range(n))
    count = {2: "two", 3: "three"}[n]
    for betas in [(0.9,) * (n + 1), (0.9,) * (n - 1), 0.9]:
        with pytest.raises(ValueError, match=rf"Invalid betas: .*; expected {count} values \({names}\)"):
            cls(bf16_params((2,)), betas=betas)
    a, b = bf16_params((2,), (3,))
    opt = cls([a])
    with pytest.raises(ValueError, match=rf"Invalid betas: \(0.9, 0.9, 0.9, 0.9\)"):
        opt.add_param_group({"params": [b], "betas": (0.9,) * 4})
    assert len(opt.param_groups) == 1
    opt.init_state()
    sd = copy.deepcopy(opt.state_dict())
    sd["param_groups"][0]["betas"] = (0.9,) * (n + 1)
    with pytest.raises(ValueError, match=r"load_state_dict: param_groups\[0\]: Invalid betas"):
        opt.load_state_dict(sd)
    assert len(opt.param_groups[0]["betas"]) == n


@pytest.mark.parametrize("cls", ALL)
def test_invalid_weight_decay(cls):
    with pytest.raises(ValueError, match="^Invalid weight_decay value: -1$"):
        cls(bf16_params((2,)), weight_decay=-1)


@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashAdam, qopt.AdamW8bit])
def test_invalid_eps(cls):
    with pytest.raises(ValueError, match="^Invalid epsilon value: -1e-08$"):
        cls(bf16_params((2,)), eps=-1e-8)


@pytest.mark.parametrize("cls", [qopt.FlashSGD, qopt.FlashSGDW])
def test_invalid_momentum_and_nesterov(cls):
    with pytest.raises(ValueError, match="^Invalid momentum value: -0.5$"):
        cls(bf16_params((2,)), momentum=-0.5)
    with pytest.raises(ValueError, match="^Nesterov momentum requires a momentum and zero dampening$"):
        cls(bf16_params((2,)), momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="^Nesterov momentum requires a momentum and zero dampening$"):
        cls(bf16_params((2,)), nesterov=True)


def test_invalid_hyperparameters_in_a_later_group():
    a, b = bf16_params((2,), (3,))
    with pytest.raises(ValueError, match="^Invalid learning rate: -0.1$"):
        qopt.FlashAdamW([{"params": [a]}, {"params": [b], "lr": -0.1}])


def test_tensor_lr_must_have_one_element():
    with pytest.raises(ValueError, match="^Tensor lr must be 1-element$"):
        qopt.FlashAdamW(bf16_params((2,)), lr=torch.tensor([1e-3, 1e-3]))


@pytest.mark.parametrize("cls", ALL)
def test_bare_tensor_params_is_a_type_error(cls):
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        cls(torch.zeros(3, dtype=torch.bfloat16, requires_grad=True))


@pytest.mark.parametrize("cls", ALL)
def test_param_in_two_groups_is_a_value_error(cls):
    (a,) = bf16_params((2,))
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        cls([{"params": [a]}, {"params": [a]}])


def test_empty_parameter_list():
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        qopt.FlashAdamW([])


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_unsupported_param_dtype_names_dtype_and_what_is_supported(cls, dtype):
    p = torch.nn.Parameter(torch.zeros(4, dtype=dtype), requires_grad=dtype.is_floating_point)
    with pytest.raises(TypeError) as e:
        cls([p])
    msg = str(e.value)
    assert str(dtype) in msg and "does not cast" in msg
    assert all(str(d) in msg for d in (torch.bfloat16, torch.float16, torch.float32))


def test_unsupported_dtype_in_added_group():
    opt = qopt.FlashAdamW(bf16_params((2,)))
    with pytest.raises(TypeError, match="torch.float64"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))]})


def test_gradient_dtype_mismatch_is_refused_before_any_launch():
    (p,) = bf16_params((8,))
    before = p.detach().clone()
    opt = qopt.FlashAdamW([p])
    p.grad = torch.ones(8, dtype=torch.bfloat16)
    p.grad.data = torch.ones(8, dtype=torch.float32)  # torch refuses `p.grad = <float32>` directly
    with pytest.raises(TypeError, match=r"param_groups\[0\]\[0\] \(shape \(8,\)\) has "
                                        r"gradient dtype torch.float32 \(parameter torch.bfloat16\)"):
        opt.step()
    assert torch.equal(p.detach(), before)
    assert int(opt.state[p]["step"]) == 0


@pytest.mark.parametrize("kwargs", [dict(compress_state_dict="no"), dict(fused=None)])
@pytest.mark.parametrize("cls", [qopt.FlashAdamW, qopt.FlashAdam, qopt.FlashSGD, qopt.FlashSGDW,
                                 qopt.FlashLion])
def test_flags_the_kernels_cannot_honour_are_rejected(cls, kwargs):
    with pytest.raises(ValueError, match="True or False"):
        cls(bf16_params((2,)), **kwargs)


@pytest.mark.parametrize("kwargs", [dict(amsgrad=True), dict(block_size=512), dict(is_paged=True),
                                    dict(percentile_clipping=5), dict(block_wise=False)])
def test_adamw8bit_rejects_unsupported_options(kwargs):
    with pytest.raises(ValueError, match="not supported"):
        qopt.AdamW8bit(bf16_params((2,)), **kwargs)


GROUP_REFUSALS = [
    (qopt.AdamW8bit, dict(amsgrad=True)), (qopt.AdamW8bit, dict(is_paged=True)),
    (qopt.AdamW8bit, dict(percentile_clipping=5)), (qopt.AdamW8bit, dict(block_wise=False)),
    (qopt.AdamW8bit, dict(block_size=2048)), (qopt.AdamW8bit, dict(maximize=True)),
    (qopt.FlashAdamW, dict(amsgrad=True)), (qopt.FlashAdamW, dict(quantize=False)),
    (qopt.FlashAdamW, dict(fused=False)), (qopt.FlashAdamW, dict(check_numerics=True)),
    (qopt.FlashAdamW, dict(compress_state_dict=False)), (qopt.FlashAdamW, dict(master_weight_bits=32)),
    (qopt.FlashAdamW, dict(decouple_lr=True)), (qopt.FlashAdam, dict(decouple_lr=True)),
    (qopt.FlashSGD, dict(master_weight_bits=None)), (qopt.FlashSGDW, dict(decouple_lr=True)),
    (qopt.FlashLion, dict(quantize=False)), (qopt.FlashLion, dict(maximize=True)),
    # options of the whole optimizer: a group used to change them silently for nothing
    (qopt.FlashAdamW, dict(skip_nonfinite=True)), (qopt.AdamW8bit, dict(skip_nonfinite=True)),
    (qopt.FlashSGD, dict(skip_nonfinite=True)), (qopt.FlashAdamW, dict(stochastic_rounding=True)),
    (qopt.FlashAdamW, dict(kahan_sum=True)), (qopt.FlashAdamW, dict(seed=5)),
    (qopt.AdamW4bit, dict(bf16_stochastic_round=True)), (qopt.AdamW4bit, dict(seed=5)),
    (qopt.AdamW4bit, dict(block_size=64)), (qopt.AdamW8bit, dict(optim_bits=32)),
    (qopt.Lion8bit, dict(skip_nonfinite=True)),
]


@pytest.mark.parametrize("cls,option", GROUP_REFUSALS,
                         ids=[f"{c.__name__}-{k}" for c, o in GROUP_REFUSALS for k in o])
def test_added_group_with_an_option_the_constructor_refuses_is_refused_and_not_kept(cls, option):
    """What the constructor refuses (or keeps for the whole optimizer) is refused in a param group
    too, added later or given to the constructor, instead of being ignored; a refused group is not
    kept."""
    a, b, c = bf16_params((2,), (3,), (4,))
    opt = cls([a])
    with pytest.raises(ValueError, match="not supported"):
        opt.add_param_group({"params": [b], **option})
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["params"] == [a]
    opt.add_param_group({"params": [b]})  # b was not kept in the refused group
    with pytest.raises(ValueError, match="not supported"):
        cls([{"params": [c], **option}])


def test_added_group_with_accepted_values_of_those_options():
    a, b, c = bf16_params((2,), (3,), (4,))
    opt = qopt.AdamW8bit([a], block_size=2048)
    opt.add_param_group({"params": [b], "amsgrad": False, "block_size": 2048, "percentile_clipping": 100})
    opt = qopt.FlashAdamW([c], master_weight_bits=32, decouple_lr=True)
    opt.add_param_group({"params": [a], "master_weight_bits": 32, "decouple_lr": True, "fused": True})
    assert len(opt.param_groups) == 2
    # options of the whole optimizer repeated with its own values
    opt = qopt.FlashAdamW([a], master_weight_bits=None, stochastic_rounding=True, seed=7,
                          skip_nonfinite=True)
    opt.add_param_group({"params": [b], "stochastic_rounding": True, "seed": 7,
                         "skip_nonfinite": True, "kahan_sum": False})
    opt = qopt.AdamW8bit([c], optim_bits=32)
    opt.add_param_group({"params": [a], "optim_bits": 32, "skip_nonfinite": False})
    assert len(opt.param_groups) == 2
    # optimi's kahan_sum=None (off for a float32 model) in a group of an optimizer without it
    qopt.StableAdamW([{"params": [b], "kahan_sum": None}])


@pytest.mark.parametrize("make", [
    lambda ps: qopt.FlashAdamW(ps, capturable="no"),
    lambda ps: qopt.FlashAdamW([{"params": ps, "capturable": 1}]),
    lambda ps: qopt.FlashAdamW(ps, skip_nonfinite="yes"),
    lambda ps: qopt.AdamW8bit(ps, skip_nonfinite=1),
    lambda ps: qopt.FlashSGD(ps, capturable="yes"),
], ids=["capturable-str", "capturable-group-int", "skip_nonfinite-str", "skip_nonfinite-int",
        "sgd-capturable"])
def test_flags_must_be_bools(make):
    """capturable="no" and skip_nonfinite="yes" used to count as True."""
    with pytest.raises(ValueError, match=r"(capturable|skip_nonfinite)=.*; True or False"):
        make(bf16_params((2,)))


def test_added_group_with_invalid_hyperparameters_is_not_kept():
    a, b = bf16_params((2,), (3,))
    opt = qopt.FlashAdamW([a])
    with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
        opt.add_param_group({"params": [b], "lr": -1})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("cls,kwargs,kernel", [
    (qopt.FlashAdamW, {}, "FlashAdamW"),
    (qopt.FlashAdamW, dict(master_weight_bits=24), "FlashAdamW"),
    (qopt.FlashAdamW, dict(master_weight_bits=32), "FlashAdamW_ecc16"),
    (qopt.FlashAdamW, dict(master_weight_bits=None), "FlashAdamW_bf16"),
    (qopt.FlashAdam, {}, "FlashAdam"),
    (qopt.FlashSGD, {}, "FlashSGD"),
    (qopt.FlashSGDW, {}, "FlashSGDW"),
    (qopt.FlashLion, {}, "FlashLion"),
    (qopt.AdamW8bit, {}, "AdamW8bit_block256"),
    (qopt.AdamW8bit, dict(block_size=2048), "AdamW8bit_block2048"),
])
def test_kernel_for_each_option(cls, kwargs, kernel):
    assert cls(bf16_params((2,)), **kwargs).kernel_name == kernel


@pytest.mark.parametrize("cls,bits", [(qopt.FlashAdamW, 16), (qopt.FlashAdam, 8), (qopt.FlashAdam, "24"),
                                      (qopt.FlashSGD, 64), (qopt.FlashLion, 0)])
def test_master_weight_bits_without_a_kernel(cls, bits):
    with pytest.raises(ValueError, match=f"master_weight_bits={bits!r} is not supported"):
        cls(bf16_params((2,)), master_weight_bits=bits)


def test_flashoptim_defaults():
    p = bf16_params((2,))
    d = qopt.FlashAdamW(p).defaults
    assert (d["lr"], d["betas"], d["eps"], d["weight_decay"]) == (1e-3, (0.9, 0.999), 1e-8, 1e-2)
    assert qopt.FlashAdam(p).defaults["weight_decay"] == 0.0
    d = qopt.FlashSGD(p).defaults
    assert (d["lr"], d["momentum"], d["dampening"], d["weight_decay"], d["nesterov"]) == (1e-3, 0, 0, 0, False)
    d = qopt.FlashLion(p).defaults
    assert (d["lr"], d["betas"], d["weight_decay"]) == (1e-3, (0.9, 0.99), 0)


def test_kernel_hyperparameters():
    p = bf16_params((2,))
    o = qopt.FlashAdamW(p, lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)
    assert o._kernel_hypers(o.param_groups[0]) == dict(lr=0.01, beta1=0.8, beta2=0.9, eps=1e-6,
                                                       weight_decay=0.1)
    # decouple_lr: decay wd * lr / initial_lr, i.e. the kernel's lr * wd' with wd' = wd / initial_lr
    o = qopt.FlashAdamW(p, lr=0.01, weight_decay=0.1, decouple_lr=True)
    assert o._kernel_hypers(o.param_groups[0])["weight_decay"] == pytest.approx(10.0)
    # SGD: as torch, dampening does nothing without momentum
    o = qopt.FlashSGD(p, momentum=0.0, dampening=0.5)
    assert o._kernel_hypers(o.param_groups[0])["dampening"] == 0.0
    o = qopt.FlashSGD(p, momentum=0.9, dampening=0.5)
    h = o._kernel_hypers(o.param_groups[0])
    assert (h["momentum"], h["dampening"], h["nesterov"]) == (0.9, 0.5, 0.0)
    o = qopt.FlashLion(p, lr=0.1, betas=(0.95, 0.98), weight_decay=0.5)
    assert o._kernel_hypers(o.param_groups[0]) == dict(lr=0.1, beta1=0.95, beta2=0.98, weight_decay=0.5)


def test_no_gradient_no_state_no_launch():
    a, b = bf16_params((3,), (4,))
    opt = qopt.FlashAdamW([a, b])
    opt.step()  # no gradients: nothing to launch, nothing created
    assert len(opt.state) == 0
    assert opt.step(lambda: 3.0) == 3.0


# ----------------------------------------------------------------------- master weights

def _c_decode(x16: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x16.numel(), dtype=torch.float32)
    x16c, rhoc = x16.contiguous(), rho.contiguous()
    ecc = C.DTYPE_INT8 if rho.dtype == torch.int8 else C.DTYPE_INT16
    C.call("qopt_error_bits_decode", C.DTYPE_BF16, ecc, ctypes.c_void_p(x16c.data_ptr()),
           ctypes.c_void_p(rhoc.data_ptr()), x16.numel(), ctypes.c_void_p(out.data_ptr()))
    return out.reshape(x16.shape)


@pytest.mark.parametrize("ecc", [torch.int8, torch.int16])
def test_ecc_decode_matches_runtime_bit_for_bit(ecc):
    g = torch.Generator().manual_seed(3)
    n = 1 << 16
    # every bf16 bit pattern class: random bits, plus zeros, subnormals, inf, NaN, powers of two
    bits = torch.randint(-32768, 32768, (n,), generator=g, dtype=torch.int32).to(torch.int16)
    special = torch.tensor([0, -32768, 1, -32767, 0x7F80, -128, 0x7FC0, 0x3F80, 0x0080, 0x7F7F],
                           dtype=torch.int32).to(torch.int16)
    bits = torch.cat([bits, special])
    x16 = bits.view(torch.bfloat16)
    hi = 127 if ecc == torch.int8 else 32767
    rho = torch.randint(-hi, hi + 1, x16.shape, generator=g, dtype=torch.int32).to(ecc)
    rho[-len(special):] = torch.tensor([hi, -hi, 5, -5, 0, 3, 0, -hi, hi, hi], dtype=torch.int32).to(ecc)
    got = qopt.ecc.decode(x16, rho)
    want = _c_decode(x16, rho)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_master_weights_helper():
    params, opt = filled_optimizer()
    m = qopt.master_weights(opt)
    for p in params:
        assert m[p].dtype == torch.float32 and m[p].shape == p.shape
        want = _c_decode(p.detach(), opt.state[p]["error_bits"])
        assert torch.equal(m[p].view(torch.int32), want.view(torch.int32))
    # without error bits: the parameter in float32
    o = qopt.FlashAdamW(params, master_weight_bits=None)
    m = qopt.master_weights(o)
    assert torch.equal(m[params[0]], params[0].detach().float())


def test_fp32_state_dict_of_a_model():
    model = torch.nn.Linear(5, 3).to(torch.bfloat16)
    opt = qopt.FlashAdamW(model.parameters())
    opt.init_state()
    opt.state[model.weight]["error_bits"].fill_(64)
    sd = qopt.fp32_state_dict(opt, model)
    assert set(sd) == {"weight", "bias"} and all(v.dtype == torch.float32 for v in sd.values())
    assert not torch.equal(sd["weight"], model.weight.detach().float())
    assert torch.equal(sd["bias"], model.bias.detach().float())


# ------------------------------------------------------------------------- dynamic maps

def read_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k != "__metadata__":
            a, b = v["data_offsets"]
            assert v["dtype"] == "F32"
            out[k] = list(struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b]))
    return out


GOLDEN = REPO / "test" / "data" / "golden" / "dynamic_map.safetensors"


@pytest.mark.skipif(not GOLDEN.is_file(), reason=f"{GOLDEN} not in this checkout")
def test_dynamic_map_equals_golden_value_by_value():
    gold = read_safetensors(GOLDEN)
    for name, signed in (("signed", True), ("unsigned", False)):
        mine = create_dynamic_map(signed)
        assert [struct.pack("<f", x) for x in mine] == [struct.pack("<f", x) for x in gold[name]], name
    for key, values in gold.items():
        if key.startswith("linspace/"):
            n = int(key.split("/")[1])
            assert torch_linspace_f32(0.1, 1.0, n) == values, key


def test_dynamic_map_properties():
    s, u = create_dynamic_map(True), create_dynamic_map(False)
    assert len(s) == len(u) == 256
    assert s == sorted(s) and u == sorted(u)
    assert 0.0 in s and 1.0 in s and -1.0 not in s and s[-1] == 1.0
    assert u[0] == 0.0 and u[-1] == 1.0 and min(u) >= 0
    assert all(struct.unpack("<f", struct.pack("<f", x))[0] == x for x in s + u)  # float32 values


def test_zero_code_matches_runtime():
    for signed in (True, False):
        table = (ctypes.c_float * 256)(*create_dynamic_map(signed))
        code = ctypes.c_uint8()
        C.call("qopt_codebook_zero_code", table, ctypes.byref(code))
        assert code.value == zero_code(create_dynamic_map(signed))


def test_qopt_error_carries_status_and_message():
    with pytest.raises(qopt.QoptError) as e:
        C.call("qopt_registry_get_manifest", ctypes.c_void_p(), b"nope", ctypes.byref(ctypes.c_void_p()))
    assert e.value.status == "QOPT_ERROR_INVALID_ARGUMENT" and e.value.message


# ------------------------------------------------------- uniforms evaluated with torch ops

SPECS = ["flash_adamw", "flash_adamw_ecc16", "flash_adamw_bf16", "flash_adam", "flash_sgd",
         "flash_sgdw", "flash_lion", "adamw8bit_block256", "adamw8bit_block2048", "rmsprop8bit",
         "adagrad8bit", "lion8bit", "adam_atan2", "ademamix8bit"]


@pytest.mark.parametrize("spec", SPECS)
def test_device_uniform_evaluation_equals_runtime(spec):
    """The torch-op evaluation used by capturable steps and tensor lr gives the runtime's float32
    uniforms exactly (here with CPU tensors; the same ops run on CUDA)."""
    from qopt import _runtime as R
    from qopt._uniforms import evaluate as _eval_device
    ks = R.kernel_spec(spec, C.BACKEND_HOST)
    names = list(ks.hypers)
    values = {"lr": 3e-3, "beta1": 0.85, "beta2": 0.995, "eps": 1e-7, "weight_decay": 0.07,
              "momentum": 0.9, "dampening": 0.1, "nesterov": 1.0, "alpha": 0.95, "lr_decay": 0.01,
              "a": 1.3, "b": 0.9, "beta3": 0.9995, "t_alpha": 7.0, "t_beta3": 900.0}
    hypers = (C.Hyper * len(names))()
    keep = [n.encode() for n in names]
    for i, n in enumerate(names):
        hypers[i].name, hypers[i].value = keep[i], values[n]
    for step in (1, 2, 3, 10, 1000, 123457):
        want = ks.evaluate_uniforms(hypers, len(names), step)
        env = {n: torch.tensor(values[n], dtype=torch.float64) for n in names}
        env["step"] = torch.tensor(float(step), dtype=torch.float32).double()
        got = []
        for e in ks.uniform_exprs:
            v = _eval_device(e, env, "cpu")
            got.append(float(torch.as_tensor(v, dtype=torch.float64).to(torch.float32)))
        assert [struct.pack("<f", x) for x in got] == [struct.pack("<f", x) for x in want], step


def _launch_info_of(path, doc):
    """qopt_launch_info of manifest `doc`, written to `path` and read back through the runtime's registry."""
    path.write_text(json.dumps(doc))
    reg, m = ctypes.c_void_p(), ctypes.c_void_p()
    C.call("qopt_registry_create", ctypes.byref(reg))
    try:
        C.call("qopt_registry_add_manifest_file", reg, str(path).encode())
        C.call("qopt_registry_get_manifest", reg, doc["kernel"].encode(), ctypes.byref(m))
        info = C.ManifestInfo()
        C.call("qopt_manifest_get_info", m, ctypes.byref(info))
        return info.launch
    finally:
        C.call("qopt_registry_destroy", reg)


def test_launch_info_mirror_reads_what_the_runtime_writes(tmp_path):
    """The ctypes mirror of qopt_launch_info against the library: a shipped manifest with distinct launch
    values, parsed by the runtime and read back through qopt_manifest_get_info."""
    from qopt import _runtime
    src = _runtime.find_manifest("flash_adamw", C.BACKEND_HOST)
    manifest = json.loads(src.read_text())
    manifest["launch"].update({"suggested_blocks_per_sm": 3, "waves": 5, "min_tiles_per_block": 77})
    info = _launch_info_of(tmp_path / "flash_adamw.manifest.json", manifest)
    launch = manifest["launch"]
    assert info.threads_per_block == launch["threads_per_block"]
    assert info.tile_elements == launch["tile_elements"]
    assert info.shared_bytes == launch["shared_bytes"]
    assert (info.suggested_blocks_per_sm, info.waves, info.min_tiles_per_block) == (3, 5, 77)


def test_launch_info_mirrors_producer_warps(tmp_path):
    """qopt_launch_info.producer_warps (0.7) fills the struct's trailing padding: the ctypes mirror keeps
    every other field's offset and 48 bytes, and reads the producer warps a version 2 manifest gives (a
    version 1 manifest may not give them). Needs no kernels: the manifest is written here."""
    assert {name: getattr(C.LaunchInfo, name).offset for name, _ in C.LaunchInfo._fields_} == {
        "threads_per_block": 0, "elements_per_thread": 4, "tile_elements": 8, "descriptor_bytes": 16,
        "shared_bytes": 24, "suggested_blocks_per_sm": 32, "waves": 36, "min_tiles_per_block": 40,
        "producer_warps": 44}
    assert ctypes.sizeof(C.LaunchInfo) == 48
    manifest = {
        "format": "qopt-manifest", "version": 2, "kernel": "ToyProducer",
        "param": {"name": "p", "dtype": "f32"}, "grad": {"name": "g", "dtype": "f32"},
        "streams": [{"name": "p", "role": "param", "dtype": "f32", "per": "element",
                     "access": "read_write"},
                    {"name": "g", "role": "grad", "dtype": "f32", "per": "element", "access": "read"}],
        "launch": {"threads_per_block": 256, "elements_per_thread": 8, "producer_warps": 1,
                   "min_tiles_per_block": 77},
    }

    def launch_of(doc):
        return _launch_info_of(tmp_path / "toy_producer.manifest.json", doc)

    launch = launch_of(manifest)
    assert (launch.threads_per_block, launch.tile_elements, launch.min_tiles_per_block,
            launch.producer_warps) == (256, 2048, 77, 1)
    del manifest["launch"]["producer_warps"]
    assert launch_of(manifest).producer_warps == 0
    manifest["version"] = 1
    manifest["launch"]["producer_warps"] = 1
    with pytest.raises(C.QoptError, match=r"field 'launch.producer_warps': 1 producer warp needs "
                                          r"manifest version 2 \(this manifest is version 1\)"):
        launch_of(manifest)


def test_runtime_of_another_abi_is_refused(monkeypatch):
    """A libqopt_runtime whose minor version is not the one the ctypes mirror follows is refused on load
    (its structs may have another layout), naming both versions."""
    C.lib()
    monkeypatch.setattr(C, "_lib", None)
    abi = C.RUNTIME_ABI
    monkeypatch.setattr(C, "RUNTIME_ABI", abi + 1)
    with pytest.raises(ImportError, match=rf"is runtime 0\.{abi}\.\d+, but this package's structs "
                                          rf"mirror the 0\.{abi + 1} ABI"):
        C.lib()


# ------------------------------------------------------------ STREAM_KEYS and TABLE_KEYS

def test_stream_keys_name_manifest_streams_as_documented():
    """python/README.md "Your own spec": STREAM_KEYS maps the manifest's stream names
    ("buf.codes", not the state's name "buf") to state keys."""
    class MySGD(qopt.QoptOptimizer):
        STREAM_KEYS = {"buf.codes": "momentum_buffer::quantized",
                       "buf.scales": "momentum_buffer::scales", "p.ecc": "error_bits"}

        def __init__(self, params, lr=0.1, momentum=0.9):
            super().__init__(params, dict(lr=lr, momentum=momentum), "flash_sgd")

        def _kernel_hypers(self, group):
            return {"lr": group["lr"], "momentum": group["momentum"]}

    (a,) = bf16_params((70,))
    opt = MySGD([a])
    opt.init_state()
    assert sorted(opt.state[a]) == ["error_bits", "momentum_buffer::quantized",
                                    "momentum_buffer::scales", "step"]


def test_stream_key_that_names_no_stream_is_refused():
    """A key naming no stream of the kernel (the state's name "buf" instead of "buf.codes") was
    silently ignored: the state kept the stream names as keys."""
    class MySGD(qopt.FlashSGD):
        STREAM_KEYS = {"buf": "momentum_buffer"}

    with pytest.raises(ValueError) as e:
        MySGD(bf16_params((8,)), momentum=0.9)
    msg = str(e.value)
    assert "MySGD.STREAM_KEYS: 'buf' names no state stream of kernel FlashSGD" in msg
    assert "'p.ecc', 'buf.codes', 'buf.scales'" in msg
    # in a group added later too, and that group is not kept
    opt = qopt.FlashSGD(bf16_params((8,)))
    opt.STREAM_KEYS = {"m.codes": "exp_avg"}
    with pytest.raises(ValueError, match="'m.codes' names no state stream of kernel FlashSGD"):
        opt.add_param_group({"params": bf16_params((4,))})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("cls,kwargs,dtype", [
    (qopt.FlashAdamW, dict(master_weight_bits=None), torch.bfloat16),   # no error bits
    (qopt.FlashAdamW, {}, torch.float32),                               # .f32: no error bits
    (qopt.FlashSGD, {}, torch.float32),
    (qopt.FlashLion, {}, torch.float16),
    (qopt.AdamW8bit, {}, torch.float32),
])
def test_shipped_stream_keys_fit_every_variant(cls, kwargs, dtype):
    """The error-bits key "p.ecc" of the shipped optimizers is accepted where the variant has no
    error bits (fp32 parameters, master_weight_bits=None)."""
    p = torch.nn.Parameter(torch.randn(40).to(dtype))
    opt = cls([p], **kwargs)
    opt.init_state()
    keys = set(opt.state[p])
    assert keys <= set(cls.STREAM_KEYS.values()) | set(cls.TABLE_KEYS.values()) | {"step"}
    assert ("error_bits" in keys) == (dtype is not torch.float32 and
                                      kwargs.get("master_weight_bits", 24) is not None)


def test_table_key_that_names_no_table_is_refused():
    class My8bit(qopt.AdamW8bit):
        TABLE_KEYS = {"qmap": "qmap1"}

    with pytest.raises(ValueError, match=r"My8bit.TABLE_KEYS: 'qmap' names no table of kernel "
                                         r"AdamW8bit_block256 .*'m.qmap', 'v.qmap'"):
        My8bit(bf16_params((8,)), min_8bit_size=0)


# --------------------------------------------------------------- kernel directories

@pytest.fixture
def fresh_kernels(monkeypatch):
    """Kernel lookups from scratch (the process caches each spec it found)."""
    from qopt import _runtime as R
    monkeypatch.setattr(R, "_specs", {})
    return monkeypatch


@pytest.mark.parametrize("text,where", [
    ('{"bad":', r":1:8: invalid JSON: Expecting value"),
    ('{\n  "kernel": "FlashAdamW",\n  "streams": [1, 2,]\n}\n', r":3:20: invalid JSON: "),
    ("[]", r": not a kernel manifest"),
])
def test_corrupt_manifest_names_the_file_and_the_position(tmp_path, fresh_kernels, text, where):
    """A manifest that is not valid JSON was a bare json.JSONDecodeError without the file."""
    bad = tmp_path / "flash_adamw.manifest.json"
    bad.write_text(text)
    fresh_kernels.setenv("QOPT_KERNEL_DIR", str(tmp_path))
    with pytest.raises(qopt.QoptError) as e:
        qopt.FlashAdamW(bf16_params((4,)))
    assert e.value.status == "QOPT_ERROR_MANIFEST"
    assert re.search(re.escape(str(bad)) + where, str(e.value)), str(e.value)


def test_kernel_dirs_and_the_default_search_path(tmp_path, fresh_kernels):
    # the folders this run's kernels come from: QOPT_KERNEL_DIR's where the run sets it (a GPU
    # machine's copy of the kernels), else the default path
    shipped = qopt.kernel_dirs()
    fresh_kernels.delenv("QOPT_KERNEL_DIR", raising=False)
    default = qopt.default_kernel_dirs()
    assert default and qopt.kernel_dirs() == default
    assert qopt.default_kernel_dirs("cuda") == [d for d in default if d.name != "host"]
    assert qopt.kernel_dirs(torch.device("cpu")) == default
    mine = tmp_path / "mine"
    mine.mkdir()
    fresh_kernels.setenv("QOPT_KERNEL_DIR", str(mine))
    assert qopt.kernel_dirs() == [mine] and qopt.kernel_dirs("cuda") == [mine]
    assert qopt.default_kernel_dirs() == default
    # QOPT_KERNEL_DIR replaces the default path: the shipped kernels are not found...
    with pytest.raises(FileNotFoundError) as e:
        qopt.FlashAdamW(bf16_params((4,)))
    msg = str(e.value)
    assert f"in the directories of QOPT_KERNEL_DIR: {mine}." in msg
    assert "replaces the default search path" in msg and str(default[0]) in msg
    # ... unless they are listed with one's own folder, as documented
    fresh_kernels.setenv("QOPT_KERNEL_DIR",
                         os.pathsep.join([str(mine)] + [str(d) for d in shipped]))
    qopt.FlashAdamW(bf16_params((4,)))
    with pytest.raises(ValueError):
        qopt.kernel_dirs("meta")


def test_missing_kernel_lists_the_directories_searched(fresh_kernels):
    fresh_kernels.delenv("QOPT_KERNEL_DIR", raising=False)

    class Missing(qopt.QoptOptimizer):
        def __init__(self, params):
            super().__init__(params, dict(lr=0.1), "no_such_spec")

    with pytest.raises(FileNotFoundError) as e:
        Missing(bf16_params((4,)))
    msg = str(e.value)
    assert "no kernel 'no_such_spec' (no_such_spec.manifest.json); searched " in msg
    for d in qopt.default_kernel_dirs():
        assert str(d) in msg
    assert "QOPT_KERNEL_DIR" in msg and "replaces this search path" in msg


@pytest.mark.parametrize("cls, kwargs, optim_bits, max_unorm", [
    (qopt.AdamW8bit, {}, 8, 0.0),
    (qopt.AdamW8bit, {"optim_bits": 32, "min_8bit_size": 0}, 32, 0.0),
    (qopt.Lion32bit, {}, 32, 0.0),
    (qopt.Adagrad8bit, {"min_8bit_size": 100}, 8, 0.0),
    (qopt.LAMB8bit, {}, 8, 1.0),
    (qopt.LAMB, {"max_unorm": 0.5}, 32, 0.5),
    (qopt.LARS8bit, {"lr": 0.1, "momentum": 0.9}, 8, 0.02),
])
def test_bitsandbytes_args_mirror_the_options(cls, kwargs, optim_bits, max_unorm):
    # bitsandbytes' Optimizer8bit keeps its options in opt.args (its tests read args.max_unorm);
    # the values here are the constructor's and bitsandbytes' documented defaults.
    opt = cls(bf16_params((64, 8)), **kwargs)
    a = opt.args
    assert (a.optim_bits, a.max_unorm) == (optim_bits, max_unorm)
    assert a.min_8bit_size == kwargs.get("min_8bit_size", 4096)
    assert (a.percentile_clipping, a.block_wise, a.skip_zeros) == (100, True, False)
    a.max_unorm = 7.0                       # a fresh namespace each time: nothing changes
    assert opt.args.max_unorm == max_unorm
    assert not hasattr(qopt.FlashAdamW(bf16_params((64, 8))), "args")   # FlashOptim has no args

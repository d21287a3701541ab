"""A spec of one's own (python/README.md, "Your own spec"), compiled here with the build's qopt-opt
for the host backend (skipped without qopt-opt or a host backend): SGD with an f32 momentum
buffer, whose parameter is f32 or f16 (issue 25, defects 2 to 4).

- state_dict()/load_state_dict() of a spec whose parameter is not bf16 (they looked for the
  kernel '<spec>.bf16');
- the hyperparameters _kernel_hypers gives, checked against the manifest's: a name the kernel does
  not have is refused, naming the spec, the name and the kernel's names; a missing one takes the
  manifest's default (refused where the manifest gives none);
- a missing kernel variant (<spec>.bf16, <spec>.scaled) is named with the qopt-opt command that
  makes it, and that command makes it.
"""

import io
import json
import re
import os
import shlex
import subprocess

import pytest
import torch

import qopt
from qopt import _capi as C
from qopt import _runtime as R

SPEC = """// SGD with momentum, dampening 0 (torch.optim.SGD's): buf = momentum * buf + g
optimizer {name} {{
  hyper lr = 0.1;
  hyper momentum = 0.5;
  param p : {ptype};
  grad g : {ptype};
  state buf : f32;
  update {{
    buf = momentum * buf + g;
    p = p - lr * buf;
  }}
}}
"""

DTYPES = {"f32": torch.float32, "f16": torch.float16}


def qopt_opt():
    tool = C.build_dir() / "bin" / "qopt-opt"
    if not tool.is_file():
        pytest.skip(f"no qopt-opt at {tool} (build the compiler)")
    return tool


def compile_spec(directory, stem, ptype, *flags):
    """The spec `<stem>.qopt` (optimizer Mom_<ptype>) written to directory and compiled there for
    the host backend (with `flags`, e.g. --param-type=f16, into `<variant>.so`)."""
    spec = directory / f"{stem}.qopt"
    if not spec.exists():
        spec.write_text(SPEC.format(name=f"Mom_{ptype}", ptype=ptype))
    variant = [f.split("=")[1] for f in flags if f.startswith("--param-type=")]
    variant += ["scaled"] if "--grad-scaling" in flags else []
    name = ".".join([stem] + variant)
    subprocess.run([str(qopt_opt()), spec.name, *flags, "--emit=host-library", "-o",
                    str(directory / f"{name}.so")], cwd=directory, check=True, capture_output=True)
    return directory / f"{name}.manifest.json"


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A fresh kernel folder of one's own before the shipped ones (on QOPT_KERNEL_DIR, as the
    README says), with the kernels looked up afresh."""
    from conftest import backend_available, skip_reason
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))
    qopt_opt()
    shipped = qopt.kernel_dirs()
    monkeypatch.setenv("QOPT_KERNEL_DIR", os.pathsep.join([str(tmp_path)] + [str(d) for d in shipped]))
    monkeypatch.setattr(R, "_specs", {})
    return tmp_path


class MyMomentum(qopt.QoptOptimizer):
    STREAM_KEYS = {"buf": "momentum_buffer"}

    def __init__(self, params, spec, lr=0.1, momentum=0.5, hypers=None):
        self.hypers = hypers   # group -> what _kernel_hypers gives; None: lr and momentum
        super().__init__(params, dict(lr=lr, momentum=momentum), spec)

    def _kernel_hypers(self, group):
        if self.hypers is not None:
            return self.hypers(group)
        return {"lr": group["lr"], "momentum": group["momentum"]}


def make_params(dtype, seed, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in shapes]


def grads(params, seed):
    g = torch.Generator().manual_seed(seed)
    return [(0.1 * torch.randn(p.shape, generator=g)).to(p.dtype) for p in params]


def step_with(opt, params, gs):
    for p, g in zip(params, gs):
        p.grad = g.clone()
    opt.step()


def u8(t):
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1).to(torch.uint8)


# ------------------------------------------------------------- defect 2: checkpoints

@pytest.mark.parametrize("ptype", list(DTYPES))
def test_state_dict_of_a_spec_whose_parameter_is_not_bf16(kernels, ptype):
    """Was: FileNotFoundError: qopt: no kernel 'mom.bf16' from state_dict() and
    load_state_dict() (the checkpoint's kernel was looked up for bf16 parameters)."""
    manifest = compile_spec(kernels, "mom", ptype)
    dtype = DTYPES[ptype]
    a = make_params(dtype, 1, (37,), (5, 8))
    opt = MyMomentum(a, "mom", lr=0.05, momentum=0.9)
    for s in range(2):
        step_with(opt, a, grads(a, 10 + s))
    sd = opt.state_dict()
    assert sd["qopt"]["kernel"] == json.loads(manifest.read_text())["kernel"] == f"Mom_{ptype}"
    assert opt.kernel_name == f"Mom_{ptype}"
    buf = io.BytesIO()
    torch.save(sd, buf)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    other = MyMomentum(b, "mom", lr=0.05, momentum=0.9)
    buf.seek(0)
    other.load_state_dict(torch.load(buf))
    assert int(other.state[b[0]]["step"]) == 2
    for s in range(3):   # lockstep after the resume
        gs = grads(a, 20 + s)
        step_with(opt, a, gs)
        step_with(other, b, gs)
    for p, q in zip(a, b):
        assert torch.equal(u8(p), u8(q))
        assert torch.equal(u8(opt.state[p]["momentum_buffer"]), u8(other.state[q]["momentum_buffer"]))
    if dtype is torch.float32:
        # the spec is torch.optim.SGD with dampening 0: the same 5 steps there
        r = make_params(dtype, 1, (37,), (5, 8))
        ref = torch.optim.SGD(r, lr=0.05, momentum=0.9)
        for s in [10, 11, 20, 21, 22]:
            step_with(ref, r, grads(r, s))
        for p, q in zip(a, r):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(opt.state[p]["momentum_buffer"],
                                       ref.state[q]["momentum_buffer"], rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------- defect 3: hyperparameters

def test_a_hyperparameter_the_kernel_does_not_have_is_refused_naming_it(kernels):
    """Was: silently ignored (a misspelled name meant the kernel took its default)."""
    compile_spec(kernels, "mom", "f32")
    (a,) = make_params(torch.float32, 2, (40,))
    opt = MyMomentum([a], "mom", hypers=lambda g: {"lr": g["lr"], "momentum": g["momentum"],
                                                    "momentun": 0.99})
    a.grad = grads([a], 3)[0]
    before = a.detach().clone()
    with pytest.raises(ValueError) as e:
        opt.step()
    msg = str(e.value)
    for part in ["param_groups[0]", "kernel Mom_f32", "spec 'mom'", "no hyperparameter 'momentun'",
                 "(it has lr, momentum)", "nothing was stepped"]:
        assert part in msg, msg
    assert torch.equal(u8(a), u8(before)) and all(int(s["step"]) == 0 for s in opt.state.values())


def test_a_missing_hyperparameter_takes_the_manifest_default(kernels):
    """Was: a bare KeyError: 'momentum'. The manifest's default (the spec's `hyper momentum =
    0.5`) is what qopt-step and qopt_step use: the steps are torch.optim.SGD's with momentum
    0.5, and bitwise those of the same optimizer given momentum=0.5."""
    compile_spec(kernels, "mom", "f32")
    a = make_params(torch.float32, 4, (40,), (7,))
    b = make_params(torch.float32, 4, (40,), (7,))
    r = make_params(torch.float32, 4, (40,), (7,))
    lacking = MyMomentum(a, "mom", lr=0.05, momentum=0.9, hypers=lambda g: {"lr": g["lr"]})
    given = MyMomentum(b, "mom", lr=0.05, momentum=0.5)
    ref = torch.optim.SGD(r, lr=0.05, momentum=0.5)
    for s in range(3):
        gs = grads(a, 30 + s)
        for o, ps in ((lacking, a), (given, b), (ref, r)):
            step_with(o, ps, gs)
    for p, q, t in zip(a, b, r):
        assert torch.equal(u8(p), u8(q))
        torch.testing.assert_close(p.detach(), t.detach(), rtol=1e-6, atol=1e-7)


def test_a_missing_hyperparameter_without_default_is_refused_naming_it(kernels, monkeypatch):
    """A manifest may give no default (docs/abi.md): then the name is needed, as qopt-step says."""
    manifest = compile_spec(kernels, "mom", "f32")
    doc = json.loads(manifest.read_text())
    for h in doc["hypers"]:
        if h["name"] == "momentum":
            del h["default"]
    nodefault = kernels / "nodefault"
    nodefault.mkdir()
    (nodefault / doc["host"]["library"]).symlink_to(kernels / doc["host"]["library"])
    (nodefault / "mom.manifest.json").write_text(json.dumps(doc))
    monkeypatch.setenv("QOPT_KERNEL_DIR",
                       os.pathsep.join([str(nodefault), os.environ["QOPT_KERNEL_DIR"]]))
    (a,) = make_params(torch.float32, 5, (40,))
    opt = MyMomentum([a], "mom", hypers=lambda g: {"lr": g["lr"]})
    a.grad = grads([a], 6)[0]
    before = a.detach().clone()
    with pytest.raises(ValueError) as e:
        opt.step()
    msg = str(e.value)
    for part in ["kernel Mom_f32", "spec 'mom'", "needs hyperparameter 'momentum'",
                 "its manifest gives no default", "(it has lr, momentum)",
                 "MyMomentum._kernel_hypers gives lr;"]:
        assert part in msg, msg
    assert torch.equal(u8(a), u8(before))


# ------------------------------------------------------------- defect 4: missing variants

def command_in(msg):
    """The qopt-opt command a message gives (its own line)."""
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip().startswith("qopt-opt ")]
    assert len(lines) == 1, msg
    return shlex.split(lines[0])


def test_a_missing_dtype_variant_names_it_and_the_command_that_makes_it(kernels):
    """Was: 'QOPT_KERNEL_DIR replaces the default search path...' (the spec's own kernel is on
    it). The command the message gives makes the variant, and the optimizer then steps."""
    compile_spec(kernels, "mom", "f32")
    (a,) = make_params(torch.bfloat16, 7, (40,))
    with pytest.raises(FileNotFoundError) as e:
        MyMomentum([a], "mom")
    msg = str(e.value)
    for part in ["no kernel variant 'mom.bf16' (mom.bf16.manifest.json)", "spec 'mom'",
                 "bfloat16 parameters", str(kernels / "mom.manifest.json"), "Your own spec"]:
        assert part in msg, msg
    cmd = command_in(msg)
    assert cmd[:2] == ["qopt-opt", "mom.qopt"] and "--param-type=bf16" in cmd
    assert "--emit=host-library" in cmd and cmd[-2:] == ["-o", str(kernels / "mom.bf16.so")]
    subprocess.run([str(qopt_opt())] + cmd[1:], cwd=kernels, check=True, capture_output=True)
    opt = MyMomentum([a], "mom", lr=0.5, momentum=0.5)
    a.grad = torch.full_like(a, 0.25)
    before = a.detach().float().clone()
    opt.step()
    assert torch.equal(a.detach().float(), (before - 0.125).to(torch.bfloat16).float())


def test_a_missing_grad_scaling_variant_names_it_and_the_command_that_makes_it(kernels):
    """A step under GradScaler asks for '<spec>.scaled' (or '<spec>.<type>.scaled')."""
    compile_spec(kernels, "mom", "f32")
    compile_spec(kernels, "mom", "f32", "--param-type=f16")   # mom.f16 is there, not its .scaled
    (a,) = make_params(torch.float32, 8, (40,))
    (h,) = make_params(torch.float16, 9, (24,))
    for p, variant, flags in ((a, "mom.scaled", ["--grad-scaling"]),
                              (h, "mom.f16.scaled", ["--param-type=f16", "--grad-scaling"])):
        opt = MyMomentum([p], "mom")
        p.grad = grads([p], 10)[0]
        opt.grad_scale = torch.full((), 2.0)
        opt.found_inf = torch.zeros(())
        before = p.detach().clone()
        with pytest.raises(FileNotFoundError) as e:
            opt.step()
        msg = str(e.value)
        assert f"no kernel variant '{variant}'" in msg and "GradScaler" in msg, msg
        cmd = command_in(msg)
        assert cmd[:2] == ["qopt-opt", "mom.qopt"] and all(f in cmd for f in flags), msg
        assert torch.equal(u8(p), u8(before))
        subprocess.run([str(qopt_opt())] + cmd[1:], cwd=kernels, check=True, capture_output=True)
        opt.step()   # now it is there: the scaled step, gradient / 2
        q = torch.nn.Parameter(before.float().clone())
        ref = torch.optim.SGD([q], lr=0.1, momentum=0.5)
        q.grad = p.grad.float() / 2
        ref.step()
        torch.testing.assert_close(p.detach().float(), q.detach().to(p.dtype).float(),
                                   rtol=1e-3 if p.dtype is torch.float16 else 1e-6, atol=1e-6)


# ----------------------------------------------------------------------- codebook states

class MyLion8bit(qopt.QoptOptimizer):
    """Lion8bit's spec compiled as one's own: its codebook table from QMAPS."""

    STREAM_KEYS = {"m.codes": "state1", "m.absmax": "absmax1"}
    TABLE_KEYS = {"m.qmap": "qmap1"}
    QMAPS = {"m.qmap": qopt.create_dynamic_map(signed=True)}

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay), "my_lion8bit")

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "weight_decay": group["weight_decay"]}


def _compile_lion(directory):
    from pathlib import Path
    spec = Path(__file__).resolve().parents[2] / "specs" / "lion8bit.qopt"
    (directory / "my_lion8bit.qopt").write_text(spec.read_text())
    subprocess.run([str(qopt_opt()), "my_lion8bit.qopt", "--emit=host-library", "-o",
                    str(directory / "my_lion8bit.so")], cwd=directory, check=True,
                   capture_output=True)


def test_a_codebook_spec_of_ones_own_steps_as_the_shipped_one(kernels):
    # The shipped Lion8bit's spec under another name, its qmap from QMAPS: bit for bit
    # qopt.Lion8bit (min_8bit_size=0: quantized states for every size), state and parameters.
    _compile_lion(kernels)
    g = torch.Generator().manual_seed(7)
    shapes = [(300,), (64, 33)]
    a = [torch.nn.Parameter(torch.randn(s, generator=g).to(torch.bfloat16)) for s in shapes]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    mine = MyLion8bit(a, lr=1e-2, weight_decay=0.1)
    shipped = qopt.Lion8bit(b, lr=1e-2, weight_decay=0.1, min_8bit_size=0)
    for _ in range(3):
        for p, q in zip(a, b):
            p.grad = (1e-2 * torch.randn(p.shape, generator=g)).to(torch.bfloat16)
            q.grad = p.grad.clone()
        mine.step()
        shipped.step()
    for p, q in zip(a, b):
        assert torch.equal(p.view(torch.int16), q.view(torch.int16))
        for key in ("state1", "absmax1", "qmap1"):
            assert torch.equal(mine.state[p][key], shipped.state[q][key]), key


def test_a_codebook_spec_without_its_qmap_is_refused_by_name(kernels):
    _compile_lion(kernels)

    class NoTable(MyLion8bit):
        QMAPS = {}

    class Short(MyLion8bit):
        QMAPS = {"m.qmap": [0.0] * 100}

    for cls, words in ((NoTable, "has the codebook table 'm.qmap' (state 'm'), which "
                                 "NoTable.QMAPS does not give"),
                       (Short, "Short.QMAPS['m.qmap']: 100 entries; a codebook table is 256")):
        p = torch.nn.Parameter(torch.randn(300).to(torch.bfloat16))
        opt = cls([p])
        p.grad = torch.zeros_like(p)
        with pytest.raises(ValueError, match=re.escape(words)):
            opt.step()
        assert not opt.state[p]


# ------------------------------------------- a uniform needed in one branch only

RADAM = """// torch.optim.RAdam as torch writes it: the rectification is computed
// whatever rho_t is, and used only where rho_t > 5 (NaN at step 3 with beta2 0.999).
optimizer MyRAdam {
  hyper lr = 1e-3;
  hyper beta1 = 0.9;
  hyper beta2 = 0.999;
  hyper eps = 1e-8;
  param p : f32;
  grad g : f32;
  state m : f32;
  state v : f32;
  update {
    let bc1 = 1 - beta1 ** step;
    let bc2 = 1 - beta2 ** step;
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    let bcm = m / bc1;
    let rho_inf = 2 / (1 - beta2) - 1;
    let rho_t = rho_inf - 2 * step * (beta2 ** step) / bc2;
    let rect = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
    let alr = sqrt(bc2) / (sqrt(v) + eps);
    p = rho_t > 5 ? p - bcm * lr * alr * rect : p - bcm * lr;
  }
}
"""


class MyRAdam(qopt.QoptOptimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps), "my_radam")

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "eps": group["eps"]}


def _compile_radam(directory):
    (directory / "my_radam.qopt").write_text(RADAM)
    subprocess.run([str(qopt_opt()), "my_radam.qopt", "--emit=host-library", "-o",
                    str(directory / "my_radam.so")], cwd=directory, check=True, capture_output=True)


def test_a_uniform_used_only_in_an_untaken_branch_may_be_nan(kernels):
    # RAdam's rectification is NaN at step 3 (rho_t about 3) but used only where rho_t > 5
    # (step 6 on): the step runs (it was refused as a NaN uniform) and follows torch.optim.RAdam
    # across the switch, within float32 rounding (torch fuses some operations).
    _compile_radam(kernels)
    g = torch.Generator().manual_seed(3)
    shapes = [(300,), (17, 5)]
    a = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    mine = MyRAdam(a, lr=1e-2)
    ref = torch.optim.RAdam(b, lr=1e-2)
    for _ in range(8):
        for p, q in zip(a, b):
            p.grad = 0.1 * torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        mine.step()
        ref.step()
        for p, q in zip(a, b):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


SHRINK = """// From step 3 on the step is scaled by sqrt(3.5 - step): NaN at step 4, in the branch taken.
optimizer MyShrink {
  hyper lr = 0.1;
  param p : f32;
  grad g : f32;
  update {
    p = step < 3 ? p - lr * g : p - lr * sqrt(3.5 - step) * g;
  }
}
"""


class MyShrink(qopt.QoptOptimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr), "my_shrink")

    def _kernel_hypers(self, group):
        return {"lr": group["lr"]}


def test_a_nan_uniform_is_refused_where_its_branch_is_taken(kernels):
    # The branch guard leaves the NaN check where the value is used: steps 1 to 3 run,
    # step 4 (sqrt(-0.5)) is refused before anything changes.
    (kernels / "my_shrink.qopt").write_text(SHRINK)
    subprocess.run([str(qopt_opt()), "my_shrink.qopt", "--emit=host-library", "-o",
                    str(kernels / "my_shrink.so")], cwd=kernels, check=True, capture_output=True)
    p = torch.nn.Parameter(torch.ones(64))
    opt = MyShrink([p])
    for _ in range(3):
        p.grad = torch.full_like(p, 0.5)
        opt.step()
    expected = 1 - 0.1 * 0.5 * 2 - torch.tensor(0.1, dtype=torch.float32) * torch.tensor(
        0.5 ** 0.5, dtype=torch.float32) * 0.5
    torch.testing.assert_close(p.detach(), torch.full_like(p, float(expected)), rtol=1e-6, atol=1e-7)
    before = p.detach().clone()
    p.grad = torch.full_like(p, 0.5)
    with pytest.raises(Exception, match="NaN"):
        opt.step()
    assert torch.equal(p.detach(), before)

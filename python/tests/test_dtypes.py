"""fp16 and fp32 parameters (each with a gradient of its own dtype), on the host backend (CPU) and on
CUDA, each skipped with the reason where that backend is missing.

Each spec is compiled for bf16 and as the variants <spec>.f16 / <spec>.f32 (qopt-opt --param-type;
the C++ host suite checks every variant against the C++ reference byte for byte). Here, through the
package: the first step of every optimizer against float64 (torch.optim where it has the
optimizer), a group mixing dtypes (one launch per dtype, each equal to its dtype stepped alone),
state layout and checkpoints, dtype mismatches refused before anything changes, 20 fp32 steps
against torch.optim.AdamW.
"""

import io

import pytest
import torch

import qopt
from test_step import CASE_IDS, CASES, bits, reference_first_step

DTYPES = [torch.float16, torch.float32]
DTYPE_IDS = ["fp16", "fp32"]


def params_of(device, dtype, *shapes, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((scale * torch.randn(s, generator=g)).to(dtype).to(device))
            for s in shapes]


def grads_of(params, seed, scale=1e-2):
    g = torch.Generator().manual_seed(seed)
    return [(scale * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device) for p in params]


def set_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad = g.clone()


def ulp(x: torch.Tensor, dtype) -> torch.Tensor:
    """The spacing of `dtype` at |x| (float64), normal range; its subnormal spacing below."""
    info = torch.finfo(dtype)
    mbits = {torch.float16: 10, torch.float32: 23}[dtype]
    a = x.abs().clamp(min=info.tiny)
    return torch.exp2(torch.floor(torch.log2(a)) - mbits)


# ----------------------------------------------------------------- first step vs float64

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name,cls,hp,extra", CASES, ids=CASE_IDS)
def test_first_step_matches_float64(device, dtype, name, cls, hp, extra):
    params = params_of(device, dtype, (64, 65), (4097,), (1,), seed=1, scale=0.5)
    grads = grads_of(params, seed=2)
    p0 = [p.detach().clone() for p in params]
    opt = cls(params, **hp, **extra)
    set_grads(params, grads)
    opt.step()
    masters = qopt.master_weights(opt)
    for p, start, g in zip(params, p0, grads):
        assert p.dtype is dtype
        ref = reference_first_step(name, start.cpu(), g.cpu(), hp)
        got = p.detach().cpu().double()
        s0 = start.cpu().double()
        # float32 arithmetic, a few roundings, relative to the values involved
        f32_err = 8 * 2.0 ** -24 * (ref.abs() + s0.abs() + (ref - s0).abs()) + 1e-30
        if dtype is torch.float32:
            assert ((got - ref).abs() <= f32_err).all(), ((got - ref).abs() - f32_err).max()
            assert "error_bits" not in opt.state[p]  # an fp32 parameter is its own master
            assert torch.equal(bits(masters[p]), bits(p))
        else:
            # the fp16 parameter is the float32 result rounded to fp16, give or take one step
            assert ((got - ref).abs() <= ulp(ref, dtype) + f32_err).all()
            nmax = {24: 127, 32: 32767}.get(getattr(opt, "master_weight_bits", None))
            if nmax is not None and "error_bits" in opt.state[p]:
                # the master keeps the rest: within half an fp16 step / nmax
                m = masters[p].cpu().double()
                tol = ulp(ref, dtype) / (2 * nmax) + f32_err
                assert ((m - ref).abs() <= tol).all(), ((m - ref).abs() - tol).max()
        assert int(opt.state[p]["step"]) == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_kernel_and_state_layout_per_dtype(device, dtype):
    (p,) = params_of(device, dtype, (100,), seed=3)
    opt = qopt.FlashAdamW([p])
    opt.init_state()
    st = opt.state[p]
    want = {"exp_avg::quantized": torch.int8, "exp_avg::scales": torch.float16,
            "exp_avg_sq::quantized": torch.uint8, "exp_avg_sq::scales": torch.float16,
            "step": torch.int64}
    if dtype is torch.float16:
        want["error_bits"] = torch.int8
    assert {k: v.dtype for k, v in st.items()} == want
    launch_ks = opt._kernel_spec(qopt.optim._backend_of(p)[0], dtype)
    assert launch_ks.kernel == {torch.float16: "FlashAdamW_f16", torch.float32: "FlashAdamW_f32"}[dtype]
    # the checkpoint names the optimizer's kernel (its spec), the per-parameter keys its dtype's
    assert opt.state_dict()["qopt"]["kernel"] == "FlashAdamW"


# ------------------------------------------------------------------ mixed dtypes in a group

@pytest.mark.parametrize("cls,kw", [(qopt.FlashAdamW, {}), (qopt.AdamW8bit, dict(min_8bit_size=0)),
                                    (qopt.FlashSGD, dict(momentum=0.9)), (qopt.FlashLion, {})],
                         ids=["adamw", "adamw8bit", "sgd", "lion"])
def test_group_mixing_dtypes_is_one_launch_per_dtype_each_as_alone(device, cls, kw):
    shapes = [(33, 7), (4097,), (1,)]
    mixed = []
    alone = []
    for i, dtype in enumerate((torch.bfloat16, torch.float16, torch.float32)):
        ps = params_of(device, dtype, *shapes, seed=10 + i)
        mixed += ps
        alone.append([torch.nn.Parameter(p.detach().clone()) for p in ps])
    opt = cls(mixed, lr=1e-2, **kw)
    opts = [cls(ps, lr=1e-2, **kw) for ps in alone]
    for step in range(3):
        grads = grads_of(mixed, seed=100 + step)
        set_grads(mixed, grads)
        for i, ps in enumerate(alone):
            set_grads(ps, grads[3 * i: 3 * i + 3])
        opt.step()
        for o in opts:
            o.step()
    launches = opt._cache[0].launches
    assert sorted(str(ln.dtype) for ln in launches) == sorted(
        str(d) for d in (torch.bfloat16, torch.float16, torch.float32))
    assert [ln.n for ln in launches] == [3, 3, 3]
    for i, ps in enumerate(alone):
        for p, q in zip(mixed[3 * i: 3 * i + 3], ps):
            assert torch.equal(bits(p), bits(q))
            for k, v in opt.state[p].items():
                assert torch.equal(bits(v), bits(opts[i].state[q][k])), k


# ----------------------------------------------------------------------------- checkpoints

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cls,kw", [(qopt.FlashAdamW, {}), (qopt.AdamW8bit, {}),
                                    (qopt.FlashSGDW, dict(momentum=0.9))],
                         ids=["adamw", "adamw8bit", "sgdw"])
def test_checkpoint_resume_is_bitwise_in_lockstep(device, dtype, cls, kw):
    a = params_of(device, dtype, (300,), (4097,), seed=30)
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = cls(a, lr=1e-2, **kw)
    for step in range(3):
        set_grads(a, grads_of(a, seed=300 + step))
        oa.step()
    for p, q in zip(a, b):
        q.data.copy_(p.detach())
    buf = io.BytesIO()
    torch.save(oa.state_dict(), buf)
    buf.seek(0)
    ob = cls(b, lr=1e-2, **kw)
    ob.load_state_dict(torch.load(buf))
    for step in range(3, 6):
        grads = grads_of(a, seed=300 + step)
        set_grads(a, grads)
        set_grads(b, grads)
        oa.step()
        ob.step()
    for p, q in zip(a, b):
        assert torch.equal(bits(p), bits(q))
        for k, v in oa.state[p].items():
            assert torch.equal(bits(v), bits(ob.state[q][k])), k


def test_bf16_checkpoint_does_not_load_into_fp32_parameters():
    (p,) = params_of("cpu", torch.bfloat16, (50,), seed=31)
    src = qopt.FlashAdamW([p])
    src.init_state()
    sd = src.state_dict()
    (q,) = params_of("cpu", torch.float32, (50,), seed=31)
    dst = qopt.FlashAdamW([q])
    with pytest.raises(ValueError, match=r"unexpected state keys \['error_bits'\] for kernel "
                                         r"FlashAdamW_f32"):
        dst.load_state_dict(sd)
    assert len(dst.state) == 0


# ------------------------------------------------------------------------ dtype mismatches

@pytest.mark.parametrize("pdtype,gdtype", [(torch.float32, torch.float16), (torch.float16, torch.float32),
                                           (torch.float32, torch.bfloat16)])
def test_gradient_of_another_dtype_is_refused_and_nothing_changes(pdtype, gdtype):
    good = params_of("cpu", torch.bfloat16, (16,), seed=40)
    bad = params_of("cpu", pdtype, (8,), seed=41)
    before = [p.detach().clone() for p in good + bad]
    # the bad parameter is in the second group: the first must not be stepped either
    opt = qopt.FlashAdamW([{"params": good}, {"params": bad}])
    set_grads(good, grads_of(good, seed=42))
    bad[0].grad = torch.zeros(8, dtype=pdtype)
    bad[0].grad.data = torch.ones(8, dtype=gdtype)  # torch refuses `p.grad = <other dtype>` directly
    with pytest.raises(TypeError) as e:
        opt.step()
    msg = str(e.value)
    assert f"gradient dtype {gdtype} (parameter {pdtype})" in msg and "does not cast" in msg
    for p, q in zip(good + bad, before):
        assert torch.equal(bits(p), bits(q))
    assert all(int(opt.state[p]["step"]) == 0 for p in good + bad if opt.state.get(p))


# ------------------------------------------------------------------ fp32 against torch AdamW

def test_fp32_matches_torch_adamw_over_20_steps(device):
    """An fp32 parameter has no master split: against torch.optim.AdamW in float32 the only
    difference is the 8-bit state, a small fraction of the distance travelled."""
    (p,) = params_of(device, torch.float32, (1024, 32), seed=50, scale=0.1)
    ref = torch.nn.Parameter(p.detach().clone())
    opt = qopt.FlashAdamW([p], lr=1e-3, weight_decay=0.01)
    topt = torch.optim.AdamW([ref], lr=1e-3, weight_decay=0.01)
    start = ref.detach().clone()
    for step in range(20):
        g = grads_of([p], seed=500 + step)[0]
        p.grad = g.clone()
        ref.grad = g.clone()
        opt.step()
        topt.step()
    err = (p.detach() - ref.detach()).abs().mean().item()
    moved = (ref.detach() - start).abs().mean().item()
    assert err < 0.05 * moved, (err, moved)
    # negative control: a 10% larger learning rate is farther away than that
    (p2,) = params_of(device, torch.float32, (1024, 32), seed=50, scale=0.1)
    opt2 = qopt.FlashAdamW([p2], lr=1.1e-3, weight_decay=0.01)
    for step in range(20):
        p2.grad = grads_of([p2], seed=500 + step)[0]
        opt2.step()
    assert (p2.detach() - ref.detach()).abs().mean().item() > 2 * err

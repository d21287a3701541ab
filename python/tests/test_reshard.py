"""The mesh-independent checkpoint form (qopt/_reshard.py) on one process, host backend.

FSDP2 shards a parameter along dim 0 with torch.chunk; each rank's optimizer steps its shard, so
the kernel's quantization groups are those of the local shard. These tests play that sharding
without torch.distributed (which Debian's torch 1.13 lacks for DTensor): one optimizer per shard,
each stepped with its slice of the full gradient, the shards' logical states put together along
dim 0 as DCP puts the DTensor shards of a checkpoint together, then cut for another world size and
loaded into fresh optimizers there. The distributed path itself (DTensor, DCP, gloo processes) is
test_dcp.py, on torch >= 2.6.

What is checked, against values the code under test does not compute:
- same world size: every state tensor after the load bitwise equal to the saved one, and a resumed
  run bitwise equal to the uninterrupted one;
- a parameter whose dim-0 rows hold a whole number of quantization groups (32; AdamW8bit 256 or
  2048): its groups are the same at every world size, so a run saved at N and resumed at M is
  bitwise equal to a single unsharded run that never stopped (world size 1, no checkpoint);
- other parameters: error bits bitwise equal at every world size, codes equal except in the groups
  that gather elements saved under different scales, and there the dequantized values within one
  code step of the saved ones; training goes on (the loss keeps falling).
"""

from __future__ import annotations

import copy

import pytest
import torch

import qopt
from qopt import _reshard

from conftest import backend_available, skip_reason


@pytest.fixture(autouse=True)
def _host_backend():
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))

OPTS = [
    ("FlashAdamW", lambda ps: qopt.FlashAdamW(ps, lr=1e-2)),
    ("FlashAdamW32", lambda ps: qopt.FlashAdamW(ps, lr=1e-2, master_weight_bits=32)),
    ("FlashAdamWnone", lambda ps: qopt.FlashAdamW(ps, lr=1e-2, master_weight_bits=None)),
    ("FlashAdam", lambda ps: qopt.FlashAdam(ps, lr=1e-2, weight_decay=1e-2)),
    ("FlashSGD", lambda ps: qopt.FlashSGD(ps, lr=5e-2, momentum=0.9)),
    ("FlashSGDW", lambda ps: qopt.FlashSGDW(ps, lr=5e-2, momentum=0.9, weight_decay=1e-2)),
    ("FlashLion", lambda ps: qopt.FlashLion(ps, lr=1e-3)),
    ("AdamW8bit", lambda ps: qopt.AdamW8bit(ps, lr=1e-2, min_8bit_size=0)),
    ("AdamW8bit2048", lambda ps: qopt.AdamW8bit(ps, lr=1e-2, block_size=2048, min_8bit_size=0)),
    ("AdamW8bit32", lambda ps: qopt.AdamW8bit(ps, lr=1e-2, optim_bits=32)),
    ("FlashAdamWf32state", lambda ps: qopt.FlashAdamW(ps, lr=1e-2, quantize=False)),
    ("AdamW4bit", lambda ps: qopt.AdamW4bit(ps, lr=1e-2)),
]
OPT_IDS = [n for n, _ in OPTS]


def _group_size(name):
    return {"AdamW8bit": 256, "AdamW8bit2048": 2048, "AdamW4bit": 128}.get(name, 32)


def shard(t: torch.Tensor, world: int):
    """FSDP2's dim-0 sharding: torch.chunk, empty shards for the ranks past the chunks."""
    chunks = list(torch.chunk(t, world, dim=0))
    while len(chunks) < world:
        chunks.append(t[:0])
    return chunks


class Run:
    """One "world" of `world` ranks, each with the shard of one full parameter and an optimizer."""

    def __init__(self, make, full: torch.Tensor, world: int):
        self.params = [torch.nn.Parameter(c.clone()) for c in shard(full, world)]
        self.opts = [make([p]) for p in self.params]

    def full(self) -> torch.Tensor:
        return torch.cat([p.detach() for p in self.params])

    def step(self, target: torch.Tensor) -> float:
        """One step of every rank with its slice of the gradient of 0.5 * |p - target|^2."""
        full = self.full()
        grad = (full.float() - target).to(full.dtype)
        for p, g, opt in zip(self.params, shard(grad, len(self.params)), self.opts):
            p.grad = g.clone()
            opt.step()
        return float(((full.float() - target) ** 2).mean())

    def save(self):
        """The logical state of every rank put together along dim 0 (what DCP stores)."""
        states = [_reshard.logical_state(o, p, o.state[p], wrap=False)
                  for o, p in zip(self.opts, self.params)]
        out = {}
        for k, v in states[0].items():
            if k == "step" or v.dim() == 0 or k.startswith("qmap"):
                out[k] = v.clone()
            else:
                out[k] = torch.cat([s[k] for s in states]).clone()
        return out, self.opts[0].state_dict()

    def load(self, saved, template):
        world = len(self.params)
        for r, (o, p) in enumerate(zip(self.opts, self.params)):
            local = {k: (v if k == "step" or v.dim() == 0 or k.startswith("qmap")
                         else shard(v, world)[r])
                     for k, v in saved.items()}
            sd = copy.deepcopy({k: v for k, v in template.items() if k != "state"})
            sd["state"] = {0: local}
            o.load_state_dict(sd)


def _target(shape):
    g = torch.Generator().manual_seed(7)
    return torch.randn(shape, generator=g) * 0.5


def _full(shape, seed=3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 0.5).to(torch.bfloat16)


def _run(make, shape, world_before, world_after, before=3, after=3):
    full, target = _full(shape), _target(shape)
    run = Run(make, full, world_before)
    for _ in range(before):
        run.step(target)
    saved, template = run.save()
    resumed = Run(make, run.full(), world_after)
    resumed.load(saved, template)
    losses = [resumed.step(target) for _ in range(after)]
    return run, saved, resumed, losses


@pytest.mark.parametrize("name,make", OPTS, ids=OPT_IDS)
@pytest.mark.parametrize("world", [1, 2, 4])
def test_same_world_resume_is_bit_exact(name, make, world):
    shape = (33, 24)       # rows of 24: shard boundaries inside quantization groups
    full, target = _full(shape), _target(shape)
    ref = Run(make, full, world)
    for _ in range(6):
        ref.step(target)
    run, saved, resumed, _ = _run(make, shape, world, world)
    assert torch.equal(resumed.full().view(torch.int16), ref.full().view(torch.int16))
    for (o1, p1), (o2, p2) in zip(zip(ref.opts, ref.params), zip(resumed.opts, resumed.params)):
        s1, s2 = o1.state[p1], o2.state[p2]
        assert s1.keys() == s2.keys()
        for k in s1:
            assert s1[k].dtype == s2[k].dtype and torch.equal(s1[k].cpu(), s2[k].cpu()), k


@pytest.mark.parametrize("name,make", OPTS, ids=OPT_IDS)
@pytest.mark.parametrize("before,after", [(2, 4), (4, 1), (1, 2), (4, 2)])
def test_aligned_rows_reshard_bit_exact_to_unsharded_run(name, make, before, after):
    G = _group_size(name)
    shape = (8, G)           # every dim-0 shard boundary is a group boundary
    full, target = _full(shape), _target(shape)
    ref = Run(make, full, 1)              # never sharded, never stopped
    for _ in range(6):
        ref.step(target)
    run, saved, resumed, _ = _run(make, shape, before, after)
    assert torch.equal(resumed.full().view(torch.int16), ref.full().view(torch.int16))
    # and the state put together again equals the unsharded run's, stream by stream
    again, _ = resumed.save()
    whole = _reshard.logical_state(ref.opts[0], ref.params[0], ref.opts[0].state[ref.params[0]],
                                   wrap=False)
    for k, v in whole.items():
        assert torch.equal(again[k].cpu(), v.cpu()), k


PAIRS = {"exp_avg::quantized": "exp_avg::scales", "exp_avg_sq::quantized": "exp_avg_sq::scales",
         "momentum_buffer::quantized": "momentum_buffer::scales", "state1": "absmax1",
         "state2": "absmax2"}


#: torchao's 4-bit maps (docs/numerics.md, "4-bit codes and tables"): AdamW4bit's exp_avg and
#: exp_avg_sq, whose logical form holds one table index per element
TABLES4 = {"exp_avg::quantized": torch.tensor(
    [-0.8875, -0.6625, -0.4375, -0.2125, -0.0775, -0.0325, -0.0055, 0.0, 0.0055, 0.0325, 0.0775,
     0.2125, 0.4375, 0.6625, 0.8875, 1.0], dtype=torch.float32),
    "exp_avg_sq::quantized": torch.arange(1, 17, dtype=torch.float32) / 16}


def _dequantized(saved, codes_key, name=""):
    """Per-element float32 values of one quantized state of the logical form, by torch ops written
    here from shared/docs/numerics.md section 2 (not qopt's code)."""
    q, s = saved[codes_key].reshape(-1), saved[PAIRS[codes_key]].reshape(-1).float()
    if name == "AdamW4bit":
        return TABLES4[codes_key][q.long()] * s
    if codes_key in ("state1", "state2"):
        return saved["qmap" + codes_key[-1]][q.long()] * s
    if q.dtype == torch.int8:
        z = q.float() / 127.0
        return (z / (2.0 - z.abs())) * s
    u = (q.float() / 255.0) * s
    return u * u


def _bits(t):
    t = t.reshape(-1)
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


@pytest.mark.parametrize("name,make", OPTS, ids=OPT_IDS)
@pytest.mark.parametrize("before,after", [(2, 4), (4, 1), (1, 2), (2, 1), (4, 2)])
def test_unaligned_reshard_keeps_elements_and_trains_on(name, make, before, after):
    shape = (33, 24)       # rows of 24 elements: boundaries inside groups at every world size
    run, saved, resumed, losses = _run(make, shape, before, after, after=4)
    # right after the load at the other world size, the state put together again
    fresh = Run(make, run.full(), after)
    fresh.load(saved, run.opts[0].state_dict())
    loaded, _ = fresh.save()
    assert loaded.keys() == saved.keys()
    G = _group_size(name)
    pairs = {ck: sk for ck, sk in PAIRS.items() if ck in saved and sk in saved}
    for k, v in saved.items():
        if k in pairs or k in pairs.values() or k.startswith("qmap") or k == "step":
            continue
        # error bits, float32 states: every element bitwise
        assert torch.equal(_bits(v), _bits(loaded[k])), k
    assert int(loaded["step"]) == int(saved["step"])
    for ck, sk in pairs.items():
        kept = _bits(saved[sk]) == _bits(loaded[sk])
        # elements whose group kept its scale keep their codes (and so their values, bitwise)
        assert torch.equal(saved[ck].reshape(-1)[kept], loaded[ck].reshape(-1)[kept]), ck
        # rank 0's shard starts at element 0 in both worlds: its first row's group is the saved one (a
        # shard whose start moved by a number of elements not a multiple of G regroups them all)
        n_old0 = shard(torch.empty(shape), before)[0].numel()
        n_new0 = shard(torch.empty(shape), after)[0].numel()
        if min(G, n_new0) <= min(G, n_old0):
            assert bool(kept[:min(G, n_new0)].all()), ck
        v_saved, v_loaded = _dequantized(saved, ck, name), _dequantized(loaded, ck, name)
        s = loaded[sk].reshape(-1).float()
        if name == "AdamW4bit":                         # half the widest gap of the table
            table = TABLES4[ck]
            tol = s * float((table[1:] - table[:-1]).max()) * 0.5 * (1 + 2.0 ** -10)
        elif ck in ("state1", "state2"):
            qmap = saved["qmap" + ck[-1]]
            tol = s * float((qmap[1:] - qmap[:-1]).max()) * 0.5 * (1 + 2.0 ** -10)
        elif saved[ck].dtype == torch.int8:
            tol = s * (1.0 / 127 + 2.0 ** -9)          # half a code step times softsign's slope 2
        else:
            tol = s * s * (2.0 / 255 + 2.0 ** -8)       # (u + du)^2 - u^2 with du half a code step
        assert bool(((v_loaded - v_saved).abs() <= tol).all()), ck
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]


def test_regroup_keeps_uniform_groups_and_requantizes_mixed():
    """regroup() on hand-made input: groups of 4; the second group mixes two scales."""
    scheme = {"scheme": "group", "storage": "int8", "companding": "softsign",
              "rounding": "half_up", "scale_divisor": "absmax"}
    codes = torch.tensor([127, -3, 0, 5, 127, 64, -127, 1, 9, 9], dtype=torch.int8)
    s = torch.tensor([2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 4.0, 4.0, 0.5, 0.5], dtype=torch.float16)
    q, sc = _reshard.regroup(codes, s, 4, scheme)
    assert sc.dtype == torch.float16 and sc.tolist() == [2.0, 4.0, 0.5]
    assert q[:4].tolist() == [127, -3, 0, 5] and q[8:].tolist() == [9, 9]
    # mixed group: values y*s with y = z / (2 - |z|), z = q / 127; the largest is |-1 * 4| = 4
    vals = [1.0 * 1.0, (64 / 127) / (2 - 64 / 127) * 1.0, -4.0, (1 / 127) / (2 - 1 / 127) * 4.0]
    expect = []
    for v in vals:
        y = v / 4.0
        z = 2 * y / (1 + abs(y))
        expect.append(int(torch.floor(torch.tensor(127 * z, dtype=torch.float32) + 0.5)))
    assert q[4:8].tolist() == expect


def test_logical_form_loads_into_plain_parameters():
    """A logical state (what a DTensor parameter's state_dict holds) loads into a plain parameter of
    the full shape: the world-size-1 case, e.g. a full_state_dict checkpoint."""
    make = OPTS[0][1]
    shape = (33, 24)
    run, saved, resumed, _ = _run(make, shape, 2, 1)
    ref = Run(make, run.full(), 1)
    ref.load(saved, run.opts[0].state_dict())
    st = ref.opts[0].state[ref.params[0]]
    assert st["exp_avg::scales"].shape == (-(-33 * 24 // 32),)


def test_dcp_marker_stands_for_the_record():
    """DCP keeps only "state" and "param_groups": the groups' kernel marker is checked instead."""
    p = torch.nn.Parameter(torch.randn(40, dtype=torch.bfloat16))
    opt = qopt.FlashAdamW([p])
    p.grad = torch.randn(40, dtype=torch.bfloat16)
    opt.step()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["_qopt_kernel"] == "FlashAdamW"
    dcp_like = {"state": sd["state"], "param_groups": sd["param_groups"]}
    other = qopt.FlashAdamW([torch.nn.Parameter(p.detach().clone())])
    other.load_state_dict(dcp_like)
    for k, v in sd["state"][0].items():
        assert torch.equal(other.state[other.param_groups[0]["params"][0]][k], v)
    with pytest.raises(ValueError, match="saved with kernel FlashAdamW, this optimizer uses "
                                         "kernel FlashLion"):
        qopt.FlashLion([torch.nn.Parameter(p.detach().clone())]).load_state_dict(dcp_like)
    dcp_like["param_groups"] = [{k: v for k, v in g.items() if k != "_qopt_kernel"}
                                for g in sd["param_groups"]]
    with pytest.raises(ValueError, match="not a qopt optimizer state"):
        other.load_state_dict(dcp_like)


def test_logical_state_of_another_shard_refused():
    make = OPTS[0][1]
    run, saved, resumed, _ = _run(make, (33, 24), 2, 2)
    o = resumed.opts[0]
    local = {k: (v if k == "step" else shard(v, 2)[1]) for k, v in saved.items()}
    sd = o.state_dict()
    sd["state"] = {0: local}      # rank 1's elements (16 rows) for rank 0's shard (17 rows)
    with pytest.raises(ValueError, match=r"'error_bits' is torch.int8 of shape \[16, 24\], the "
                                         r"kernel FlashAdamW needs torch.int8 of shape \[17, 24\]"):
        o.load_state_dict(sd)


def test_regroup_on_cuda_equals_cpu():
    """The load's regrouping runs on the parameter's device: CUDA gives the CPU's bits."""
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda.is_available() is False")
    g = torch.Generator().manual_seed(5)
    scheme = {"scheme": "group", "storage": "uint8", "companding": "sqrt",
              "rounding": "half_up", "scale_divisor": "absmax"}
    codes = torch.randint(0, 256, (200,), generator=g).to(torch.uint8)
    s = (torch.rand(200, generator=g) + 0.5).to(torch.float16)
    s[:64] = 1.0        # two uniform groups, the rest mixed
    q1, s1 = _reshard.regroup(codes, s, 32, scheme)
    q2, s2 = _reshard.regroup(codes.cuda(), s.cuda(), 32, scheme)
    assert torch.equal(q1, q2.cpu()) and torch.equal(s1.view(torch.int16), s2.cpu().view(torch.int16))


class _FakeDTensor:
    """Stands in for torch's DTensor (absent from torch 1.13) in the state_dict glue: from_local
    keeps the local tensor and the metadata, to_local gives the local tensor back."""

    def __init__(self, local, mesh, placements, shape, stride):
        self.local, self.device_mesh, self.placements = local, mesh, placements
        self.shape, self._stride = torch.Size(shape), stride

    @classmethod
    def from_local(cls, local, mesh, placements, run_check=False, shape=None, stride=None):
        return cls(local, mesh, placements, shape if shape is not None else local.shape, stride)

    def to_local(self):
        return self.local

    def stride(self):
        return self._stride


def test_state_dict_wraps_a_dtensor_parameters_logical_state(monkeypatch):
    """The DTensor glue of state_dict / load_state_dict with a stand-in DTensor class: every
    per-element and expanded per-group stream is wrapped with the parameter's mesh, placements,
    shape and stride; loading the wrapped form takes the local tensors and regroups them, so a
    round trip gives every state tensor back bit for bit."""
    marked = set()
    monkeypatch.setattr(_reshard, "dtensor_class", lambda: _FakeDTensor)
    monkeypatch.setattr(_reshard, "is_dtensor",
                        lambda t: isinstance(t, _FakeDTensor) or id(t) in marked)
    uncompressed = [("FlashAdamWuncompressed",
                     lambda ps: qopt.FlashAdamW(ps, lr=1e-2, compress_state_dict=False)),
                    ("FlashAdamW32uncompressed",     # int16 error bits, widened in the form
                     lambda ps: qopt.FlashAdamW(ps, lr=1e-2, master_weight_bits=32,
                                                compress_state_dict=False))]
    for name, make in OPTS + uncompressed:
        run = Run(make, _full((33, 24)), 1)
        for _ in range(2):
            run.step(_target((33, 24)))
        o, p = run.opts[0], run.params[0]
        p.device_mesh, p.placements = "mesh", ("Shard(0)",)
        marked.add(id(p))
        sd = o.state_dict()
        st = sd["state"][0]
        for k, v in st.items():
            if k == "step" or k.startswith("qmap"):
                assert isinstance(v, torch.Tensor), (name, k)
                continue
            assert isinstance(v, _FakeDTensor), (name, k)
            assert v.device_mesh == "mesh" and v.placements == ("Shard(0)",)
            if name.endswith("uncompressed") and k != "error_bits":
                assert k in ("exp_avg", "exp_avg_sq") and v.to_local().dtype == torch.float32
            assert tuple(v.shape) == (33, 24) and v.to_local().shape == (33, 24)
        other = Run(make, run.full(), 1)
        q = other.params[0]
        q.device_mesh, q.placements = "mesh", ("Shard(0)",)
        marked.add(id(q))
        other.opts[0].load_state_dict(sd)
        for k, v in o.state[p].items():
            assert torch.equal(other.opts[0].state[q][k], v), (name, k)
        marked.clear()


#: the dtypes gloo's collectives take (ProcessGroupGloo's GENERATE_ALL_TYPES; NCCL takes these too):
#: no int16, uint16, uint32 or uint64
COLLECTIVE_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                     torch.uint8, torch.bool, torch.int32, torch.int64}


@pytest.mark.parametrize("name,make", OPTS, ids=OPT_IDS)
def test_logical_form_has_only_dtypes_the_collectives_take(name, make):
    """DCP's full_state_dict gather (and broadcast_from_rank0) sends every DTensor of the form
    through the process group: gloo refuses int16 ("Invalid scalar type"). The 16-bit error bits
    of master_weight_bits=32 are held as int32 there, value for value, and loaded back as int16."""
    run = Run(make, _full((33, 24)), 1)
    for _ in range(2):
        run.step(_target((33, 24)))
    o, p = run.opts[0], run.params[0]
    live = o.state[p]
    form = _reshard.logical_state(o, p, live, wrap=False)
    for k, v in form.items():
        assert v.dtype in COLLECTIVE_DTYPES, (k, v.dtype)
        if live[k].dtype == torch.int16:
            assert v.dtype == torch.int32
            assert v.reshape(-1).tolist() == live[k].reshape(-1).tolist(), k
    if name == "FlashAdamW32":
        assert live["error_bits"].dtype == torch.int16
        assert bool((live["error_bits"] != 0).any())      # values beyond int8 occur: a real test
        assert int(live["error_bits"].abs().max()) > 127


def test_widened_error_bits_out_of_int16_range_refused():
    make = dict(OPTS)["FlashAdamW32"]
    run = Run(make, _full((33, 24)), 1)
    run.step(_target((33, 24)))
    saved, template = run.save()
    assert saved["error_bits"].dtype == torch.int32
    bad = dict(saved)
    bad["error_bits"] = saved["error_bits"].clone()
    bad["error_bits"].view(-1)[5] = 40000
    other = Run(make, run.full(), 1)
    with pytest.raises(ValueError, match=r"'error_bits' is torch.int32 with values outside "
                                         r"torch.int16's range"):
        other.load(bad, template)
    other.load(saved, template)          # the widened form itself loads, bitwise
    st = other.opts[0].state[other.params[0]]
    assert st["error_bits"].dtype == torch.int16
    assert torch.equal(st["error_bits"], run.opts[0].state[run.params[0]]["error_bits"])

#!/usr/bin/env python3
"""Generate the golden data of qopt's C++ reference tests (test/reference/tests) from the seed references.

Usage:  python3 scripts/golden/make_golden.py --out DIR [--device cuda|cpu]

Writes into DIR:
  seed000_adamw.safetensors      seed 000's quantized_adamw_step on 2 blocks of 2048 elements, six cases
                                 (a three-step chain from the zero state, random states at steps 10 and
                                 1000, other hyperparameters, zero gradients), run on --device ("cuda") and
                                 on the CPU, plus the qmaps used and the intermediates of one case.
  seed000_requantise.safetensors seed 000's _requantise on inputs that sit exactly on the map midpoints.
  seed003_battery.safetensors    seed 003's quantize / dequantize / nmse on seed 004's battery at reduced
                                 sizes plus numerics.md §5 edge inputs, four configurations, run on the CPU
                                 (seed 004 runs seed 003 "eager cpu").
  dynamic_map.safetensors        bitsandbytes' dynamic maps (signed, unsigned), written here from the
                                 algorithm's description, and the raw torch.linspace values they are made of.
  torch_optim.safetensors        torch.optim.SGD / Adam / AdamW (fp32, CPU, 5 steps) and a Lion written from
                                 numerics.md §4 with one PyTorch op per formula term.
  probe.json                     versions, device, and how PyTorch evaluates `tensor / python_float`
                                 on each device (true division or multiplication by a float32 reciprocal).

Only the seed functions in seed_refs.py are specifications; everything else here builds inputs.
"""

import argparse
import datetime
import json
import os
import platform
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_refs as S  # noqa: E402

N000 = 2 * S.BLOCK


# ------------------------------------------------------------------------------------------------
# safetensors output (the `safetensors` package when present, else the same format written by hand)
# ------------------------------------------------------------------------------------------------
_ST_DTYPE = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16", torch.float16: "F16",
             torch.int8: "I8", torch.uint8: "U8", torch.int16: "I16", torch.int32: "I32",
             torch.int64: "I64"}


WRITER = set()


def save(tensors, path, metadata):
    # clone: the same input tensor may be stored under several names (safetensors refuses shared memory)
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    meta = {k: (v if isinstance(v, str) else json.dumps(v, sort_keys=True)) for k, v in metadata.items()}
    try:
        from safetensors.torch import save_file
        save_file(tensors, path, metadata=meta)
        WRITER.add("safetensors " + __import__("safetensors").__version__)
        return
    except Exception as e:  # no package, or it refused something: the same format by hand
        print(f"note: safetensors.torch.save_file unavailable or failed for {path} ({e!r}); "
              "writing the format directly", file=sys.stderr)
    WRITER.add("make_golden.py built-in writer")
    header = {"__metadata__": meta}
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _ST_DTYPE[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ------------------------------------------------------------------------------------------------
# bitsandbytes' dynamic map, written from its description (Dettmers, "8-Bit Approximations for
# Parallelism in Deep Learning"; bitsandbytes.functional.create_dynamic_map's documented output):
# for exponent level i = 0 .. E-1 (E = max_exponent_bits) the values are the midpoints of a float32
# linspace(0.1, 1, k + 1) scaled by 10**(i - (E - 1)), with k = 2**(i + F - E) items per sign (F = bits
# without the sign bit, always total_bits - 1) and one more bit for the unsigned map; then 0 and 1.0
# (no -1.0); then zero padding to 256; sorted. Computed with torch's float32 ops as the library does.
# ------------------------------------------------------------------------------------------------
def dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    values = []
    fraction_bits = total_bits - 1
    extra = 2 ** (fraction_bits - max_exponent_bits) - 1
    level = 0
    for level in range(max_exponent_bits):
        items = 2 ** (level + fraction_bits - max_exponent_bits + (0 if signed else 1))
        edges = torch.linspace(0.1, 1, items + 1, dtype=torch.float32)
        mids = (edges[:-1] + edges[1:]) / 2.0
        scale = 10 ** (-(max_exponent_bits - 1) + level)
        values += (scale * mids).tolist()
        if signed:
            values += (-scale * mids).tolist()
    if extra > 0:  # the library reuses the last level's scale here
        edges = torch.linspace(0.1, 1, extra + 1, dtype=torch.float32)
        mids = (edges[:-1] + edges[1:]) / 2.0
        scale = 10 ** (-(max_exponent_bits - 1) + level)
        values += (scale * mids).tolist()
        if signed:
            values += (-scale * mids).tolist()
    values += [0.0, 1.0]
    assert len(values) == 2 ** total_bits, len(values)
    values += [0.0] * (256 - len(values))
    values.sort()
    return torch.tensor(values, dtype=torch.float32)


def requantise_codes(x, qmap):
    """The codes that seed 000's _requantise computes internally (its own lines, returning `code`).
    Used only to feed one step's output state into the next step of a chain; the script checks
    that qmap[code] * absmax reproduces _requantise's output bit for bit."""
    nb = x.numel() // S.BLOCK
    xb = x.view(nb, S.BLOCK)
    absmax = xb.abs().amax(-1)
    c = xb / absmax.clamp(min=1e-30).unsqueeze(-1)
    mid = (qmap[:-1] + qmap[1:]) * 0.5
    return torch.bucketize(c, mid).reshape(-1).to(torch.uint8)


def bits_equal(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return bool(torch.equal(a.cpu().contiguous().view(view), b.cpu().contiguous().view(view)))


# ------------------------------------------------------------------------------------------------
# seed 000
# ------------------------------------------------------------------------------------------------
DEFAULT_HYPERS = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01)
OTHER_HYPERS = dict(lr=3e-2, beta1=0.8, beta2=0.95, eps=1e-6, wd=0.1)


def run_seed000(inp, hypers, qmap1, qmap2, device):
    d = lambda t: t.to(device)  # noqa: E731
    out = S.quantized_adamw_step(d(inp["p"]), d(inp["g"]), d(inp["m_code"]), d(inp["m_absmax"]),
                                 d(inp["v_code"]), d(inp["v_absmax"]), d(qmap1), d(qmap2), inp["step"],
                                 **hypers)
    names = ["p_out", "m_out", "v_out", "m_absmax_out", "v_absmax_out"]
    return {k: v.cpu() for k, v in zip(names, out)}


def seed000_intermediates(inp, hypers, qmap1, qmap2, device):
    """The seed's own lines up to p_out, kept as separate tensors (for diagnosing a mismatch)."""
    lr, beta1, beta2, eps, wd = (hypers[k] for k in ("lr", "beta1", "beta2", "eps", "wd"))
    step = inp["step"]
    m = d(qmap1, device)[inp["m_code"].to(device).long()] * inp["m_absmax"].to(device).repeat_interleave(S.BLOCK)
    v = d(qmap2, device)[inp["v_code"].to(device).long()] * inp["v_absmax"].to(device).repeat_interleave(S.BLOCK)
    g = inp["g"].to(device).float()
    m_new = beta1 * m + (1.0 - beta1) * g
    v_new = beta2 * v + (1.0 - beta2) * g * g
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    v_div = v_new / bc2
    denom = v_div.sqrt() + eps
    upd = (lr / bc1) * m_new / denom
    p_f32 = inp["p"].to(device).float() * (1.0 - lr * wd) - upd
    return {k: t.cpu() for k, t in dict(m_new=m_new, v_new=v_new, v_div=v_div, denom=denom,
                                        p_f32=p_f32).items()}


def d(t, device):
    return t.to(device)


def make_seed000(device, out_dir, report):
    gen = torch.Generator().manual_seed(2000)
    qmap1, qmap2 = dynamic_map(True), dynamic_map(False)
    zero_code1 = int(torch.bucketize(torch.zeros(1), (qmap1[:-1] + qmap1[1:]) * 0.5))
    zero_code2 = int(torch.bucketize(torch.zeros(1), (qmap2[:-1] + qmap2[1:]) * 0.5))
    nb = N000 // S.BLOCK
    tensors = {"qmap1": qmap1, "qmap2": qmap2}
    cases = {}

    def store(name, inp, hypers, diag=False):
        res = {dev: run_seed000(inp, hypers, qmap1, qmap2, dev) for dev in (device, "cpu")}
        for k in ("p", "g", "m_code", "m_absmax", "v_code", "v_absmax"):
            tensors[f"{name}/{k}"] = inp[k]
        for dev, r in res.items():
            tag = "cuda" if dev.startswith("cuda") else "cpu"
            for k, v in r.items():
                tensors[f"{name}/{tag}/{k}"] = v
        if diag:  # True: the intermediates; "division": only v_new and v_new / bc2
            for dev in (device, "cpu"):
                tag = "cuda" if dev.startswith("cuda") else "cpu"
                for k, v in seed000_intermediates(inp, hypers, qmap1, qmap2, dev).items():
                    if diag is True or k in ("v_new", "v_div"):
                        tensors[f"{name}/{tag}/diag/{k}"] = v
        cases[name] = dict(step=inp["step"], grad_dtype=str(inp["g"].dtype).replace("torch.", ""), **hypers)
        same = {k: bits_equal(res[device][k], res["cpu"][k]) for k in res["cpu"]}
        report.setdefault("seed000_cuda_vs_cpu_bit_equal", {})[name] = same
        return res

    # chain: three steps from the zero state; each step's inputs are the previous step's outputs (device run)
    p = (torch.randn(N000, generator=gen) * 0.5).to(torch.bfloat16)
    inp = dict(p=p, m_code=torch.full((N000,), zero_code1, dtype=torch.uint8), m_absmax=torch.zeros(nb),
               v_code=torch.full((N000,), zero_code2, dtype=torch.uint8), v_absmax=torch.zeros(nb))
    for k in (1, 2, 3):
        inp["g"] = (torch.randn(N000, generator=gen) * 1e-2).to(torch.bfloat16)
        inp["step"] = k
        res = store(f"chain{k}", dict(inp), DEFAULT_HYPERS, diag="division" if k < 3 else False)[device]
        # recompute the stored codes of m_out/v_out from the step's float32 moments, on the device
        inter = seed000_intermediates(inp, DEFAULT_HYPERS, qmap1, qmap2, device)
        for st, qm, new in (("m", qmap1, inter["m_new"]), ("v", qmap2, inter["v_new"])):
            code = requantise_codes(new.to(device), qm.to(device)).cpu()
            absmax = res[f"{st}_absmax_out"]
            assert bits_equal(qm[code.long()] * absmax.repeat_interleave(S.BLOCK), res[f"{st}_out"]), st
            inp[f"{st}_code"], inp[f"{st}_absmax"] = code, absmax
        inp["p"] = res["p_out"]

    # random states, float32 gradient, step 10; intermediates kept
    rnd = dict(p=(torch.randn(N000, generator=gen) * 0.5).to(torch.bfloat16),
               g=torch.randn(N000, generator=gen) * 1e-2,
               m_code=torch.randint(0, 256, (N000,), generator=gen, dtype=torch.uint8),
               m_absmax=torch.rand(nb, generator=gen) * 0.05,
               v_code=torch.randint(0, 256, (N000,), generator=gen, dtype=torch.uint8),
               v_absmax=torch.rand(nb, generator=gen) * 1e-3, step=10)
    store("rand10", rnd, DEFAULT_HYPERS, diag=True)
    # other hyperparameters, heavy-tailed bf16 gradient, step 1000
    g = torch.randn(N000, generator=gen) * torch.exp(torch.randn(N000, generator=gen) * 2) * 1e-2
    hyp = dict(rnd, g=g.to(torch.bfloat16), step=1000,
               p=(torch.randn(N000, generator=gen) * 2.0).to(torch.bfloat16))
    store("hyp1000", hyp, OTHER_HYPERS, diag=True)
    # zero gradient on a random state, step 4
    store("zerograd4", dict(rnd, g=torch.zeros(N000, dtype=torch.bfloat16), step=4), DEFAULT_HYPERS)

    meta = dict(cases=cases, block=S.BLOCK, n=N000, zero_code1=zero_code1, zero_code2=zero_code2,
                devices=dict(cuda=device, cpu="cpu"))
    save(tensors, os.path.join(out_dir, "seed000_adamw.safetensors"), meta)

    # _requantise on inputs exactly on the midpoints (the lower code must win) and on the map entries
    t2 = {"qmap1": qmap1, "qmap2": qmap2}
    for name, qm in (("signed", qmap1), ("unsigned", qmap2)):
        mid = (qm[:-1] + qm[1:]) * 0.5
        blk0 = torch.cat([torch.ones(1), mid, qm, torch.rand(S.BLOCK - 1 - 255 - 256, generator=gen)
                          * (2 if name == "signed" else 1) - (1 if name == "signed" else 0)])
        blk1 = torch.cat([mid * 3.0, qm * 3.0, torch.full((1,), -3.0 if name == "signed" else 3.0),
                          torch.randn(S.BLOCK - 255 - 256 - 1, generator=gen).clamp(-2.9, 2.9)])
        if name == "unsigned":
            blk1 = blk1.abs()
        x = torch.cat([blk0, blk1]).contiguous()
        t2[f"{name}/x"] = x
        for dev in (device, "cpu"):
            tag = "cuda" if dev.startswith("cuda") else "cpu"
            o, a = S._requantise(x.to(dev), qm.to(dev))
            t2[f"{name}/{tag}/out"], t2[f"{name}/{tag}/absmax"] = o.cpu(), a.cpu()
    save(t2, os.path.join(out_dir, "seed000_requantise.safetensors"), dict(block=S.BLOCK))

    # the dynamic maps and the raw linspace values they are made of
    t3 = {"signed": qmap1, "unsigned": qmap2}
    for n in (2, 3, 5, 9, 17, 33, 65, 129, 257):
        t3[f"linspace/{n}"] = torch.linspace(0.1, 1, n, dtype=torch.float32)
    cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") and hasattr(
        torch.backends.cpu, "get_cpu_capability") else "unknown"
    save(t3, os.path.join(out_dir, "dynamic_map.safetensors"),
         dict(max_exponent_bits=7, total_bits=8, torch_cpu_capability=cap, linspace_start=0.1, linspace_end=1.0))


# ------------------------------------------------------------------------------------------------
# seed 003 on seed 004's battery at reduced sizes (same construction, generator seed 7) + §5 edges
# ------------------------------------------------------------------------------------------------
def battery_reduced():
    g = torch.Generator(device="cpu").manual_seed(7)
    big, small = 1 << 11, 1 << 10
    ts = {
        "normal": torch.randn(big, generator=g),
        "heavy_tail": torch.randn(big, generator=g) * torch.exp(torch.randn(big, generator=g) * 3),
        "tiny": torch.randn(small, generator=g) * 1e-20,
        "adam_v_like": (torch.randn(big, generator=g) * 1e-3) ** 2,
        "nonmult32": torch.randn(small + 17, generator=g),
        "const_groups": torch.ones(1 << 9) * 0.37,
        "with_zeros": torch.where(torch.rand(small, generator=g) < 0.3, torch.zeros(1),
                                  torch.randn(small, generator=g)),
    }
    # numerics.md §5 additions that seed 003 handles without NaN in its integer casts
    ts["all_zeros"] = torch.zeros(96)
    ts["one_element"] = torch.tensor([-0.75])
    ts["empty"] = torch.zeros(0)
    ts["f16_huge"] = torch.randn(64, generator=g) * 1e5          # group absmax above 65504
    ts["f16_tiny"] = torch.randn(64, generator=g) * 1e-6         # scales in float16's subnormal range
    return ts


SPECS003 = {
    "momentum_companded": dict(signed=True, sqrt=False, softsign=True),
    "momentum_linear": dict(signed=True, sqrt=False, softsign=False),
    "variance_companded": dict(signed=False, sqrt=True, softsign=False),
    "variance_linear": dict(signed=False, sqrt=False, softsign=False),
}


def make_seed003(out_dir, report, device):
    tensors, nmse = {}, {}
    for tname, t in battery_reduced().items():
        tensors[f"{tname}/x"] = t
        for sname, sp in SPECS003.items():
            x = t.abs() if sname.startswith("variance") else t
            q, s = S.quantize(x, **sp)
            deq = S.dequantize(q, s, **sp)
            rt = S.roundtrip(x, **sp)
            assert bits_equal(rt.reshape(-1), deq.reshape(-1))
            tensors[f"{tname}/{sname}/q"] = q
            tensors[f"{tname}/{sname}/scales"] = s
            tensors[f"{tname}/{sname}/deq"] = deq
            val = S.nmse(x.reshape(-1), rt.reshape(-1))
            tensors[f"{tname}/{sname}/nmse"] = torch.tensor([val], dtype=torch.float64)
            nmse[f"{tname}/{sname}"] = val
            if device != "cpu":  # the same seed code on the GPU, for the record only
                qd, sd = S.quantize(x.to(device), **sp)
                dd = S.dequantize(qd, sd, **sp).cpu()
                report.setdefault("seed003_gpu_vs_cpu", {})[f"{tname}/{sname}"] = dict(
                    codes_equal=bits_equal(qd.cpu(), q), scales_equal=bits_equal(sd.cpu(), s),
                    deq_bit_mismatches=int((dd.view(torch.int32) != deq.view(torch.int32)).sum()))
    save(tensors, os.path.join(out_dir, "seed003_battery.safetensors"),
         dict(group=S.GROUP, specs=SPECS003, device="cpu", nmse=nmse))


# ------------------------------------------------------------------------------------------------
# torch.optim in fp32 on the CPU, and Lion from numerics.md §4 (one PyTorch op per term)
# ------------------------------------------------------------------------------------------------
def make_torch_optim(out_dir):
    gen = torch.Generator().manual_seed(4)
    n, steps = 512, 5
    p0 = torch.randn(n, generator=gen) * 0.5
    grads = [torch.randn(n, generator=gen) * 0.1 for _ in range(steps)]
    grads[2][:16] = 0.0
    tensors = {"p0": p0}
    for k, gk in enumerate(grads):
        tensors[f"g{k + 1}"] = gk
    configs = {
        "sgd": ("SGD", dict(lr=0.1)),
        "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9)),
        "sgd_dampening": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)),
        "sgd_nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
        "sgd_wd": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.05)),
        "adam_l2": ("Adam", dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)),
        "adamw": ("AdamW", dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)),
    }
    meta = {}
    for name, (cls, kw) in configs.items():
        p = torch.nn.Parameter(p0.clone())
        extra = dict(foreach=False) if "foreach" in getattr(torch.optim, cls).__init__.__code__.co_varnames else {}
        opt = getattr(torch.optim, cls)([p], **kw, **extra)
        for gk in grads:
            p.grad = gk.clone()
            opt.step()
        tensors[f"{name}/p"] = p.detach().clone()
        st = opt.state[p]
        for key in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
            if key in st and st[key] is not None:
                tensors[f"{name}/{key}"] = st[key].clone()
        meta[name] = dict(optimizer=cls, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()})
    # Lion (numerics.md §4): u = sign(beta1*m + (1-beta1)*g); p = p*(1-lr*wd) - lr*u; m = beta2*m + (1-beta2)*g
    lr, beta1, beta2, wd = 1e-2, 0.9, 0.99, 0.1
    p, m = p0.clone(), torch.zeros(n)
    for gk in grads:
        u = torch.sign(beta1 * m + (1 - beta1) * gk)
        p = p * (1 - lr * wd) - lr * u
        m = beta2 * m + (1 - beta2) * gk
    tensors["lion/p"], tensors["lion/m"] = p, m
    meta["lion"] = dict(optimizer="Lion (numerics.md §4, PyTorch ops)", lr=lr, beta1=beta1, beta2=beta2, wd=wd)
    save(tensors, os.path.join(out_dir, "torch_optim.safetensors"), dict(configs=meta, steps=steps, n=n,
                                                                          device="cpu"))


# ------------------------------------------------------------------------------------------------
def probe_division(device):
    """How `tensor / python_float` is evaluated: count disagreements with true division by a float32
    device tensor, and with multiplication by the float32 reciprocal of float32(divisor)."""
    gen = torch.Generator().manual_seed(99)
    v = torch.rand(1 << 20, generator=gen) * torch.exp(torch.randn(1 << 20, generator=gen) * 4)
    out = {}
    for dev in dict.fromkeys([device, "cpu"]):
        vd = v.to(dev)
        rows = {}
        for label, divisor in (("bc2_step1", 1.0 - 0.999 ** 1), ("bc2_step2", 1.0 - 0.999 ** 2),
                               ("bc2_step10", 1.0 - 0.999 ** 10), ("bc2_step1000", 1.0 - 0.999 ** 1000),
                               ("127", 127.0), ("255", 255.0)):
            scalar = vd / divisor
            true_div = vd / torch.tensor(divisor, dtype=torch.float32, device=dev)
            inv = float(torch.tensor(1.0, dtype=torch.float32) / torch.tensor(divisor, dtype=torch.float32))
            recip = vd * inv                              # x * (1.0f / f32(d))
            recip64 = vd * float(torch.tensor(1.0 / divisor, dtype=torch.float32))  # x * f32(1.0 / d)
            rows[label] = dict(n=v.numel(),
                               differs_from_true_division=int((scalar != true_div).sum()),
                               differs_from_f32_reciprocal_multiply=int((scalar != recip).sum()),
                               differs_from_f64_reciprocal_multiply=int((scalar != recip64).sum()))
        # float32 sqrt against the correctly rounded one (float64 sqrt rounded once to float32 is
        # correctly rounded: float64 has more than 2 * 24 + 2 bits)
        exact = v.double().sqrt().float()
        rows["sqrt"] = dict(n=v.numel(), differs_from_correctly_rounded=int((vd.sqrt().cpu() != exact).sum()),
                            differs_via_torch_sqrt=int((torch.sqrt(vd).cpu() != exact).sum()))
        out[dev] = rows
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report = dict(
        command="python3 scripts/golden/make_golden.py --out $OUT" + ("" if args.device == "cuda" else
                                                                      f" --device {args.device}"),
        date_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        python=platform.python_version(), torch=torch.__version__, torch_cuda=torch.version.cuda,
        device=args.device, host=platform.node(), machine=platform.machine(), processor=platform.processor(),
        gpu=torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None,
        cpu_capability=(torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") and
                        hasattr(torch.backends.cpu, "get_cpu_capability") else "unknown"),
    )
    try:
        report["cpu_model"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    make_seed000(args.device, args.out, report)
    make_seed003(args.out, report, args.device)
    make_torch_optim(args.out)
    report["division_probe"] = probe_division(args.device)
    report["safetensors_writer"] = sorted(WRITER)
    with open(os.path.join(args.out, "probe.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    print(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

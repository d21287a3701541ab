#!/usr/bin/env python3
"""PyTorch baselines for qopt-bench, measured in the same device call.

    python3 bench/torch_baselines.py --out torch.json

* device-to-device copy of 1 GiB (``dst.copy_(src)``), the roof as PyTorch sees it;
* ``torch.optim.AdamW(fused=True)`` with fp32 and with bf16 parameters, gradients and states, on
  single tensors of 1, 16, 64 and 256 Mi parameters and on the GPT-2 124M parameter list (148
  tensors, one ``step()``);
* the seed 000 eager reference (``quantized_adamw_step``, imported from scripts/golden/seed_refs.py,
  its tables from make_golden.dynamic_map) at 64 Mi parameters.

Timing as qopt-bench: CUDA events around each call, warm-up (3 steps on every buffer set, which
also creates the optimizer states), median of >= 20 timed calls rotating over K >= 3 buffer sets
with K * footprint >= 4 * L2, a 512 MiB copy queued first so the host runs ahead of the device.
Effective bandwidth counts each stream read once and each written stream written once:
fp32 AdamW 28 B/param (p rw, g r, m rw, v rw), bf16 AdamW 14, seed 000 10 B/param plus its
float32 absmax per 2048 (read and written, twice).

``--device cpu --quick`` is a dry run of the script's logic on the CPU (no fused kernels, host
timers, small sizes); its numbers mean nothing.
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts", "golden"))
import seed_refs as S  # noqa: E402  (the seed's code, transcribed)
from make_golden import dynamic_map  # noqa: E402  (bitsandbytes' dynamic map, as the goldens use)

MI = 1 << 20


def gpt2_shapes():
    shapes = [(50257, 768), (1024, 768)]
    for _ in range(12):
        shapes += [(768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,),
                   (768, 3072), (3072,), (3072, 768), (768,)]
    shapes += [(768,), (768,)]
    return shapes


def numel(shape):
    return math.prod(shape)


class Timer:
    """Times callables with CUDA events (or the host clock on the CPU dry run)."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.spacer_a = torch.empty(128 * MI, dtype=torch.float32, device=device)  # 512 MiB
            self.spacer_b = torch.empty_like(self.spacer_a)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def each(self, fns, n):
        """fns: one callable per buffer set; n timed calls rotating over them. Returns ms each."""
        k = len(fns)
        if not self.cuda:
            out = []
            for i in range(n):
                t0 = time.perf_counter()
                fns[i % k]()
                out.append((time.perf_counter() - t0) * 1e3)
            return out
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(n)]
        self.sync()
        self.spacer_b.copy_(self.spacer_a)  # head start: the host queues the calls meanwhile
        for i in range(n):
            ev[i][0].record()
            fns[i % k]()
            ev[i][1].record()
        self.sync()
        return [a.elapsed_time(b) for a, b in ev]


def stats(ms):
    return {"ms_median": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms),
            "ms_mean": statistics.fmean(ms), "n": len(ms)}


def copy_roof(timer, device, nbytes):
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ms = timer.each([lambda: dst.copy_(src)], 20)
    st = stats(ms)
    st["bytes"] = nbytes
    st["gbps"] = 2 * nbytes / (st["ms_median"] * 1e-3) / 1e9
    del src, dst
    return st


def sets_for(footprint, l2, cap=64):
    return max(3, min(cap, -(-4 * l2 // footprint)))


def adamw_case(timer, device, dtype, shapes, l2, iters, fused):
    elem = torch.finfo(dtype).bits // 8
    n = sum(numel(s) for s in shapes)
    footprint = n * elem * 4  # p, g, m, v
    k = sets_for(footprint, l2)
    opts = []
    gen = torch.Generator(device=device)
    for s in range(k):
        gen.manual_seed(1000 + s)
        params = []
        for shape in shapes:
            p = torch.nn.Parameter(0.02 * torch.randn(shape, generator=gen, device=device,
                                                      dtype=torch.float32).to(dtype))
            p.grad = (1e-3 * torch.randn(shape, generator=gen, device=device,
                                         dtype=torch.float32)).to(dtype)
            params.append(p)
        kw = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        if fused:
            kw["fused"] = True
        opts.append(torch.optim.AdamW(params, **kw))
    for _ in range(3):
        for o in opts:
            o.step()
    timer.sync()
    ms = timer.each([o.step for o in opts], max(iters, k))
    st = stats(ms)
    bpp = 7 * elem  # p rw (2), g r (1), m rw (2), v rw (2)
    st.update(numel=n, tensors=len(shapes), sets=k, bytes=n * bpp, bytes_per_param=bpp,
              gbps=n * bpp / (st["ms_median"] * 1e-3) / 1e9)
    del opts
    return st


def seed000_case(timer, device, n, l2, iters):
    block = S.BLOCK
    assert n % block == 0
    nb = n // block
    qmap1 = dynamic_map(signed=True).to(device)
    qmap2 = dynamic_map(signed=False).to(device)
    footprint = n * (2 + 2 + 1 + 1)
    k = sets_for(footprint, l2)
    gen = torch.Generator(device=device)
    sets = []
    for s in range(k):
        gen.manual_seed(2000 + s)
        p = (0.02 * torch.randn(n, generator=gen, device=device)).to(torch.bfloat16)
        g = (1e-3 * torch.randn(n, generator=gen, device=device)).to(torch.bfloat16)
        m_code = torch.randint(0, 256, (n,), generator=gen, device=device, dtype=torch.int64
                               ).to(torch.uint8)
        v_code = torch.randint(0, 256, (n,), generator=gen, device=device, dtype=torch.int64
                               ).to(torch.uint8)
        m_absmax = 1e-3 * (0.5 + torch.rand(nb, generator=gen, device=device))
        v_absmax = 1e-6 * (0.5 + torch.rand(nb, generator=gen, device=device))
        sets.append((p, g, m_code, m_absmax, v_code, v_absmax))

    def call(args):
        return lambda: S.quantized_adamw_step(*args, qmap1, qmap2, 10)

    fns = [call(a) for a in sets]
    for f in fns:
        f()
    timer.sync()
    ms = timer.each(fns, max(iters, k))
    st = stats(ms)
    nbytes = n * 10 + nb * 4 * 2 * 2
    st.update(numel=n, tensors=1, sets=k, bytes=nbytes, bytes_per_param=nbytes / n,
              gbps=nbytes / (st["ms_median"] * 1e-3) / 1e9)
    del sets, fns
    return st


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="torch_baselines.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sizes", default="1,16,64,256", help="single-tensor sizes in Mi params")
    ap.add_argument("--seed-size", type=int, default=64, help="seed 000 size in Mi params")
    ap.add_argument("--iters", type=int, default=25)
    ap.add_argument("--quick", action="store_true", help="dry run: tiny sizes, few iterations")
    args = ap.parse_args()

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    gpt2 = gpt2_shapes()
    iters = max(20, args.iters)
    seed_n = args.seed_size * MI
    copy_bytes = 1 << 30
    if args.quick:
        sizes, iters, seed_n, copy_bytes = [1], 3, 2 * S.BLOCK * 8, 1 << 20
        gpt2 = [(64, 32), (16,), (32, 48)]
    if cuda:
        props = torch.cuda.get_device_properties(device)
        l2 = props.L2_cache_size
        dev_info = {"name": props.name, "cc": f"{props.major}.{props.minor}",
                    "sms": props.multi_processor_count, "l2_bytes": l2,
                    "total_mem_bytes": props.total_memory}
    else:
        l2 = 60 * MI
        dev_info = {"name": platform.processor() or "cpu"}
    out = {"tool": "torch_baselines.py",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "torch": torch.__version__, "cuda": torch.version.cuda, "device": dev_info,
           "method": __doc__.split("\n\n")[3].replace("\n", " "), "results": []}
    timer = Timer(device)

    def log(name, case, st):
        print(f"{name:28s} {case:>10s} {st['ms_median']:9.4f} ms  {st.get('gbps', 0):7.1f} GB/s"
              f"  K={st.get('sets', '-')}", flush=True)

    out["copy_roof"] = copy_roof(timer, device, copy_bytes)
    log("copy (dst.copy_(src))", f"{copy_bytes >> 20}MiB", out["copy_roof"])
    roof = out["copy_roof"]["gbps"]

    def record(name, case, st):
        st = dict(st, name=name, case=case, roof_fraction=st["gbps"] / roof)
        out["results"].append(st)
        log(name, case, st)

    for dtype, label in ((torch.float32, "torch AdamW fused fp32"),
                         (torch.bfloat16, "torch AdamW fused bf16")):
        cases = [(f"{s}Mi", [(s * MI,)]) for s in sizes] + [("gpt2-124M", gpt2)]
        for case, shapes in cases:
            try:
                record(label, case, adamw_case(timer, device, dtype, shapes, l2, iters, cuda))
            except Exception as e:  # keep going: the other numbers still count
                print(f"{label} {case}: FAILED: {e!r}", flush=True)
                out["results"].append({"name": label, "case": case, "error": repr(e)})
            if cuda:
                torch.cuda.empty_cache()
    try:
        record("seed 000 eager reference", f"{seed_n // MI}Mi" if seed_n >= MI else str(seed_n),
               seed000_case(timer, device, seed_n, l2, iters))
    except Exception as e:
        print(f"seed 000: FAILED: {e!r}", flush=True)
        out["results"].append({"name": "seed 000 eager reference", "error": repr(e)})
    if cuda:
        torch.cuda.empty_cache()
        out["copy_roof_after"] = copy_roof(timer, device, copy_bytes)
        log("copy after", f"{copy_bytes >> 20}MiB", out["copy_roof_after"])
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

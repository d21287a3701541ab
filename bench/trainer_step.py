#!/usr/bin/env python3
"""optimizer.step() as a trainer calls it: eager against a captured CUDA graph, for qopt FlashAdamW,
qopt AdamW8bit and torch.optim.AdamW(fused=True), on bf16 parameters, all in one run.

Lists: the GPT-2 124M parameter list (148 tensors, bench/BenchCommon.cpp's gpt2Shapes) and a
ResNet-like list of 300 small tensors (bench/HostPath.cpp's resnetLikeNumels).

Cases:
  same       the same gradient tensors every step;
  grads_new  every p.grad a different tensor each step, from a rotating pool of three sets, so every
             gradient pointer changes (what zero_grad(set_to_none=True) and a new backward give);
  graph      optimizer.step() captured once in a CUDA graph (capturable=True), replayed.
Figures per case: host ms of the step() call (median, no sync), and ms per step back to back (N
steps queued between two events, one sync at the end, divided by N: the step's cost to a training
loop, host time included when the host is the slower side). The grads_new loop assigns p.grad for
every parameter between steps (outside the host timing, inside the back-to-back time, for every
optimizer alike).

    python3 bench/trainer_step.py --out bench/results/<date>-h200-host/trainer_step.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

# QOPT_PYTHON_DIR: another checkout's package (a before/after comparison in one run).
sys.path.insert(0, os.environ.get("QOPT_PYTHON_DIR",
                                  str(Path(__file__).resolve().parents[1] / "python")))
import qopt  # noqa: E402


def gpt2_shapes():
    v = [(50257, 768), (1024, 768)]
    for _ in range(12):
        v += [(768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,),
              (768, 3072), (3072,), (3072, 768), (768,)]
    v += [(768,), (768,)]
    return v


def resnet_like_shapes():
    v = []
    for i in range(50):
        c = 64 << min(3, i * 4 // 50)
        v += [(4 * c, c, 1, 1), (c,), (c,), (c, c, 3, 3), (c,), (c,)]
    return v


def make_params(shapes, device, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    params = [torch.nn.Parameter((0.02 * torch.randn(s, generator=g)).to(device, torch.bfloat16))
              for s in shapes]
    pools = [[(1e-3 * torch.randn(s, generator=g)).to(device, torch.bfloat16) for s in shapes]
             for _ in range(3)]
    return params, pools


def make_opt(kind, params, capturable=False):
    hp = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if kind == "qopt_flash_adamw":
        return qopt.FlashAdamW(params, capturable=capturable, **hp)
    if kind == "qopt_adamw8bit":
        return qopt.AdamW8bit(params, capturable=capturable, **hp)
    if kind == "torch_adamw_fused":
        return torch.optim.AdamW(params, fused=True, capturable=capturable, **hp)
    raise ValueError(kind)


def eager(kind, shapes, device, steps, grads_new):
    params, pools = make_params(shapes, device)
    for p, g in zip(params, pools[0]):
        p.grad = g
    opt = make_opt(kind, params)
    for i in range(5):
        if grads_new:
            for p, g in zip(params, pools[i % 3]):
                p.grad = g
        opt.step()
    torch.cuda.synchronize()
    host = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for i in range(steps):
        if grads_new:
            for p, g in zip(params, pools[i % 3]):
                p.grad = g
        t = time.perf_counter()
        opt.step()
        host.append((time.perf_counter() - t) * 1e3)
    e1.record()
    torch.cuda.synchronize()
    return {"host_ms_median": statistics.median(host),
            "host_ms_p90": sorted(host)[int(0.9 * len(host))],
            "ms_per_step_back_to_back": e0.elapsed_time(e1) / steps}


def graphed(kind, shapes, device, steps):
    params, pools = make_params(shapes, device)
    for p, g in zip(params, pools[0]):
        p.grad = g
    opt = make_opt(kind, params, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opt.step()
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(steps):
        graph.replay()
    e1.record()
    torch.cuda.synchronize()
    return {"ms_per_step_back_to_back": e0.elapsed_time(e1) / steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kinds", default="qopt_flash_adamw,qopt_adamw8bit,torch_adamw_fused")
    ap.add_argument("--out", default="trainer_step.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("trainer_step: no CUDA device; nothing measured")
        return
    device = torch.device("cuda")
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "host": platform.node(), "steps": args.steps, "rows": []}
    lists = {"gpt2-124M": gpt2_shapes(), "resnet-like-300": resnet_like_shapes()}
    print(f"{'optimizer':20s} {'list':16s} {'case':10s} {'host ms':>9s} {'ms/step':>9s}")
    for lname, shapes in lists.items():
        for kind in args.kinds.split(","):
            for case in ("same", "grads_new", "graph"):
                try:
                    r = (graphed(kind, shapes, device, args.steps) if case == "graph"
                         else eager(kind, shapes, device, args.steps, case == "grads_new"))
                except Exception as e:  # a failed case is recorded, the others still run
                    r = {"error": f"{type(e).__name__}: {e}"}
                r.update(optimizer=kind, list=lname, tensors=len(shapes), case=case)
                result["rows"].append(r)
                print(f"{kind:20s} {lname:16s} {case:10s} "
                      f"{r.get('host_ms_median', float('nan')):9.4f} "
                      f"{r.get('ms_per_step_back_to_back', float('nan')):9.4f} "
                      f"{r.get('error', '')}", flush=True)
                torch.cuda.empty_cache()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

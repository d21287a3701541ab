#!/usr/bin/env python3
"""Global gradient clipping, fused into the step (max_grad_norm=) against torch's
clip_grad_norm_ + torch.optim.AdamW(fused=True), and each without clipping, all in one run
(issue 23, item 2).

Lists: one 64 Mi-parameter bf16 tensor, and the GPT-2 124M parameter list (148 bf16 tensors,
bench/trainer_step.py's gpt2_shapes). Gradients: 1e-3 * randn in bf16 (global norm about 8 on the
64 Mi tensor, 11 on GPT-2), max_norm 1.0, so every clipped step clips.

Cases (lr 1e-3, betas (0.9, 0.95), weight decay 0.1):
  torch_fused            torch.optim.AdamW(fused=True)
  torch_clip+fused       torch.nn.utils.clip_grad_norm_(params, 1.0), then the same
  norm_only              the norm pass alone (torch._foreach_norm + vector_norm of the stack)
  qopt_flash             qopt.FlashAdamW
  qopt_flash_clip        qopt.FlashAdamW(max_grad_norm=1.0)
  qopt_flash_clip_skip   qopt.FlashAdamW(max_grad_norm=1.0, skip_nonfinite=True)
  qopt_flash_stepclip    qopt.FlashAdamWClip(max_grad_norm=1.0): the clip in the spec, its norm a
                         whole-step reduction that the runtime computes (no torch op a step)
  qopt_8bit              qopt.AdamW8bit (bitsandbytes' block 256)
  qopt_8bit_clip         qopt.AdamW8bit(max_grad_norm=1.0)
The "(graph)" rows capture the step once in a CUDA graph (capturable=True) and time its replays:
the device's time per step without the host.
The clipping cases reset the gradients before each step (the torch case rescales them in place);
the copy runs outside the timed region, on the same stream.

Figures per case: the median of per-step CUDA-event times (ms), the back-to-back time per step
(N steps between two events, one sync, / N), the host time of the call (median), and GB/s from a
traffic model (bytes each step must move at least: the step's reads and writes of parameters,
gradients and state, plus the norm read and torch's in-place rescale, 6 B/param in bf16).

    python3 bench/clip_bench.py --out bench/results/<date>-h200-clip/clip_bench.json
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

sys.path.insert(0, os.environ.get("QOPT_PYTHON_DIR",
                                  str(Path(__file__).resolve().parents[1] / "python")))
import qopt  # noqa: E402

HP = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
MAX_NORM = 1.0
CASES = ["torch_fused", "torch_clip+fused", "norm_only", "qopt_flash", "qopt_flash_clip",
         "qopt_flash_stepclip", "qopt_flash_clip_skip", "qopt_8bit", "qopt_8bit_clip"]


def gpt2_shapes():
    v = [(50257, 768), (1024, 768)]
    for _ in range(12):
        v += [(768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,),
              (768, 3072), (3072,), (3072, 768), (768,)]
    v += [(768,), (768,)]
    return v


def make(shapes, device, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    params = [torch.nn.Parameter(
        (0.02 * torch.randn(s, generator=g, device=device)).to(torch.bfloat16)) for s in shapes]
    grads = [(1e-3 * torch.randn(s, generator=g, device=device)).to(torch.bfloat16) for s in shapes]
    return params, grads


def norm_pass(params):
    grads = [p.grad for p in params]
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2)), 2)


def build(case, params, capturable=False):
    """(step function, optimizer or None, state bytes per parameter)."""
    n = sum(p.numel() for p in params)
    if case.startswith("torch"):
        opt = torch.optim.AdamW(params, fused=True, capturable=capturable, **HP)
        clip = case == "torch_clip+fused"

        def step():
            if clip:
                torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
            opt.step()
        return step, opt, 4.0   # exp_avg, exp_avg_sq in the parameters' dtype (bf16)
    if case == "norm_only":
        return (lambda: norm_pass(params)), None, 0.0
    kw = {}
    if "clip" in case:
        kw["max_grad_norm"] = MAX_NORM
    if case.endswith("skip"):
        kw["skip_nonfinite"] = True
    cls = qopt.FlashAdamW if "flash" in case else qopt.AdamW8bit
    if case == "qopt_flash_stepclip":
        cls = qopt.FlashAdamWClip
    opt = cls(params, capturable=capturable, **HP, **kw)
    opt.init_state()
    return opt.step, opt, opt.state_bytes() / n


def traffic_bytes_per_param(case, state_bpp):
    """Bytes per parameter a step moves at least (bf16 parameters and gradients)."""
    if case == "norm_only":
        return 2.0
    b = 2 + 2 + 2 + 2 * state_bpp      # parameter read + write, gradient read, state read + write
    if "clip" in case:
        b += 2                        # the norm pass reads every gradient
        if case.startswith("torch"):
            b += 4                    # clip_grad_norm_ rescales the gradients in place
    return b


def run_case(case, shapes, device, steps, warmup):
    params, grads = make(shapes, device)
    for p, g in zip(params, grads):
        p.grad = g.clone()
    step, opt, state_bpp = build(case, params)
    resets = case == "torch_clip+fused"   # the only case that writes the gradients

    def reset():
        if resets:
            torch._foreach_copy_(list(p.grad for p in params), grads)

    for _ in range(warmup):
        reset()
        step()
    torch.cuda.synchronize()
    per, host = [], []
    for _ in range(steps):
        reset()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        t = time.perf_counter()
        step()
        host.append((time.perf_counter() - t) * 1e3)
        e1.record()
        per.append((e0, e1))
    torch.cuda.synchronize()
    ms = statistics.median(a.elapsed_time(b) for a, b in per)
    # back to back (no reset: for torch_clip+fused the gradients after the first step are already
    # clipped, which changes no traffic)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(steps):
        step()
    e1.record()
    torch.cuda.synchronize()
    b2b = e0.elapsed_time(e1) / steps
    n = sum(p.numel() for p in params)
    bpp = traffic_bytes_per_param(case, state_bpp)
    row = {"case": case, "params": n, "tensors": len(shapes), "ms_median": ms,
           "ms_back_to_back": b2b, "host_ms_median": statistics.median(host),
           "model_bytes_per_param": bpp, "GBps_model": bpp * n / (ms * 1e-3) / 1e9}
    if opt is not None and getattr(opt, "last_grad_norm", None) is not None:
        row["last_grad_norm"] = float(opt.last_grad_norm)
    del step, opt, params, grads
    torch.cuda.empty_cache()
    return row


def run_graphed(case, shapes, device, steps):
    """The step captured once in a CUDA graph (capturable=True) and replayed: the device's time
    per step without the host (torch_clip+fused rescales the same gradients at every replay,
    which changes no traffic)."""
    params, grads = make(shapes, device)
    for p, g in zip(params, grads):
        p.grad = g.clone()
    step, opt, state_bpp = build(case, params, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    per = []
    for _ in range(steps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        per.append((e0, e1))
    torch.cuda.synchronize()
    ms = statistics.median(a.elapsed_time(b) for a, b in per)
    n = sum(p.numel() for p in params)
    bpp = traffic_bytes_per_param(case, state_bpp)
    row = {"case": case + " (graph)", "params": n, "tensors": len(shapes), "ms_median": ms,
           "model_bytes_per_param": bpp, "GBps_model": bpp * n / (ms * 1e-3) / 1e9}
    del graph, step, opt, params, grads
    torch.cuda.empty_cache()
    return row


def markdown(result):
    lines = [f"device: {result['device']}, torch {result['torch']}, {result['date']}; "
             f"median of {result['steps']} steps after {result['warmup']} warm-up", "",
             "| list | case | ms/step (median) | ms/step back to back | host ms | model B/param | "
             "GB/s (model) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['list']} | {r['case']} | error: {r['error']} | | | | |")
            continue
        def f(x):
            return "–" if x != x else f"{x:.4f}"
        nan = float("nan")
        lines.append(f"| {r['list']} | {r['case']} | {f(r['ms_median'])} | "
                     f"{f(r.get('ms_back_to_back', nan))} | {f(r.get('host_ms_median', nan))} | "
                     f"{r['model_bytes_per_param']:.2f} | {r['GBps_model']:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--graph-cases", default="torch_fused,torch_clip+fused,qopt_flash,"
                    "qopt_flash_clip,qopt_flash_stepclip,qopt_8bit,qopt_8bit_clip")
    ap.add_argument("--out", default="clip_bench.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("clip_bench: no CUDA device; nothing measured")
        return
    device = torch.device("cuda")
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "host": platform.node(), "steps": args.steps, "warmup": args.warmup,
              "max_norm": MAX_NORM, "rows": []}
    lists = {"64Mi": [(64 << 20,)], "gpt2-124M": gpt2_shapes()}
    print(f"{'list':10s} {'case':30s} {'ms':>8s} {'b2b ms':>8s} {'host ms':>8s} {'GB/s':>6s} norm")
    runs = [(case, False) for case in args.cases.split(",")]
    runs += [(case, True) for case in args.graph_cases.split(",") if case]
    for lname, shapes in lists.items():
        for case, graphed in runs:
            try:
                r = (run_graphed(case, shapes, device, args.steps) if graphed
                     else run_case(case, shapes, device, args.steps, args.warmup))
            except Exception as e:  # a failed case is recorded, the others still run
                r = {"case": case + (" (graph)" if graphed else ""),
                     "error": f"{type(e).__name__}: {e}"}
            r["list"] = lname
            result["rows"].append(r)
            print(f"{lname:10s} {r['case']:30s} {r.get('ms_median', float('nan')):8.4f} "
                  f"{r.get('ms_back_to_back', float('nan')):8.4f} "
                  f"{r.get('host_ms_median', float('nan')):8.4f} "
                  f"{r.get('GBps_model', float('nan')):6.0f} {r.get('last_grad_norm', '')} "
                  f"{r.get('error', '')}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()

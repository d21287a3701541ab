#!/usr/bin/env python3
"""Where the time of one optimizer step goes, for the parameters of train_gpt.py's model
(4.87M bf16 parameters in 76 tensors, two param groups).

- eager step: host time of optimizer.step() and of its parts (the package's Python code, the
  runtime's qopt_step_many call, and qopt_validate alone, which that call runs first);
- GPU time of one step, measured by replaying a CUDA graph of the step (no host overhead):
  qopt.FlashAdamW(capturable=True) against torch.optim.AdamW(fused=True, capturable=True).

    PYTHONPATH=python python3 python/examples/bench_step.py --out python/examples/results
"""

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import qopt  # noqa: E402
import qopt.optim as O  # noqa: E402
from qopt import _capi as C  # noqa: E402
from train_gpt import GPT, param_groups  # noqa: E402


def make(device, seed=0):
    torch.manual_seed(seed)
    m = GPT(256, 256, 256, 6, 8).to(device=device, dtype=torch.bfloat16)
    for p in m.parameters():
        p.grad = (1e-2 * torch.randn_like(p, dtype=torch.float32)).to(torch.bfloat16)
    return m


def host_ms(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return statistics.median(out)


def graph_ms(opt, params, n, device):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        opt.step()
    for _ in range(10):
        g.replay()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    for _ in range(n):
        g.replay()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / n


def runtime_breakdown(opt, n, sync):
    """Host time of the runtime's step call (qopt_step_many: one per stream, validating and
    launching every launch of the step) per optimizer step, and of qopt_validate alone (which
    each of those calls runs first) for the same tensor lists. Uses the package's internals: the
    launch cache (opt._cache) and the ctypes library the optimizers call through."""
    lib = C.lib()
    times = []
    timed = ("qopt_step_many",)

    class Timed:
        def __getattr__(self, k):
            f = getattr(lib, k)
            if k not in timed:
                return f

            def g(*a):
                t = time.perf_counter()
                r = f(*a)
                times.append((time.perf_counter() - t) * 1e3)
                return r
            return g

    real_lib = O.C.lib
    O.C.lib = lambda: Timed()
    try:
        opt.step()  # the launches of this step: one timed call each
        calls = len(times)
        for _ in range(n):
            opt.step()
    finally:
        O.C.lib = real_lib
    sync()
    launches = [ln for cache in opt._cache.values() for ln in cache.launches]
    if calls == 0:
        raise RuntimeError(f"no runtime step call for {len(launches)} launches")
    times = times[calls:]
    per_step = [sum(times[i:i + calls]) for i in range(0, len(times), calls)]
    out = {"qopt_launches_per_step": calls,
           "qopt_step_calls_ms_per_step": statistics.median(per_step)}
    val = []
    for ln in launches:
        k = ln._kernel(ln.slots[False])   # the launch's kernel handle (no GradScaler here)

        def v(ln=ln, k=k):
            C.check(lib.qopt_validate(k, ctypes.byref(ln.list), ln.table_ptrs, len(ln.tables)),
                    "qopt_validate")
        val.append(host_ms(v, n))
    out["qopt_validate_ms_per_step"] = sum(val)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: this PyTorch sees no CUDA device (use --device cpu for "
                 f"the host backend; the CUDA-graph part needs a GPU)")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    res = {"device": torch.cuda.get_device_name(dev) if cuda else "cpu", "torch": torch.__version__}

    m = make(dev)
    res["params"] = sum(p.numel() for p in m.parameters())
    res["tensors"] = sum(1 for _ in m.parameters())
    opt = qopt.FlashAdamW(param_groups(m, 0.1), lr=1e-3)
    for _ in range(20):
        opt.step()
    sync()
    res["qopt_eager_step_host_ms"] = host_ms(opt.step, args.n)
    sync()

    # The runtime's share of the step: internal API (the optimizer's launch cache), so a change
    # there is reported here instead of stopping the benchmark.
    try:
        res.update(runtime_breakdown(opt, args.n, sync))
        res["qopt_python_ms_per_step"] = (res["qopt_eager_step_host_ms"]
                                          - res["qopt_step_calls_ms_per_step"])
    except Exception as e:  # report and go on
        res["qopt_runtime_breakdown"] = f"failed: {type(e).__name__}: {e}"

    for k, v in res.items():
        print(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}", flush=True)
    if cuda:
        for name, kw in (("torch_adamw_fused", dict(fused=True)), ("torch_adamw_foreach", dict(foreach=True))):
            mt = make(dev)
            o = torch.optim.AdamW(param_groups(mt, 0.1), lr=1e-3, **kw)
            for _ in range(20):
                o.step()
            sync()
            res[f"{name}_eager_step_host_ms"] = host_ms(o.step, args.n)
            sync()
            print(f"{name}_eager_step_host_ms: {res[f'{name}_eager_step_host_ms']:.4f}", flush=True)
        try:
            mg = make(dev)
            og = qopt.FlashAdamW(param_groups(mg, 0.1), lr=torch.tensor(1e-3, device=dev), capturable=True)
            res["qopt_graph_step_gpu_ms"] = graph_ms(og, list(mg.parameters()), args.n, dev)
        except Exception as e:  # report and go on
            res["qopt_graph_step_gpu_ms"] = f"failed: {e}"
        print(f"qopt_graph_step_gpu_ms: {res['qopt_graph_step_gpu_ms']}", flush=True)
        mt = make(dev)
        ot = torch.optim.AdamW(param_groups(mt, 0.1), lr=torch.tensor(1e-3, device=dev), fused=True,
                               capturable=True)
        res["torch_adamw_fused_graph_step_gpu_ms"] = graph_ms(ot, list(mt.parameters()), args.n, dev)
        print(f"torch_adamw_fused_graph_step_gpu_ms: {res['torch_adamw_fused_graph_step_gpu_ms']:.4f}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "step_bench.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()

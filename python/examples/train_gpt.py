#!/usr/bin/env python3
"""Train a small GPT-style byte-level language model with qopt's FlashAdamW and with
torch.optim.AdamW, same seed, same initial weights, same batches, and compare.

Corpus: the Python standard library's source found on the machine (every
/usr/lib/python3*/**/*.py, sorted, concatenated, as bytes), split 95/5 into train/validation.

Runs (--runs):
  qopt        qopt.FlashAdamW on the bf16 model (bf16 parameters + int8 error bits = 24-bit masters,
              8-bit moments): the drop-in swap.
  torch_bf16  torch.optim.AdamW on the same bf16 model: its moments are bf16 too (torch keeps state
              in the parameter dtype) and there is no master copy, so small updates are rounded away.
  torch_fp32  torch.optim.AdamW on a float32 copy of the model run under bf16 autocast: the usual
              mixed-precision setup with float32 master weights and float32 moments (the quality
              reference, 4x the optimizer memory).
  qopt_4bit   qopt.AdamW4bit (torchao's layout: 4-bit moments, groups of 128) on the bf16 model,
              rounded to nearest, no master weight.
  qopt_4bit_sr  the same with bf16_stochastic_round=True (Philox stochastic rounding, no master).
  qopt_sr     qopt.FlashAdamW(master_weight_bits=None, stochastic_rounding=True) on the bf16 model.

Writes <out>/loss_curves.csv, <out>/loss_curves.png (if matplotlib is there), <out>/summary.json and
<out>/summary.md.

--gradient-release N steps the qopt run from the gradient hooks during backward
(qopt.enable_gradient_release, buckets of N elements; 0: each parameter alone) and frees each
gradient once stepped; gradient clipping needs every gradient at once, so it goes with --no-clip
(use --no-clip for the run it is compared with too). --sync-timing synchronizes the device at the
end of every iteration, so the iteration times are the device's (the optimizer step has no time of
its own under gradient release). Every run reports its peak CUDA memory (max_memory_allocated
from the first step to the last).

    PYTHONPATH=python python3 python/examples/train_gpt.py --steps 1000 --out python/examples/results
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # python/ (source checkout)
import qopt  # noqa: E402


# ------------------------------------------------------------------------------ data

def load_corpus(max_bytes: int) -> bytes:
    files = sorted(set(glob.glob("/usr/lib/python3*/**/*.py", recursive=True)))
    chunks, total, used = [], 0, 0
    for f in files:
        try:
            b = Path(f).read_bytes()
        except OSError:
            continue
        chunks.append(b)
        total += len(b)
        used += 1
        if total >= max_bytes:
            break
    data = b"".join(chunks)[:max_bytes]
    return data, used


class Batches:
    """Random windows of the corpus, drawn from a seeded CPU generator: every run sees the same
    batches in the same order."""

    def __init__(self, data: torch.Tensor, batch: int, seq: int, seed: int, device):
        self.data, self.batch, self.seq, self.device = data, batch, seq, device
        self.gen = torch.Generator().manual_seed(seed)

    def next(self):
        ix = torch.randint(0, len(self.data) - self.seq - 1, (self.batch,), generator=self.gen)
        x = torch.stack([self.data[i:i + self.seq] for i in ix.tolist()])
        y = torch.stack([self.data[i + 1:i + 1 + self.seq] for i in ix.tolist()])
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


# ----------------------------------------------------------------------------- model

class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            a = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int, layers: int, heads: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def param_groups(model: nn.Module, wd: float):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def optimizer_state_bytes(opt) -> int:
    if isinstance(opt, qopt.QoptOptimizer):
        return opt.state_bytes()
    total = 0
    for st in opt.state.values():
        for k, v in st.items():
            if isinstance(v, torch.Tensor) and k != "step":
                total += v.numel() * v.element_size()
    return total


# ------------------------------------------------------------------------------- run

def run(kind: str, args, data_train, data_val, device, log):
    torch.manual_seed(args.seed)
    model = GPT(256, args.seq, args.d_model, args.layers, args.heads)  # float32 init, same for all
    if kind == "torch_fp32":
        model = model.to(device)
    else:
        model = model.to(device=device, dtype=torch.bfloat16)
    nparams = sum(p.numel() for p in model.parameters())
    groups = param_groups(model, args.weight_decay)
    hp = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if kind == "qopt":
        opt = qopt.FlashAdamW(groups, **hp)
    elif kind in ("qopt_4bit", "qopt_4bit_sr"):
        opt = qopt.AdamW4bit(groups, bf16_stochastic_round=kind == "qopt_4bit_sr", **hp)
    elif kind == "qopt_sr":
        opt = qopt.FlashAdamW(groups, master_weight_bits=None, stochastic_rounding=True, **hp)
    else:
        fused = args.torch_fused and device.type == "cuda"
        opt = torch.optim.AdamW(groups, fused=fused, **hp) if fused else torch.optim.AdamW(groups, **hp)

    def lr_lambda(step):  # linear warm-up, cosine to 10%
        if step < args.warmup:
            return (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    release = None
    if args.gradient_release is not None:
        if kind != "qopt":
            raise SystemExit(f"--gradient-release steps qopt's optimizer; run '{kind}' has "
                             f"{type(opt).__name__}")
        if not args.no_clip:
            raise SystemExit("--gradient-release frees each gradient during backward: gradient "
                             "clipping (which needs them all) must be off, --no-clip")
        release = qopt.enable_gradient_release(model, opt, bucket_numel=args.gradient_release)
    train = Batches(data_train, args.batch, args.seq, args.seed, device)
    vb = Batches(data_val, args.batch, args.seq, args.seed + 1, device)
    val_batches = [vb.next() for _ in range(args.val_batches)]
    autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16)
                if kind == "torch_fp32" else torch.autocast(device_type=device.type, enabled=False))

    def evaluate():
        model.eval()
        with torch.no_grad(), autocast:
            losses = [model(x, y) for x, y in val_batches]
        model.train()
        return torch.stack(losses).mean().item()

    cuda = device.type == "cuda"
    train_losses, val_curve, step_events, host_ms, iter_ms = [], [], [], [], []
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    t_start = time.perf_counter()
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = train.next()
        with autocast:
            loss = model(x, y)
        loss.backward()        # under gradient release this steps and frees every gradient
        if not args.no_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if release is None:
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
            h0 = time.perf_counter()
            opt.step()
            host_ms.append((time.perf_counter() - h0) * 1e3)
            if cuda:
                e1.record()
                step_events.append((e0, e1))
            opt.zero_grad(set_to_none=True)
        sched.step()
        train_losses.append(loss.detach())
        if cuda and args.sync_timing:
            torch.cuda.synchronize()
            iter_ms.append((time.perf_counter() - t0) * 1e3)
        if (step + 1) % args.eval_every == 0 or step == 0:
            v = evaluate()
            val_curve.append((step + 1, v))
            log(f"{kind:10s} step {step + 1:5d}  train {train_losses[-1].item():.4f}  val {v:.4f}  "
                f"lr {sched.get_last_lr()[0]:.2e}")
        if cuda and step % 50 == 0:
            torch.cuda.synchronize()
        if not (cuda and args.sync_timing):
            iter_ms.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t_start
    peak = torch.cuda.max_memory_allocated(device) if cuda else None
    launches = None
    if release is not None:
        launches = opt._release.launches      # buckets the gradient hooks stepped
        release.remove()
    train_losses = [t.item() for t in train_losses]
    opt_ms = [a.elapsed_time(b) for a, b in step_events] if cuda else host_ms
    skip = min(50, len(iter_ms) // 4)  # warm-up steps (first launches, module loads)
    nan = float("nan")
    state_bytes = optimizer_state_bytes(opt)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    final_val = evaluate()
    return {
        "kind": kind, "params": nparams, "train_losses": train_losses, "val_curve": val_curve,
        "final_val_loss": final_val,
        "final_train_loss_mean_last_100": statistics.fmean(train_losses[-100:]),
        "optimizer_state_bytes": state_bytes,
        "optimizer_state_bytes_per_param": state_bytes / nparams,
        "param_bytes_per_param": param_bytes / nparams,
        # (none under gradient release: the step runs inside backward)
        "optimizer_step_ms_median": statistics.median(opt_ms[skip:]) if opt_ms else nan,
        "optimizer_step_host_ms_median": statistics.median(host_ms[skip:]) if host_ms else nan,
        "iteration_ms_median": statistics.median(iter_ms[skip:]),
        "iteration_ms_synced": bool(cuda and args.sync_timing),
        "peak_memory_bytes": peak,
        "gradient_release_bucket_numel": args.gradient_release,
        "gradient_release_buckets": launches,
        "wall_s": wall,
        "optimizer": type(opt).__name__ + (" (fused)" if getattr(opt, "defaults", {}).get("fused") else "")
        + (" + gradient release" if release is not None else ""),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--val-batches", type=int, default=20)
    ap.add_argument("--corpus-bytes", type=int, default=32 << 20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="qopt,torch_bf16,torch_fp32")
    ap.add_argument("--no-torch-fused", dest="torch_fused", action="store_false")
    ap.add_argument("--gradient-release", type=int, default=None, metavar="BUCKET_NUMEL",
                    help="qopt run: qopt.enable_gradient_release with this bucket_numel")
    ap.add_argument("--no-clip", action="store_true", help="no gradient clipping")
    ap.add_argument("--sync-timing", action="store_true",
                    help="synchronize at the end of every iteration (device iteration times)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "train_log.txt", "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    device = torch.device(args.device)
    raw, nfiles = load_corpus(args.corpus_bytes)
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.long)
    cut = int(0.95 * len(data))
    data_train, data_val = data[:cut], data[cut:]
    log(f"corpus: {len(raw)} bytes from {nfiles} files under /usr/lib/python3*; "
        f"train {len(data_train)}, val {len(data_val)}")
    log(f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor()}, "
        f"torch {torch.__version__}, qopt runtime {qopt.runtime_version()}")

    results = {}
    for kind in args.runs.split(","):
        results[kind] = run(kind, args, data_train, data_val, device, log)
        r = results[kind]
        log(f"{kind}: {r['params']} params, final val {r['final_val_loss']:.4f}, state "
            f"{r['optimizer_state_bytes_per_param']:.3f} B/param, step {r['optimizer_step_ms_median']:.3f} ms, "
            f"iteration {r['iteration_ms_median']:.2f} ms")
        write_results(results, args, raw, nfiles, device, out, log)  # after every run


def write_results(results, args, raw, nfiles, device, out, log):
    # CSV: per-step training loss of every run, validation loss where evaluated
    kinds = list(results)
    vals = {k: dict(results[k]["val_curve"]) for k in kinds}
    with open(out / "loss_curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step"] + [f"train_{k}" for k in kinds] + [f"val_{k}" for k in kinds])
        for s in range(args.steps):
            w.writerow([s + 1] + [f"{results[k]['train_losses'][s]:.6f}" for k in kinds]
                       + [f"{vals[k][s + 1]:.6f}" if s + 1 in vals[k] else "" for k in kinds])

    summary = {
        "config": vars(args), "corpus_bytes": len(raw), "corpus_files": nfiles,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "runs": {k: {kk: vv for kk, vv in r.items() if kk not in ("train_losses",)}
                 for k, r in results.items()},
    }
    if "qopt" in results and "torch_bf16" in results:
        a, b = results["qopt"]["final_val_loss"], results["torch_bf16"]["final_val_loss"]
        summary["qopt_vs_torch_bf16_final_val_rel_diff"] = (a - b) / b
    if "qopt" in results and "torch_fp32" in results:
        a, b = results["qopt"]["final_val_loss"], results["torch_fp32"]["final_val_loss"]
        summary["qopt_vs_torch_fp32_final_val_rel_diff"] = (a - b) / b
    for k in kinds:
        if k not in ("qopt", "torch_fp32") and "torch_fp32" in results:
            a, b = results[k]["final_val_loss"], results["torch_fp32"]["final_val_loss"]
            summary[f"{k}_vs_torch_fp32_final_val_rel_diff"] = (a - b) / b
    (out / "summary.json").write_text(json.dumps(summary, indent=2))

    lines = ["| run | optimizer | params | final val loss | mean train loss (last 100) | "
             "optimizer state B/param | param B/param | "
             f"optimizer step ({'GPU' if device.type == 'cuda' else 'CPU'}, median) | "
             "step host time (median) | iteration (median) | peak memory |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, r in results.items():
        lines.append(f"| {k} | {r['optimizer']} | {r['params']:,} | {r['final_val_loss']:.4f} | "
                     f"{r['final_train_loss_mean_last_100']:.4f} | {r['optimizer_state_bytes_per_param']:.3f} | "
                     f"{r['param_bytes_per_param']:.0f} | {r['optimizer_step_ms_median']:.3f} ms | "
                     f"{r['optimizer_step_host_ms_median']:.3f} ms | {r['iteration_ms_median']:.2f} ms | "
                     + (f"{r['peak_memory_bytes'] / 2**20:.1f} MiB |" if r["peak_memory_bytes"] else "- |"))
    for key in summary:
        if key.endswith("_final_val_rel_diff"):
            lines.append(f"\n{key}: {100 * summary[key]:+.2f}%")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not found: no PNG")
        return
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    win = 20
    for k in kinds:
        tl = results[k]["train_losses"]
        sm = [statistics.fmean(tl[max(0, i - win + 1):i + 1]) for i in range(len(tl))]
        axes[0].plot(range(1, len(sm) + 1), sm, label=k, linewidth=1)
        vs, vv = zip(*results[k]["val_curve"])
        axes[1].plot(vs, vv, marker="o", markersize=3, label=k)
    axes[0].set_title(f"training loss ({win}-step mean)")
    axes[1].set_title("validation loss")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats/byte)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    n = results[kinds[0]]["params"]
    fig.suptitle(f"byte-level GPT, {n / 1e6:.1f}M bf16 params, Python stdlib corpus, "
                 f"{args.steps} steps, {summary['device']}")
    fig.tight_layout()
    fig.savefig(out / "loss_curves.png", dpi=120)
    log(f"wrote {out}/loss_curves.png")



if __name__ == "__main__":
    main()

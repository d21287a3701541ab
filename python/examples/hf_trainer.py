#!/usr/bin/env python3
"""Hugging Face ``transformers.Trainer`` with qopt's optimizers passed through ``optimizers=``:
GPT-2 124M (``GPT2Config()``, random init) trained on the running Python's standard library
source, once with each optimizer, each in its own process; tokens per second, peak CUDA memory and
the loss curves side by side.

Optimizers (--runs, comma-separated; each one's parameter dtype in brackets):
  torch_adamw_fused  torch.optim.AdamW(fused=True)  [float32 parameters, Trainer's bf16 autocast:
                     the usual mixed-precision recipe, float32 masters and moments]
  qopt_flash_adamw   qopt.FlashAdamW                [bf16 parameters + int8 error bits (24-bit
                     masters), 8-bit moments; bf16 autocast]
  qopt_adamw8bit     qopt.AdamW8bit                 [float32 parameters, bf16 autocast: as
                     bitsandbytes' AdamW8bit is usually run; 8-bit block-quantized moments]

Tokens: the corpus's bytes, ids 0..255 of GPT-2's 50257-entry vocabulary (no tokenizer files
needed; the model keeps GPT-2 124M's shape and parameter count). Every run sees the same windows in
the same order (Trainer's sampler seeded with --seed).

    python3 python/examples/hf_trainer.py --steps 300 --out bench/results/<date>-h200-trainer

writes <out>/runs/<name>.json (one per optimizer, by its own process), <out>/loss_curves.csv (the
Trainer's logged training loss, every --logging-steps steps), <out>/summary.csv, <out>/summary.md
and <out>/loss_curves.png (matplotlib, else loss_curves.svg). Needs CUDA, transformers and
accelerate; qopt finds its kernels as usual (QOPT_KERNEL_DIR, QOPT_BUILD_DIR, python/qopt/_runtime.py).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import glob
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # python/ (source checkout)

RUNS = {
    # name: (parameter dtype, optimizer label)
    "torch_adamw_fused": (torch.float32, "torch.optim.AdamW(fused=True)"),
    "qopt_flash_adamw": (torch.bfloat16, "qopt.FlashAdamW"),
    "qopt_adamw8bit": (torch.float32, "qopt.AdamW8bit"),
}


# ------------------------------------------------------------------------------ data

def load_corpus(max_bytes: int):
    """The running Python's standard library source (<stdlib>/**/*.py, sorted), as bytes."""
    root = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))
    chunks, total = [], 0
    for f in files:
        try:
            b = Path(f).read_bytes()
        except OSError:
            continue
        chunks.append(b)
        total += len(b)
        if total >= max_bytes:
            break
    if not chunks:
        raise SystemExit(f"hf_trainer: no *.py under {root} (the standard library's source)")
    return b"".join(chunks)[:max_bytes], len(chunks), root


class ByteWindows(torch.utils.data.Dataset):
    """Consecutive windows of `seq` bytes; labels are the inputs (GPT2LMHeadModel shifts them)."""

    def __init__(self, data: torch.Tensor, seq: int):
        self.data, self.seq = data, seq

    def __len__(self):
        return (len(self.data) - 1) // self.seq

    def __getitem__(self, i):
        x = self.data[i * self.seq:(i + 1) * self.seq]
        return {"input_ids": x, "labels": x}


# ------------------------------------------------------------------------- one run

def param_groups(model, wd: float):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(name: str, groups, args):
    hp = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if name == "torch_adamw_fused":
        return torch.optim.AdamW(groups, fused=True, **hp)
    import qopt
    if name == "qopt_flash_adamw":
        return qopt.FlashAdamW(groups, **hp)
    if name == "qopt_adamw8bit":
        return qopt.AdamW8bit(groups, **hp)
    raise SystemExit(f"hf_trainer: unknown run '{name}' (known: {', '.join(RUNS)})")


def state_bytes(opt) -> int:
    total, seen = 0, set()
    for st in opt.state.values():
        for k, v in st.items():
            if isinstance(v, torch.Tensor) and k != "step" and v.data_ptr() not in seen:
                seen.add(v.data_ptr())
                total += v.numel() * v.element_size()
    return total


def run_one(name: str, args) -> dict:
    from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                              TrainingArguments, get_cosine_schedule_with_warmup)
    import transformers

    raw, nfiles, root = load_corpus(args.corpus_bytes)
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.long)
    ds = ByteWindows(data, args.seq)

    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(GPT2Config(n_positions=max(1024, args.seq)))  # float32 init
    dtype = RUNS[name][0]
    model = model.to(device="cuda", dtype=dtype)
    nparams = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(name, param_groups(model, args.weight_decay), args)
    sched = get_cosine_schedule_with_warmup(opt, args.warmup, args.steps)

    class Meter(TrainerCallback):
        """Wall time of steps warm+1 .. max_steps, synchronized at both ends."""
        t0 = t1 = None

        def on_step_end(self, targs, state, control, **kw):
            if state.global_step in (args.warm_steps, targs.max_steps):
                torch.cuda.synchronize()
                t = time.perf_counter()
                if state.global_step == args.warm_steps:
                    Meter.t0 = t
                else:
                    Meter.t1 = t

    targs = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="qopt_hf_trainer_"), max_steps=args.steps,
        per_device_train_batch_size=args.batch, gradient_accumulation_steps=1,
        learning_rate=args.lr, max_grad_norm=1.0, bf16=True, logging_steps=args.logging_steps,
        logging_first_step=True, save_strategy="no", report_to="none", seed=args.seed,
        data_seed=args.seed, dataloader_drop_last=True, dataloader_num_workers=0,
        disable_tqdm=True, remove_unused_columns=False)
    trainer = Trainer(model=model, args=targs, train_dataset=ds, optimizers=(opt, sched),
                      callbacks=[Meter()])
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t_start = time.perf_counter()
    out = trainer.train()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t_start
    timed = args.steps - args.warm_steps
    tokens_per_s = timed * args.batch * args.seq / (Meter.t1 - Meter.t0)
    losses = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    return {
        "run": name, "optimizer": RUNS[name][1], "param_dtype": str(dtype).replace("torch.", ""),
        "params": nparams, "steps": args.steps, "batch": args.batch, "seq": args.seq,
        "tokens_per_s": tokens_per_s, "timed_steps": timed,
        "peak_memory_bytes": torch.cuda.max_memory_allocated(),
        "optimizer_state_bytes": state_bytes(opt) if not hasattr(opt, "state_bytes")
        else opt.state_bytes(),
        "losses": losses, "final_loss": losses[-1][1], "train_wall_s": wall,
        "trainer_metrics": out.metrics,
        "corpus": {"bytes": len(raw), "files": nfiles, "root": root},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "device": torch.cuda.get_device_name(0),
    }


# --------------------------------------------------------------------------- driver

def write_outputs(results: list, args, out: Path, command: str) -> None:
    names = [r["run"] for r in results]
    steps = sorted({s for r in results for s, _ in r["losses"]})
    by = {r["run"]: dict(r["losses"]) for r in results}
    with open(out / "loss_curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step"] + names)
        for s in steps:
            w.writerow([s] + [f"{by[n][s]:.6f}" if s in by[n] else "" for n in names])
    cols = ["run", "optimizer", "param_dtype", "params", "steps", "batch", "seq", "tokens_per_s",
            "peak_memory_bytes", "optimizer_state_bytes", "final_loss"]
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in results:
            w.writerow([r[c] if not isinstance(r[c], float) else f"{r[c]:.6g}" for c in cols])
    first = results[0]
    lines = [f"# transformers Trainer, GPT-2 124M, {first['device']}",
             "",
             f"Date (UTC): {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}. "
             f"torch {first['versions']['torch']}, transformers {first['versions']['transformers']}, "
             f"Python {first['versions']['python']}.",
             "",
             f"Command: `{command}`",
             "",
             f"GPT2LMHeadModel(GPT2Config()), random init, {first['params']:,} parameters; "
             f"{first['corpus']['bytes']:,} bytes of {first['corpus']['files']} files under "
             f"{first['corpus']['root']} as byte ids; {args.steps} steps of {args.batch} x "
             f"{args.seq} tokens, lr {args.lr} (warm-up {args.warmup}, cosine), betas (0.9, 0.95), "
             f"weight decay {args.weight_decay} on 2-D weights, max_grad_norm 1.0, bf16=True "
             f"(autocast). Each optimizer in its own process. Tokens/s over steps "
             f"{args.warm_steps + 1}..{args.steps} (synchronized at both ends); peak memory is "
             f"torch.cuda.max_memory_allocated() over trainer.train().",
             "",
             "| run | optimizer | parameters | tokens/s | peak memory (GiB) | optimizer state (MiB) "
             "| loss at the last logged step |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        lines.append(f"| {r['run']} | {r['optimizer']} | {r['param_dtype']} | "
                     f"{r['tokens_per_s']:,.0f} | {r['peak_memory_bytes'] / 2**30:.2f} | "
                     f"{r['optimizer_state_bytes'] / 2**20:.1f} | {r['final_loss']:.4f} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    plot(results, out, first)


def plot(results, out: Path, first) -> None:
    title = (f"transformers Trainer, GPT-2 124M (random init), bytes of the Python stdlib, "
             f"{first['device']}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        (out / "loss_curves.svg").write_text(svg(results, title))
        return
    fig, ax = plt.subplots(figsize=(9, 5))
    for r in results:
        s, v = zip(*r["losses"])
        ax.plot(s, v, marker="o", markersize=2, linewidth=1,
                label=f"{r['optimizer']} ({r['param_dtype']}): {r['tokens_per_s']:,.0f} tok/s, "
                      f"peak {r['peak_memory_bytes'] / 2**30:.2f} GiB")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/byte)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "loss_curves.png", dpi=120)


def svg(results, title: str, w: int = 900, h: int = 500) -> str:
    """The loss curves as a plain SVG line chart (where matplotlib is missing)."""
    pts = [(s, v) for r in results for s, v in r["losses"]]
    x0, x1 = min(s for s, _ in pts), max(s for s, _ in pts)
    y0, y1 = min(v for _, v in pts), max(v for _, v in pts)
    L, R, T, B = 60, 20, 40, 50

    def xy(s, v):
        return (L + (s - x0) / max(1e-9, x1 - x0) * (w - L - R),
                T + (y1 - v) / max(1e-9, y1 - y0) * (h - T - B))
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}">',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="12">{title}</text>',
           f'<rect x="{L}" y="{T}" width="{w - L - R}" height="{h - T - B}" fill="none" stroke="#888"/>',
           f'<text x="{L}" y="{h - 15}" font-size="11">step {x0}</text>',
           f'<text x="{w - R}" y="{h - 15}" text-anchor="end" font-size="11">step {x1}</text>',
           f'<text x="5" y="{T + 10}" font-size="11">{y1:.2f}</text>',
           f'<text x="5" y="{h - B}" font-size="11">{y0:.2f}</text>']
    for i, r in enumerate(results):
        c = colors[i % len(colors)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(s, v) for s, v in r["losses"]))
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{path}"/>')
        out.append(f'<text x="{w - R - 5}" y="{T + 18 + 16 * i}" text-anchor="end" font-size="11" '
                   f'fill="{c}">{r["optimizer"]} ({r["param_dtype"]}): final {r["final_loss"]:.3f}'
                   f'</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--warm-steps", type=int, default=20,
                    help="steps left out of the tokens/s figure (first launches, allocator)")
    ap.add_argument("--logging-steps", type=int, default=10)
    ap.add_argument("--corpus-bytes", type=int, default=24 << 20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)   # a child process's run
    args = ap.parse_args(argv)
    if args.warm_steps >= args.steps:
        raise SystemExit("hf_trainer: --warm-steps must be below --steps")
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    if args.one:
        r = run_one(args.one, args)
        (out / "runs" / f"{args.one}.json").write_text(json.dumps(r, indent=1))
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("hf_trainer: needs CUDA")
    command = "python3 " + " ".join([os.path.relpath(__file__)] + (argv or sys.argv[1:]))
    results = []
    for name in args.runs.split(","):
        if name not in RUNS:
            raise SystemExit(f"hf_trainer: unknown run '{name}' (known: {', '.join(RUNS)})")
        # each optimizer in a process of its own: a second run in one process is faster or
        # slower for reasons that are not the optimizer's (allocator, loaded modules)
        rc = subprocess.run([sys.executable, __file__, "--one", name]
                            + (argv if argv is not None else sys.argv[1:])).returncode
        if rc != 0:
            raise SystemExit(f"hf_trainer: run {name} failed (exit status {rc})")
        results.append(json.loads((out / "runs" / f"{name}.json").read_text()))
    write_outputs(results, args, out, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())

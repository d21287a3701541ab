#!/usr/bin/env python3
"""The report of scripts/multi_gpu_29.sh: README.md (tables), loss_curves.csv and loss_curves.png
(matplotlib where present) from the per-run CSVs of python/examples/train_gpt_fsdp.py.

    python scripts/multi_gpu_29_report.py --runs OUT/runs --weights WORK --out OUT --world 2 \\
        [--other 4] --steps 200 --save-at 100

--runs holds <opt>/<tag>.csv, --weights <opt>/<tag>.pt (final full weights), tags as
multi_gpu_29.sh names them: w<W> (uninterrupted at W GPUs, checkpoint after --save-at), and
w<M>_from<S> (resumed at M GPUs from the checkpoint of w<S>). Each resumed run is compared with the
uninterrupted run it continues (w<S>):
- at the saving world size (M == S): bit-exact, every loss of steps save-at+1 .. steps equal and
  every final weight tensor bitwise equal;
- at another world size: every loss finite and within rtol 1.5e-2 of the reference (the verdict),
  and the final weights against python/tests/DIST.md's bar as test_train_fsdp.py applies it
  (cosine of all weights >= 0.9999, per tensor NMSE <= 1e-3, every element
  torch.isclose(rtol=1.5e-2, atol=2e-3); the min cosine of a tensor is information), reported
  either way.
Exit status 1 when a run is missing or a verdict fails.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
from pathlib import Path

import torch

RTOL, ATOL, MIN_COS, MAX_NMSE = 1.5e-2, 2e-3, 0.9999, 1e-3
OPTS = {"flash_adamw": "qopt.FlashAdamW (bf16 params)",
        "adamw8bit": "qopt.AdamW8bit (fp32 params, bf16 compute)",
        "torch_fused": "torch.optim.AdamW(fused=True) (fp32 params, bf16 compute)"}


def read_csv(path: Path):
    with open(path) as f:
        return {int(r["step"]): r for r in csv.DictReader(f)}


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous().reshape(-1)
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def weight_figures(got: dict, ref: dict) -> dict:
    """Bitwise-equal tensors, the cosine of all tensors concatenated, the min cosine of a tensor,
    the max NMSE of a tensor, the elements outside rtol/atol."""
    eq, cos_min, nmse_max, outside, dot, na, nb = 0, 1.0, 0.0, 0, 0.0, 0.0, 0.0
    for n, r in ref.items():
        g = got[n]
        eq += bool(g.dtype == r.dtype and torch.equal(_bits(g), _bits(r)))
        a, b = g.double().reshape(-1), r.double().reshape(-1)
        dot, na, nb = dot + float(a @ b), na + float(a @ a), nb + float(b @ b)
        if b.norm() > 0 and a.norm() > 0:
            cos_min = min(cos_min, float(torch.nn.functional.cosine_similarity(a, b, dim=0)))
        nmse_max = max(nmse_max, float(((a - b) ** 2).sum() / (b ** 2).sum().clamp_min(1e-30)))
        outside += int((~torch.isclose(g.float(), r.float(), rtol=RTOL, atol=ATOL)).sum())
    return {"equal_t": eq, "tensors": len(ref), "cos": dot / math.sqrt(na * nb), "cos_min": cos_min,
            "nmse": nmse_max, "outside": outside}


def compare(runs: Path, weights: Path, opt: str, tag: str, a) -> dict:
    m, s = map(int, re.fullmatch(r"w(\d+)_from(\d+)", tag).groups())
    ref_rows, got_rows = read_csv(runs / opt / f"w{s}.csv"), read_csv(runs / opt / f"{tag}.csv")
    steps = list(range(a.save_at + 1, a.steps + 1))
    missing = [st for st in steps if st not in got_rows or st not in ref_rows]
    if missing:
        return {"opt": opt, "tag": tag, "ok": False, "why": f"steps missing: {missing[:5]}"}
    ref = [float(ref_rows[st]["loss"]) for st in steps]
    got = [float(got_rows[st]["loss"]) for st in steps]
    equal = sum(x == y for x, y in zip(got, ref))
    rel = max(abs(x - y) / abs(y) for x, y in zip(got, ref))
    finite = all(math.isfinite(x) for x in got)
    w = weight_figures(torch.load(weights / opt / f"{tag}.pt", weights_only=True),
                       torch.load(weights / opt / f"w{s}.pt", weights_only=True))
    if m == s:
        ok = equal == len(steps) and w["equal_t"] == w["tensors"]
        verdict = "bit-exact" if ok else "NOT bit-exact"
    else:
        bar = w["cos"] >= MIN_COS and w["nmse"] <= MAX_NMSE and w["outside"] == 0
        ok = finite and rel <= RTOL
        verdict = (("loss within rtol" if ok else "loss OUTSIDE rtol")
                   + (", weights within bar" if bar else ", weights outside bar"))
    return {"opt": opt, "tag": tag, "saved": s, "resumed": m, "steps": len(steps), "equal": equal,
            "rel": rel, "finite": finite, "ok": ok, "verdict": verdict, **w}


def tokens_per_s(rows: dict, skip: int = 20) -> float:
    """The median over the steps after the first `skip` (warm-up: first launches, lazy inits)."""
    v = [float(r["tokens_per_s"]) for st, r in sorted(rows.items()) if st > skip]
    return statistics.median(v) if v else float("nan")


def write_curves(runs: Path, out: Path, tags: dict, a) -> list:
    cols = [(o, t) for o in tags for t in tags[o]]
    data = {(o, t): read_csv(runs / o / f"{t}.csv") for o, t in cols}
    with open(out / "loss_curves.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["step"] + [f"{o}/{t}" for o, t in cols])
        for st in range(1, a.steps + 1):
            wr.writerow([st] + [data[c][st]["loss"] if st in data[c] else "" for c in cols])
    return cols


def plot(runs: Path, out: Path, tags: dict, a, title: str) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not found: no PNG"
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.8))
    colors = dict(zip(OPTS, ("tab:blue", "tab:orange", "tab:green")))
    for o in tags:
        if f"w{a.world}" in tags[o]:
            ref = read_csv(runs / o / f"w{a.world}.csv")
            st = sorted(ref)
            ax[0].plot(st, [float(ref[s]["loss"]) for s in st], color=colors.get(o), lw=1,
                       label=f"{o} (w{a.world})")
        for t in tags[o]:
            s0 = int(t.split("_from")[1]) if "_from" in t else None
            if s0 is None or f"w{s0}" not in tags[o]:
                continue
            got = read_csv(runs / o / f"{t}.csv")
            base = read_csv(runs / o / f"w{s0}.csv")
            xs = [s for s in sorted(got) if s in base]
            ls = "-" if t.startswith(f"w{s0}_") else "--" if s0 == a.world else ":"
            ax[1].plot(xs, [float(got[s]["loss"]) - float(base[s]["loss"]) for s in xs],
                       color=colors.get(o), ls=ls, lw=1, label=f"{o} {t} - w{s0}")
    ax[0].axvline(a.save_at, color="gray", lw=0.8, ls=":")
    ax[0].set_title("training loss, uninterrupted runs")
    ax[0].set_ylabel("cross-entropy (nats/byte)")
    ax[1].set_title("resumed run minus the uninterrupted run it continues")
    ax[1].set_ylabel("loss difference")
    for x in ax:
        x.set_xlabel("step")
        x.grid(alpha=0.3)
        x.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out / "loss_curves.png", dpi=120)
    return "loss_curves.png"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--weights", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--other", type=int, default=None)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--save-at", type=int, required=True)
    a = ap.parse_args(argv)
    W, M = a.world, a.other
    want = [f"w{W}", f"w{W}_from{W}"] + ([f"w{M}_from{W}", f"w{M}", f"w{W}_from{M}"] if M else [])
    tags, problems = {}, []
    for o in OPTS:
        if not (a.runs / o).is_dir():
            continue
        have = [t for t in want if (a.runs / o / f"{t}.csv").is_file()
                and (a.weights / o / f"{t}.pt").is_file()]
        problems += [f"{o}: run {t} missing (see logs/{o}.{t}.log)" for t in want if t not in have]
        tags[o] = have
    rows = []
    for o, ts in tags.items():
        for t in ts:
            if "_from" in t and f"w{t.split('_from')[1]}" in ts:
                rows.append(compare(a.runs, a.weights, o, t, a))
    skip = 20 if a.steps > 40 else 0
    env = (a.out / "env.txt").read_text() if (a.out / "env.txt").is_file() else ""
    lines = ["# Issue 29: FSDP2 with DCP checkpoints across world sizes (scripts/multi_gpu_29.sh)", "",
             "```", env.strip(), "```", "",
             "Commands: `commands.txt` (torchrun per run; `$OUT` is this folder, `$WORK` a scratch "
             "folder for checkpoints and final weights); logs: `logs/`; per-step CSVs (step, loss, "
             "lr, tokens/s, step ms): `runs/<optimizer>/<tag>.csv`; all losses side by side: "
             "`loss_curves.csv`, `loss_curves.png`.", "",
             "## Optimizers, uninterrupted runs", "",
             f"| optimizer | GPUs | loss, mean of the last 10 steps | median tokens/s (steps {skip + 1}-{a.steps}) |",
             "| --- | --- | --- | --- |"]
    for o, ts in tags.items():
        for t in ts:
            if "_from" in t:
                continue
            r = read_csv(a.runs / o / f"{t}.csv")
            last = [float(r[s]["loss"]) for s in sorted(r)[-10:]]
            lines.append(f"| {OPTS[o]} | {t[1:]} | {statistics.fmean(last):.4f} | "
                         f"{tokens_per_s(r, skip):,.0f} |")
    lines += ["", "Tokens/s: the runs of the three optimizers share the GPUs unless the script ran "
              "with SERIAL=1 (then each run had its GPUs alone).", "",
              f"## Resumes (checkpoint after step {a.save_at}, compared over steps "
              f"{a.save_at + 1}-{a.steps} with the uninterrupted run at the saving world size)", "",
              "| optimizer | saved at | resumed at | losses bitwise equal | max rel. loss diff | "
              "final tensors bitwise equal | cosine (all) | min cosine (tensor) | max NMSE | "
              "elements outside rtol/atol | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [_row(r) for r in rows]
    lines += ["", "Bar of the other-world-size rows (python/tests/DIST.md, FlashOptim's table for bf16 "
              f"with quantized state): losses within rtol {RTOL}; weights: cosine of all weights >= "
              f"{MIN_COS}, per tensor NMSE <= {MAX_NMSE}, every element within rtol {RTOL} / atol "
              f"{ATOL} (the per-tensor cosine is information: zero-initialised biases hold only "
              "their updates). The "
              "verdict requires the losses; the weights' figures are information after "
              f"{a.steps - a.save_at} steps on differently reduced gradients."]
    for name, pat in (("dist_check.py (2 GPUs, NCCL)", "RESULT"),
                      ("test_train_fsdp.py (CPU processes, gloo)", r"passed|failed|error")):
        log = a.out / "logs" / ("dist_check.log" if "dist" in name else "pytest_train_fsdp.log")
        if log.is_file():
            hits = [ln for ln in log.read_text().splitlines() if re.search(pat, ln)]
            lines += ["", f"{name}: `{hits[-1].strip() if hits else 'no result line'}` "
                          f"(logs/{log.name})"]
            if not hits or re.search(r"FAIL|failed|error", hits[-1]):
                problems.append(f"{name}: {hits[-1] if hits else 'no result'}")
    problems += [f"{r['opt']} {r['tag']}: {r.get('verdict', r.get('why'))}" for r in rows if not r["ok"]]
    if tags:
        gpu = re.search(r"GPU 0: (.+?) \(", env)
        date = re.search(r"date: (.+)", env)
        title = (f"small GPT under FSDP2, {a.steps} steps, checkpoint after {a.save_at}"
                 + (f", {gpu.group(1)}" if gpu else "") + (f", {date.group(1)}" if date else ""))
        write_curves(a.runs, a.out, tags, a)
        lines += ["", plot(a.runs, a.out, tags, a, title)]
    lines += ["", "Problems: " + ("; ".join(problems) if problems else "none")]
    (a.out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if problems or not rows else 0


def _row(r: dict) -> str:
    if "equal" not in r:
        return f"| {r['opt']} | {r['tag']} | | | | | | | | | FAIL: {r['why']} |"
    return (f"| {r['opt']} | {r['saved']} GPU(s) | {r['resumed']} GPU(s) | {r['equal']}/{r['steps']} | "
            f"{r['rel']:.2e} | {r['equal_t']}/{r['tensors']} | {r['cos']:.7f} | {r['cos_min']:.7f} | "
            f"{r['nmse']:.2e} | "
            f"{r['outside']} | {r['verdict']} |")


if __name__ == "__main__":
    sys.exit(main())

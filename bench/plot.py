#!/usr/bin/env python3
"""Effective GB/s against parameters per launch, with the copy roof, from qopt-bench's JSON and
(optionally) torch_baselines.py's JSON:

    python3 bench/plot.py --bench bench.json --torch torch.json --out gbps_vs_size.png

Single-tensor sizes are joined by lines; the GPT-2 124M list (148 tensors, one launch) is drawn
as an open marker of the same colour at its parameter count. The roof is qopt-bench's 1 GiB
cuMemcpyDtoD (read + write), with 90% and 85% of it (issue 5's targets) dotted.
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(results, name_key, case_key="case"):
    """{name: ([(numel, gbps)] for single tensors, (numel, gbps) for the GPT-2 list or None)}"""
    out = {}
    for r in results:
        if "gbps" not in r:
            continue
        name = r[name_key]
        line, gpt = out.setdefault(name, ([], [None]))
        if r[case_key].startswith("gpt2"):
            gpt[0] = (r["numel"], r["gbps"])
        else:
            line.append((r["numel"], r["gbps"]))
    return {k: (sorted(v[0]), v[1][0]) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--torch")
    ap.add_argument("--out", default="gbps_vs_size.png")
    ap.add_argument("--driver", help="driver version for the title (e.g. 580.159.04)")
    ap.add_argument("--all-variants", action="store_true",
                    help="also draw the .f16/.f32/.scaled variants (default: the shipped specs)")
    args = ap.parse_args()
    with open(args.bench) as f:
        bench = json.load(f)
    rows = []
    for k in bench["kernels"]:
        # <spec>.f16, <spec>.scaled, ...: sixty lines make the chart unreadable.
        if not args.all_variants and "." in k["spec"]:
            continue
        for c in k["cases"]:
            rows.append(dict(c, name=f"qopt {k['spec']}"))
    qopt = series(rows, "name")
    base = {}
    if args.torch:
        with open(args.torch) as f:
            base = series(json.load(f)["results"], "name")
    roof = bench["copy_roof"]["gbps"]

    fig, ax = plt.subplots(figsize=(11, 6.5))
    cmap = plt.get_cmap("tab10")
    for i, (name, (line, gpt)) in enumerate(sorted(qopt.items())):
        color = cmap(i % 10)
        if line:
            ax.plot([x for x, _ in line], [y for _, y in line], "o-", color=color, lw=1.5, ms=4,
                    label=name)
        if gpt:
            ax.plot([gpt[0]], [gpt[1]], "o", mfc="none", mec=color, ms=8, mew=1.5)
    for j, (name, (line, gpt)) in enumerate(sorted(base.items())):
        color = ["black", "dimgray", "saddlebrown", "purple"][j % 4]
        if line:
            ax.plot([x for x, _ in line], [y for _, y in line], "s--", color=color, lw=1.2, ms=5,
                    label=name)
        if gpt:
            ax.plot([gpt[0]], [gpt[1]], "s", mfc="none", mec=color, ms=9, mew=1.5)
    ax.axhline(roof, color="red", lw=2, label=f"copy roof (cuMemcpyDtoD 1 GiB) {roof:.0f} GB/s")
    ax.axhline(0.9 * roof, color="red", lw=1, ls=":", label="90% / 85% of the roof")
    ax.axhline(0.85 * roof, color="red", lw=1, ls=":")
    ax.set_xscale("log", base=2)
    ticks = sorted({x for _, (line, gpt) in list(qopt.items()) + list(base.items())
                    for x in [p[0] for p in line] + ([gpt[0]] if gpt else [])})
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{x / (1 << 20):.0f}Mi" if x % (1 << 20) == 0 else f"{x / 1e6:.1f}M"
                            for x in ticks], fontsize=8)
        ax.minorticks_off()
    ax.set_xlabel("parameters per launch (open markers: GPT-2 124M list, 148 tensors, one launch)")
    ax.set_ylabel("effective GB/s (each stream read once, each written stream written once)")
    dev = bench.get("device", {})
    api = dev.get("driver_version", 0)
    drv = f"driver {args.driver}, " if args.driver else ""
    ax.set_title(f"qopt fused optimizer steps on {dev.get('name', '?')} "
                 f"({drv}CUDA {api // 1000}.{api % 1000 // 10}), {bench.get('date', '')[:10]}")
    ax.set_ylim(0, roof * 1.08)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(args.out, dpi=130, bbox_inches="tight")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

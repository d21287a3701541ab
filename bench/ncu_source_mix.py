#!/usr/bin/env python3
"""Executed instruction mix per element from an ncu source page (SASS with counts):

    ncu --section SourceCounters --page source --print-source sass --csv \\
        qopt-bench --specs K --sizes 64 ... > src.csv
    python3 bench/ncu_source_mix.py src.csv[.gz] [--numel N] [--listing MIN]

Prints thread instructions per element (warp instructions executed x 32 / N; N defaults to
64 Mi, qopt-bench's 64Mi case) in all and by opcode, and with --listing the instructions
executed at least MIN times per element, in address order, with their stall samples.
"""

import argparse
import collections
import csv
import gzip
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--numel", type=int, default=64 * 1024 * 1024)
    ap.add_argument("--listing", type=float, default=None)
    args = ap.parse_args()
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt") as fh:
        lines = [l for l in fh if l.startswith('"')]
    header, rows = None, []
    for row in csv.reader(lines):
        if row[0] == "Kernel Name":
            continue
        if row[0] == "Address":
            header = row
            continue
        rows.append(row)
    if header is None:
        sys.exit(f"{args.csv}: no ncu source table")
    col = {h: i for i, h in enumerate(header)}
    total, by_op, listing = 0.0, collections.Counter(), []
    for row in rows:
        src = row[col["Source"]].strip()
        per = int(row[col["Instructions Executed"]] or 0) * 32 / args.numel
        samples = int(row[col["Warp Stall Sampling (All Samples)"]] or 0)
        words = src.split()
        op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "?")
        by_op[op.split(".")[0]] += per
        total += per
        listing.append((row[col["Address"]], per, samples, src))
    print(f"{total:.2f} thread instructions per element")
    for op, per in by_op.most_common(30):
        print(f"  {op:<10} {per:6.2f}")
    if args.listing is not None:
        for addr, per, samples, src in listing:
            if per >= args.listing:
                print(f"{addr[-6:]} {per:6.3f} {samples:5d}  {src}")


if __name__ == "__main__":
    main()

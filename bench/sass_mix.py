#!/usr/bin/env python3
"""Static instruction mix of kernels from `cuobjdump -sass` listings:

    cuobjdump -sass -arch sm_90 k.fatbin > k.sass
    python3 bench/sass_mix.py k.sass ... > sass_mix.txt

Per kernel: instruction count, counts by class (global loads/stores with their widths, shared
memory, FP32 arithmetic, MUFU special functions, FCHK division checks, calls to slow paths,
integer/address arithmetic, conversions, control flow) and the most frequent opcodes. Static
counts cover every path (full tiles, partial tiles, slow paths of IEEE division and square
root), so they show what the code holds, not what executes; ncu's InstructionStats gives the
executed mix.
"""

import collections
import re
import sys

LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
FUNC = re.compile(r"Function\s*:\s*(\S+)")

CLASSES = [
    ("global load", lambda o: o.startswith("LDG")),
    ("global store", lambda o: o.startswith("STG")),
    ("shared ld/st", lambda o: o.split(".")[0] in ("LDS", "STS", "LDSM", "ATOMS")),
    ("const/uniform ld", lambda o: o.split(".")[0] in ("LDC", "ULDC", "S2R", "S2UR", "CS2R")),
    ("MUFU", lambda o: o.startswith("MUFU")),
    ("FCHK", lambda o: o.startswith("FCHK")),
    ("call/ret", lambda o: o.split(".")[0] in ("CALL", "RET")),
    ("FP32 arith", lambda o: o.split(".")[0] in ("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL",
                                                 "FRND", "FSET", "FSWZADD")),
    ("conversion", lambda o: o.split(".")[0] in ("F2F", "F2I", "I2F", "F2FP", "I2FP", "F2IP",
                                                 "I2I", "F2I64")),
    ("int/address", lambda o: o.split(".")[0] in (
        "IADD3", "IMAD", "LOP3", "SHF", "PRMT", "ISETP", "IMNMX", "LEA", "SEL", "MOV", "IABS",
        "SGXT", "FLO", "POPC", "BMSK", "IADD", "LEA.HI", "IMUL", "UIADD3", "UIMAD", "ULOP3",
        "USHF", "UMOV", "USEL", "ULEA", "UISETP", "UPRMT", "VIADD", "VIMNMX", "PLOP3", "P2R",
        "R2P", "IDP", "HMNMX2", "UFLO", "UPOPC", "USGXT", "R2UR", "VOTEU", "VOTE", "SHFL")),
    ("control", lambda o: o.split(".")[0] in ("BRA", "BSSY", "BSYNC", "EXIT", "BAR", "WARPSYNC",
                                              "NOP", "BREAK", "JMP", "BRX", "YIELD")),
]


def classify(op):
    for name, pred in CLASSES:
        if pred(op):
            return name
    return "other"


def parse(path):
    kernels = collections.OrderedDict()
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            m = FUNC.search(line)
            if m:
                cur = kernels.setdefault(m.group(1), collections.Counter())
                continue
            m = LINE.search(line)
            if m and cur is not None:
                cur[m.group(1)] += 1
    return kernels


def report(name, ops):
    total = sum(ops.values())
    by = collections.Counter()
    for op, n in ops.items():
        by[classify(op)] += n
    width = collections.Counter()
    for op, n in ops.items():
        if op.startswith(("LDG", "STG")):
            w = next((p for p in op.split(".")[1:] if p in ("8", "U8", "S8", "16", "U16", "S16",
                                                          "64", "128")), "32")
            width[f"{op[:3]}.{w}"] += n
    out = [f"== {name}: {total} SASS instructions (static)"]
    out.append("   " + ", ".join(f"{k} {v} ({100 * v / total:.0f}%)" for k, v in by.most_common()))
    out.append("   global access widths: " + ", ".join(f"{k} x{v}" for k, v in sorted(width.items())))
    mufu = {k: v for k, v in ops.items() if k.startswith("MUFU")}
    out.append("   MUFU: " + ", ".join(f"{k} x{v}" for k, v in sorted(mufu.items())))
    out.append("   top opcodes: " + ", ".join(f"{k} {v}" for k, v in ops.most_common(18)))
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    for path in sys.argv[1:]:
        for name, ops in parse(path).items():
            if ops:
                print(report(name, ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How often the sqrt codes of FlashAdamW's second moment fall near a rounding boundary on the bench's data.

A model in numpy float32 of the v-state path of numerics.md section 2 (u = sqrt(v), s = max(max u, 1e-12) over a
group of 32, t = 255 * u / s, code = floor(t + 0.5)). The gradients follow qopt-bench's distribution (N(0, 1e-3),
0.5% of them x10..x100, rounded to bf16) and the states start at zero, as the bench fills them. For each step it
prints the fraction of elements, and of warps (256 elements: 32 threads x 8 lanes), that have |t - floor(t + 0.5)|
>= 1/2 - 2^-12. Those lanes are where the kernel's checked codes take the IEEE fallback (bench/NOTES.md, fourth
session).

    python3 bench/tie_model.py fixed   # one gradient for every step (each of the bench's buffer sets)
    python3 bench/tie_model.py fresh   # a new gradient each step (training)
"""
import numpy as np, sys
rng = np.random.default_rng(0)
N = 1<<20; G = 32; f32 = np.float32
def bf16(x):
    x = np.asarray(x, np.float32).view(np.uint32)
    r = ((x + 0x7fff + ((x >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)
def grad():
    g = f32(1e-3) * rng.standard_normal(N).astype(f32)
    t = rng.random(N) < 0.005
    g[t] *= (10.0 ** (1 + rng.random(t.sum()))).astype(f32)
    return bf16(g)
mode = sys.argv[1]
fixed = grad()
vq = np.zeros(N, np.uint8); vs = np.zeros(N // G, np.float16)
b2 = f32(0.999)
for step in range(1, 13):
    g = fixed if mode == "fixed" else grad()
    u = (vq.astype(f32) / f32(255)) * np.repeat(vs.astype(f32), G)
    v = u * u
    vn = b2 * v + (f32(1) - b2) * g * g
    un = np.sqrt(vn)
    s = np.maximum(un.reshape(-1, G).max(1), f32(1e-12))
    t = (f32(255) * un) / np.repeat(s, G)
    d = np.abs(t - np.floor(t + f32(0.5)))
    near = d >= f32(0.5 - 2**-12)
    if step in (1, 2, 3, 6, 12):
        print(mode, step, "near-tie elements %.4f warps-with-one %.3f" % (near.mean(), near.reshape(-1, 256).any(1).mean()))
    vq = np.floor(t + f32(0.5)).astype(np.uint8); vs = s.astype(np.float16)

#!/usr/bin/env python3
"""A numpy model of the GPU's codebook buckets (QoptToGPU.cpp, fillBuckets and codebookCodes) on
bitsandbytes' dynamic maps:

    PYTHONPATH=python python3 bench/codebook_buckets_model.py

Buckets: a sign and a 128th of a binade of |c| (its float pattern clamped below to 2^-24, in steps of 2^16; 1.0
alone), 2 x 3073 of them; each u32 entry is the number of midpoints below the bucket times 2^16 plus, where one
midpoint lies in it, 0xFFFF minus the low 16 bits of its magnitude (positive) or those bits (negative). The code is
bits 16..23 of entry + (the low 16 bits of |c|, complemented where c < 0). Prints, per map, the most midpoints any
bucket holds (the lookup needs at most one), whether a midpoint lies within 2^-24 of 0 (the clamp would misplace
c: the kernel then takes the full search), and how many of ~300K values (uniform and small normal ones, every code
value, every midpoint and its two neighbouring floats, 0, -0, +-1, subnormals) the lookup counts differently from
the reference count of midpoints below c.
"""
import sys, struct, numpy as np
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
from qopt.codebook import create_dynamic_map
def f32(x): return np.float32(x)
def bits(x): return struct.unpack('<I', struct.pack('<f', float(np.float32(x))))[0]
def flt(b): return np.float32(struct.unpack('<f', struct.pack('<I', b & 0xffffffff))[0])
MagLo=0x33800000; MagHi=0x3F800000; P=((MagHi-MagLo)>>16)+1; N=2*P
for signed in (True, False):
    q=np.array(create_dynamic_map(signed),dtype=np.float32); q.sort()
    mids=((q[:-1]+q[1:])*np.float32(0.5)).astype(np.float32)
    mids_pad=np.concatenate([mids,np.full(8,np.inf,dtype=np.float32)])
    table=np.zeros(N,dtype=np.int64); maxw=0; wide=0; tiny=0
    for v in range(N):
        neg = v < P
        k = (P-1-v) if neg else (v-P)
        start = MagLo + (k<<16); mlo = 0 if k==0 else start; mhi=min(start+0xFFFF, MagHi)
        lo = flt(mhi|0x80000000) if neg else flt(mlo)
        hi = flt(mlo|0x80000000) if neg else flt(mhi)
        below=int(np.sum(mids<lo)); upto=int(np.sum(mids<=hi))
        w=upto-below; maxw=max(maxw,w); wide+= w>1
        idx = k+P if neg else k
        off=0
        if w>=1:
            mm=bits(mids_pad[below])&0x7fffffff; low=mm&0xffff
            off = low if neg else 0xffff-low
            if mm<=MagLo: tiny+=1
        table[idx]=(below<<16)+off
    # check lookup on random + all codebook values + midpoints neighbors
    rng=np.random.default_rng(0)
    cs=np.concatenate([rng.uniform(-1,1,200000).astype(np.float32), (rng.standard_normal(100000)*0.01).astype(np.float32), q, mids, np.nextafter(mids,np.float32(2)), np.nextafter(mids,np.float32(-2)), np.array([0.0,-0.0,1.0,-1.0,1e-40,-1e-40,2**-33,-2**-33],dtype=np.float32)])
    if not signed: cs=np.abs(cs)
    cs=cs[(cs>=-1)&(cs<=1)]
    bad=0; slow=0
    for c in cs:
        b=bits(c); s=0xffffffff if b>>31 else 0; mag=max(b&0x7fffffff,MagLo); j=((mag>>16)-(MagLo>>16))+(s&P)
        pos=((table[j]+((mag^s)&0xffff))>>16)&0xff
        ref=int(np.sum(mids<c))
        if pos!=ref: bad+=1
    print("signed" if signed else "unsigned", "max width", maxw, "wide buckets", wide, "midpoints within 2^-24 of 0", tiny, "checked", len(cs), "bad", bad, "slow", slow)

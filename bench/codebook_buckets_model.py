#!/usr/bin/env python3
"""A numpy model of the GPU's codebook buckets (QoptToGPU.cpp, fillBuckets and codebookCodes) on
bitsandbytes' dynamic maps:

    PYTHONPATH=python python3 bench/codebook_buckets_model.py

Buckets: a sign and a 128th of a binade of |c| (its float pattern clamped to [2^-32, 1], in steps of 2^16),
2 x 4097 of them; each holds the number of midpoints below it and how many lie in it. Prints, per map, the most
midpoints any bucket holds (the one-comparison lookup needs at most one) and how many of ~300K values (uniform and
small normal ones, every code value, every midpoint and its two neighbouring floats, 0, -0, +-1, subnormals) the
lookup start + (mids[start] < c) counts differently from the reference count of midpoints below c.
"""
import sys, struct, numpy as np
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
from qopt.codebook import create_dynamic_map
def f32(x): return np.float32(x)
def bits(x): return struct.unpack('<I', struct.pack('<f', float(np.float32(x))))[0]
def flt(b): return np.float32(struct.unpack('<f', struct.pack('<I', b & 0xffffffff))[0])
MagLo=0x2F800000; MagHi=0x3F800000; P=((MagHi-MagLo)>>16)+1; N=2*P
for signed in (True, False):
    q=np.array(create_dynamic_map(signed),dtype=np.float32); q.sort()
    mids=((q[:-1]+q[1:])*np.float32(0.5)).astype(np.float32)
    mids_pad=np.concatenate([mids,np.full(8,np.inf,dtype=np.float32)])
    table=np.zeros(N,dtype=np.int64); maxw=0; wide=0
    for v in range(N):
        neg = v < P
        k = (P-1-v) if neg else (v-P)
        start = MagLo + (k<<16); mlo = 0 if k==0 else start; mhi=min(start+0xFFFF, MagHi)
        lo = flt(mhi|0x80000000) if neg else flt(mlo)
        hi = flt(mlo|0x80000000) if neg else flt(mhi)
        below=int(np.sum(mids<lo)); upto=int(np.sum(mids<=hi))
        w=min(upto-below,255); maxw=max(maxw,w); wide+= w>1
        idx = k+P if neg else k
        table[idx]=below|(w<<8)
    # check lookup on random + all codebook values + midpoints neighbors
    rng=np.random.default_rng(0)
    cs=np.concatenate([rng.uniform(-1,1,200000).astype(np.float32), (rng.standard_normal(100000)*0.01).astype(np.float32), q, mids, np.nextafter(mids,np.float32(2)), np.nextafter(mids,np.float32(-2)), np.array([0.0,-0.0,1.0,-1.0,1e-40,-1e-40,2**-33,-2**-33],dtype=np.float32)])
    if not signed: cs=np.abs(cs)
    cs=cs[(cs>=-1)&(cs<=1)]
    bad=0; slow=0
    for c in cs:
        b=bits(c); mag=b&0x7fffffff; mag=min(max(mag,MagLo),MagHi); k=(mag-MagLo)>>16; j=k+(b>>31)*P
        e=table[j]; st=e&0xff; w=e>>8
        if w>1: slow+=1; continue
        pos=st+(1 if mids_pad[st]<c else 0)
        ref=int(np.sum(mids<c))
        if pos!=ref: bad+=1
    print("signed" if signed else "unsigned", "max width", maxw, "wide buckets", wide, "checked", len(cs), "bad", bad, "slow", slow)

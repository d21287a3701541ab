"""One outlier gradient in a blockwise 8-bit state: how far its block-mates move.

Steps a 4096-element float32 parameter 60 times with gradients N(0, 1e-3), one
element's gradient 1e4 at step 11, and prints the largest step (in units of
lr) of the other elements of the outlier's block from then on, and how many
element-steps exceeded 10 lr, for torch's AdamW and qopt's optimizers
(docs/numerics.md, "Overflow"). Runs on the host backend:
    QOPT_BUILD_DIR=build PYTHONPATH=python python3 bench/outlier_block.py
"""
import torch

import qopt

N, LR = 4096, 1e-3


def run(make, label, block=256):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.zeros(N))
    opt = make([p])
    worst, moved = 0.0, 0
    for step in range(60):
        g = torch.randn(N) * 1e-3
        if step == 10:
            g[0] = 1e4
        before = p.detach().clone()
        p.grad = g
        opt.step()
        d = (p.detach() - before)[1:block].abs() / LR
        if step >= 10:
            worst = max(worst, d.max().item())
            moved += int((d > 10).sum())
    print(f"{label}: block-mates' largest step {worst:.1f} lr, element-steps above 10 lr: {moved}")


run(lambda ps: torch.optim.AdamW(ps, lr=LR, weight_decay=0), "torch AdamW (fp32)")
for block in (256, 2048):
    run(lambda ps: qopt.AdamW8bit(ps, lr=LR, weight_decay=0, min_8bit_size=0, block_size=block),
        f"AdamW8bit block {block}", block)
run(lambda ps: qopt.AdamW8bit(ps, lr=LR, weight_decay=0, min_8bit_size=0, max_grad_norm=1.0),
    "AdamW8bit block 256, max_grad_norm=1")
run(lambda ps: qopt.FlashAdamW(ps, lr=LR, weight_decay=0), "FlashAdamW (group 32)")

"""What python/README.md says of StableAdamW and bf16 parameters (no Kahan summation, unlike
optimi's default) and of LAMB/LARS on a zero tensor, pinned on the host backend with values worked
out by hand: AdamW's normalised update under a constant gradient is lr per step."""

import pytest
import torch

import qopt

from conftest import backend_available, skip_reason


@pytest.fixture(autouse=True)
def _host_backend():
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))


def _fifty_steps(opt, p):
    for _ in range(50):
        p.grad = torch.ones(p.shape, dtype=p.dtype)
        opt.step()


def test_stable_adamw_bf16_loses_updates_below_half_an_ulp():
    """lr 1e-4, weights 1.5 (bf16 half ulp 2^-8 = 0.0039): 50 steps of about 1e-4 each move a
    float32 parameter by 5e-3 and a bf16 one not at all (kahan_sum=None: no Kahan summation);
    FlashAdamW's Kahan summation keeps the 5e-3 (up to the bf16 compensation's rounding)."""
    p16 = torch.nn.Parameter(torch.full((256,), 1.5, dtype=torch.bfloat16))
    _fifty_steps(qopt.StableAdamW([p16], lr=1e-4, weight_decay=0, kahan_sum=None), p16)
    assert bool((p16.detach() == 1.5).all())
    p32 = torch.nn.Parameter(torch.full((256,), 1.5))
    _fifty_steps(qopt.StableAdamW([p32], lr=1e-4, weight_decay=0), p32)
    assert float((p32.detach() - (1.5 - 50e-4)).abs().max()) < 1e-5
    pk = torch.nn.Parameter(torch.full((256,), 1.5, dtype=torch.bfloat16))
    kahan = qopt.FlashAdamW([pk], lr=1e-4, weight_decay=0, master_weight_bits=None,
                            kahan_sum=True)
    _fifty_steps(kahan, pk)
    # within the bf16 compensation's own rounding, half its ulp (2^-17 below 2^-8) per step
    assert float((qopt.master_weights(kahan)[pk] - (1.5 - 50e-4)).abs().max()) < 50 * 2.0 ** -17


@pytest.mark.parametrize("make", [
    lambda ps: qopt.LAMB(ps, lr=1e-2), lambda ps: qopt.LAMB8bit(ps, lr=1e-2, min_8bit_size=0),
    lambda ps: qopt.LARS(ps, lr=1e-2, momentum=0.9),
    lambda ps: qopt.LARS8bit(ps, lr=1e-2, momentum=0.9, min_8bit_size=0)],
    ids=["LAMB", "LAMB8bit", "LARS", "LARS8bit"])
def test_lamb_lars_leave_a_zero_tensor_at_zero(make):
    """max_unorm * norm(p) / norm(u) is 0 for p = 0: the update is scaled to nothing (as
    bitsandbytes); a group with max_unorm=0 (no clipping) moves it."""
    gen = torch.Generator().manual_seed(0)
    z = torch.nn.Parameter(torch.zeros(300))
    free = torch.nn.Parameter(torch.zeros(300))
    opt = make([z])
    opt.add_param_group({"params": [free], "max_unorm": 0.0})
    for _ in range(3):
        g = torch.randn(300, generator=gen)
        z.grad, free.grad = g.clone(), g.clone()
        opt.step()
    assert bool((z.detach() == 0).all())
    assert float(free.detach().abs().max()) > 1e-3

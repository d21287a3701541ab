"""Hyperparameters the trust-ratio optimizers refuse at construction (and in a param group added
later): LARS's momentum outside [0, 1) and StableAdamW's eps <= 0, each a ValueError that names the
argument. No kernel is stepped: the checks run before."""

import math

import pytest
import torch

import qopt

LARS_CLASSES = [qopt.LARS, qopt.LARS8bit, qopt.LARS32bit]


@pytest.mark.parametrize("cls", LARS_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("momentum", [1.0, 1.5, -0.1, math.nan])
def test_lars_momentum_outside_0_1_refused(cls, momentum):
    p = [torch.nn.Parameter(torch.zeros(4))]
    with pytest.raises(ValueError, match=r"momentum=.* is outside \[0, 1\)"):
        cls(p, lr=0.1, momentum=momentum)
    opt = cls(p, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"momentum=.* is outside \[0, 1\)"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))],
                             "momentum": momentum})
    assert len(opt.param_groups) == 1
    with pytest.raises(ValueError, match="momentum=0"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))], "momentum": 0.0})


@pytest.mark.parametrize("eps", [0.0, -1e-8, math.nan])
def test_stable_adamw_eps_must_be_positive(eps):
    p = [torch.nn.Parameter(torch.zeros(4))]
    with pytest.raises(ValueError, match=r"StableAdamW: eps=.*must be > 0"):
        qopt.StableAdamW(p, eps=eps)
    opt = qopt.StableAdamW(p)
    with pytest.raises(ValueError, match=r"eps=.*must be > 0"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))], "eps": eps})
    assert len(opt.param_groups) == 1

#!/usr/bin/env python3
"""torch.distributed.checkpoint (DCP) with every qopt optimizer under FSDP2, on CPU processes with
gloo and qopt's host backend (issue 25, item 1).

    python python/tests/dcp_check.py --save 2 --load 1,2,4 [--flatten] [--dir DIR]

Saves at world size `--save` after STEPS steps of a small bf16 MLP (FSDP2 ``fully_shard`` on each
Linear and the root, one optimizer of each kind on its own copy of the model) with
``dcp.save({"model": get_model_state_dict(...), "optim": get_optimizer_state_dict(...)})``, and for
each world size in `--load` starts fresh processes with other initial weights, restores with
``dcp.load`` + ``set_model_state_dict`` + ``set_optimizer_state_dict`` (nested, or flattened with
``--flatten``) and checks, on rank 0, against the saving run (``full_state_dict`` gathers):
- the model's weights bitwise;
- the optimizer state: every per-element stream (error bits) and the step bitwise; the codes and
  scales of each element bitwise where its group is the same at both world sizes (all of them for
  the (8, 256) weight, whose rows are whole groups for every optimizer: checked), and elsewhere the
  codes wherever the element kept its scale;
- then STEPS more steps: at the saving world size bitwise equal to the saving run's own
  uninterrupted continuation; at another, finite and with the loss still falling.
Also, in the saving world, get/set round trips without DCP into a second optimizer that then steps
bitwise like the first: nested, flattened, ``full_state_dict=True`` and ``full_state_dict=True`` with
``broadcast_from_rank0=True`` (these two send every state tensor through gloo's collectives, which
take no int16: the logical form holds 16-bit error bits as int32, _reshard.WIDENED).

Needs torch >= 2.6 (``torch.distributed.fsdp.fully_shard``, ``torch.distributed.checkpoint.state_dict``)
and gloo; prints SKIP with the reason and exits 0 otherwise. Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

_PKG = Path(__file__).resolve().parent.parent
if str(_PKG) not in sys.path:
    sys.path.insert(0, str(_PKG))

import qopt  # noqa: E402

STEPS = 3
OPTIMIZERS = {
    "FlashAdamW": lambda ps: qopt.FlashAdamW(ps, lr=1e-2),
    "FlashAdamW32": lambda ps: qopt.FlashAdamW(ps, lr=1e-2, master_weight_bits=32),
    "FlashAdamWnone": lambda ps: qopt.FlashAdamW(ps, lr=1e-2, master_weight_bits=None),
    "FlashAdam": lambda ps: qopt.FlashAdam(ps, lr=1e-2, weight_decay=1e-2),
    "FlashSGD": lambda ps: qopt.FlashSGD(ps, lr=5e-2, momentum=0.9),
    "FlashSGDW": lambda ps: qopt.FlashSGDW(ps, lr=5e-2, momentum=0.9, weight_decay=1e-2),
    "FlashLion": lambda ps: qopt.FlashLion(ps, lr=1e-3),
    "AdamW8bit": lambda ps: qopt.AdamW8bit(ps, lr=1e-2, min_8bit_size=0),
    # bitsandbytes' default min_8bit_size (4096): 1.weight (256 x 33 = 8448 elements) keeps 8-bit
    # state on every rank although each rank's shard at world size 4 has fewer than 4096
    "AdamW8bitDefault": lambda ps: qopt.AdamW8bit(ps, lr=1e-2),
    "FlashAdamWf32state": lambda ps: qopt.FlashAdamW(ps, lr=1e-2, quantize=False),
}
#: (optimizer, parameter) -> whether its state is 8-bit, decided on the global shape
POLICY = {("AdamW8bitDefault", "2.weight"): True, ("AdamW8bitDefault", "4.weight"): False,
          ("AdamW8bitDefault", "0.weight"): False, ("FlashAdamWf32state", "2.weight"): False}
#: the weight whose rows are whole quantization groups for every optimizer (256 = 8 x 32)
ALIGNED = "4.weight"


def unavailable() -> str:
    """Why this check cannot run here ("" if it can): FSDP2 and DCP, on gloo."""
    why = qopt.fsdp2_unavailable()
    if not why and not dist.is_gloo_available():
        why = "torch.distributed has no gloo backend"
    return why


def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(24, 33), torch.nn.GELU(),
                               torch.nn.Linear(33, 256), torch.nn.GELU(),
                               torch.nn.Linear(256, 8)).to(torch.bfloat16)


def batch(step: int):
    """The batch of every step and rank (one fixed batch: the loss falls step by step)."""
    g = torch.Generator().manual_seed(100)
    return (torch.randn(16, 24, generator=g).to(torch.bfloat16),
            torch.randn(16, 8, generator=g).to(torch.bfloat16))


def shard_model(model, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train(model, opt, first: int, n: int):
    losses = []
    for s in range(first, first + n):
        x, y = batch(s)           # every rank the same batch
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def full_weights(model):
    return {n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone()
            for n, p in model.named_parameters()}


def _cloned(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _cloned(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cloned(v) for v in obj)
    return obj


def full_optim(model, opt):
    """The gathered optimizer state, copied: a plain tensor of it (``step``) is the optimizer's
    own, which later steps advance in place (as torch.optim's step tensors)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict
    return _cloned(get_optimizer_state_dict(model, opt, options=StateDictOptions(
        full_state_dict=True, cpu_offload=True)))


def _opts(flatten: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    return StateDictOptions(flatten_optimizer_state_dict=flatten)


#: the get/set round trips of the saving world: nested, flattened, full (every rank gets the
#: gathered state, which each rank cuts to its shard on set), full with broadcast from rank 0 (only
#: rank 0 holds the gathered state, offloaded to the CPU; set broadcasts it)
ROUND_TRIPS = ("nested", "flat", "full", "full-broadcast")


def _round_trip_options(form: str):
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    if form in ("nested", "flat"):
        o = _opts(form == "flat")
        return o, o
    if form == "full":
        o = StateDictOptions(full_state_dict=True)
        return o, o
    return (StateDictOptions(full_state_dict=True, cpu_offload=True),
            StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().reshape(-1).cpu()
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


PAIRS = {"exp_avg::quantized": "exp_avg::scales", "exp_avg_sq::quantized": "exp_avg_sq::scales",
         "momentum_buffer::quantized": "momentum_buffer::scales", "state1": "absmax1",
         "state2": "absmax2"}


def compare_state(saved: dict, loaded: dict, fails: list, tag: str):
    """Full (gathered) optimizer states: per-element streams bitwise; codes where the element kept
    its scale; everything of ALIGNED bitwise."""
    for fqn, st in saved["state"].items():
        got = loaded["state"].get(fqn)
        if got is None or got.keys() != st.keys():
            fails.append(f"{tag}: state keys of {fqn}: {sorted(st)} vs {sorted(got or {})}")
            continue
        for k, v in st.items():
            if not isinstance(v, torch.Tensor):
                continue
            w = got[k]
            quantized = k in PAIRS and PAIRS[k] in st
            if k in PAIRS.values():
                continue
            if quantized:
                kept = _bits(st[PAIRS[k]]) == _bits(got[PAIRS[k]])
                if not torch.equal(_bits(v)[kept], _bits(w)[kept]):
                    fails.append(f"{tag}: {fqn} {k}: a code changed where its scale did not")
                if fqn == ALIGNED and not (bool(kept.all()) and torch.equal(_bits(v), _bits(w))):
                    fails.append(f"{tag}: {fqn} {k}: not bitwise (its groups are whole rows)")
            elif v.dim() == 0 and k == "step":
                if int(v) != int(w):
                    fails.append(f"{tag}: {fqn} step {int(w)} != {int(v)}")
            elif not torch.equal(_bits(v), _bits(w)):
                fails.append(f"{tag}: {fqn} {k} differs")


def worker(rank: int, world: int, phase: str, root: str, flatten: bool, store: str):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict,
                                                         get_optimizer_state_dict,
                                                         set_model_state_dict,
                                                         set_optimizer_state_dict)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    fails = []
    try:
        for name, make in OPTIMIZERS.items():
            path = os.path.join(root, name)
            tag = f"{name} {phase}@{world}"
            if phase == "save":
                model = shard_model(make_model(0), world)
                opt = make(model.parameters())
                train(model, opt, 0, STEPS)
                for pname, p in model.named_parameters():
                    want = POLICY.get((name, pname))
                    if want is not None and ("absmax1" in opt.state[p]
                                             or "exp_avg::quantized" in opt.state[p]) != want:
                        fails.append(f"{tag}: {pname} has {'float32' if want else '8-bit'} state "
                                     f"(the policy must follow the global shape)")
                sd = {"model": get_model_state_dict(model),
                      "optim": get_optimizer_state_dict(model, opt, options=_opts(flatten))}
                dcp.save(sd, checkpoint_id=path)
                weights, osd = full_weights(model), full_optim(model, opt)
                # get/set without DCP into a second optimizer on a copy of the model, in each
                # of the state_dict API's forms
                twins = []
                for form in ROUND_TRIPS:
                    twin = shard_model(make_model(1), world)
                    twin_opt = make(twin.parameters())
                    get_o, set_o = _round_trip_options(form)
                    # (set_optimizer_state_dict may step a fresh optimizer with zero gradients
                    # first, DCP's _init_optim_state: the weights are set after it)
                    set_optimizer_state_dict(
                        twin, twin_opt,
                        optim_state_dict=get_optimizer_state_dict(model, opt, options=get_o),
                        options=set_o)
                    set_model_state_dict(twin, get_model_state_dict(model))
                    twin_osd = full_optim(twin, twin_opt)
                    if rank == 0:
                        compare_state(osd, twin_osd, fails, f"{tag} get/set {form}")
                    twins.append((form, twin, twin_opt))
                losses = train(model, opt, STEPS, STEPS)
                after = full_weights(model)
                for form, twin, twin_opt in twins:
                    train(twin, twin_opt, STEPS, STEPS)
                    twin_after = full_weights(twin)
                    for n in after:
                        if not torch.equal(_bits(after[n]), _bits(twin_after[n])):
                            fails.append(f"{tag} get/set {form}: {n} stepped differently after "
                                         f"the round trip")
                if rank == 0:
                    torch.save({"weights": weights, "optim": osd, "after": after,
                                "losses": losses, "world": world},
                               os.path.join(root, f"{name}.ref.pt"))
            else:
                ref = torch.load(os.path.join(root, f"{name}.ref.pt"), weights_only=False)
                model = shard_model(make_model(1), world)       # other initial weights
                opt = make(model.parameters())
                sd = {"model": get_model_state_dict(model),
                      "optim": get_optimizer_state_dict(model, opt, options=_opts(flatten))}
                dcp.load(sd, checkpoint_id=path)
                set_model_state_dict(model, sd["model"])
                set_optimizer_state_dict(model, opt, optim_state_dict=sd["optim"],
                                         options=_opts(flatten))
                weights, osd = full_weights(model), full_optim(model, opt)
                if rank == 0:
                    for n, w in ref["weights"].items():
                        if not torch.equal(_bits(w), _bits(weights[n])):
                            fails.append(f"{tag}: weight {n} not restored bitwise")
                    compare_state(ref["optim"], osd, fails, tag)
                losses = train(model, opt, STEPS, STEPS)
                after = full_weights(model)
                if rank == 0:
                    if world == ref["world"]:
                        for n, w in ref["after"].items():
                            if not torch.equal(_bits(w), _bits(after[n])):
                                fails.append(f"{tag}: {n} after resuming differs from the "
                                             f"uninterrupted run at the same world size")
                    if not all(map(lambda v: v == v and abs(v) != float("inf"), losses)):
                        fails.append(f"{tag}: non-finite loss {losses}")
                    elif not losses[-1] < losses[0]:
                        fails.append(f"{tag}: loss did not fall after resuming: {losses}")
    except Exception:
        fails.append(f"rank {rank}: " + traceback.format_exc())
    finally:
        dist.barrier()
        dist.destroy_process_group()
    if fails:
        for f in fails:
            print(f"FAIL rank {rank} world {world}: {f}", flush=True)
        sys.exit(1)


def spawn(world: int, phase: str, root: str, flatten: bool) -> bool:
    import torch.multiprocessing as mp
    store = tempfile.mktemp(prefix="qopt_dcp_store_")
    try:
        mp.spawn(worker, args=(world, phase, root, flatten, store), nprocs=world, join=True)
        return True
    except Exception as e:    # a worker's non-zero exit
        print(f"FAIL {phase} at world size {world}: {e}", flush=True)
        return False
    finally:
        if os.path.exists(store):
            os.remove(store)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--save", type=int, default=2)
    ap.add_argument("--load", default="1,2,4")
    ap.add_argument("--flatten", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args(argv)
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    root = a.dir or tempfile.mkdtemp(prefix="qopt_dcp_")
    ok = spawn(a.save, "save", root, a.flatten)
    for m in ([int(x) for x in a.load.split(",") if x] if ok else []):
        ok = spawn(m, "load", root, a.flatten) and ok
        print(f"{'PASS' if ok else 'FAIL'} saved at {a.save}, loaded at {m}"
              f"{' (flattened)' if a.flatten else ''}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The small GPT of train_gpt.py under FSDP2, with DCP checkpoints that resume at any world size
(issue 29).

    torchrun --standalone --nproc_per_node=N python/examples/train_gpt_fsdp.py \\
        --opt flash_adamw|adamw8bit|torch_fused --steps 200 --save-at 100 --ckpt DIR --csv FILE
    torchrun --standalone --nproc_per_node=M python/examples/train_gpt_fsdp.py \\
        --opt ... --steps 200 --resume DIR --csv FILE

Model and corpus are train_gpt.py's (``GPT``, ``load_corpus``, ``param_groups``: a byte-level GPT on
the Python standard library's source); every transformer block and the root are wrapped by
``fully_shard`` on a 1-D mesh of all ranks. Optimizers (``--opt``), lr with linear warm-up and a
cosine decay to 10%, betas (0.9, 0.95), weight decay on 2-D weights only:

  flash_adamw  qopt.FlashAdamW on bfloat16 parameters (24-bit masters through the error bits);
               FSDP2 gathers and reduces in bfloat16.
  adamw8bit    qopt.AdamW8bit on float32 parameters; FSDP2's MixedPrecisionPolicy computes in
               bfloat16 and reduces gradients in float32.
  torch_fused  torch.optim.AdamW(fused=True) on float32 parameters, the same MixedPrecisionPolicy.

Data: the batch of global step s (1-based) is drawn from a generator seeded with (seed, s) alone,
and rank r of W takes rows [r*B/W, (r+1)*B/W) of the global batch B, so every world size trains on
the same global batches; a resumed run draws the same batches as the uninterrupted one.
Gradients are clipped to a global L2 norm of --clip (the norm is summed over every rank's shards
in float32); --clip 0 turns clipping off.

Checkpoints: after step --save-at, ``dcp.save`` writes {"model": get_model_state_dict,
"optim": get_optimizer_state_dict} (torch.distributed.checkpoint.state_dict, nested form) to
--ckpt, and rank 0 writes --ckpt/meta.json (the step, the world size and the run's configuration,
which a resume must match: RUN_KEYS) and
--ckpt/weights.pt (the full weights, name -> tensor, for checks). --resume DIR loads that checkpoint
into freshly initialised processes of any world size (``dcp.load`` then ``set_model_state_dict``
and ``set_optimizer_state_dict``) and trains steps meta.step+1 .. --steps. A resume at the saving
world size repeats the uninterrupted run bit for bit; at another world size the reduction order
and the shards (so the 8-bit moments' groups) differ, and the run continues within the bound that
python/tests/DIST.md states.

Outputs (rank 0): --csv FILE with one row per step: step, loss (the mean over ranks of each rank's
float32 mean cross-entropy in nats per byte, i.e. the global batch's mean; written with repr, so
exactly), lr, tokens_per_s (global tokens of the step over its wall time, the step's end
synchronised by the loss all-reduce), step_ms; --save-weights FILE with the final full weights
(name -> CPU tensor). Errors (a bad flag, a checkpoint of another
optimizer or model, a global batch that the world size does not divide) exit with a message naming
the problem; status 1 on any failure.

Environment: launched by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), or as a single
process (world size 1). NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are set where
unset (NVLink multicast stays off, python/tests/DIST.md), and so is CUBLAS_WORKSPACE_CONFIG=:4096:8
for torch's deterministic algorithms (on by default, warn-only: an op without a deterministic
implementation, such as cuDNN attention's backward, warns and runs; --no-deterministic turns
them off).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import socket
import sys
import time
import traceback
from pathlib import Path

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))          # train_gpt
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # python/ (source checkout)
import qopt  # noqa: E402
from train_gpt import GPT, load_corpus, param_groups  # noqa: E402

OPTS = ("flash_adamw", "adamw8bit", "torch_fused")
#: the checkpoint's meta.json entries that a resume must match (model, data, optimizer, schedule)
RUN_KEYS = ("opt", "param_dtype", "layers", "d_model", "heads", "seq", "batch", "seed",
            "corpus_bytes", "steps", "lr", "warmup", "weight_decay", "clip")


def unavailable() -> str:
    """Why this script cannot run with this torch ("" if it can)."""
    return qopt.fsdp2_unavailable()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opt", choices=OPTS, required=True)
    ap.add_argument("--steps", type=int, default=200, help="last global step (1-based)")
    ap.add_argument("--save-at", type=int, default=None, metavar="K",
                    help="write a DCP checkpoint to --ckpt after step K")
    ap.add_argument("--ckpt", default=None, metavar="DIR")
    ap.add_argument("--resume", default=None, metavar="DIR",
                    help="load the checkpoint in DIR and continue after its step")
    ap.add_argument("--csv", default=None, metavar="FILE")
    ap.add_argument("--save-weights", default=None, metavar="FILE",
                    help="rank 0 writes the final full weights (torch.save of name -> tensor)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="default: cuda where available")
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                    help="default: nccl on cuda, gloo on cpu")
    ap.add_argument("--param-dtype", choices=("auto", "bf16", "fp32"), default="auto",
                    help="auto: bf16 for flash_adamw, fp32 (+ bf16 compute) for the others")
    ap.add_argument("--batch", type=int, default=64, help="global batch (sequences per step)")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient norm (0: off)")
    ap.add_argument("--corpus-bytes", type=int, default=8 << 20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-deterministic", dest="deterministic", action="store_false")
    a = ap.parse_args(argv)
    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    a.backend = a.backend or ("nccl" if a.device == "cuda" else "gloo")
    if a.param_dtype == "auto":
        a.param_dtype = "bf16" if a.opt == "flash_adamw" else "fp32"
    if a.backend == "nccl" and a.device != "cuda":
        ap.error("--backend nccl needs --device cuda")
    if a.save_at is not None and not a.ckpt:
        ap.error("--save-at needs --ckpt DIR")
    if a.ckpt and a.save_at is None:
        ap.error("--ckpt needs --save-at K")
    if a.save_at is not None and not 1 <= a.save_at <= a.steps:
        ap.error(f"--save-at {a.save_at} is outside steps 1..{a.steps}")
    if min(a.steps, a.batch, a.seq, a.d_model, a.layers, a.heads) < 1:
        ap.error("--steps, --batch, --seq, --d-model, --layers and --heads must be positive")
    if a.d_model % a.heads:
        ap.error(f"--d-model {a.d_model} is not a multiple of --heads {a.heads}")
    return a


def lr_at(step: int, a) -> float:
    """The learning rate of global step `step` (1-based): linear warm-up over --warmup steps, then
    a cosine from 1 to 0.1 of --lr at --steps (train_gpt.py's schedule, indexed by step - 1)."""
    s = step - 1
    if s < a.warmup:
        return a.lr * (s + 1) / a.warmup
    t = (s - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def local_batch(data: torch.Tensor, step: int, a, rank: int, world: int, device):
    """Rank `rank`'s rows of global step `step`'s batch: inputs and targets, [B/W, seq] int64."""
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
    ix = torch.randint(0, len(data) - a.seq - 1, (a.batch,), generator=g)
    per = a.batch // world
    ix = ix[rank * per:(rank + 1) * per].tolist()
    x = torch.stack([data[i:i + a.seq] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + a.seq] for i in ix])
    return x.to(device), y.to(device)


def build(a, world: int, device):
    """The sharded model and its optimizer, initialised alike on every rank (seeded)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    torch.manual_seed(a.seed)
    model = GPT(256, a.seq, a.d_model, a.layers, a.heads)
    bf16 = a.param_dtype == "bf16"
    model = model.to(device=device, dtype=torch.bfloat16 if bf16 else torch.float32)
    mesh = init_device_mesh(device.type, (world,))
    mp = (MixedPrecisionPolicy() if bf16 else
          MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    groups = param_groups(model, a.weight_decay)
    hp = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    if a.opt == "flash_adamw":
        opt = qopt.FlashAdamW(groups, **hp)
    elif a.opt == "adamw8bit":
        opt = qopt.AdamW8bit(groups, **hp)
    else:
        opt = torch.optim.AdamW(groups, fused=True, **hp)
    return model, opt


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


@torch.no_grad()
def clip_(model, max_norm: float, world: int) -> None:
    """Scale every gradient by min(1, max_norm / (norm + 1e-6)), norm the L2 norm of all gradients
    over all ranks' shards (float32 sums of squares, all-reduced)."""
    grads = [_local(p.grad) for p in model.parameters() if p.grad is not None]
    dev = grads[0].device if grads else torch.device("cpu")
    sq = torch.zeros((), dtype=torch.float32, device=dev)
    for g in grads:
        sq += g.float().pow(2).sum()
    if world > 1:
        dist.all_reduce(sq)
    coef = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))


def full_weights(model):
    """The full weights on rank 0 (name -> CPU tensor; {} elsewhere). Collective."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                cpu_offload=True))


def save_checkpoint(model, opt, a, step: int, world: int, rank: int) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict
    dcp.save({"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)},
             checkpoint_id=a.ckpt)
    weights = full_weights(model)
    if rank == 0:
        meta = {k: getattr(a, k) for k in RUN_KEYS}
        meta.update(step=step, world=world, torch=torch.__version__)
        Path(a.ckpt, "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        torch.save(weights, Path(a.ckpt, "weights.pt"))
    dist.barrier()


def load_checkpoint(model, opt, a) -> int:
    """Load --resume into model and opt; the step the checkpoint was written after."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict,
                                                         get_optimizer_state_dict,
                                                         set_model_state_dict,
                                                         set_optimizer_state_dict)
    meta_path = Path(a.resume, "meta.json")
    if not meta_path.is_file():
        raise SystemExit(f"--resume {a.resume}: no meta.json there (not a checkpoint of this script)")
    meta = json.loads(meta_path.read_text())
    wrong = [f"{k}: checkpoint {meta.get(k)!r}, this run {getattr(a, k)!r}"
             for k in RUN_KEYS if meta.get(k) != getattr(a, k)]
    if wrong:
        raise SystemExit(f"--resume {a.resume} was written by another configuration: " + "; ".join(wrong))
    if not meta["step"] < a.steps:
        raise SystemExit(f"--resume {a.resume} is at step {meta['step']}, not before --steps {a.steps}")
    # get_optimizer_state_dict creates a fresh optimizer's state (a step with zero gradients);
    # the weights that step moves are then replaced by the checkpoint's
    sd = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.load(sd, checkpoint_id=a.resume)
    set_model_state_dict(model, sd["model"])
    set_optimizer_state_dict(model, opt, optim_state_dict=sd["optim"])
    return int(meta["step"])


def init_distributed(a):
    if "RANK" not in os.environ:          # a single process, not under torchrun
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if a.batch % world:
        raise SystemExit(f"global batch {a.batch} is not a multiple of the world size {world}")
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device")
        if local >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local} needs GPU {local}; torch sees "
                             f"{torch.cuda.device_count()}")
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=600),
                            **({"device_id": device} if device.type == "cuda" else {}))
    return rank, world, device


def train(a, rank: int, world: int, device) -> None:
    if a.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    raw, _ = load_corpus(a.corpus_bytes)
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.long)
    data = data[:int(0.95 * len(data))]                # train_gpt.py's training split
    if len(data) <= a.seq + 1:
        raise SystemExit(f"corpus of {len(data)} bytes is too short for --seq {a.seq}")
    model, opt = build(a, world, device)
    first = load_checkpoint(model, opt, a) + 1 if a.resume else 1
    writer = None
    if rank == 0 and a.csv:
        Path(a.csv).parent.mkdir(parents=True, exist_ok=True)
        f = open(a.csv, "w", newline="")
        writer = csv.writer(f)
        writer.writerow(["step", "loss", "lr", "tokens_per_s", "step_ms"])
    tokens = a.batch * a.seq
    for step in range(first, a.steps + 1):
        t0 = time.perf_counter()
        lr = lr_at(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = local_batch(data, step, a, rank, world, device)
        loss = model(x, y)
        loss.backward()
        if a.clip > 0:
            clip_(model, a.clip, world)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = loss.detach().float().clone()
        dist.all_reduce(total)                      # (gloo has no AVG)
        value = float(total) / world                # synchronises: the step has ended
        ms = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(value):
            raise SystemExit(f"step {step}: loss is {value}")
        if writer:
            writer.writerow([step, repr(value), repr(lr), f"{tokens / ms * 1e3:.1f}", f"{ms:.3f}"])
        if rank == 0 and (step == first or step % 50 == 0 or step == a.steps):
            print(f"{a.opt} world {world} step {step} loss {value:.5f} lr {lr:.3e} "
                  f"{tokens / ms * 1e3:,.0f} tok/s", flush=True)
        if a.save_at == step:
            save_checkpoint(model, opt, a, step, world, rank)
    if writer:
        f.close()
    if a.save_weights:
        weights = full_weights(model)
        if rank == 0:
            Path(a.save_weights).parent.mkdir(parents=True, exist_ok=True)
            torch.save(weights, a.save_weights)


def main(argv=None) -> int:
    a = parse_args(argv)
    why = unavailable()
    if why:
        print(f"train_gpt_fsdp.py: {why}", file=sys.stderr)
        return 1
    rank, world, device = init_distributed(a)
    try:
        train(a, rank, world, device)
    except SystemExit as e:
        print(f"rank {rank}: {e}", file=sys.stderr, flush=True)
        return 1                  # (torchrun then stops the other ranks)
    except Exception:
        print(f"rank {rank}: " + traceback.format_exc(), file=sys.stderr, flush=True)
        return 1
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

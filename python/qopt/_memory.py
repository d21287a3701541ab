"""Parameters that share memory: the check a step runs (before anything is launched) where a
parameter moved, from shapes and strides only (no element is read). Two parameters of a step whose
elements overlap, and a parameter with elements at one address (an expanded view), are refused:
the kernels would write shared elements twice and the copy back would fail with the step half done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import torch

from . import _capi as C
from ._launch import _local

if TYPE_CHECKING:
    from ._launch import _Launch


def _reach(t: torch.Tensor) -> int:
    """Elements from t's first element to one past its last (t non-empty; strides >= 0)."""
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def _distinct_by_strides(t: torch.Tensor) -> Optional[bool]:
    """Whether t's elements lie at distinct addresses, by its strides alone: True where each
    stride (of a dimension of more than one element, smallest first) passes the reach of the
    smaller ones, False where such a stride is 0 (an expanded view), None where the rule cannot
    tell (the element offsets decide)."""
    reach = 0
    for s, n in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if s == 0:
            return False
        if s <= reach:
            return None
        reach += (n - 1) * s
    return True


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """The element offsets of t from its first element (int64, CPU, row-major order), from its
    shape and strides only: no element is read."""
    off = torch.zeros((), dtype=torch.int64)
    for n, s in zip(t.shape, t.stride()):
        off = off.unsqueeze(-1) + torch.arange(n, dtype=torch.int64) * s
    return off.reshape(-1)


def _memory_error(message: str) -> C.QoptError:
    return C.QoptError("step", 11, f"{message}; nothing was stepped")  # QOPT_ERROR_VALIDATION


def check_param_memory(launches: List["_Launch"]) -> None:
    """Refuses, before anything of the step is launched, parameters that share memory: two
    parameters of the step (in any launch) whose elements overlap, and a parameter with elements
    at one address (an expanded, stride-0 view), whose copy back after the step would fail with
    the step half done. Also a non-contiguous inference tensor (its copy back is refused by
    torch). Address arithmetic from shapes and strides only (no element is read); run when a
    parameter moved (_Launch.mem_token), not at every step."""
    spans: Dict[Any, List[Tuple[int, int, int, bool]]] = {}   # device -> (start, end, #, dense)
    items: List[Tuple[str, torch.Tensor]] = []
    for ln in launches:
        for label, p in zip(ln.labels, ln.params):
            t = _local(p)
            n = t.numel()
            if n == 0:
                continue
            name = f"{label} {list(p.shape)}"
            if t.is_contiguous():
                dense = True
                reach = n
            else:
                distinct = _distinct_by_strides(t)
                if distinct is None:
                    distinct = int(_offsets(t).unique().numel()) == n
                if not distinct:
                    raise _memory_error(
                        f"{name} has elements that share one address (strides "
                        f"{list(t.stride())}: an expanded view, e.g. tensor.expand()); the kernel "
                        f"would write several updates to one element and the copy back would "
                        f"fail. Give the parameter memory of its own (p.data = p.data.clone())")
                if t.is_inference():
                    raise _memory_error(
                        f"{name} is a non-contiguous inference tensor: the step writes it "
                        f"through a contiguous copy, which torch refuses to copy back outside "
                        f"InferenceMode. Give the parameter memory of its own (p.data = "
                        f"p.data.clone())")
                reach = _reach(t)
                dense = reach == n
            start = t.data_ptr()
            spans.setdefault(t.device, []).append(
                (start, start + reach * t.element_size(), len(items), dense))
            items.append((name, t))
    for dev_spans in spans.values():
        dev_spans.sort()
        comp = [dev_spans[0]]
        end = dev_spans[0][1]
        for sp in dev_spans[1:]:
            if sp[0] < end:
                comp.append(sp)
                end = max(end, sp[1])
            else:
                _check_component(comp, items)
                comp, end = [sp], sp[1]
        _check_component(comp, items)


def _check_component(comp: List[Tuple[int, int, int, bool]],
                     items: List[Tuple[str, torch.Tensor]]) -> None:
    """Parameters whose address ranges chain into one range (sorted by start): refused where two
    of them share an element's memory."""
    if len(comp) < 2:
        return
    if all(sp[3] for sp in comp):
        # each covers its whole range: the first one that starts inside another's overlaps it
        far = comp[0]
        for sp in comp[1:]:
            if sp[0] < far[1]:
                _overlap(items[far[2]][0], items[sp[2]][0])
            if sp[1] > far[1]:
                far = sp
        return
    # interleaved views (e.g. two column blocks of one matrix): every element's address
    base = comp[0][0]
    tensors = [items[sp[2]][1] for sp in comp]
    sizes = {t.element_size() for t in tensors}
    unit = sizes.pop() if len(sizes) == 1 else 1
    if any((t.data_ptr() - base) % unit for t in tensors):
        unit = 1
    addrs, owner = [], []
    for k, t in enumerate(tensors):
        off = _offsets(t) * t.element_size() // unit
        if unit == 1 and t.element_size() > 1:
            off = (off.unsqueeze(-1) + torch.arange(t.element_size(), dtype=torch.int64)).reshape(-1)
        addrs.append(off + (t.data_ptr() - base) // unit)
        owner.append(torch.full((off.numel(),), k, dtype=torch.int64))
    a, order = torch.sort(torch.cat(addrs), stable=True)
    o = torch.cat(owner)[order]
    same = (a[1:] == a[:-1]) & (o[1:] != o[:-1])
    if bool(same.any()):
        i = int(same.nonzero()[0, 0])
        j, k = sorted((int(o[i]), int(o[i + 1])))
        _overlap(items[comp[j][2]][0], items[comp[k][2]][0])


def _overlap(first: str, second: str) -> None:
    raise _memory_error(
        f"{first} and {second} share memory (overlapping views of one storage, or one parameter "
        f"listed twice): a step would write the shared elements twice. Give each parameter memory "
        f"of its own (p.data = p.data.clone()), or list it once")

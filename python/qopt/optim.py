"""torch.optim.Optimizer classes that step their parameters with qopt's fused multi-tensor kernels.

One launch per parameter group and parameter dtype (bf16, fp16, fp32: each has its kernel, a
variant of the same spec; more launches only when the group's parameters live on several devices or
have taken different numbers of steps), on ``torch.cuda.current_stream()``; no host sync. The
optimizer state is the kernel's own quantized state (codes, scales or absmax, error bits), created
lazily from ``qopt_manifest_state_layout`` and kept as it is in ``state_dict``.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import numbers
import operator
import weakref
from ctypes import byref, c_char_p, c_int32, c_int64, c_uint64, c_void_p
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch

from . import _capi as C
from . import _runtime as R
from .codebook import create_dynamic_map

__all__ = ["QoptOptimizer", "FlashAdamW", "FlashAdam", "FlashSGD", "FlashSGDW", "FlashLion",
           "AdamW8bit", "STATE_FORMAT", "STATE_FORMAT_VERSION"]

#: param group key of the lr a group had when it was added (decouple_lr's reference); torch's
#: "initial_lr" is left to its schedulers
_INITIAL_LR = "_qopt_initial_lr"

STATE_FORMAT = "qopt-optimizer-state"
STATE_FORMAT_VERSION = 1

TORCH_DTYPES = {C.DTYPE_F32: torch.float32, C.DTYPE_BF16: torch.bfloat16, C.DTYPE_F16: torch.float16,
                C.DTYPE_INT8: torch.int8, C.DTYPE_UINT8: torch.uint8, C.DTYPE_INT16: torch.int16}
QOPT_DTYPES = {v: k for k, v in TORCH_DTYPES.items()}

#: Parameter (and gradient) dtypes with kernels: each spec is compiled for bf16 (its own type), and
#: as the variants <spec>.f16 and <spec>.f32 (qopt-opt --param-type; an fp32 parameter is its own
#: master weight, so it has no error bits whatever master_weight_bits says).
PARAM_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_DTYPE_SUFFIX = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}

#: torch >= 2.0's GradScaler hands an optimizer with this flag its scale and found_inf as the
#: attributes ``grad_scale`` and ``found_inf`` (torch 1.x passed itself as a ``grad_scaler``
#: keyword instead, which qopt does not take: there GradScaler unscales and checks by itself).
_AMP_ATTRIBUTES = int(torch.__version__.split(".")[0]) >= 2


def _local(t: torch.Tensor) -> torch.Tensor:
    """The local shard of a DTensor (FSDP2), else the tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def _local_grad(p: torch.Tensor) -> torch.Tensor:
    """The local shard of p's gradient. A DTensor parameter is stepped shard by shard, so its
    gradient must be sharded the same way (FSDP2 gives both the same placements); a gradient with
    other placements (or a plain tensor for a DTensor parameter, or the reverse) would pair
    elements of different positions and is refused."""
    g = p.grad
    pp, gp = getattr(p, "placements", None), getattr(g, "placements", None)
    if pp != gp:
        raise RuntimeError(f"qopt: a parameter of shape {tuple(p.shape)} has placements {pp} but "
                           f"its gradient {gp}; qopt steps the local shards, which must match")
    return _local(g)


_is = operator.is_
_chain = itertools.chain.from_iterable

# The per-property passes of _Launch._check_fast (one C-level loop each over a list of tensors).
_grad_of = operator.attrgetter("grad")
_numel = torch.Tensor.numel
_contiguous = torch.Tensor.is_contiguous
_data_ptr = torch.Tensor.data_ptr
_misaligned = (15).__and__
_PLAIN = {torch.Tensor}
_STRIDED = {torch.strided}


def _types(ts):
    return set(map(type, ts))


def _layouts(ts):
    return set(map(operator.attrgetter("layout"), ts))


def _dtypes(ts):
    return set(map(operator.attrgetter("dtype"), ts))


def _size_error(where: str, now: int, made_for: int) -> RuntimeError:
    """A parameter whose number of elements is not the one its state (and its launch) was made
    for: stepping it would write past a smaller tensor, or step a part of a larger one."""
    return RuntimeError(
        f"{where} has {now} elements, but its optimizer state was made for {made_for} (was "
        f"`param.data` replaced by a tensor of another size?); nothing was stepped. Recreate the "
        f"optimizer, or drop this parameter's state with `optimizer.state.pop(param)` so that its "
        f"next step starts it afresh.")


def _backend_of(t: torch.Tensor) -> Tuple[int, int]:
    if t.device.type == "cuda":
        return C.BACKEND_CUDA, t.device.index if t.device.index is not None else torch.cuda.current_device()
    if t.device.type == "cpu":
        return C.BACKEND_HOST, 0
    raise TypeError(f"qopt: parameters on device '{t.device}' are not supported (CUDA or CPU only)")


def _fill(t: torch.Tensor, bits: int) -> None:
    """Fills t with the bit pattern `bits` (one element's bits, as qopt_buffer_layout gives)."""
    if bits == 0 or t.numel() == 0:
        t.zero_()
        return
    size = t.element_size()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[size]
    if size > 1 and bits >= 1 << (8 * size - 1):
        bits -= 1 << (8 * size)  # the signed integer with the same bits
    t.view(view).fill_(bits)


# --------------------------------------------------------------------- uniforms on the device

_BINARY = {"sub", "div", "pow", "lt", "le", "gt", "ge", "eq", "ne"}


def _is_dynamic(expr, dynamic_names) -> bool:
    if isinstance(expr, str):
        return expr in dynamic_names
    if isinstance(expr, list):
        return any(_is_dynamic(a, dynamic_names) for a in expr[1:])
    return False


def _eval_device(expr, env: Dict[str, Any], device) -> Any:
    """Evaluates a manifest uniform expression in float64: 0-dim float64 tensors where the value
    depends on `step` or a tensor hyperparameter, Python floats elsewhere (then the same IEEE
    double arithmetic as the runtime's host evaluation). No host<->device copies, so it can be
    captured in a CUDA graph. Division is tensor / tensor (IEEE; a scalar divisor would be a
    reciprocal multiply on CUDA)."""
    if isinstance(expr, bool):
        return 1.0 if expr else 0.0
    if isinstance(expr, (int, float)):
        return float(expr)
    if isinstance(expr, str):
        return env[expr]
    op, args = expr[0], [_eval_device(a, env, device) for a in expr[1:]]
    if not any(isinstance(a, torch.Tensor) for a in args):
        return _eval_host_op(op, args)

    def t(x):
        return x if isinstance(x, torch.Tensor) else torch.full((), x, dtype=torch.float64, device=device)

    def fold(fn, xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = fn(acc, x)
        return acc

    if op == "add":
        return fold(lambda a, b: a + b, [t(args[0])] + args[1:])
    if op == "mul":
        return fold(lambda a, b: a * b, [t(args[0])] + args[1:])
    if op == "sub":
        return t(args[0]) - args[1]
    if op == "div":
        return torch.div(t(args[0]), t(args[1]))
    if op == "pow":
        return torch.pow(args[0], args[1])
    if op == "neg":
        return -args[0]
    if op == "sqrt":
        return torch.sqrt(args[0])
    if op == "abs":
        return torch.abs(args[0])
    if op == "sign":
        return torch.sign(args[0]) + 0.0  # +0 for -0 (and for NaN, as the runtime)
    T = [t(a) for a in args]
    if op == "min":
        return fold(torch.minimum, T)
    if op == "max":
        return fold(torch.maximum, T)
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return getattr(torch, op)(T[0], T[1]).to(torch.float64)
    if op == "and":
        return fold(lambda a, b: ((a != 0) & (b != 0)).to(torch.float64), T)
    if op == "or":
        return fold(lambda a, b: ((a != 0) | (b != 0)).to(torch.float64), T)
    if op == "not":
        return (T[0] == 0).to(torch.float64)
    if op == "select":
        return torch.where(T[0] != 0, T[1], T[2])
    raise ValueError(f"qopt: unknown uniform operator '{op}'")


def _eval_host_op(op: str, a: List[float]) -> float:
    import operator
    try:
        if op == "add":
            return sum(a[1:], a[0])
        if op == "mul":
            r = a[0]
            for x in a[1:]:
                r *= x
            return r
        if op == "sub":
            return a[0] - a[1]
        if op == "div":
            return a[0] / a[1]
        if op == "pow":
            return math.pow(a[0], a[1])
    except (ZeroDivisionError, ValueError, OverflowError):
        t = _eval_device([op] + a, {}, "cpu")  # IEEE semantics through torch
        return float(t)
    if op == "neg":
        return -a[0]
    if op == "sqrt":
        return math.sqrt(a[0]) if a[0] >= 0 else math.nan
    if op == "abs":
        return abs(a[0])
    if op == "sign":
        return 0.0 if a[0] == 0 or math.isnan(a[0]) else math.copysign(1.0, a[0])
    if op in ("min", "max"):
        if any(math.isnan(x) for x in a):
            return math.nan
        return min(a) if op == "min" else max(a)
    cmp = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
           "eq": operator.eq, "ne": operator.ne}
    if op in cmp:
        return 1.0 if cmp[op](a[0], a[1]) else 0.0
    if op == "and":
        return 1.0 if all(x != 0 for x in a) else 0.0
    if op == "or":
        return 1.0 if any(x != 0 for x in a) else 0.0
    if op == "not":
        return 1.0 if a[0] == 0 else 0.0
    if op == "select":
        return a[1] if a[0] != 0 else a[2]
    raise ValueError(f"qopt: unknown uniform operator '{op}'")


# ---------------------------------------------------------------------------- one launch

def _check_adam_group(group):
    """PyTorch's checks of an Adam-family param group (lr, eps, betas, weight decay)."""
    _check_lr(group["lr"])
    _check_eps(group["eps"])
    _check_betas(group["betas"])
    _check_wd(group["weight_decay"])


class _Slot:
    """One kernel a launch can use: the spec's, or its grad-scaling variant (the same streams, two
    more hyperparameters and uniforms), with its hyperparameter array and device uniforms."""

    def __init__(self, ks: R.KernelSpec, kernel_key):
        self.ks = ks
        self.kernel: Optional[c_void_p] = None
        self.kernel_key = kernel_key
        self.hyper_names = list(ks.hypers)
        self._hyper_bytes = [h.encode() for h in self.hyper_names]
        self.hypers = (C.Hyper * max(len(self.hyper_names), 1))()
        for i, b in enumerate(self._hyper_bytes):
            self.hypers[i].name = b
        self.uniforms: Optional[torch.Tensor] = None
        self._static_key = None
        self._static: List[Optional[torch.Tensor]] = []


class _Prepared:
    """What _Launch.prepare() decided for the launch of the same step."""
    __slots__ = ("keep", "copy_back", "slot", "hv", "step", "use_device_uniforms", "host",
                 "device_skip", "move_counters", "moved")

    def __init__(self, keep, copy_back, slot, hv, step, use_device_uniforms, host, device_skip,
                 move_counters):
        self.keep, self.copy_back, self.slot, self.hv, self.step = keep, copy_back, slot, hv, step
        self.use_device_uniforms, self.host = use_device_uniforms, host
        self.device_skip, self.move_counters = device_skip, move_counters
        self.moved = None   # (counts, step tensors) before begin() moved them to the device


class _Launch:
    """The tensors of one kernel launch (one group, one device, one parameter dtype, one step
    count), with the ctypes arrays of qopt_tensor_list built once and patched only where a pointer
    changed."""

    def __init__(self, opt: "QoptOptimizer", ks: R.KernelSpec, backend: int, device: int,
                 params: List[torch.Tensor], labels: List[str], kernel_key):
        self.opt, self.ks, self.backend, self.device = opt, ks, backend, device
        self.params = params
        self.dtype = TORCH_DTYPES[ks.param_dtype]
        self._want = {self.dtype}
        self.slots = {False: _Slot(ks, kernel_key)}
        n, S = len(params), ks.num_streams
        self.n, self.S = n, S
        self.numels = (c_int64 * max(n, 1))()
        self.data = (c_void_p * max(n * S, 1))()
        self.bytes = (c_uint64 * max(n * S, 1))()
        self.dtypes = (c_int32 * max(n * S, 1))()
        self.labels = labels   # "param_groups[g][i]" of each parameter
        self._names = [f"{lb} {list(p.shape)}".encode() for lb, p in zip(labels, params)]
        self.names = (c_char_p * max(n, 1))(*self._names)
        self.pptr = [0] * n
        self.gptr = [0] * n
        self.states = [opt.state[p] for p in params]
        # plain tensors only (no DTensor): check() takes p and p.grad as they are
        self.plain = all(type(p) in (torch.Tensor, torch.nn.Parameter) for p in params)
        self.numel_list: List[int] = []   # what the launch (and each state) was made for
        keys = opt._stream_keys(ks)
        for i, (p, st) in enumerate(zip(params, self.states)):
            lp = _local(p)
            self.numels[i] = lp.numel()
            self.numel_list.append(lp.numel())
            for s in ks.streams:
                j = i * S + s.index
                self.dtypes[j] = s.dtype
                if s.role in (C.ROLE_PARAM, C.ROLE_GRAD):
                    self.bytes[j] = lp.numel() * C.DTYPE_SIZES[s.dtype]
                    continue
                t = st[keys[s.name]]
                self.data[j] = t.data_ptr()
                self.bytes[j] = t.numel() * t.element_size()
        self.list = C.TensorList(n, S, self.numels, self.data, self.bytes, self.dtypes, self.names)
        self.tables = opt._device_tables(ks, params[0].device if params else None)
        self.table_ptrs = (c_void_p * max(len(self.tables), 1))(*[t.data_ptr() for t in self.tables])
        self.step = int(self.states[0]["step"].item()) if self.states else 0
        self.device_obj = params[0].device
        self._bind_counters(self.states[0]["step"].device if self.states else None)
        # (local parameter, local gradient) of each parameter, from check() to prepare() of one step
        # where one of them needs a look of its own (check()'s slow path); None on the fast path
        self._cur: Optional[List[Tuple[torch.Tensor, torch.Tensor]]] = None
        # the parameter and gradient pointers check() found on its fast path
        self._fast: Optional[Tuple[List[int], List[int]]] = None
        # what prepare() decided for the launch of the same step
        self._prep: Optional[_Prepared] = None
        # this launch's entry of qopt_step_many, filled by prepare()
        self.entry = C.Launch()
        self.entry.tensors = ctypes.pointer(self.list)
        self.entry.tables = self.table_ptrs
        self.entry.num_tables = len(self.tables)

    def _snapshot(self) -> None:
        """Records what the launch's pointers were taken from: every value of every parameter's
        state dict (check() compares them by identity at each step)."""
        self.state_lens = [len(st) for st in self.states]
        self.state_vals = [v for st in self.states for v in st.values()]
        self.state_starts = list(itertools.accumulate([0] + self.state_lens[:-1]))

    def same_state(self, i: int, st: Any) -> bool:
        """Whether `st` is parameter i's state dict as this launch took it, values and all."""
        if st is not self.states[i] or len(st) != self.state_lens[i]:
            return False
        start = self.state_starts[i]
        return all(map(_is, st.values(), self.state_vals[start:start + len(st)]))

    def _slot(self, scaled: bool) -> _Slot:
        slot = self.slots.get(scaled)
        if slot is None:
            ks = self.opt._kernel_spec(self.backend, self.dtype, scaled=True)
            base = self.slots[False]
            slot = _Slot(ks, base.kernel_key + ("scaled",))
            self.slots[scaled] = slot
        return slot

    def _kernel(self, slot: _Slot) -> c_void_p:
        if slot.kernel is None:
            # One handle per launch slot of the optimizer, kept across cache rebuilds: the runtime
            # keeps one idle staging buffer per handle for a capture, so a graph can capture
            # every launch of a step (several groups, several devices).
            handles = self.opt._kernels
            k = handles.get(slot.kernel_key)
            if k is None:
                k = R.create_kernel(slot.ks, self.backend, self.device)
                handles[slot.kernel_key] = k
            slot.kernel = k
        return slot.kernel

    def _bind_counters(self, device, dtype: Optional[torch.dtype] = None) -> None:
        """Makes every parameter's ``state["step"]`` a view of one tensor of this launch
        (``self.counts``), so that a step advances all of them with one operation. The counters
        of one launch are equal (its parameters have taken the same number of steps); they keep
        their dtype: int64 on the host, float32 on the device (capturable=True, GradScaler)."""
        if not self.states:
            self.counts = None
            self.step_tensors = []
            self._snapshot()
            return
        dtype = dtype or self.states[0]["step"].dtype
        self.counts = torch.full((len(self.states),), self.step, dtype=dtype, device=device)
        for i, st in enumerate(self.states):
            st["step"] = self.counts[i]
        self.step_tensors = [st["step"] for st in self.states]
        self._snapshot()

    def _counters_to_device(self) -> None:
        """Moves the step counters of this launch's parameters to the device (float32, as
        capturable=True keeps them), so that a step skipped on the device needs no host sync."""
        self._bind_counters(self.device_obj, torch.float32)

    def check(self) -> bool:
        """Run for every launch of every group before the step launches anything: refuses a
        sparse gradient, a gradient of another dtype or size than its parameter, a parameter whose
        dtype or number of elements changed since its state (and this launch) was made.

        Returns False, having refused nothing yet, where the optimizer's state is no longer what
        this launch was built from (a parameter's state dict or one of its values replaced, removed
        or added: ``optimizer.state.pop(p)``, ``optimizer.state.clear()``, ``optimizer.state[p][k] =
        t``): the launch's pointers would be stale, so the group is rebuilt from the current state.
        Identity comparisons only (no tensor is read)."""
        states = self.states
        if not (all(map(_is, map(self.opt.state.get, self.params), states))
                and list(map(len, states)) == self.state_lens
                and all(map(_is, _chain(map(dict.values, states)), self.state_vals))):
            return False
        self._fast = self._check_fast() if self.plain else None
        if self._fast is not None:
            return True
        ks = self.ks
        want = TORCH_DTYPES[ks.param_dtype]
        numels = self.numel_list
        cur = []
        cls = type(self.opt).__name__
        plain = self.plain
        for i, p in enumerate(self.params):
            if plain:
                lp, g = p, p.grad
                if type(g) is not torch.Tensor:
                    g = _local_grad(p)
            else:
                lp, g = _local(p), _local_grad(p)
            if g.layout != torch.strided:
                raise RuntimeError(f"{cls} does not support sparse gradients ("
                                   f"{self.labels[i]} {list(p.shape)} has a {g.layout} gradient)")
            if lp.dtype is not want:
                raise TypeError(f"{cls}: {self.labels[i]} {list(p.shape)} is {lp.dtype} now, but "
                                f"its state was made for {want} (kernel {ks.kernel}); cast "
                                f"parameters before creating the optimizer")
            n = lp.numel()
            if n != numels[i]:
                raise _size_error(f"{cls}: {self.labels[i]} {list(p.shape)}", n, numels[i])
            if g.dtype is not want:
                self.opt._dtype_error(p, lp.dtype, g.dtype, ks)
            if g.numel() != n:
                raise RuntimeError(f"qopt: {self._names[i].decode()}: gradient has {g.numel()} "
                                   f"elements, parameter {n}")
            cur.append((lp, g))
        self._cur = cur
        return True

    def _check_fast(self) -> Optional[Tuple[List[int], List[int]]]:
        """check() for plain tensors in one pass per property over the whole list: the parameter
        and gradient pointers when every parameter and gradient is a strided, contiguous, 16-byte
        aligned tensor of the launch's dtype and size; None when one is not, and check()'s
        per-parameter loop then says which and stages what needs a copy."""
        params = self.params
        grads = list(map(_grad_of, params))
        want = self._want
        if (_types(grads) != _PLAIN or _layouts(grads) != _STRIDED
                or _dtypes(grads) != want or _dtypes(params) != want
                or list(map(_numel, grads)) != self.numel_list
                or list(map(_numel, params)) != self.numel_list
                or not all(map(_contiguous, grads)) or not all(map(_contiguous, params))):
            return None
        gptrs = list(map(_data_ptr, grads))
        pptrs = list(map(_data_ptr, params))
        if any(map(_misaligned, gptrs)) or any(map(_misaligned, pptrs)):
            return None
        return pptrs, gptrs

    def prepare(self, group: Dict[str, Any], hv: Dict[str, Any],
                scaling: Optional[Tuple[Any, Any]] = None) -> None:
        """The second phase of a step, after check() returned True for every launch of it: takes
        this step's pointers (a copy of a parameter or gradient that is not contiguous and 16-byte
        aligned), the kernel (created here: a kernel the backend cannot run is refused here) and
        the uniforms' host evaluation (a hyperparameter the runtime refuses, a NaN uniform); with
        `precheck`, qopt_validate too (everything qopt_step validates: overlapping buffers, a
        gradient aliasing its parameter, alignment, sizes, device memory). Launches nothing and
        changes no parameter, gradient or state: step() prepares every launch of the step, and
        prechecks all but the first (whose own qopt_step validates before launching anything),
        before it runs any, so that a step the runtime refuses steps no group.

        `hv`: the group's kernel hyperparameters (checked); `scaling`: (grad_scale, found_inf)
        from a GradScaler (either may be None), or None without one."""
        cur, self._cur = self._cur, None
        fast, self._fast = self._fast, None
        assert fast is not None or (cur is not None and len(cur) == self.n), \
            "qopt: _Launch.prepare without check"
        self._prep = None
        ks, S, data = self.ks, self.S, self.data
        ps, gs = ks.param_stream, ks.grad_stream
        keep: List[torch.Tensor] = []           # temporaries that must live until the launch
        copy_back: List[Tuple[torch.Tensor, torch.Tensor]] = []
        if fast is not None:
            pptrs, gptrs = fast
            if gptrs != self.gptr:
                data[gs::S] = gptrs
                self.gptr = gptrs
            if pptrs != self.pptr:
                data[ps::S] = pptrs
                self.pptr = pptrs
        else:
            gptr, pptr = list(self.gptr), list(self.pptr)
            for i, (lp, g) in enumerate(cur):
                if not g.is_contiguous() or g.data_ptr() % 16:
                    g = g.contiguous() if not g.is_contiguous() else g.clone()
                    keep.append(g)
                gp = g.data_ptr()
                if gp != gptr[i]:
                    data[i * S + gs] = gp
                    gptr[i] = gp
                if not lp.is_contiguous() or lp.data_ptr() % 16:
                    staged = lp.contiguous() if not lp.is_contiguous() else lp.clone()
                    keep.append(staged)
                    copy_back.append((lp, staged))
                    pp = staged.data_ptr()
                else:
                    pp = lp.data_ptr()
                if pp != pptr[i]:
                    data[i * S + ps] = pp
                    pptr[i] = pp
            self.gptr, self.pptr = gptr, pptr

        step = self.step + 1
        lr = group["lr"]
        capturable = bool(group.get("capturable", False))
        use_device_uniforms = capturable or isinstance(lr, torch.Tensor)
        slot = self.slots[False]
        # With a GradScaler: its kernel variant unscales each gradient as it loads it and skips
        # the whole step when found_inf is set. The step counters then live on the parameter's
        # device (float32, as with capturable=True) and advance there by (found_inf == 0): no
        # host synchronization.
        device_skip = None
        if scaling is not None:
            grad_scale, found_inf = scaling
            slot = self._slot(True)
            hv = dict(hv)
            hv["grad_scale"] = 1.0 if grad_scale is None else grad_scale
            hv["found_inf"] = 0.0 if found_inf is None else found_inf
            if found_inf is not None:
                device_skip = found_inf
            use_device_uniforms = True
        # Counters on the device (capturable, or moved there by a GradScaler at begin()): the
        # per-step scalars are computed there from them.
        counts = self.counts
        move_counters = (device_skip is not None and counts is not None
                         and counts.dtype != torch.float32)
        device_counter = counts is not None and (move_counters or counts.dtype == torch.float32)
        use_device_uniforms = use_device_uniforms or device_counter
        if (self.backend == C.BACKEND_CUDA and not use_device_uniforms
                and torch.cuda.is_current_stream_capturing()):
            raise RuntimeError(
                f"Attempting CUDA graph capture of step() for an instance of "
                f"{type(self.opt).__name__} but param_groups' capturable is False. Construct "
                f"the optimizer with capturable=True to capture it.")
        kernel = self._kernel(slot)
        hy = slot.hypers
        entry = self.entry
        entry.kernel = kernel.value
        host: Optional[List[float]] = None
        if use_device_uniforms:
            # Uniforms that depend on neither the step nor a tensor hyperparameter: the runtime's
            # host evaluation (the float32 values qopt_step itself would use).
            for i, name in enumerate(slot.hyper_names):
                v = hv[name]
                hy[i].value = 1.0 if isinstance(v, torch.Tensor) else float(v)
            host = slot.ks.evaluate_uniforms(hy, len(slot.hyper_names), max(step, 1))
            entry.hypers, entry.num_hypers, entry.step = None, 0, 0
        else:
            for i, name in enumerate(slot.hyper_names):
                hy[i].value = hv[name]
            entry.hypers, entry.num_hypers, entry.step = hy, len(slot.hyper_names), step
        entry.device_uniforms = None
        self._prep = _Prepared(keep, copy_back, slot, hv, step, use_device_uniforms, host,
                               device_skip, move_counters)

    def precheck(self) -> None:
        """What the launch of qopt_step_many checks, without launching: for the launches of a
        step on a second device (stream), which their own qopt_step_many call validates only
        after the first device's launches."""
        prep = self._prep
        if not prep.use_device_uniforms:
            prep.slot.ks.evaluate_uniforms(prep.slot.hypers, len(prep.slot.hyper_names),
                                           prep.step)
        C.check(C.lib().qopt_validate(self.entry.kernel, byref(self.list), self.table_ptrs,
                                      len(self.tables)), "qopt_validate")

    def begin(self) -> None:
        """After prepare() of every launch of the step: the step counters moved to the device
        where a GradScaler needs them there, the device uniforms computed (device work, on the
        current stream, before the launch)."""
        prep = self._prep
        if prep.move_counters:
            prep.moved = (self.counts, self.step_tensors)
            self._counters_to_device()
        if prep.use_device_uniforms:
            device_counter = self.counts is not None and self.counts.dtype == torch.float32
            self._device_uniforms(prep.slot, prep.hv, prep.step, device_counter, prep.host)
            self.entry.device_uniforms = prep.slot.uniforms.data_ptr()

    def abort(self) -> None:
        """The step was refused: the counters stay as they were."""
        prep, self._prep = self._prep, None
        if prep is not None and prep.moved is not None:
            counts, steps = prep.moved
            for st, t in zip(self.states, steps):
                st["step"] = t
            self.counts, self.step_tensors = counts, steps
            self._snapshot()

    def finish(self) -> None:
        """After the launch: staged parameters copied back, the step counters advanced (on the
        device by found_inf == 0 under a GradScaler: no host sync)."""
        prep, self._prep = self._prep, None
        for dst, src in prep.copy_back:
            dst.copy_(src)
        self.step = prep.step
        counts = self.counts
        if counts is None:
            return
        if prep.device_skip is not None:
            skip = prep.device_skip.to(device=counts.device).reshape(())
            counts.add_((skip == 0).to(counts.dtype))
        else:
            counts.add_(1)

    def _device_uniforms(self, slot: _Slot, hv: Dict[str, Any], step: int,
                         device_counter: bool, host: List[float]) -> None:
        """Fills slot.uniforms (float32, on the device) for this step with device ops only.
        `host`: the runtime's host evaluation of the uniforms (prepare() made it), kept for those
        that depend on neither the step nor a tensor hyperparameter."""
        ks, dev = slot.ks, self.device_obj
        if slot.uniforms is None:
            slot.uniforms = torch.zeros(max(ks.num_uniforms, 1), dtype=torch.float32, device=dev)
        if ks.num_uniforms == 0:
            return
        env: Dict[str, Any] = {}
        dynamic = set()
        for name, v in hv.items():
            if isinstance(v, torch.Tensor):
                env[name] = v.to(device=dev, dtype=torch.float64)
                dynamic.add(name)
            else:
                env[name] = float(v)
        if device_counter:
            # the step counter lives on the device: replays of a captured step advance it
            env["step"] = self.step_tensors[0].to(dtype=torch.float64) + 1.0
            dynamic.add("step")
        else:
            env["step"] = float(step)
        # Uniforms that depend on neither: the runtime's host evaluation (the float32 values
        # qopt_step itself would use), kept on the device until they change.
        dyn = tuple(_is_dynamic(e, dynamic) for e in ks.uniform_exprs)
        key = (dyn, tuple(h for h, d in zip(host, dyn) if not d))
        if key != slot._static_key:
            slot._static = [None if d else torch.full((), h, dtype=torch.float64, device=dev)
                            for h, d in zip(host, dyn)]
            slot._static_key = key
        parts = []
        for i, expr in enumerate(ks.uniform_exprs):
            if dyn[i]:
                v = _eval_device(expr, env, dev)
                parts.append(v.reshape(()) if isinstance(v, torch.Tensor)
                             else torch.full((), v, dtype=torch.float64, device=dev))
            else:
                parts.append(slot._static[i])
        slot.uniforms.copy_(torch.stack(parts))


def _launch_all(launches: List[_Launch]) -> None:
    """The launches of one step, prepared: one qopt_step_many call per stream (per device), the
    launches of a second device checked before the first device's are launched."""
    by_stream: Dict[Optional[int], List[_Launch]] = {}
    try:
        for ln in launches:
            stream = (torch.cuda.current_stream(ln.device_obj).cuda_stream
                      if ln.backend == C.BACKEND_CUDA else None)
            by_stream.setdefault(stream, []).append(ln)
        groups = list(by_stream.items())
        for _, lns in groups[1:]:
            for ln in lns:
                ln.precheck()
        for ln in launches:
            ln.begin()
        for stream, lns in groups:
            entries = (C.Launch * len(lns))(*[ln.entry for ln in lns])
            C.check(C.lib().qopt_step_many(entries, len(lns), stream), "qopt_step_many")
            for ln in lns:
                ln.finish()
    except BaseException:
        for ln in launches:
            ln.abort()
        raise


class _GroupCache:
    __slots__ = ("generation", "ids", "launches")

    def __init__(self, generation, ids, launches):
        self.generation, self.ids, self.launches = generation, ids, launches


# Kernel handles of optimizers collected while a CUDA graph was being captured: destroying them
# then (freeing staging memory, waiting for in-flight copies) would invalidate the capture, and
# Python's garbage collector may run an optimizer's finalizer at any point of a captured step.
_deferred_handles: List[c_void_p] = []


def _capturing() -> bool:
    try:
        return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
    except Exception:  # never raise from a finalizer
        return False


def _destroy_deferred() -> None:
    """Destroys the handles set aside during a capture, once no capture is running."""
    if _deferred_handles and not _capturing():
        handles = list(_deferred_handles)
        _deferred_handles.clear()
        R.destroy_kernels(handles)


def _destroy_handle_dict(handles: Dict[Any, c_void_p]) -> None:
    if _capturing():
        _deferred_handles.extend(handles.values())
    else:
        _destroy_deferred()
        R.destroy_kernels(handles.values())
    handles.clear()


# ------------------------------------------------------------------------- the base class

class QoptOptimizer(torch.optim.Optimizer):
    """Base class: a torch.optim.Optimizer whose step is one qopt kernel launch per group.

    Subclasses set the kernel (a spec stem, e.g. ``flash_adamw``), the names of the state keys and
    the map from a param group to the kernel's hyperparameters.
    """

    #: torch.amp.GradScaler hands step() its scale and found_inf (attributes ``grad_scale`` and
    #: ``found_inf``, torch >= 2.0): the step unscales inside the kernel and is skipped on the
    #: device when found_inf is set (docs: python/README.md, "GradScaler").
    _step_supports_amp_scaling = _AMP_ATTRIBUTES

    #: manifest stream name -> state_dict key
    STREAM_KEYS: Dict[str, str] = {}
    #: manifest table name -> state key (codebook tables)
    TABLE_KEYS: Dict[str, str] = {}

    def __init__(self, params, defaults: Dict[str, Any], spec: str):
        self._spec = spec
        self._generation = 0
        self._cache: Dict[int, _GroupCache] = {}
        self._tables_host: Optional[List[List[float]]] = None
        self._tables_dev: Dict[Any, List[torch.Tensor]] = {}
        self._init_kernels()
        super().__init__(params, defaults)

    def _init_kernels(self) -> None:
        # Kernel handles of this optimizer, destroyed with it (not at interpreter exit, when the
        # CUDA context may be gone). A graph captured from a step must not outlive the optimizer
        # (its state tensors go with it too).
        self._kernels: Dict[Any, c_void_p] = {}
        self._finalizer = weakref.finalize(self, _destroy_handle_dict, self._kernels)
        self._finalizer.atexit = False

    # ---- kernel and dtype checks
    @property
    def kernel_name(self) -> str:
        """The registry key of the kernel (e.g. ``FlashAdamW``)."""
        return self._kernel_spec(C.BACKEND_HOST).kernel

    @property
    def spec(self) -> str:
        """The spec file stem the kernel was compiled from (specs/<spec>.qopt)."""
        return self._spec

    def _kernel_spec(self, backend: int, dtype: Optional[torch.dtype] = None,
                     scaled: bool = False) -> R.KernelSpec:
        """The kernel for parameters of `dtype`: the spec's own (its parameter type; also for
        dtype None), or its variant <spec>.bf16 / .f16 / .f32; with `scaled`, the grad-scaling
        variant (.scaled)."""
        base = R.kernel_spec(self._spec, backend)
        name = self._spec
        if dtype is not None and dtype is not TORCH_DTYPES[base.param_dtype]:
            name += "." + _DTYPE_SUFFIX[dtype]
        if scaled:
            name += ".scaled"
        return base if name == self._spec else R.kernel_spec(name, backend)

    def _dtype_error(self, p, pdtype, gdtype, ks: Optional[R.KernelSpec]):
        shape = tuple(p.shape)
        if pdtype not in PARAM_DTYPES:
            raise TypeError(
                f"{type(self).__name__}: a parameter of shape {shape} has dtype {pdtype}; qopt's "
                f"kernels ({self._spec}) step torch.bfloat16, torch.float16 and torch.float32 "
                f"parameters, each with a gradient of its own dtype. Cast the model (e.g. "
                f"model.to(torch.bfloat16)); qopt does not cast silently.")
        raise TypeError(
            f"{type(self).__name__}: a parameter of shape {shape} has gradient dtype {gdtype} "
            f"(parameter {pdtype}); the {ks.kernel} kernel steps {pdtype} parameters with "
            f"{pdtype} gradients only. qopt does not cast silently.")

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """torch's add_param_group, then qopt's checks of the group (hyperparameters, options the
        constructor refuses or keeps for the whole optimizer, parameter dtypes); a group refused
        is not kept."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            self._check_group_options(group)
            self._validate_group(group)
            for p in group["params"]:
                lp = _local(p)
                backend, _ = _backend_of(lp)
                if lp.dtype not in PARAM_DTYPES:
                    self._dtype_error(p, lp.dtype, None, None)
                # the kernel exists (FileNotFoundError if not); STREAM_KEYS and TABLE_KEYS name
                # its streams and tables (ValueError if not)
                ks = self._kernel_spec(backend, lp.dtype)
                self._stream_keys(ks)
                self._table_keys(ks)
        except BaseException:
            if self.param_groups and self.param_groups[-1] is group:
                self.param_groups.pop()
            raise
        # decouple_lr's reference lr, under a key of qopt's own: torch's schedulers set
        # "initial_lr" themselves, from the lr the group has when the scheduler is made (as with
        # torch.optim.AdamW, an lr set after the optimizer and before the scheduler is kept)
        if _INITIAL_LR not in group:
            lr = group.get("initial_lr", group["lr"])
            group[_INITIAL_LR] = lr.clone() if isinstance(lr, torch.Tensor) else lr
        self._generation += 1

    # ---- to be provided by subclasses
    def _validate_group(self, group: Dict[str, Any]) -> None:
        _check_lr(group["lr"])

    def _check_group_options(self, group: Dict[str, Any]) -> None:
        """Refuses, in any param group (also one added later), what the constructor refuses or
        keeps for the whole optimizer, rather than ignoring it."""
        if group.get("maximize", False):
            raise ValueError(f"{type(self).__name__}: maximize=True is not supported")

    def _same_for_all(self, group: Dict[str, Any], key: str, value: Any) -> None:
        if key in group and group[key] != value:
            raise ValueError(f"{type(self).__name__}: {key}={group[key]!r} in a param group is not "
                             f"supported: {key} is set for the whole optimizer ({value!r}); use "
                             f"another optimizer for these parameters")

    def _kernel_hypers(self, group: Dict[str, Any]) -> Dict[str, Any]:
        raise NotImplementedError

    def _host_tables(self, ks: R.KernelSpec) -> List[List[float]]:
        return []

    # ---- state
    def _stream_keys(self, ks: R.KernelSpec) -> Dict[str, str]:
        """Manifest stream name -> state key, for the kernel's streams other than the parameter
        and the gradient (STREAM_KEYS, else the stream's own name). A STREAM_KEYS key that names
        none of them is a ValueError (it would be ignored silently otherwise), except the
        parameter's error-bits stream ``<param>.ecc``, which a variant without a master weight (an
        fp32 parameter, ``master_weight_bits=None``) does not have."""
        names = [s.name for s in ks.streams if s.role not in (C.ROLE_PARAM, C.ROLE_GRAD)]
        keys = self.STREAM_KEYS
        if any(k not in names for k in keys):
            ecc = ks.streams[ks.param_stream].name + ".ecc"
            unknown = [k for k in keys if k not in names and k != ecc]
            if unknown:
                raise ValueError(
                    f"{type(self).__name__}.STREAM_KEYS: {', '.join(map(repr, unknown))} "
                    f"name{'s' if len(unknown) == 1 else ''} no state stream of kernel "
                    f"{ks.kernel} ({ks.path.name}); its stream names are "
                    f"{', '.join(map(repr, names)) or 'none'} (keys are manifest stream names, "
                    f"e.g. '<state>.codes', '<state>.scales', '<param>.ecc')")
        return {n: keys.get(n, n) for n in names}

    def _table_keys(self, ks: R.KernelSpec) -> List[str]:
        """State keys of the kernel's codebook tables (TABLE_KEYS, else the table's name); a
        TABLE_KEYS key that names no table of the kernel is a ValueError."""
        names = [name for name, _ in ks.tables]
        unknown = [k for k in self.TABLE_KEYS if k not in names]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.TABLE_KEYS: {', '.join(map(repr, unknown))} "
                f"name{'s' if len(unknown) == 1 else ''} no table of kernel {ks.kernel} "
                f"({ks.path.name}); its table names are {', '.join(map(repr, names)) or 'none'}")
        return [self.TABLE_KEYS.get(name, name) for name in names]

    def _device_tables(self, ks: R.KernelSpec, device) -> List[torch.Tensor]:
        if not ks.tables:
            return []
        key = str(device)
        if key not in self._tables_dev:
            host = self._host_tables(ks)
            self._tables_dev[key] = [torch.tensor(t, dtype=torch.float32, device=device) for t in host]
        return self._tables_dev[key]

    def _expected_state(self, p: torch.Tensor, ks: R.KernelSpec) -> Dict[str, Tuple[tuple, torch.dtype, Any]]:
        """state key -> (shape, dtype, buffer layout) for parameter p."""
        lp = _local(p)
        cached = self.__dict__.setdefault("_table_arrays", {})   # ks.path -> ctypes arrays
        arrays = cached.get(ks.path)
        if arrays is None:
            arrays = [(ctypes.c_float * 256)(*t) for t in self._host_tables(ks)]
            cached[ks.path] = arrays
        layout = ks.state_layout(lp.numel(), arrays if arrays else None)
        keys = self._stream_keys(ks)
        out = {}
        for s, b in zip(ks.streams, layout):
            if s.role in (C.ROLE_PARAM, C.ROLE_GRAD):
                continue
            shape = tuple(lp.shape) if s.per == C.PER_ELEMENT else (b.count,)
            out[keys[s.name]] = (shape, TORCH_DTYPES[b.dtype], b)
        return out

    def _init_param_state(self, p: torch.Tensor, group: Dict[str, Any]) -> Dict[str, Any]:
        lp = _local(p)
        backend, _ = _backend_of(lp)
        ks = self._kernel_spec(backend, lp.dtype)
        state = self.state.get(p)
        if not isinstance(state, dict):
            state = {}
            self.state[p] = state
        state.clear()
        for key, (shape, dtype, b) in self._expected_state(p, ks).items():
            t = torch.empty(shape, dtype=dtype, device=lp.device)
            if b.init == C.INIT_FILL:
                _fill(t, b.fill_bits)
            elif b.init in (C.INIT_FROM_MASTER, C.INIT_CALLER):
                t.zero_()  # the master is the parameter itself: rho = 0
            else:
                raise RuntimeError(f"qopt: unexpected initial value kind {b.init} for {key}")
            state[key] = t
        for key, table in zip(self._table_keys(ks), self._device_tables(ks, lp.device)):
            state[key] = table
        if group.get("capturable", False):
            state["step"] = torch.zeros((), dtype=torch.float32, device=lp.device)
        else:
            state["step"] = torch.zeros((), dtype=torch.int64)
        return state

    @torch.no_grad()
    def init_state(self) -> None:
        """Creates the state of every parameter that requires grad and has none yet (the step
        creates it lazily for the parameters that have a gradient)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and len(self.state.get(p, {})) == 0:
                    self._init_param_state(p, group)
        self._generation += 1

    # ---- the step
    def _build(self, gi: int, group: Dict[str, Any], plist: List[torch.Tensor],
               old: Optional[_GroupCache] = None) -> _GroupCache:
        """The launches of group gi for the parameters `plist` (those with a gradient). A parameter
        without state gets it fresh (as at its first step); an existing state is checked as
        load_state_dict checks it (ValueError; RuntimeError for a parameter whose size changed),
        except where `old` (the group's previous cache) took exactly this state for a parameter of
        this size and dtype."""
        # each parameter's position in the group (plist is the group's parameters with a
        # gradient, in order; a parameter listed twice gets each of its positions)
        pos, it = [], iter(enumerate(group["params"]))
        for p in plist:
            pos.append(next(i for i, q in it if q is p))
        known: Dict[int, Tuple[_Launch, int]] = {}
        if old is not None:
            for launch in old.launches:
                for i, q in enumerate(launch.params):
                    known[id(q)] = (launch, i)
        cls = type(self).__name__
        parts: Dict[Tuple[int, int, int, torch.dtype, torch.dtype], List[torch.Tensor]] = {}
        at: Dict[Tuple[int, int, int, torch.dtype, torch.dtype], List[int]] = {}
        for p, pi in zip(plist, pos):
            lp = _local(p)
            backend, dev = _backend_of(lp)
            st = self.state.get(p)
            if not st:
                st = self._init_param_state(p, group)
            else:
                where = f"{cls}: param_groups[{gi}][{pi}] {list(p.shape)}"
                k = known.get(id(p))
                if k is not None and k[0].params[k[1]] is p and k[0].same_state(k[1], st):
                    launch, i = k
                    if lp.numel() != launch.numel_list[i]:
                        raise _size_error(where, lp.numel(), launch.numel_list[i])
                    if lp.dtype is not launch.dtype:
                        raise TypeError(f"{where} is {lp.dtype} now, but its state was made for "
                                        f"{launch.dtype} (kernel {launch.ks.kernel}); cast "
                                        f"parameters before creating the optimizer")
                else:
                    checked = self._validated_state(p, group, st, where, live=True)
                    for key, v in checked.items():
                        if st.get(key) is not v:
                            st[key] = v
            step = int(st["step"].item())
            # counters on the host (int64) and on the device (float32) are not stepped together
            part = (backend, dev, step, lp.dtype, st["step"].dtype)
            parts.setdefault(part, []).append(p)
            at.setdefault(part, []).append(pi)
        launches = []
        for j, (part, ps) in enumerate(parts.items()):
            backend, dev, _, dtype, _ = part
            ks = self._kernel_spec(backend, dtype)
            labels = [f"param_groups[{gi}][{pi}]" for pi in at[part]]
            key = (gi, j, backend, dev, str(ks.path))
            launches.append(_Launch(self, ks, backend, dev, ps, labels, key))
        return _GroupCache(self._generation, [id(p) for p in plist], launches)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None):
        """Performs one optimization step (one kernel launch per parameter group and dtype).

        Under ``torch.amp.GradScaler.step`` (torch >= 2.0) the attributes ``grad_scale`` (the loss
        scale, a float32 tensor; None when the gradients were unscaled already) and ``found_inf``
        (a float32 tensor, nonzero when a gradient is inf or NaN) are set: each gradient is then
        multiplied by ``float32(1 / float64(grad_scale))`` as the kernel loads it and rounded to
        its own dtype (exactly what ``GradScaler.unscale_`` stores), and a nonzero ``found_inf``
        skips the step on the device: parameters, state and step counts stay as they were. The
        gradients themselves are left scaled."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        _destroy_deferred()
        grad_scale = getattr(self, "grad_scale", None)
        found_inf = getattr(self, "found_inf", None)
        scaling = None
        if grad_scale is not None or found_inf is not None:
            for name, v in (("grad_scale", grad_scale), ("found_inf", found_inf)):
                if v is not None and (not isinstance(v, torch.Tensor) or v.numel() != 1):
                    raise TypeError(f"{type(self).__name__}.step: {name} must be a one-element "
                                    f"tensor (as torch.amp.GradScaler sets it), got {v!r}")
            scaling = (grad_scale, found_inf)
        # The check phase: every group's hyperparameters, every parameter's state and size, every
        # gradient of every group, before anything is launched (a refused step steps no group).
        work = []
        try:
            for gi, group in enumerate(self.param_groups):
                plist = [p for p in group["params"] if p.grad is not None]
                if not plist:
                    continue
                hv = self._checked_hypers(gi, group)
                cache = self._cache.get(gi)
                ids = [id(p) for p in plist]
                if cache is None or cache.generation != self._generation or cache.ids != ids:
                    cache = self._build(gi, group, plist, cache)
                    self._cache[gi] = cache
                if not all(launch.check() for launch in cache.launches):
                    # the state changed under the cache: rebuild from the current state
                    cache = self._build(gi, group, plist, cache)
                    self._cache[gi] = cache
                    if not all(launch.check() for launch in cache.launches):
                        raise RuntimeError("qopt: internal error: a launch rebuilt from the "
                                           "current state does not match it")
                work.append((gi, group, cache, hv))
            # Every launch takes its pointers, kernel and uniforms; then the runtime validates
            # every launch of the step and launches them (qopt_step_many), so a step it would
            # refuse in a later group refuses the whole step.
            launches = []
            for gi, group, cache, hv in work:
                for launch in cache.launches:
                    launch.prepare(group, hv, scaling)
                    launches.append(launch)
            _launch_all(launches)
            for gi, group, cache, hv in work:
                if len(cache.launches) > 1:
                    # parameters whose step counts now agree go into one launch next time (the
                    # old cache still vouches for the states it took)
                    keys = {(ln.backend, ln.device, ln.dtype, ln.step, ln.step_tensors[0].dtype)
                            for ln in cache.launches}
                    if len(keys) < len(cache.launches):
                        cache.generation = -1
        finally:
            for cache in self._cache.values():   # drop what check() and prepare() kept
                for launch in cache.launches:
                    launch._cur = None
                    launch._prep = None
        return loss

    def _checked_hypers(self, gi: int, group: Dict[str, Any]) -> Dict[str, Any]:
        """The group's kernel hyperparameters, refused (before any launch of the step) where a
        float one is NaN or infinite, or not a number. Tensor values (a tensor lr) are not read:
        that would be a host sync: a tensor must have one element (shape [] or [1])).

        The names must be the kernel's (the manifest's "hypers"): one it does not have is refused
        and one missing takes the manifest's default (refused where it gives none)."""
        hv = self._kernel_hypers(group)
        ks = R.kernel_spec(self._spec, _backend_of(_local(group["params"][0]))[0])
        if hv.keys() != ks.hypers.keys():
            hv = self._completed_hypers(gi, hv, ks)
        for name, v in hv.items():
            if isinstance(v, torch.Tensor):
                if v.numel() != 1:
                    raise ValueError(f"{type(self).__name__}: param_groups[{gi}]: {name} is a "
                                     f"tensor of shape {list(v.shape)}; a tensor {name} must "
                                     f"have one element (shape [] or [1]); nothing was stepped")
                continue
            if not isinstance(v, numbers.Real):
                raise TypeError(f"{type(self).__name__}: param_groups[{gi}]: hyperparameter "
                                f"'{name}' is {v!r}, not a number; nothing was stepped")
            f = float(v)
            if not math.isfinite(f):
                raise ValueError(f"{type(self).__name__}: param_groups[{gi}]: hyperparameter "
                                 f"'{name}' is {f}; nothing was stepped")
        return hv

    def _completed_hypers(self, gi: int, hv: Dict[str, Any], ks: R.KernelSpec) -> Dict[str, Any]:
        """`hv` (from _kernel_hypers) checked against the kernel's hyperparameters, as qopt-step
        checks its --hyper options: a name the kernel does not have is refused, a missing one
        takes the manifest's default (refused where the manifest gives none)."""
        cls = type(self).__name__
        known = list(ks.hypers)
        has = f"(it has {', '.join(known)})" if known else "(it has none)"
        where = (f"{cls}: param_groups[{gi}]: kernel {ks.kernel} (spec '{self._spec}', "
                 f"{ks.path.name})")
        unknown = [n for n in hv if n not in ks.hypers]
        if unknown:
            raise ValueError(f"{where} has no hyperparameter {', '.join(map(repr, unknown))} "
                             f"{has}; {cls}._kernel_hypers must use the spec's `hyper` names; "
                             f"nothing was stepped")
        out = dict(hv)
        for name, (default, has_default, _) in ks.hypers.items():
            if name in out:
                continue
            if not has_default:
                raise ValueError(f"{where} needs hyperparameter '{name}' (its manifest gives no "
                                 f"default) {has}; {cls}._kernel_hypers gives "
                                 f"{', '.join(hv) or 'none'}; nothing was stepped")
            out[name] = default
        return out

    # ---- checkpoints
    def state_dict(self) -> Dict[str, Any]:
        """PyTorch's layout ({"state", "param_groups"}) plus a "qopt" record with the format
        version and the kernel. The quantized state is kept as it is (codes, scales or absmax,
        error bits, the codebook tables, the step); tensors are referenced, not copied."""
        mapping: Dict[int, int] = {}
        groups = []
        start = 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {mapping[id(p)]: dict(s) for p, s in self.state.items() if id(p) in mapping and s}
        ks = self._kernel_spec(C.BACKEND_HOST)
        return {"state": state, "param_groups": groups,
                "qopt": {"format": STATE_FORMAT, "version": STATE_FORMAT_VERSION,
                         "optimizer": type(self).__name__, "kernel": ks.kernel, "spec": self._spec}}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Loads a state_dict of this optimizer class and kernel. Every state tensor must have the
        shape and dtype the kernel expects; anything else is refused with a ValueError (nothing is
        loaded then). Tensors are copied to the parameter's device; the dict is not modified."""
        name = type(self).__name__
        meta = state_dict.get("qopt") if isinstance(state_dict, dict) else None
        if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
            raise ValueError(f"{name}.load_state_dict: not a qopt optimizer state (no 'qopt' record "
                             f"with format '{STATE_FORMAT}'); qopt loads only its own checkpoints")
        if meta.get("version") != STATE_FORMAT_VERSION:
            raise ValueError(f"{name}.load_state_dict: state format version {meta.get('version')} "
                             f"is not supported (this qopt reads version {STATE_FORMAT_VERSION})")
        ks_host = self._kernel_spec(C.BACKEND_HOST)
        if meta.get("kernel") != ks_host.kernel:
            raise ValueError(f"{name}.load_state_dict: the state was saved by {meta.get('optimizer')} "
                             f"with kernel {meta.get('kernel')}, this optimizer uses kernel "
                             f"{ks_host.kernel}; their states differ")
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match "
                                 "the size of optimizer's group")
        id_map = {}
        for g, sg in zip(groups, saved_groups):
            for p, i in zip(g["params"], sg["params"]):
                id_map[i] = (p, sg)
        new_state: Dict[torch.Tensor, Dict[str, Any]] = {}
        for idx, saved in state_dict["state"].items():
            if idx not in id_map:
                raise ValueError(f"{name}.load_state_dict: state for parameter {idx}, which no "
                                 f"parameter group lists")
            p, g = id_map[idx]
            new_state[p] = self._load_param_state(p, g, idx, saved)
        # Everything checked: commit.
        self.state.clear()
        for p, st in new_state.items():
            self.state[p] = st
        for g, sg in zip(groups, saved_groups):
            for k, v in sg.items():
                if k != "params":
                    g[k] = v.clone() if isinstance(v, torch.Tensor) else v
            if _INITIAL_LR not in sg and "initial_lr" in sg:
                # saved by a qopt that kept decouple_lr's reference lr as "initial_lr"
                v = sg["initial_lr"]
                g[_INITIAL_LR] = v.clone() if isinstance(v, torch.Tensor) else v
        self._cache.clear()
        self._generation += 1

    def _load_param_state(self, p, group, idx, saved: Dict[str, Any]) -> Dict[str, Any]:
        where = (f"{type(self).__name__}.load_state_dict: parameter {idx} "
                 f"(shape {list(_local(p).shape)})")
        return self._validated_state(p, group, saved, where, live=False)

    def _validated_state(self, p, group, saved: Dict[str, Any], where: str,
                         live: bool) -> Dict[str, Any]:
        """One parameter's state `saved`, checked against what its kernel needs (every key present
        and no unknown key, each tensor's dtype and shape, the codebook tables bit for bit, a
        non-negative integer step): a ValueError naming `where` otherwise.

        live=False (load_state_dict): the tensors are copied to the parameter's device. live=True
        (a state found changed at a step, e.g. ``optimizer.state[p][k] = t``): the tensors are the
        kernel's from now on, so each must already be on the parameter's device, contiguous and
        16-byte aligned; a per-element tensor may have any shape of the parameter's number of
        elements, and one of another number of elements is the parameter's size change
        (RuntimeError). Tables and step are returned as the step keeps them."""
        lp = _local(p)
        backend, _ = _backend_of(lp)
        ks = self._kernel_spec(backend, lp.dtype)
        expected = self._expected_state(p, ks)
        if not isinstance(saved, dict):
            raise ValueError(f"{where}: the state is a {type(saved).__name__}, expected a dict")
        if live:
            for key, (_, _, b) in expected.items():
                t = saved.get(key)
                if (b.per == C.PER_ELEMENT and isinstance(t, torch.Tensor)
                        and t.numel() != lp.numel()):
                    raise _size_error(where, lp.numel(), t.numel())
        table_keys = self._table_keys(ks)
        allowed = set(expected) | set(table_keys) | {"step"}
        unknown = sorted(set(saved) - allowed, key=str)
        missing = sorted((set(expected) | {"step"}) - set(saved))
        if unknown:
            raise ValueError(f"{where}: unexpected state keys {unknown} for kernel {ks.kernel}")
        if missing:
            raise ValueError(f"{where}: missing state keys {missing} for kernel {ks.kernel}")
        out: Dict[str, Any] = {}
        for key, (shape, dtype, b) in expected.items():
            t = saved[key]
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"{where}: '{key}' is a {type(t).__name__}, expected a tensor")
            flat = live and b.per == C.PER_ELEMENT
            shape_ok = t.numel() == lp.numel() if flat else tuple(t.shape) == shape
            if t.dtype != dtype or not shape_ok:
                raise ValueError(f"{where}: '{key}' is {t.dtype} of shape {list(t.shape)}, the "
                                 f"kernel {ks.kernel} needs {dtype} of shape {list(shape)}")
            if not live:
                out[key] = t.to(device=lp.device, copy=True).contiguous()
                continue
            if t.device != lp.device:
                raise ValueError(f"{where}: '{key}' is on {t.device}, the parameter on "
                                 f"{lp.device}; a state tensor must be on its parameter's device")
            if t.numel() and (not t.is_contiguous() or t.data_ptr() % 16):
                raise ValueError(f"{where}: '{key}' is not contiguous and 16-byte aligned; the "
                                 f"kernel steps a state tensor in place")
            out[key] = t
        tables = self._device_tables(ks, lp.device)
        for key, table in zip(table_keys, tables):
            if key in saved and saved[key] is not table:
                t = saved[key]
                if (not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or t.numel() != 256
                        or not torch.equal(t.detach().cpu().view(torch.int32),
                                           table.detach().cpu().view(torch.int32))):
                    raise ValueError(f"{where}: codebook table '{key}' differs from this "
                                     f"optimizer's table (a checkpoint of another quantization map)")
            out[key] = table
        step = saved["step"]
        try:
            step_val = int(step.item()) if isinstance(step, torch.Tensor) else int(step)
            bad = step_val < 0 or (isinstance(step, torch.Tensor) and float(step.item()) != step_val)
        except (TypeError, ValueError, RuntimeError):
            bad = True
        if bad:
            raise ValueError(f"{where}: step {step} is not a non-negative integer")
        if live and isinstance(step, torch.Tensor) and step.dim() == 0 and (
                (step.dtype == torch.int64 and step.device.type == "cpu")
                or (step.dtype == torch.float32 and step.device == lp.device)):
            out["step"] = step   # a host counter, or one on the device (capturable, GradScaler)
        elif group.get("capturable", False):
            out["step"] = torch.tensor(float(step_val), dtype=torch.float32, device=lp.device)
        else:
            out["step"] = torch.tensor(step_val, dtype=torch.int64)
        return out

    def __getstate__(self):
        d = super().__getstate__()
        d = dict(self.__dict__) if d is None else dict(d)
        for k in ("_spec", "master_weight_bits", "_decouple_lr", "block_size"):
            if k in self.__dict__:
                d[k] = self.__dict__[k]
        for k in ("_cache", "_tables_dev", "_kernels", "_finalizer", "_table_arrays"):
            d.pop(k, None)
        return d

    def __setstate__(self, state):
        super().__setstate__(state)
        self._cache = {}
        self._tables_dev = {}
        self._init_kernels()
        self._generation = getattr(self, "_generation", 0) + 1
        self._tables_host = None

    # ---- accounting
    def state_bytes(self) -> int:
        """Bytes of optimizer state (per-parameter tensors; shared codebook tables counted once)."""
        seen = set()
        total = 0
        for st in self.state.values():
            for k, v in st.items():
                if isinstance(v, torch.Tensor) and k != "step" and v.data_ptr() not in seen:
                    seen.add(v.data_ptr())
                    total += v.numel() * v.element_size()
        return total


# ------------------------------------------------------------------------ validation

def _check_lr(lr) -> None:
    if isinstance(lr, torch.Tensor):
        if lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        return
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_betas(betas, upper_inclusive=False) -> None:
    for i, b in enumerate(betas):
        ok = 0.0 <= b <= 1.0 if upper_inclusive else 0.0 <= b < 1.0
        if not ok:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")


def _check_eps(eps) -> None:
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")


def _check_wd(wd) -> None:
    if not 0.0 <= wd:
        raise ValueError(f"Invalid weight_decay value: {wd}")


def _reject_flashoptim_flags(cls: str, quantize, compress_state_dict, check_numerics, fused) -> None:
    if quantize is not True:
        raise ValueError(f"{cls}: quantize={quantize!r} is not supported; qopt's kernels keep "
                         f"8-bit states (quantize=True)")
    if compress_state_dict is not True:
        raise ValueError(f"{cls}: compress_state_dict={compress_state_dict!r} is not supported; "
                         f"state_dict keeps the quantized state (compress_state_dict=True)")
    if check_numerics:
        raise ValueError(f"{cls}: check_numerics=True is not supported")
    if fused is not True:
        raise ValueError(f"{cls}: fused={fused!r} is not supported; every step is one fused launch")


def _check_flash_group(opt: "QoptOptimizer", group) -> None:
    """What a FlashOptim-style constructor refuses, or keeps for the whole optimizer, refused in
    a param group too."""
    _reject_flashoptim_flags(type(opt).__name__, group.get("quantize", True),
                             group.get("compress_state_dict", True),
                             group.get("check_numerics", False), group.get("fused", True))
    opt._same_for_all(group, "master_weight_bits", opt.master_weight_bits)
    if "decouple_lr" in group and bool(group["decouple_lr"]) != bool(opt._decouple_lr):
        opt._same_for_all(group, "decouple_lr", opt._decouple_lr)


def _wd_for_kernel(group, decouple_lr: bool):
    """With decouple_lr the decay is wd * lr / initial_lr; the kernel multiplies lr * wd, so it
    gets wd / initial_lr. initial_lr: the group's lr when it was added (_INITIAL_LR; a group's
    own "initial_lr" then, else its "lr"), not a scheduler's "initial_lr"."""
    wd = group["weight_decay"]
    if decouple_lr and wd != 0:
        init = group.get(_INITIAL_LR, group.get("initial_lr", group["lr"]))
        init = float(init) if isinstance(init, torch.Tensor) else init
        return wd / init if init != 0 else 0.0
    return wd


# ------------------------------------------------------------------------- the optimizers

_FLASH_ADAM_KEYS = {"p.ecc": "error_bits", "m.codes": "exp_avg::quantized",
                    "m.scales": "exp_avg::scales", "v.codes": "exp_avg_sq::quantized",
                    "v.scales": "exp_avg_sq::scales"}


class FlashAdamW(QoptOptimizer):
    """AdamW with FlashOptim's compressed state: companded 8-bit moments in groups of 32 with
    float16 scales, and a bf16 (or fp16) parameter whose error bits keep a 24- or 32-bit master
    weight; an fp32 parameter is its own master (no error bits).

    Arguments follow FlashOptim's ``FlashAdamW``. ``master_weight_bits``: 24 (int8 error bits,
    kernel ``flash_adamw``), 32 (int16, ``flash_adamw_ecc16``) or None (no master weight,
    ``flash_adamw_bf16``); fp16 and fp32 parameters use the spec's ``.f16`` / ``.f32`` variant. ``capturable`` (as torch.optim.AdamW): the step counter lives on the
    device and the per-step scalars are computed there, so the step can be captured in a CUDA
    graph; a tensor ``lr`` takes the same path (no host sync).
    """

    STREAM_KEYS = _FLASH_ADAM_KEYS
    _SPECS = {24: "flash_adamw", 32: "flash_adamw_ecc16", None: "flash_adamw_bf16"}
    _DECOUPLED = True

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, decouple_lr: bool = False,
                 quantize: bool = True, compress_state_dict: bool = True,
                 master_weight_bits: Optional[int] = 24, check_numerics: bool = False,
                 fused: bool = True, *, capturable: bool = False):
        cls = type(self).__name__
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        capturable=capturable)
        _check_adam_group(defaults)
        _reject_flashoptim_flags(cls, quantize, compress_state_dict, check_numerics, fused)
        if master_weight_bits not in self._SPECS:
            raise ValueError(f"{cls}: master_weight_bits={master_weight_bits!r} is not supported; "
                             f"this optimizer has kernels for {sorted(self._SPECS, key=str)}")
        self.master_weight_bits = master_weight_bits
        self._decouple_lr = decouple_lr
        super().__init__(params, defaults, self._SPECS[master_weight_bits])

    def _validate_group(self, group):
        _check_adam_group(group)

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _check_flash_group(self, group)
        if group.get("amsgrad", False):
            raise ValueError(f"{type(self).__name__}: amsgrad=True is not supported")

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        wd = _wd_for_kernel(group, self._decouple_lr) if self._DECOUPLED else group["weight_decay"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "eps": group["eps"], "weight_decay": wd}


class FlashAdam(FlashAdamW):
    """Adam with L2 weight decay (``grad += weight_decay * param``), FlashOptim's compressed state.
    Only ``master_weight_bits=24`` has a kernel (``flash_adam``)."""

    _SPECS = {24: "flash_adam"}
    _DECOUPLED = False

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, quantize: bool = True,
                 compress_state_dict: bool = True, master_weight_bits: Optional[int] = 24,
                 check_numerics: bool = False, fused: bool = True, *, capturable: bool = False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         decouple_lr=False, quantize=quantize,
                         compress_state_dict=compress_state_dict,
                         master_weight_bits=master_weight_bits, check_numerics=check_numerics,
                         fused=fused, capturable=capturable)


class FlashSGD(QoptOptimizer):
    """SGD with momentum (dampening, Nesterov) and L2 weight decay, FlashOptim's compressed
    momentum (companded int8, groups of 32) and int8 error bits (kernel ``flash_sgd``).

    As torch.optim.SGD, the first step sets the momentum buffer to the gradient (FlashOptim applies
    ``1 - dampening`` already on the first step); with ``momentum=0`` the dampening is ignored, as
    in torch. The kernel keeps a momentum buffer even when ``momentum=0``.
    """

    STREAM_KEYS = {"p.ecc": "error_bits", "buf.codes": "momentum_buffer::quantized",
                   "buf.scales": "momentum_buffer::scales"}
    _SPECS = {24: "flash_sgd"}
    _DECOUPLED = False

    def __init__(self, params: Iterable, lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 quantize: bool = True, compress_state_dict: bool = True,
                 master_weight_bits: Optional[int] = 24, check_numerics: bool = False,
                 fused: bool = True, *, capturable: bool = False, decouple_lr: bool = False):
        cls = type(self).__name__
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        _check_wd(weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _reject_flashoptim_flags(cls, quantize, compress_state_dict, check_numerics, fused)
        if master_weight_bits not in self._SPECS:
            raise ValueError(f"{cls}: master_weight_bits={master_weight_bits!r} is not supported; "
                             f"this optimizer has kernels for {sorted(self._SPECS, key=str)}")
        self.master_weight_bits = master_weight_bits
        self._decouple_lr = decouple_lr
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, capturable=capturable)
        super().__init__(params, defaults, self._SPECS[master_weight_bits])

    def _validate_group(self, group):
        _check_lr(group["lr"])
        if group["momentum"] < 0.0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        _check_wd(group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _check_flash_group(self, group)

    def _kernel_hypers(self, group):
        momentum = group["momentum"]
        wd = _wd_for_kernel(group, self._decouple_lr) if self._DECOUPLED else group["weight_decay"]
        return {"lr": group["lr"], "momentum": momentum,
                "dampening": group["dampening"] if momentum != 0 else 0.0,
                "weight_decay": wd, "nesterov": 1.0 if group["nesterov"] else 0.0}


class FlashSGDW(FlashSGD):
    """SGD with momentum and decoupled weight decay (``p *= 1 - lr * weight_decay``; with
    ``decouple_lr=True``, ``1 - weight_decay * lr / initial_lr``), kernel ``flash_sgdw``."""

    _SPECS = {24: "flash_sgdw"}
    _DECOUPLED = True

    def __init__(self, params: Iterable, lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 decouple_lr: bool = False, quantize: bool = True,
                 compress_state_dict: bool = True, master_weight_bits: Optional[int] = 24,
                 check_numerics: bool = False, fused: bool = True, *, capturable: bool = False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov, quantize=quantize,
                         compress_state_dict=compress_state_dict,
                         master_weight_bits=master_weight_bits, check_numerics=check_numerics,
                         fused=fused, capturable=capturable, decouple_lr=decouple_lr)


class FlashLion(QoptOptimizer):
    """Lion with decoupled weight decay, FlashOptim's compressed momentum and int8 error bits
    (kernel ``flash_lion``)."""

    STREAM_KEYS = {"p.ecc": "error_bits", "m.codes": "exp_avg::quantized",
                   "m.scales": "exp_avg::scales"}
    _SPECS = {24: "flash_lion"}

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0, decouple_lr: bool = False, quantize: bool = True,
                 compress_state_dict: bool = True, master_weight_bits: Optional[int] = 24,
                 check_numerics: bool = False, fused: bool = True, *, capturable: bool = False):
        cls = type(self).__name__
        _check_lr(lr)
        _check_betas(betas, upper_inclusive=True)
        _check_wd(weight_decay)
        _reject_flashoptim_flags(cls, quantize, compress_state_dict, check_numerics, fused)
        if master_weight_bits not in self._SPECS:
            raise ValueError(f"{cls}: master_weight_bits={master_weight_bits!r} is not supported; "
                             f"this optimizer has kernels for {sorted(self._SPECS, key=str)}")
        self.master_weight_bits = master_weight_bits
        self._decouple_lr = decouple_lr
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, capturable=capturable)
        super().__init__(params, defaults, self._SPECS[master_weight_bits])

    def _validate_group(self, group):
        _check_lr(group["lr"])
        _check_betas(group["betas"], upper_inclusive=True)
        _check_wd(group["weight_decay"])

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _check_flash_group(self, group)

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2,
                "weight_decay": _wd_for_kernel(group, self._decouple_lr)}


_DYNAMIC_MAPS: Dict[bool, List[float]] = {}


def _reject_bnb_flags(cls: str, amsgrad, percentile_clipping, block_wise, is_paged) -> None:
    if amsgrad:
        raise ValueError(f"{cls}: amsgrad=True is not supported")
    if percentile_clipping != 100:
        raise ValueError(f"{cls}: percentile_clipping={percentile_clipping} is not supported (100 only)")
    if not block_wise:
        raise ValueError(f"{cls}: block_wise=False is not supported")
    if is_paged:
        raise ValueError(f"{cls}: is_paged=True is not supported")


def dynamic_map(signed: bool) -> List[float]:
    if signed not in _DYNAMIC_MAPS:
        _DYNAMIC_MAPS[signed] = create_dynamic_map(signed)
    return _DYNAMIC_MAPS[signed]


class AdamW8bit(QoptOptimizer):
    """bitsandbytes-style blockwise 8-bit AdamW (seed 000's step): uint8 codes into the dynamic
    maps (signed for the first moment, unsigned for the second), one float32 absmax per block of
    ``block_size`` (256, bitsandbytes since 0.44, or 2048, the seed) elements; a plain bf16, fp16
    or fp32 parameter (no master weight). State keys as bitsandbytes: ``state1``, ``absmax1``, ``qmap1``, ``state2``, ...

    Every tensor is quantized (bitsandbytes keeps tensors under ``min_8bit_size`` in 32 bits;
    that option is not offered).
    """

    STREAM_KEYS = {"m.codes": "state1", "m.absmax": "absmax1", "v.codes": "state2",
                   "v.absmax": "absmax2"}
    TABLE_KEYS = {"m.qmap": "qmap1", "v.qmap": "qmap2"}
    _SPECS = {256: "adamw8bit_block256", 2048: "adamw8bit_block2048"}

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False,
                 block_size: int = 256, percentile_clipping: int = 100, block_wise: bool = True,
                 is_paged: bool = False, *, capturable: bool = False):
        cls = type(self).__name__
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        capturable=capturable)
        _check_adam_group(defaults)
        _reject_bnb_flags(cls, amsgrad, percentile_clipping, block_wise, is_paged)
        if block_size not in self._SPECS:
            raise ValueError(f"{cls}: block_size={block_size!r} is not supported; kernels exist "
                             f"for block sizes {sorted(self._SPECS)}")
        self.block_size = block_size
        super().__init__(params, defaults, self._SPECS[block_size])

    def _validate_group(self, group):
        _check_adam_group(group)

    def _check_group_options(self, group):
        super()._check_group_options(group)
        _reject_bnb_flags(type(self).__name__, group.get("amsgrad", False),
                          group.get("percentile_clipping", 100), group.get("block_wise", True),
                          group.get("is_paged", False))
        self._same_for_all(group, "block_size", self.block_size)

    def _host_tables(self, ks):
        return [dynamic_map(state == "m") for _, state in ks.tables]

    def _kernel_hypers(self, group):
        b1, b2 = group["betas"]
        return {"lr": group["lr"], "beta1": b1, "beta2": b2, "eps": group["eps"],
                "weight_decay": group["weight_decay"]}

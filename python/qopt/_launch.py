"""The launch machinery of the optimizers: the tensors of one kernel launch (one group, one device,
one parameter dtype, one step count) as the ctypes arrays of qopt_tensor_list, built once and
patched where a pointer changed; the checks of a step over whole lists (where a parameter moved,
_memory.py checks that no two parameters share memory); one qopt_step_many call per stream for
every launch of a step; the kernel handles set aside while a CUDA graph is captured.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import operator
import struct
from ctypes import byref, c_char_p, c_int32, c_int64, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import torch

from . import _capi as C
from . import _runtime as R
from ._state import _TrackedState
from ._uniforms import evaluate as _eval_device, is_dynamic as _is_dynamic

if TYPE_CHECKING:
    from ._base import QoptOptimizer

TORCH_DTYPES = {C.DTYPE_F32: torch.float32, C.DTYPE_BF16: torch.bfloat16, C.DTYPE_F16: torch.float16,
                C.DTYPE_INT8: torch.int8, C.DTYPE_UINT8: torch.uint8, C.DTYPE_INT16: torch.int16}
QOPT_DTYPES = {v: k for k, v in TORCH_DTYPES.items()}

#: Parameter (and gradient) dtypes with kernels: each spec is compiled for bf16 (its own type), and
#: as the variants <spec>.f16 and <spec>.f32 (qopt-opt --param-type; an fp32 parameter is its own
#: master weight, so it has no error bits whatever master_weight_bits says).
PARAM_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_DTYPE_SUFFIX = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}


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
_is_none = functools.partial(operator.is_, None)
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
        # the runtime's evaluation of the uniforms into one array of this slot (finite())
        self._evaluate = None
        self._values = None
        self._static_key = None
        self._static: List[Optional[torch.Tensor]] = []
        self._static_captured = False

    def finite(self, step: int) -> bool:
        """Whether every uniform qopt_step will evaluate from ``self.hypers`` at `step` is finite
        in float32 (False also where the runtime refuses them, e.g. a NaN one)."""
        out = self._values
        if out is None:
            self._evaluate = C.lib().qopt_manifest_evaluate_uniforms
            out = self._values = (ctypes.c_float * max(self.ks.num_uniforms, 1))()
        return (self._evaluate(self.ks.manifest, self.hypers, len(self.hyper_names), step, out,
                               self.ks.num_uniforms) == C.SUCCESS
                and all(map(math.isfinite, out)))


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
        self.gi = kernel_key[0] if isinstance(kernel_key, tuple) and kernel_key else 0  # its group
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
        # a token for the parameters' memory as the launch last found it (new whenever a parameter
        # moved): the step checks that its parameters share no memory once per set of tokens
        self.mem_token = next(_MEM_TOKENS)
        self._psig: Optional[List[Any]] = None   # (address, size, stride) of each, slow path
        self.states = [opt.state[p] for p in params]
        # the optimizer.state (and its version) whose entries check() last found to be `states`
        self._book, self._book_version = None, None
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
        # the optimizer's numerics counters on this device (kept for its life: a captured step
        # keeps the pointer); a kernel without them ignores it
        self.entry.numerics_counters = opt._numerics_counters(self.device_obj).data_ptr()

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
            ks = self.opt._kernel_spec(self.backend, self.dtype, scaled=True,
                                       spec=getattr(self, "spec", None))
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
            self._counts_version = None
            self._snapshot()
            return
        dtype = dtype or self.states[0]["step"].dtype
        self.counts = torch.full((len(self.states),), self.step, dtype=dtype, device=device)
        for i, st in enumerate(self.states):
            st["step"] = self.counts[i]
        self.step_tensors = [st["step"] for st in self.states]
        # the counters' version as the launch last wrote them: a counter edited in place since
        # (``state[p]["step"].copy_(...)``: the views share the version) makes check() rebuild
        # the launch from the counters' values
        self._counts_version = self.counts._version
        self._snapshot()

    def _counters_to_device(self) -> None:
        """Moves the step counters of this launch's parameters to the device (float32, as
        capturable=True keeps them), so that a step skipped on the device needs no host sync."""
        self._bind_counters(self.device_obj, torch.float32)

    def check(self, grads: Optional[List[Any]] = None) -> bool:
        """Run for every launch of every group before the step launches anything: refuses a
        sparse gradient, a gradient of another dtype or size than its parameter, a parameter whose
        dtype or number of elements changed since its state (and this launch) was made.

        Returns False, having refused nothing yet, where the optimizer's state is no longer what
        this launch was built from (a parameter's state dict or one of its values replaced, removed
        or added: ``optimizer.state.pop(p)``, ``optimizer.state.clear()``, ``optimizer.state[p][k] =
        t``): the launch's pointers would be stale, so the group is rebuilt from the current state.
        Also False where a step counter was edited in place (``state[p]["step"].copy_(t)``: the
        counters' version moved), so that the step count is read again.

        Identity comparisons only (no tensor is read). `grads`: the parameters' gradients, where
        the caller read them already."""
        counts = self.counts
        if counts is not None and counts._version != self._counts_version:
            return False
        states = self.states
        book = self.opt.state
        if not (book is self._book and type(book) is _TrackedState
                and book.version == self._book_version):
            if not all(map(_is, map(book.get, self.params), states)):
                return False
            self._book, self._book_version = book, getattr(book, "version", None)
        if not (list(map(len, states)) == self.state_lens
                and all(map(_is, _chain(map(dict.values, states)), self.state_vals))):
            return False
        self._fast = self._check_fast(grads) if self.plain else None
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
                self.opt._dtype_error(p, lp.dtype, g.dtype, ks, self.labels[i])
            if g.numel() != n:
                raise RuntimeError(f"qopt: {self._names[i].decode()}: gradient has {g.numel()} "
                                   f"elements, parameter {n}")
            cur.append((lp, g))
        self._cur = cur
        return True

    def _check_fast(self, grads=None) -> Optional[Tuple[List[int], List[int]]]:
        """check() for plain tensors in one pass per property over the whole list: the parameter
        and gradient pointers when every parameter and gradient is a strided, contiguous, 16-byte
        aligned tensor of the launch's dtype and size; None when one is not, and check()'s
        per-parameter loop then says which and stages what needs a copy."""
        params = self.params
        if grads is None:
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
                self.mem_token = next(_MEM_TOKENS)
                self._psig = None
        else:
            gptr, pptr = list(self.gptr), list(self.pptr)
            sig: List[Any] = []   # where each parameter is (a staged one: its view too)
            for i, (lp, g) in enumerate(cur):
                if not g.is_contiguous() or g.data_ptr() % 16:
                    g = g.contiguous() if not g.is_contiguous() else g.clone()
                    keep.append(g)
                gp = g.data_ptr()
                if gp != gptr[i]:
                    data[i * S + gs] = gp
                    gptr[i] = gp
                lptr = lp.data_ptr()
                if not lp.is_contiguous() or lptr % 16:
                    staged = lp.contiguous() if not lp.is_contiguous() else lp.clone()
                    keep.append(staged)
                    copy_back.append((lp, staged))
                    sig.append((lptr, lp.size(), lp.stride()))
                    pp = staged.data_ptr()
                else:
                    sig.append(lptr)
                    pp = lptr
                if pp != pptr[i]:
                    data[i * S + ps] = pp
                    pptr[i] = pp
            self.gptr, self.pptr = gptr, pptr
            if sig != self._psig:
                self.mem_token = next(_MEM_TOKENS)
                self._psig = sig

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
            if not all(map(math.isfinite, host)):
                # only the host's own values: the others are computed on the device (not read)
                dynamic = frozenset([n for n, v in hv.items() if isinstance(v, torch.Tensor)]
                                    + (["step"] if device_counter else []))
                self._refuse_infinite(slot, host, hv, step,
                                      [_is_dynamic(e, dynamic) for e in slot.ks.uniform_exprs])
            entry.hypers, entry.num_hypers, entry.step = None, 0, 0
        else:
            for i, name in enumerate(slot.hyper_names):
                hy[i].value = hv[name]
            # the runtime refuses a NaN per-step value, not an infinite one (it leaves the range
            # of hyperparameters to the caller): the values qopt_step will use, checked here
            if not slot.finite(step):
                # (the runtime's own refusal, e.g. a NaN uniform, raises here with its message)
                values = slot.ks.evaluate_uniforms(hy, len(slot.hyper_names), step)
                self._refuse_infinite(slot, values, hv, step, None)
            entry.hypers, entry.num_hypers, entry.step = hy, len(slot.hyper_names), step
        entry.device_uniforms = None
        self._prep = _Prepared(keep, copy_back, slot, hv, step, use_device_uniforms, host,
                               device_skip, move_counters)

    def _refuse_infinite(self, slot: _Slot, values: List[float], hv: Dict[str, Any], step: int,
                         dynamic: Optional[List[bool]]) -> None:
        """A per-step value (uniform) that is infinite in float32 although every hyperparameter is
        finite (they are checked first): beta1 = 1 makes lr / (1 - beta1^step) infinite, lr *
        weight_decay can overflow. The kernel's update would turn parameters into inf or NaN,
        so the step is refused before anything is launched. `dynamic`: which values the device
        computes instead (those are not judged here), or None."""
        exprs = slot.ks.uniform_exprs
        for i, v in enumerate(values):
            if math.isfinite(v) or (dynamic is not None and i < len(dynamic) and dynamic[i]):
                continue
            expr = _render(exprs[i]) if i < len(exprs) else f"uniform {i}"
            given = ", ".join(f"{n}={x!r}" for n, x in hv.items()
                              if not isinstance(x, torch.Tensor))
            raise ValueError(
                f"{type(self.opt).__name__}: param_groups[{self.gi}]: the per-step value {expr} "
                f"of kernel {slot.ks.kernel} is {v} in float32 at step {step} ({given}); the "
                f"kernel cannot step with it (check the group's hyperparameters); nothing was "
                f"stepped")

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
            self._counts_version = counts._version
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
        self._counts_version = counts._version

    def _device_uniforms(self, slot: _Slot, hv: Dict[str, Any], step: int,
                         device_counter: bool, host: List[float]) -> None:
        """Fills slot.uniforms (float32, on the device) for this step with device ops only.
        `host`: the runtime's host evaluation of the uniforms (prepare() made it), kept for those
        that depend on neither the step nor a tensor hyperparameter."""
        ks, dev = slot.ks, self.device_obj
        if slot.uniforms is None:
            slot.uniforms = torch.zeros(max(ks.num_uniforms, 1), dtype=torch.float32, device=dev)
        if not ks.uniform_exprs:
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
            # a value that kept its bits keeps its tensor (from step to step, with the counter on
            # the host, only the bias corrections change); not one filled by a captured step,
            # which holds its value only once the graph has run
            old = slot._static_key
            kept = (dict(zip(itertools.compress(range(len(dyn)), map(operator.not_, dyn)),
                             map(_float_bits, old[1])))
                    if old is not None and old[0] == dyn and not slot._static_captured else {})
            slot._static_captured = dev.type == "cuda" and torch.cuda.is_current_stream_capturing()
            slot._static = [None if d else slot._static[i] if kept.get(i) == _float_bits(h)
                            else torch.full((), h, dtype=torch.float64, device=dev)
                            for i, (h, d) in enumerate(zip(host, dyn))]
            slot._static_key = key
        parts = []
        for i, expr in enumerate(ks.uniform_exprs):
            if dyn[i]:
                v = _eval_device(expr, env, dev)
                parts.append(v.reshape(()) if isinstance(v, torch.Tensor)
                             else torch.full((), v, dtype=torch.float64, device=dev))
            else:
                parts.append(slot._static[i])
        # the step reductions' slots after these are written by the kernel's combine
        slot.uniforms[:len(parts)].copy_(torch.stack(parts))


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "^"}


def _render(expr) -> str:
    """A manifest uniform expression (nested lists) as text: ``lr / (1 - beta1 ^ step)``."""
    if not isinstance(expr, list):
        return str(expr)
    op, args = expr[0], [_render(a) if not isinstance(a, list) or a[0] not in _INFIX
                         else f"({_render(a)})" for a in expr[1:]]
    if op in _INFIX:
        return f" {_INFIX[op]} ".join(args)
    return f"{op}({', '.join(args)})"


#: tokens of the parameters' memory as each launch found it (_Launch.mem_token): never reused
_MEM_TOKENS = itertools.count(1)


def _float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _launch_all(launches: List[_Launch]) -> None:
    """The launches of one step, prepared: one qopt_step_many call per stream (per device), the
    launches of a second device checked before the first device's are launched. A step whose
    kernels have whole-step reductions (global_norm, ...) reads every tensor of one call: it runs
    on one device, and where its gradients are sharded (DTensor, or the optimizer's
    ``process_group``) through the split API with an all-reduce of the rows between the phases
    (_step_split)."""
    by_stream: Dict[Optional[int], List[_Launch]] = {}
    streams: Dict[Any, Optional[int]] = {}
    try:
        for ln in launches:
            stream = streams.get(ln.device_obj, 0)
            if stream == 0:
                stream = (torch.cuda.current_stream(ln.device_obj).cuda_stream
                          if ln.backend == C.BACKEND_CUDA else None)
                streams[ln.device_obj] = stream
            by_stream.setdefault(stream, []).append(ln)
        groups = list(by_stream.items())
        reduced = any(ln.ks.num_step_reductions for ln in launches)
        if reduced and len(groups) > 1:
            devices = ", ".join(str(d) for d in streams)
            raise RuntimeError(
                f"qopt: {type(launches[0].opt).__name__}'s kernel reduces over every tensor of "
                f"the step (a whole-step reduction such as the global gradient norm), but this "
                f"step's parameters are on several devices ({devices}); keep them on one device "
                f"per optimizer (shard across processes with FSDP2 or process_group=)")
        sharded = _step_groups(launches) if reduced else None
        for _, lns in groups[1:]:
            for ln in lns:
                ln.precheck()
        for ln in launches:
            ln.begin()
        for stream, lns in groups:
            entries = (C.Launch * len(lns))(*[ln.entry for ln in lns])
            if sharded:
                _step_split(entries, lns, stream, sharded)
            else:
                C.check(C.lib().qopt_step_many(entries, len(lns), stream), "qopt_step_many")
            for ln in lns:
                ln.finish()
    except BaseException:
        for ln in launches:
            ln.abort()
        raise


def _step_groups(launches: List[_Launch]) -> Optional[List[Any]]:
    """The process groups over which a step's whole-step reductions are all-reduced: the
    optimizer's ``process_group`` where it was given one; else, where a gradient is a DTensor
    (FSDP2), the groups of its mesh's dimensions along which it is sharded (a replicated dimension
    holds the same values on each rank and is not summed); else None (one process holds every
    tensor of the step)."""
    pg = getattr(launches[0].opt, "process_group", None)
    if pg is not None:
        return [pg]
    for ln in launches:
        for p in ln.params:
            g = p.grad
            mesh = getattr(g, "device_mesh", None)
            if mesh is None:
                continue
            dims = [i for i, pl in enumerate(g.placements)
                    if getattr(pl, "is_shard", lambda: False)()]
            return [mesh.get_group(i) for i in dims] or None
    return None


def _step_split(entries, lns: List[_Launch], stream, groups: List[Any]) -> None:
    """One step with whole-step reductions over sharded tensors (docs/abi.md, "Whole-step reductions"):
    phase A writes this rank's [T][S] float64 rows (one per tensor of the step, one column per
    step reduction), the rows are all-reduced (SUM for sum and norm, whose rows are sums of
    squares; MAX for max) over `groups`, and phase B combines and steps from them. Every rank
    must step the same parameters in the same order (T rows of the same tensors)."""
    import torch.distributed as dist
    n = len(lns)
    T, S = c_int64(), c_int64()
    C.check(C.lib().qopt_step_partials_shape(entries, n, byref(T), byref(S)),
            "qopt_step_partials_shape")
    rows = torch.zeros((T.value, S.value), dtype=torch.float64, device=lns[0].device_obj)
    ptr = c_void_p(rows.data_ptr())
    C.check(C.lib().qopt_step_many_partials(entries, n, ptr, stream), "qopt_step_many_partials")
    kinds = lns[0].ks.step_kinds
    for op, cols in ((dist.ReduceOp.SUM, [s for s, k in enumerate(kinds) if k != "max"]),
                     (dist.ReduceOp.MAX, [s for s, k in enumerate(kinds) if k == "max"])):
        if not cols or rows.numel() == 0:
            continue
        part = rows[:, cols].contiguous()
        for g in groups:
            dist.all_reduce(part, op=op, group=g)
        rows[:, cols] = part
    C.check(C.lib().qopt_step_many_from_partials(entries, n, ptr, stream),
            "qopt_step_many_from_partials")


class _GroupCache:
    """The launches of one param group, for the parameters `params` (those with a gradient)."""
    __slots__ = ("generation", "params", "launches")

    def __init__(self, generation, params, launches):
        self.generation, self.params, self.launches = generation, list(params), launches

    def holds(self, plist: List[torch.Tensor]) -> bool:
        """Whether it was built for exactly these parameters, in this order."""
        return len(plist) == len(self.params) and all(map(_is, plist, self.params))


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

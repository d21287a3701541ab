"""QoptOptimizer: the base class of the optimizers, a torch.optim.Optimizer whose step is one qopt
kernel launch per parameter group and parameter dtype (the launches in _launch.py). It creates the
kernel's state from the manifest's layout and maps a group to the kernel's hyperparameters (its
state dicts are _checkpoint.py's); the subclasses in optim.py name the spec and the state keys.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import numbers
import operator
import weakref
from ctypes import c_void_p
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _capi as C
from . import _clip
from . import _runtime as R
from ._checkpoint import _INITIAL_LR, _KERNEL_KEY, _Checkpoints, _group_error
from ._checks import _check_lr
from ._copy import _Copies
from ._launch import (PARAM_DTYPES, TORCH_DTYPES, _DTYPE_SUFFIX, _GroupCache, _Launch,
                      _backend_of, _destroy_deferred, _destroy_handle_dict, _grad_of, _is_none,
                      _launch_all, _local, _size_error)
from ._memory import check_param_memory
from ._state import _TrackedState

#: torch >= 2.0's GradScaler hands an optimizer with this flag its scale and found_inf as the
#: attributes ``grad_scale`` and ``found_inf`` (torch 1.x passed itself as a ``grad_scaler``
#: keyword instead, which qopt does not take: there GradScaler unscales and checks by itself).
_AMP_ATTRIBUTES = int(torch.__version__.split(".")[0]) >= 2


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



# ------------------------------------------------------------------------- stochastic rounding

#: stochastic rounding's Philox counter takes the step as a float32 uniform, exact below 2^24
SR_STEP_LIMIT = 1 << 24
#: odd, so k -> k * _SEED_STRIDE mod 2^24 is one-to-one: launches of one step never share a seed
_SEED_STRIDE = 0x3779B1
_STOCHASTIC: Dict[Any, bool] = {}


def launch_seed(seed: int, index: int) -> int:
    """The seed a stochastic-rounding launch receives (docs/numerics.md, "Stochastic rounding"):
    ``(seed + index * 0x3779B1) mod 2^24``, `index` the state_dict index of the launch's first
    parameter (its param group's offset plus its position there). A kernel numbers the elements of
    one launch from 0, so two launches with one seed would draw the same bits; distinct indices
    below 2^24 give distinct seeds, and the first launch keeps the user's seed."""
    return (int(seed) + int(index) * _SEED_STRIDE) % SR_STEP_LIMIT


def _is_stochastic(ks: R.KernelSpec) -> bool:
    """Whether kernel ks rounds its parameter stochastically (the manifest's param master)."""
    v = _STOCHASTIC.get(ks.path)
    if v is None:
        param = R.read_manifest(ks.path).get("param", {})
        v = isinstance(param, dict) and param.get("master") == "stochastic"
        _STOCHASTIC[ks.path] = v
    return v


# ------------------------------------------------------------------------- the base class

#: the smallest magnitude that rounds to infinity in float32 (half an ulp above its largest
#: finite value, 2^128 - 2^104; the tie rounds to the even 2^128)
_F32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103

#: options every step of the optimizer takes alike (attributes of the same name, False where the
#: optimizer has none): a param group may repeat them, not change them
_WHOLE_OPTIMIZER_FLAGS = ("skip_nonfinite", "stochastic_rounding", "kahan_sum",
                          "bf16_stochastic_round")
#: the same for options some optimizers have (checked where the optimizer has the attribute)
_WHOLE_OPTIMIZER_VALUES = ("seed", "block_size")

class QoptOptimizer(_Checkpoints, _Copies, torch.optim.Optimizer):
    """Base class: a torch.optim.Optimizer whose step is one qopt kernel launch per group.

    Subclasses set the kernel (a spec stem, e.g. ``flash_adamw``), the names of the state keys and
    the map from a param group to the kernel's hyperparameters.

    Options every shipped optimizer takes (keyword-only; attributes of the same name):

    - ``max_grad_norm`` (float > 0, or None: no clipping): global gradient clipping fused into the
      step, as ``torch.nn.utils.clip_grad_norm_(params, max_grad_norm)`` before ``step()``. One read
      of every gradient of every param group gives the global L2 norm on the device; the kernel
      multiplies each gradient by ``min(1, max_grad_norm / (norm + 1e-6))`` as it loads it (the
      gradients in memory are left unclipped). No host sync. The step equals ``clip_grad_norm_`` +
      ``step()`` bit for bit, also under a GradScaler with a power-of-two scale and bfloat16 or
      float32 gradients (the exact contract: _clip.py). ``float('inf')`` measures the norm without
      clipping. Not with ``enable_gradient_release`` (RuntimeError at the step).
    - ``last_grad_norm`` (attribute, with ``max_grad_norm``): the global L2 norm of the last step's
      gradients, a 0-dim tensor on the first gradient's device in the gradients' (promoted) dtype,
      unscaled under a GradScaler: the value ``clip_grad_norm_`` returns. Reading it syncs.
    - ``skip_nonfinite`` (bool): a step whose gradients hold a NaN or an infinity is skipped on the
      device (``nonfinite_steps`` counts such steps). With ``max_grad_norm`` the flag comes from the
      same norm (a non-finite norm; for float16 gradients also a norm above 65504), no extra read.
      Not with ``enable_gradient_release`` (refused there; RuntimeError at the step where set
      later): skipping the whole step needs every gradient before any bucket is stepped.
    """

    #: the kernel itself clips by max_grad_norm (a whole-step reduction, FlashAdamWClip): no
    #: separate norm pass (_clip.py)
    _KERNEL_CLIPS = False

    #: torch.amp.GradScaler hands step() its scale and found_inf (attributes ``grad_scale`` and
    #: ``found_inf``, torch >= 2.0): the step unscales inside the kernel and is skipped on the
    #: device when found_inf is set (docs: python/README.md, "GradScaler").
    _step_supports_amp_scaling = _AMP_ATTRIBUTES

    #: manifest stream name -> state_dict key
    STREAM_KEYS: Dict[str, str] = {}
    #: manifest table name -> state key (codebook tables)
    TABLE_KEYS: Dict[str, str] = {}

    def __init__(self, params, defaults: Dict[str, Any], spec: str):
        skip = getattr(self, "skip_nonfinite", False)
        if not isinstance(skip, bool):
            raise ValueError(f"{type(self).__name__}: skip_nonfinite={skip!r}; True or False")
        self._spec = spec
        self._generation = 0
        # param group index -> its values (by identity) when they were last checked at a step
        self._checked_groups: Dict[int, tuple] = {}
        # the launches' memory tokens of the steps whose parameters were found not to share
        # memory (check_param_memory)
        self._memory_checked: set = set()
        self._cache: Dict[int, _GroupCache] = {}
        self._tables_host: Optional[List[List[float]]] = None
        self._tables_dev: Dict[Any, List[torch.Tensor]] = {}
        self._init_kernels()
        super().__init__(params, defaults)
        self.state = _TrackedState(dict, self.state)

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
                     scaled: bool = False, spec: Optional[str] = None) -> R.KernelSpec:
        """The kernel for parameters of `dtype`: the spec's own (its parameter type; also for
        dtype None), or its variant <spec>.bf16 / .f16 / .f32; with `scaled`, the grad-scaling
        variant (.scaled). `spec`: another spec stem than the optimizer's (a parameter's policy,
        _spec_of)."""
        stem = spec or self._spec
        base = R.kernel_spec(stem, backend)
        name = stem
        if dtype is not None and dtype is not TORCH_DTYPES[base.param_dtype]:
            name += "." + _DTYPE_SUFFIX[dtype]
        if scaled:
            name += ".scaled"
        return base if name == stem else R.kernel_spec(name, backend)

    def _new_param_state(self, st: Dict[str, Any]) -> Dict[str, Any]:
        """The dict that holds one parameter's state (a subclass may give a dict type of its
        own, e.g. one that also answers FlashOptim's keys)."""
        return st

    def _spec_of(self, p: torch.Tensor) -> str:
        """The spec stem that steps p (the optimizer's; a per-parameter policy may choose its
        float32-state spec, _policy.py)."""
        return self._spec

    def _param_kernel_spec(self, p: torch.Tensor) -> R.KernelSpec:
        """The kernel that steps p (its backend, dtype and policy)."""
        lp = _local(p)
        return self._kernel_spec(_backend_of(lp)[0], lp.dtype, spec=self._spec_of(p))

    def _dtype_error(self, p, pdtype, gdtype, ks: Optional[R.KernelSpec],
                     where: Optional[str] = None):
        shape = tuple(p.shape)
        if pdtype not in PARAM_DTYPES:
            raise TypeError(
                f"{type(self).__name__}: a parameter of shape {shape} has dtype {pdtype}; qopt's "
                f"kernels ({self._spec}) step torch.bfloat16, torch.float16 and torch.float32 "
                f"parameters, each with a gradient of its own dtype. Cast the model (e.g. "
                f"model.to(torch.bfloat16)); qopt does not cast silently.")
        what = f"{where} (shape {shape})" if where else f"a parameter of shape {shape}"
        raise TypeError(
            f"{type(self).__name__}: {what} has gradient dtype {gdtype} "
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
                ks = self._kernel_spec(backend, lp.dtype, spec=self._spec_of(p))
                self._stream_keys(ks)
                self._table_keys(ks)
        except BaseException:
            if self.param_groups and self.param_groups[-1] is group:
                self.param_groups.pop()
            raise
        # decouple_lr's reference lr, under a key of qopt's own: torch's schedulers set
        # "initial_lr" themselves, from the lr the group has when the scheduler is made (as with
        # torch.optim.AdamW, an lr set after the optimizer and before the scheduler is kept)
        # the kernel's name, a marker that travels with the group through DCP (which keeps only
        # "state" and "param_groups" of a state_dict): load_state_dict checks it
        group[_KERNEL_KEY] = self._kernel_spec(C.BACKEND_HOST).kernel
        if _INITIAL_LR not in group:
            lr = group.get("initial_lr", group["lr"])
            group[_INITIAL_LR] = lr.clone() if isinstance(lr, torch.Tensor) else lr
        self._generation += 1

    # ---- to be provided by subclasses
    def _validate_group(self, group: Dict[str, Any]) -> None:
        _check_lr(group["lr"])

    def _check_group_options(self, group: Dict[str, Any]) -> None:
        """Refuses, in any param group (also one added later or loaded), what the constructor
        refuses or keeps for the whole optimizer, rather than ignoring it."""
        cls = type(self).__name__
        if group.get("maximize", False):
            raise ValueError(f"{cls}: maximize=True is not supported")
        capturable = group.get("capturable", False)
        if not isinstance(capturable, bool):
            raise ValueError(f"{cls}: capturable={capturable!r}; True or False")
        self._same_for_all(group, "max_grad_norm", getattr(self, "max_grad_norm", None))
        # flags of the whole optimizer (off where the optimizer does not have them; a group's
        # None is off, as optimi's kahan_sum=None for a float32 model)
        for key in _WHOLE_OPTIMIZER_FLAGS:
            if key in group:
                given = False if group[key] is None else group[key]
                self._same_for_all({key: given}, key, bool(getattr(self, key, False)))
        for key in _WHOLE_OPTIMIZER_VALUES:
            if hasattr(self, key):
                self._same_for_all(group, key, getattr(self, key))
        if "optim_bits" in group and hasattr(self, "quantize"):
            self._same_for_all(group, "optim_bits", 8 if self.quantize else 32)

    def _same_for_all(self, group: Dict[str, Any], key: str, value: Any) -> None:
        if key in group and group[key] != value:
            raise ValueError(f"{type(self).__name__}: {key}={group[key]!r} in a param group is not "
                             f"supported: {key} is set for the whole optimizer ({value!r}); use "
                             f"another optimizer for these parameters")

    def _kernel_hypers(self, group: Dict[str, Any]) -> Dict[str, Any]:
        raise NotImplementedError

    #: a spec of your own with codebook states: manifest table name (``<state>.qmap``) -> its
    #: 256 ascending float32 entries, e.g. ``{"m.qmap": qopt.create_dynamic_map(signed=True)}``
    #: (python/README.md, "Your own spec"); the shipped optimizers give theirs in _host_tables
    QMAPS: Dict[str, Any] = {}

    def _host_tables(self, ks: R.KernelSpec) -> List[List[float]]:
        """The kernel's codebook tables in manifest order, from QMAPS: each 256 finite floats. A
        table QMAPS lacks, or one of another length, is a ValueError naming it."""
        cls = type(self).__name__
        out = []
        for name, state in ks.tables:
            if name not in self.QMAPS:
                raise ValueError(
                    f"{cls}: kernel {ks.kernel} ({ks.path.name}) has the codebook table "
                    f"'{name}' (state '{state}'), which {cls}.QMAPS does not give; set "
                    f"QMAPS = {{'{name}': qopt.create_dynamic_map(signed=True)}} (or signed=False "
                    f"for a state that is never negative), or any 256 ascending floats")
            entries = [float(x) for x in self.QMAPS[name]]
            if len(entries) != 256 or not all(math.isfinite(x) for x in entries):
                raise ValueError(f"{cls}.QMAPS['{name}']: {len(entries)} entries; a codebook "
                                 f"table is 256 finite floats")
            out.append(entries)
        return out

    # ---- state
    def _stream_keys(self, ks: R.KernelSpec) -> Dict[str, str]:
        """Manifest stream name -> state key, for the kernel's streams other than the parameter
        and the gradient (STREAM_KEYS, else the stream's own name). A STREAM_KEYS key that names
        none of them is a ValueError (it would be ignored silently otherwise), except the
        parameter's error-bits stream ``<param>.ecc`` (or Kahan compensation ``<param>.kahan``),
        which a variant without a master weight (an fp32 parameter, ``master_weight_bits=None``)
        does not have."""
        names = [s.name for s in ks.streams if s.role not in (C.ROLE_PARAM, C.ROLE_GRAD)]
        keys = self._stream_key_table(ks)
        if any(k not in names for k in keys):
            param = ks.streams[ks.param_stream].name
            unknown = [k for k in keys if k not in names and k not in (param + ".ecc",
                                                                        param + ".kahan")]
            if unknown:
                raise ValueError(
                    f"{type(self).__name__}.STREAM_KEYS: {', '.join(map(repr, unknown))} "
                    f"name{'s' if len(unknown) == 1 else ''} no state stream of kernel "
                    f"{ks.kernel} ({ks.path.name}); its stream names are "
                    f"{', '.join(map(repr, names)) or 'none'} (keys are manifest stream names, "
                    f"e.g. '<state>.codes', '<state>.scales', '<param>.ecc')")
        return {n: keys.get(n, n) for n in names}

    def _stream_key_table(self, ks: R.KernelSpec) -> Dict[str, str]:
        """STREAM_KEYS of kernel ks (a policy may name another kernel's streams)."""
        return self.STREAM_KEYS

    def _table_keys(self, ks: R.KernelSpec) -> List[str]:
        """State keys of the kernel's codebook tables (TABLE_KEYS, else the table's name); a
        TABLE_KEYS key that names no table of the kernel is a ValueError."""
        names = [name for name, _ in ks.tables]
        table = self._table_key_table(ks)
        unknown = [k for k in table if k not in names]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.TABLE_KEYS: {', '.join(map(repr, unknown))} "
                f"name{'s' if len(unknown) == 1 else ''} no table of kernel {ks.kernel} "
                f"({ks.path.name}); its table names are {', '.join(map(repr, names)) or 'none'}")
        return [table.get(name, name) for name in names]

    def _table_key_table(self, ks: R.KernelSpec) -> Dict[str, str]:
        """TABLE_KEYS of kernel ks (a policy's float32-state kernel has no tables)."""
        return self.TABLE_KEYS

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
        ks = self._param_kernel_spec(p)
        state = self.state.get(p)
        if not isinstance(state, dict):
            state = self._new_param_state({})
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
                if (k is not None and k[0].params[k[1]] is p and k[0].same_state(k[1], st)
                        and getattr(k[0], "spec", None) == self._spec_of(p)):
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
            value = st["step"].item()
            step = int(value)
            if step < 0 or step != value:
                # a counter edited in place (a replaced one is checked as load_state_dict checks it)
                raise ValueError(f"{cls}: param_groups[{gi}][{pi}] {list(p.shape)}: step {value} "
                                 f"is not a non-negative integer; nothing was stepped")
            # counters on the host (int64) and on the device (float32) are not stepped together;
            # one launch per kernel (the parameter's policy: 8-bit or float32 state)
            part = (backend, dev, step, lp.dtype, st["step"].dtype, self._spec_of(p))
            parts.setdefault(part, []).append(p)
            at.setdefault(part, []).append(pi)
        launches = []
        offset = sum(len(g["params"]) for g in self.param_groups[:gi])
        for j, (part, ps) in enumerate(parts.items()):
            backend, dev, _, dtype, _, spec = part
            ks = self._kernel_spec(backend, dtype, spec=spec)
            labels = [f"param_groups[{gi}][{pi}]" for pi in at[part]]
            key = (gi, j, backend, dev, str(ks.path))
            launch = _Launch(self, ks, backend, dev, ps, labels, key)
            launch.spec = spec
            launch.gi = gi
            # the state_dict index of its first parameter: its stochastic rounding's seed (launch_seed)
            launch.first_index = offset + at[part][0]
            launches.append(launch)
        return _GroupCache(self._generation, plist, launches)

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
        from ._release import release_active
        if release_active(self, "step"):
            return None
        return self._release_step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        from ._release import release_active
        if release_active(self, "zero_grad"):
            return
        super().zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def _release_step(self, closure: Optional[Callable[[], Any]] = None):
        """The step itself (step() is this, except while gradient release is active)."""
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
        clip = None
        # The check phase: every group's hyperparameters, every parameter's state and size, every
        # gradient of every group, before anything is launched (a refused step steps no group).
        work = []
        try:
            for gi, group in enumerate(self.param_groups):
                plist = group["params"]
                grads = list(map(_grad_of, plist))
                if any(map(_is_none, grads)):
                    has = [g is not None for g in grads]
                    plist = list(itertools.compress(plist, has))
                    grads = list(itertools.compress(grads, has))
                if not plist:
                    continue
                hv = self._checked_hypers(gi, group)
                # under gradient release each bucket (a subset of the group, the same every
                # iteration) keeps a cache of its own instead of rebuilding the group's
                ck = gi if getattr(self, "_release", None) is None else (gi, tuple(map(id, plist)))
                cache = self._cache.get(ck)
                if (cache is None or cache.generation != self._generation
                        or not cache.holds(plist)):
                    cache = self._build(gi, group, plist, cache)
                    self._cache[ck] = cache
                # one launch (the usual case) takes the gradients read here
                one = grads if len(cache.launches) == 1 else None
                if not all(launch.check(one) for launch in cache.launches):
                    # the state changed under the cache: rebuild from the current state
                    cache = self._build(gi, group, plist, cache)
                    self._cache[ck] = cache
                    if not all(launch.check() for launch in cache.launches):
                        raise RuntimeError("qopt: internal error: a launch rebuilt from the "
                                           "current state does not match it")
                if getattr(self, "stochastic_rounding", False):
                    self._check_stochastic_steps(gi, cache.launches)
                work.append((gi, group, cache, hv))
            # The gradients' norms after the check phase, so that a gradient it refuses (sparse,
            # of another dtype or size) gets its error rather than one of the norm's.
            if getattr(self, "max_grad_norm", None) is not None and not self._KERNEL_CLIPS:
                # one norm pass gives the clip coefficient and skip_nonfinite's flag (_clip.py)
                clip = _clip.fused_clip(self, grad_scale, found_inf)
            elif found_inf is None and getattr(self, "skip_nonfinite", False):
                if getattr(self, "_release", None) is not None:
                    # (skip_nonfinite set after enable_gradient_release, which refuses it)
                    raise RuntimeError(f"{type(self).__name__}: skip_nonfinite needs every "
                                       f"gradient before any step; it does not work with "
                                       f"enable_gradient_release")
                found_inf = self._nonfinite_flag()
                if found_inf is not None:
                    scaling = (grad_scale, found_inf)
            # Every launch takes its pointers, kernel and uniforms; then the runtime validates
            # every launch of the step and launches them (qopt_step_many), so a step it would
            # refuse in a later group refuses the whole step.
            launches = []
            for gi, group, cache, hv in work:
                for launch in cache.launches:
                    lhv = hv
                    if "seed" in hv and getattr(self, "stochastic_rounding", False):
                        lhv = dict(hv, seed=float(launch_seed(hv["seed"], launch.first_index)))
                    launch.prepare(group, lhv, scaling if clip is None
                                   else clip.scaling(launch.device_obj, launch.dtype))
                    launches.append(launch)
            # parameters that share memory, checked over every launch of the step where one
            # moved since this set of launches was last checked (address arithmetic only)
            key = tuple(ln.mem_token for ln in launches)
            if key not in self._memory_checked:
                check_param_memory(launches)
                # (a key per bucket under gradient release: room for many before starting over)
                if len(self._memory_checked) >= 4096:
                    self._memory_checked.clear()
                self._memory_checked.add(key)
            _launch_all(launches)
            for gi, group, cache, hv in work:
                if len(cache.launches) > 1:
                    # parameters whose step counts now agree go into one launch next time (the
                    # old cache still vouches for the states it took)
                    keys = {(ln.backend, ln.device, ln.dtype, ln.step, ln.step_tensors[0].dtype,
                             ln.spec) for ln in cache.launches}
                    if len(keys) < len(cache.launches):
                        cache.generation = -1
        finally:
            for cache in self._cache.values():   # drop what check() and prepare() kept
                for launch in cache.launches:
                    launch._cur = None
                    launch._prep = None
        return loss

    def _check_stochastic_steps(self, gi: int, launches) -> None:
        """Refuses (before anything is launched) a stochastic-rounding launch whose step would
        reach 2^24: its Philox counter is exact only below. The count is the host's (with the
        counter on the device, capturable or a GradScaler, an upper bound: skipped steps count)."""
        for launch in launches:
            if launch.step + 1 >= SR_STEP_LIMIT and _is_stochastic(launch.ks):
                raise ValueError(
                    f"{type(self).__name__}: param_groups[{gi}]: step {launch.step + 1} of "
                    f"{launch.labels[0]} reaches 2^24, where stochastic rounding's counter (the "
                    f"step, a float32) is no longer exact; nothing was stepped. Reset the step "
                    f"count (load a state with a smaller 'step') or use round to nearest.")

    @torch.no_grad()
    def _nonfinite_flag(self) -> Optional[torch.Tensor]:
        """skip_nonfinite: a float32 one-element tensor on the first gradient's device, 1 when any
        gradient element of the step is NaN or infinite, else 0 (the largest magnitude of each
        gradient, one fused read per device and dtype: torch._foreach_norm with ord inf), and
        ``nonfinite_steps`` advanced by it; None without gradients. No host sync: the flag goes to
        the kernels' GradScaler variant as found_inf, which skips the step on the device."""
        by_device: Dict[Any, List[torch.Tensor]] = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    g = _local(p.grad)
                    by_device.setdefault(g.device, []).append(g)
        if not by_device:
            return None
        first = next(iter(by_device))
        flag = torch.zeros(1, dtype=torch.float32, device=first)
        for dev, grads in by_device.items():
            # an empty gradient has no element to be non-finite (and no inf norm in torch)
            grads = [g for g in grads if g.numel() != 0]
            if not grads:
                continue
            peaks = torch._foreach_norm(grads, float("inf"))
            bad = torch.logical_not(torch.isfinite(torch.stack(peaks).float()).all())
            flag = torch.maximum(flag, bad.reshape(1).to(device=first, dtype=torch.float32))
        counter = getattr(self, "nonfinite_steps", None)
        if counter is None or counter.device != flag.device:
            self.nonfinite_steps = torch.zeros((), dtype=torch.float32, device=first)
        self.nonfinite_steps.add_(flag.reshape(()))
        return flag

    def _checked_hypers(self, gi: int, group: Dict[str, Any]) -> Dict[str, Any]:
        """The group's kernel hyperparameters, refused (before any launch of the step) where a
        float one is NaN or infinite, infinite in float32 (the kernel's precision), or not a
        number. Tensor values (a tensor lr) are not read: that would be a host sync: a tensor
        must have one element (shape [] or [1])). A group whose values changed since they were
        last checked (``param_groups[g][k] = v``) is checked again as add_param_group checks a
        new one (its options and its hyperparameters' ranges, e.g. beta1 < 1).

        The names must be the kernel's (the manifest's "hypers"): one it does not have is refused
        and one missing takes the manifest's default (refused where it gives none)."""
        try:
            hv = self._kernel_hypers(group)
        except (ValueError, TypeError, KeyError):
            # a value _kernel_hypers cannot read (betas of another length, ...): the group check
            # names it
            self._recheck_group(gi, group)
            raise
        ks = R.kernel_spec(self._spec, _backend_of(_local(group["params"][0]))[0])
        if hv.keys() != ks.hypers.keys():
            hv = self._completed_hypers(gi, hv, ks)
        self._check_hyper_values(hv, f"{type(self).__name__}: param_groups[{gi}]",
                                 "nothing was stepped")
        # identity of the group's values (a float set anew, e.g. by a scheduler, is a new object):
        # unchanged values were checked already
        vals = tuple(group.values())
        seen = self._checked_groups.get(gi)
        if seen is None or len(seen) != len(vals) or not all(map(operator.is_, seen, vals)):
            self._recheck_group(gi, group)
            self._checked_groups[gi] = vals
        return hv

    def _recheck_group(self, gi: int, group: Dict[str, Any]) -> None:
        """add_param_group's checks of a group (its options, its hyperparameters' ranges) at a
        step: a ValueError (or the check's own type) naming the group; nothing is stepped."""
        try:
            self._check_group_options(group)
            self._validate_group(group)
        except (ValueError, TypeError, NotImplementedError) as e:
            cls = type(self).__name__
            raise _group_error(e, cls, f"{cls}: param_groups[{gi}]", "nothing was stepped") \
                from None

    def _check_hyper_values(self, hv: Dict[str, Any], where: str, after: str) -> None:
        """Each kernel hyperparameter a number the kernel can take: finite, and finite once
        rounded to float32 (the kernel's hyperparameters and per-step values are float32); a tensor
        (not read) of one element. `where` starts each message, `after` ends it."""
        for name, v in hv.items():
            if isinstance(v, torch.Tensor):
                if v.numel() != 1:
                    raise ValueError(f"{where}: {name} is a tensor of shape {list(v.shape)}; a "
                                     f"tensor {name} must have one element (shape [] or [1]); "
                                     f"{after}")
                continue
            if not isinstance(v, numbers.Real):
                raise TypeError(f"{where}: hyperparameter '{name}' is {v!r}, not a number; {after}")
            f = float(v)
            if not math.isfinite(f):
                raise ValueError(f"{where}: hyperparameter '{name}' is {f}; {after}")
            if abs(f) >= _F32_OVERFLOW:
                raise ValueError(f"{where}: hyperparameter '{name}' is {f!r}, which is infinite "
                                 f"in float32 (the kernel's precision); {after}")

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

    #: attributes that are handles or caches of this process (kernel modules, device tables, the
    #: ctypes arrays, the step cache, gradient release's hooks): a copy or an unpickled optimizer
    #: makes its own; torch's step / state_dict hooks are dropped, as torch.optim drops them
    _NOT_COPIED = ("_cache", "_tables_dev", "_tables_host", "_kernels", "_finalizer",
                   "_table_arrays", "_overrides", "_release", "_maxabs", "_checked_groups",
                   "_memory_checked")

    # ---- numerics counters (docs/abi.md, "Numerics counters")
    def _numerics_counters(self, device) -> torch.Tensor:
        """The int64 counters (C.NUMERICS_COUNTERS) on `device` that this optimizer's kernels add
        to; made at the first launch there and kept, so a captured step keeps its pointer."""
        table = self.__dict__.setdefault("_counters_dev", {})
        key = str(device)
        t = table.get(key)
        if t is None:
            t = torch.zeros(C.NUMERICS_COUNTERS, dtype=torch.int64, device=device)
            table[key] = t
        return t

    def _numerics_counter(self, slot: int) -> Optional[torch.Tensor]:
        tensors = list(self.__dict__.get("_counters_dev", {}).values())
        if not tensors:
            return None
        if len(tensors) == 1:
            return tensors[0][slot]
        # parameters on several devices: the sum on the first (device copies, no host sync)
        first = tensors[0].device
        return torch.stack([t[slot].to(first) for t in tensors]).sum()

    @property
    def saturated_groups(self) -> Optional[torch.Tensor]:
        """Quantization groups (and codebook blocks) whose scale did not fit its type and was
        stored saturated (a float16 scale above 65504: docs/numerics.md, "Overflow"; a positive one
        that would round to 0 is stored as 2^-24 and not counted), counted over
        every step since the first, by the kernels on the device: a 0-dim int64 tensor on the
        parameters' device (None before the first step; a view of the counters, which
        ``.zero_()`` resets, where all parameters are on one device). Reading its value syncs."""
        return self._numerics_counter(C.COUNTER_SATURATED_GROUPS)

    @property
    def nonfinite_groups(self) -> Optional[torch.Tensor]:
        """Groups and codebook blocks whose new state held a NaN or an infinity (a NaN or infinite
        gradient that was not skipped): stored saturated, as ``saturated_groups`` says."""
        return self._numerics_counter(C.COUNTER_NONFINITE_GROUPS)

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

"""FlashOptim's public API beside the optimizers (databricks/flashoptim 0.1.3 ``__all__``):
``FlashOptimizer`` (the Flash optimizers' base class), ``NumericsError`` and ``check_numerics``,
``compute_ecc_bits`` / ``reconstruct_fp32_param`` (numerics.md section 3, bit-identical to the
runtime's qopt_error_bits_init / qopt_error_bits_decode), ``cast_model``, and the optimizers'
``get_fp32_model_state_dict`` / ``set_fp32_model_state_dict`` / ``recompute_param_stats``.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Dict, List, Optional, Union

import torch

from . import ecc
from ._base import QoptOptimizer
from ._checkpoint import _check_layout
from ._launch import _local
from ._policy import PolicyMixin

__all__ = ["FlashOptimizer", "NumericsError", "compute_ecc_bits", "reconstruct_fp32_param",
           "cast_model"]


class NumericsError(RuntimeError):
    """``check_numerics=True``: the learning rate is too small to change the largest weight of a
    parameter at its dtype and master-weight precision (FlashOptim's check)."""


_EXP_BITS = {torch.bfloat16: 8, torch.float16: 5, torch.float32: 8}
_MASTER_BYTES = {None: 0, 24: 3, 32: 4}


class FlashState(dict):
    """One parameter's state in a Flash optimizer: the kernel's keys, and, read-only, FlashOptim's
    keys of a quantized state (``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``): ``state["exp_avg"]``
    and ``state.get("exp_avg")`` give it dequantized, a new float32 tensor of the parameter's
    (local) shape, with the scheme the kernel's manifest gives (8- or 4-bit codes, companded or on
    a 4-bit table; numerics.md section 2's inverse; writing to it changes nothing). They are not
    among the keys (``keys()``, ``in``, ``state_dict``), which stay the kernel's."""

    def _dequantized(self, key):
        # _views: float32 key -> (codes key, scales key, group, manifest scheme, parameter shape),
        # set by the optimizer for the parameter's kernel (_stamp)
        view = self.__dict__.get("_views", {}).get(key)
        if view is None:
            return None
        ckey, skey, group, scheme, shape = view
        c, sc = dict.get(self, ckey), dict.get(self, skey)
        if c is None or sc is None:
            return None
        return _float_of(c, sc, group, scheme, shape)

    def __missing__(self, key):
        v = self._dequantized(key)
        if v is None:
            raise KeyError(key)
        return v

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        v = self._dequantized(key)
        return default if v is None else v


class FlashOptimizer(PolicyMixin, QoptOptimizer):
    """Base class of qopt's Flash optimizers (FlashAdamW, FlashAdam, FlashSGD, FlashSGDW, FlashLion),
    as FlashOptim's ``FlashOptimizer``: the per-parameter state policy, ``check_numerics``, fp32
    model state dicts."""

    #: FlashOptim's heuristic lower bound of a step relative to lr (Adam: 0.1; sign/SGD steps: 1)
    _MIN_STEP_RELATIVE_TO_LR = 1.0

    def _new_param_state(self, st: Dict[str, Any]) -> Dict[str, Any]:
        return st if isinstance(st, FlashState) else FlashState(st)

    def _stamp(self, p: torch.Tensor, st: Any) -> None:
        """Gives p's FlashState the float32 keys it answers for p's kernel (FlashState)."""
        if isinstance(st, FlashState):
            shape = tuple(_local(p).shape)
            st._views = {fkey: (ckey, skey, group, scheme, shape)
                         for ckey, skey, group, scheme, fkey in _float_pairs(self, p)}

    def _init_param_state(self, p, group):
        st = super()._init_param_state(p, group)
        self._stamp(p, st)
        return st

    def _init_flash(self, check_numerics: bool, fused: bool, compress_state_dict: bool) -> None:
        self.check_numerics = bool(check_numerics)
        self.fused = bool(fused)   # accepted either way: every qopt step is one fused launch
        self.compress_state_dict = bool(compress_state_dict)
        self._maxabs: Dict[int, float] = {}

    # ---- check_numerics
    def recompute_param_stats(self) -> None:
        """Measures each parameter's largest absolute value (one host sync per parameter; a
        collective for a DTensor) for ``check_numerics``; done at a parameter's first checked step
        and after ``load_state_dict``, otherwise only when called."""
        for group in self.param_groups:
            for p in group["params"]:
                self._measure(p)

    def _measure(self, p: torch.Tensor) -> float:
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        v = float(full.detach().abs().max().item()) if full.numel() else 0.0
        self.__dict__.setdefault("_maxabs", {})[id(p)] = v
        return v

    def _check_param_numerics(self) -> None:
        """FlashOptim's check: the step lr * (0.1 for Adam, 1 otherwise) must reach the resolution
        of the largest weight, 2^(floor(log2 maxabs) - (master bits - 1 - exponent bits) -
        log2(0.49)); a float lr only (a tensor lr is not read: that would be a host sync)."""
        cache = self.__dict__.setdefault("_maxabs", {})
        for gi, group in enumerate(self.param_groups):
            lr = group["lr"]
            if isinstance(lr, torch.Tensor) or lr == 0.0:
                continue
            for p in group["params"]:
                if p.grad is None:
                    continue
                maxabs = cache.get(id(p))
                if maxabs is None:
                    maxabs = self._measure(p)
                if maxabs <= 0 or not math.isfinite(maxabs):
                    continue
                dtype = _local(p).dtype
                width = max(torch.tensor([], dtype=dtype).element_size(),
                            _MASTER_BYTES[self.master_weight_bits] if dtype != torch.float32
                            else 4)
                mant = width * 8 - 1 - _EXP_BITS[dtype] + math.log2(0.49)
                needed = math.floor(math.log2(maxabs)) - mant
                guaranteed = math.log2(lr * self._MIN_STEP_RELATIVE_TO_LR)
                if needed > guaranteed:
                    raise NumericsError(
                        f"{type(self).__name__}: param_groups[{gi}]: learning rate {lr:.3g} "
                        f"yields steps that may be too small to change a {dtype} parameter of "
                        f"shape {list(p.shape)} with a {width * 8}-bit master weight and largest "
                        f"magnitude {maxabs:.6g} (step {2 ** guaranteed:.5g} < resolution "
                        f"{2 ** needed:.5g}); raise the learning rate or master_weight_bits, or "
                        f"set check_numerics=False. Nothing was stepped.")

    @torch.no_grad()
    def _release_step(self, closure=None):
        if getattr(self, "check_numerics", False):
            self._check_param_numerics()
        return super()._release_step(closure)

    # ---- checkpoints: compress_state_dict=False, torch.optim's format
    def _qopt_state_dict(self) -> Dict[str, Any]:
        """(state_dict, inside torch's hooks) With ``compress_state_dict=False`` (FlashOptim's option) every quantized state is given
        dequantized, a float32 tensor of the parameter's shape under FlashOptim's (and torch's) key
        (``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``), beside ``error_bits`` and ``step``: a
        torch.optim optimizer of the same algorithm loads it. Quantized again on load (values
        within half a code step), with the scheme the kernel's manifest gives (8-bit or packed
        4-bit codes, companded or on a 4-bit table)."""
        sd = super()._qopt_state_dict()
        if getattr(self, "compress_state_dict", True):
            return sd
        index = {}
        start = 0
        for g in self.param_groups:
            for i, p in enumerate(g["params"], start):
                index.setdefault(i, p)
            start += len(g["params"])
        for i, st in sd["state"].items():
            sd["state"][i] = _dequantized_state(self, index[i], st)
        return sd

    def _qopt_load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """(load_state_dict, inside torch's hooks) Also loads a plain ``torch.optim`` checkpoint of the same algorithm (AdamW/Adam:
        ``exp_avg``, ``exp_avg_sq``; SGD: ``momentum_buffer``; Lion: ``exp_avg``; float tensors):
        the states are quantized into this optimizer's groups (or kept float32 where its policy
        says so), error bits and a Kahan compensation start at 0 (the master is the parameter), and only the group options
        this optimizer has are taken (``amsgrad=True`` / ``maximize=True`` are refused). A state of
        None values only (torch's SGD without momentum: ``momentum_buffer=None``) is no state yet:
        the parameter starts afresh at its next step, as torch's does."""
        _check_layout(type(self).__name__, state_dict)
        from_torch = _is_torch_optim_state(self, state_dict)
        if from_torch:
            state_dict = _from_torch_optim(self, state_dict)
        self._loading_torch_optim = from_torch
        try:
            super()._qopt_load_state_dict(state_dict)
        finally:
            self._loading_torch_optim = False
        for p, st in self.state.items():
            self._stamp(p, st)
        if getattr(self, "check_numerics", False):
            self.recompute_param_stats()

    def _load_param_state(self, p, group, idx, saved):
        if isinstance(saved, dict):
            saved = _quantized_on_load(self, p, saved)
            if getattr(self, "_loading_torch_optim", False):
                saved = _torch_state_on_load(self, p, saved)
        return super()._load_param_state(p, group, idx, saved)

    # ---- fp32 model state
    def get_fp32_model_state_dict(self, model: torch.nn.Module) -> Dict[str, torch.Tensor]:
        """The model's state_dict in float32, each stepped parameter replaced by its master weight
        (bf16/fp16 + error bits; with ``kahan_sum=True`` ``float32(p) + float32(kahan_comp)``; an
        fp32 parameter or one with neither as it is). Under FSDP2 the local shard's (as
        FlashOptim)."""
        from . import _master_of
        module = model.module if hasattr(model, "module") else model
        out = {k: _local(v).detach().float().clone() for k, v in module.state_dict().items()}
        for name, p in module.named_parameters():
            st = self.state.get(p, {})
            if "error_bits" in st or "kahan_comp" in st:
                out[name] = _master_of(_local(p).detach(), st)
        return out

    @torch.no_grad()
    def set_fp32_model_state_dict(self, model: torch.nn.Module,
                                  fp32_state_dict: Dict[str, torch.Tensor]) -> None:
        """The inverse: each parameter named in `fp32_state_dict` (float32) becomes its rounding to
        the parameter's dtype, and its error bits (where it has them) the rest of the value; a
        Kahan compensation becomes ``bf16(v - float32(p))``, the rest rounded to bf16. A parameter
        of this optimizer that requires grad and has no state yet (before its first step) gets
        its state first, as ``init_state()`` makes it, so that the error bits keep the float32
        value (FlashOptim creates them when missing).

        Refused before anything is written (ValueError): a key that is not in the model's
        state_dict, a parameter's value that is not float32 or not of the parameter's shape (the
        local shard's under FSDP2). Buffers' keys are accepted and left alone."""
        module = model.module if hasattr(model, "module") else model
        groups = {id(p): g for g in self.param_groups for p in g["params"]}
        named = [(name, p) for name, p in module.named_parameters() if name in fp32_state_dict]
        # Every entry checked before any is written, as Module.load_state_dict checks: a refused
        # dict leaves the model and the error bits as they were.
        where = f"{type(self).__name__}.set_fp32_model_state_dict"
        unknown = sorted(set(fp32_state_dict) - set(module.state_dict()))
        if unknown:
            raise ValueError(f"{where}: {unknown[:8]} {'is' if len(unknown) == 1 else 'are'} not in "
                           f"the model's state_dict (get_fp32_model_state_dict's keys); nothing was "
                           f"written")
        for name, p in named:
            v = fp32_state_dict[name]
            if not isinstance(v, torch.Tensor) or v.dtype != torch.float32:
                raise ValueError(f"{where}: '{name}' is "
                                 f"{getattr(v, 'dtype', type(v).__name__)}, expected torch.float32")
            if _local(v).shape != _local(p).shape:
                raise ValueError(f"{where}: '{name}' has shape {list(_local(v).shape)}, the "
                                 f"parameter {list(_local(p).shape)}; nothing was written")
        for name, p in named:
            v = fp32_state_dict[name]
            lp = _local(p)
            v = _local(v).to(lp.device)
            st = self.state.get(p)
            if not st and id(p) in groups and p.requires_grad:
                st = self._init_param_state(p, groups[id(p)])
                self._generation += 1
            st = st or {}
            lp.copy_(v.to(lp.dtype))
            if "error_bits" in st:
                bytes_ = lp.element_size() + st["error_bits"].element_size()
                st["error_bits"].copy_(compute_ecc_bits(v, lp, master_bytewidth=bytes_))
            elif "kahan_comp" in st:
                comp = st["kahan_comp"]
                rest = (v - lp.float()).reshape(comp.shape)
                comp.copy_(rest.to(comp.dtype))


# ------------------------------------------------------------------ float32 form of the state

def _float_pairs(opt, p):
    """[(codes key, scales key, group, scheme, float32 key)] of p's quantized states."""
    from ._reshard import _grouped_keys
    ks = opt._param_kernel_spec(p)
    grouped, _ = _grouped_keys(opt, ks)
    out = []
    for ckey, skey, group, scheme in grouped:
        fkey = opt.STREAM_KEYS32.get(scheme["name"])
        if fkey is not None and scheme["scheme"] == "group":
            out.append((ckey, skey, group, scheme, fkey))
    return out


def _float_of(codes: torch.Tensor, scales: torch.Tensor, group: int, scheme: dict,
              shape) -> torch.Tensor:
    """float32 values of one quantized state (local tensors) of a parameter of `shape`: codes one
    per element, or packed two a byte (a 4-bit scheme in the kernel's form); scales one per group,
    or one per element (the logical form)."""
    from ._reshard import _code_dtype, _group_dequantize, expand, is_packed, unpack_codes
    n = 1
    for d in shape:
        n *= int(d)
    c = codes.reshape(-1)
    if is_packed(scheme) and c.numel() == (n + 1) // 2 and (
            c.numel() != n or c.dtype != _code_dtype(scheme)):
        c = unpack_codes(c, n, scheme)
    sc = scales.reshape(-1)
    if sc.numel() != n:        # the kernel's own form: one scale per group
        sc = expand(sc, group, n)
    return _group_dequantize(c, sc, scheme).reshape(shape)


def _dequantized_state(opt, p, st: Dict[str, Any]) -> Dict[str, Any]:
    from ._reshard import is_dtensor, dtensor_class
    st = dict(st)
    shape = tuple(_local(p).shape)
    for ckey, skey, group, scheme, fkey in _float_pairs(opt, p):
        if ckey not in st:
            continue
        c, s = st.pop(ckey), st.pop(skey)
        wrap = is_dtensor(c)
        lc = c.to_local() if wrap else c
        ls = s.to_local() if is_dtensor(s) else s
        x = _float_of(lc, ls, group, scheme, shape)
        if wrap:
            x = dtensor_class().from_local(x, c.device_mesh, c.placements, run_check=False,
                                           shape=c.shape, stride=c.stride())
        st[fkey] = x
    return st


def _quantized_on_load(opt, p, saved: Dict[str, Any]) -> Dict[str, Any]:
    """A saved float32 state (compress_state_dict=False, torch.optim) quantized into p's groups
    with the kernel's formulas and the scheme its manifest gives (4-bit codes packed two a byte);
    missing error bits and a missing Kahan compensation start at 0 (the master is the parameter)."""
    from ._reshard import _group_quantize, is_dtensor, is_packed, pack_codes
    # (a float state beside its quantized keys is left to the key check, which refuses it)
    pairs = [e for e in _float_pairs(opt, p) if e[4] in saved and e[0] not in saved
             and e[1] not in saved]
    if not pairs:
        return saved
    out = dict(saved)
    lp = _local(p)
    n = lp.numel()
    for ckey, skey, group, scheme, fkey in pairs:
        x = out.pop(fkey, None)
        if x is None:
            continue
        if is_dtensor(x):
            x = x.to_local()
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() != n:
            raise ValueError(f"{type(opt).__name__}.load_state_dict: '{fkey}' must be a float "
                             f"tensor of the parameter's {n} elements, got "
                             f"{getattr(x, 'dtype', type(x).__name__)} of shape "
                             f"{list(getattr(x, 'shape', []))}")
        ng = -(-n // group)
        rows = torch.zeros(ng * group, dtype=torch.float32, device=lp.device)
        rows[:n] = x.reshape(-1).to(device=lp.device, dtype=torch.float32)
        sdt = torch.float16 if scheme.get("scale_dtype", "f16") == "f16" else torch.float32
        q, sc = _group_quantize(rows.view(ng, group), scheme, sdt)
        q = q.reshape(-1)[:n]
        out[ckey] = pack_codes(q, n) if is_packed(scheme) else q.reshape(lp.shape).clone()
        out[skey] = sc
    expected = opt._expected_state(p, opt._param_kernel_spec(p))
    for key in ("error_bits", "kahan_comp"):
        # the master is the parameter: zero error bits, a zero Kahan compensation
        if key in expected and key not in out:
            shape, dtype, _ = expected[key]
            out[key] = torch.zeros(shape, dtype=dtype, device=lp.device)
    # the rest of a DTensor state as its local shard (the quantized states are this shard's now)
    return {k: (v.to_local() if is_dtensor(v) else v) for k, v in out.items()}


def _torch_state_on_load(opt, p, saved: Dict[str, Any]) -> Dict[str, Any]:
    """A torch.optim checkpoint's state of p as p's kernel keeps it, also where the kernel keeps
    float32 states (``quantize=False``, ``min_8bit_size``, overrides), which _quantized_on_load
    leaves as they are: torch keeps its states in the parameter's dtype (bf16, fp16), the kernel in
    float32, so they are widened (exactly); missing error bits and a missing Kahan compensation
    start at 0 (the master is the parameter)."""
    expected = opt._expected_state(p, opt._param_kernel_spec(p))
    out = dict(saved)
    for key, v in saved.items():
        want = expected.get(key)
        if (want is not None and isinstance(v, torch.Tensor) and v.is_floating_point()
                and want[1].is_floating_point and v.dtype != want[1]):
            out[key] = v.to(want[1])
    lp = _local(p)
    for key in ("error_bits", "kahan_comp"):
        if key in expected and key not in out:
            shape, dtype, _ = expected[key]
            out[key] = torch.zeros(shape, dtype=dtype, device=lp.device)
    return out


_TORCH_KEYS = {"exp_avg", "exp_avg_sq", "momentum_buffer", "step"}


def _is_torch_optim_state(opt, sd: Any) -> bool:
    """A state_dict without qopt's record or kernel markers whose states hold only torch.optim's
    keys (and error_bits)."""
    if not isinstance(sd, dict) or "qopt" in sd or not isinstance(sd.get("param_groups"), list):
        return False
    if any(isinstance(g, dict) and "_qopt_kernel" in g for g in sd["param_groups"]):
        return False
    states = sd.get("state", {})
    keys = set().union(*[set(s) for s in states.values() if isinstance(s, dict)]) if states else set()
    allowed = set(opt.STREAM_KEYS32.values()) | {"step", "max_exp_avg_sq"}   # (amsgrad: refused)
    return keys <= allowed and bool(keys & (_TORCH_KEYS - {"step"}) or not states)


def _from_torch_optim(opt, sd: Dict[str, Any]) -> Dict[str, Any]:
    name = type(opt).__name__
    groups = []
    for gi, (g, sg) in enumerate(zip(opt.param_groups, sd["param_groups"])):
        for flag in ("amsgrad", "maximize"):
            if sg.get(flag):
                raise ValueError(f"{name}.load_state_dict: param_groups[{gi}] of the torch.optim "
                                 f"checkpoint has {flag}=True, which {name} does not do")
        ng = {k: v for k, v in sg.items() if k in g and k != "params"}
        ng["params"] = sg["params"]
        ng["_qopt_kernel"] = g["_qopt_kernel"]
        groups.append(ng)
    if len(sd["param_groups"]) != len(opt.param_groups):
        groups = sd["param_groups"]     # refused by load_state_dict's group count check
    state = {}
    for i, st in sd["state"].items():
        if not isinstance(st, dict):
            state[i] = st         # refused by the state check, naming the parameter
            continue
        st = {k: v for k, v in st.items() if v is not None}
        if not any(k != "step" for k in st) and len(st) < len(sd["state"][i]):
            # torch.optim.SGD with momentum 0 keeps momentum_buffer=None: no state yet. The
            # parameter starts afresh at its next step, whose first-step rule sets the buffer to
            # the gradient, as torch's SGD does with a None buffer.
            continue
        if "step" not in st:
            # torch.optim.SGD keeps no count: its state is at least one step old, and SGD's update
            # reads the count only to start the buffer at the first step (the count itself is
            # checked by the state check: a non-negative integer)
            st["step"] = torch.tensor(1, dtype=torch.int64)
        state[i] = st
    return {"state": state, "param_groups": groups}


# ------------------------------------------------------------------ error bits

_NMAX = {1: 127, 2: 32767}
_MBITS = {torch.bfloat16: (7, 127), torch.float16: (10, 15)}


def reconstruct_fp32_param(param: torch.Tensor, error_bits: torch.Tensor) -> torch.Tensor:
    """float32 master weight from a bf16/fp16 parameter and its int8/int16 error bits
    (numerics.md section 3; bit-identical to qopt_error_bits_decode and to the kernels)."""
    if param.dtype == torch.float32:
        raise ValueError("reconstruct_fp32_param: the parameter is float32 already (error bits "
                         "complete only bf16 or fp16 parameters)")
    if param.dtype not in _MBITS:
        raise ValueError(f"reconstruct_fp32_param: parameter dtype {param.dtype}; bf16 or fp16")
    if error_bits.dtype not in (torch.int8, torch.int16):
        raise ValueError(f"reconstruct_fp32_param: error_bits dtype {error_bits.dtype}; int8 or "
                         f"int16")
    return ecc.decode(param, error_bits)


def _pow2(k: torch.Tensor) -> torch.Tensor:
    return ((k + 127) << 23).view(torch.float32)


def compute_ecc_bits(fp32_param: torch.Tensor, narrow_param: torch.Tensor,
                     master_bytewidth: int = 4) -> torch.Tensor:
    """Error bits that complete `narrow_param` (bf16/fp16, the rounding of `fp32_param`) to the
    float32 value: int8 for a 3-byte (24-bit) master, int16 for a 4-byte one (numerics.md
    section 3 encode; bit-identical to qopt_error_bits_init). Non-finite values get 0."""
    if fp32_param.dtype != torch.float32:
        raise ValueError(f"compute_ecc_bits: fp32_param is {fp32_param.dtype}, expected float32")
    if narrow_param.dtype not in _MBITS:
        raise ValueError(f"compute_ecc_bits: narrow_param is {narrow_param.dtype}; bf16 or fp16")
    nbytes = master_bytewidth - narrow_param.element_size()
    if nbytes not in _NMAX:
        raise ValueError(f"compute_ecc_bits: master_bytewidth={master_bytewidth} with a "
                         f"{narrow_param.element_size()}-byte parameter leaves {nbytes} bytes of "
                         f"error bits; 1 or 2 (master_bytewidth 3 or 4)")
    mbits, bias = _MBITS[narrow_param.dtype]
    x16 = narrow_param.detach().contiguous().reshape(-1)
    x32 = fp32_param.detach().contiguous().reshape(-1).to(x16.device)
    p = x16.float()
    e = x32 - p
    bits = x16.view(torch.int16).to(torch.int32) & 0x7FFF
    field = bits >> mbits
    E = torch.where(field == 0, torch.full_like(field, 1 - bias), field - bias)
    l = E - mbits - 1
    h = torch.div(-l, 2, rounding_mode="floor")
    ok = torch.isfinite(p) & torch.isfinite(x32)
    h = torch.where(ok, h, torch.zeros_like(h))
    rest = torch.where(ok, -l - h, torch.zeros_like(l))
    en = (e * _pow2(h)) * _pow2(rest)
    nmax = _NMAX[nbytes]
    s = en.clamp(-1.0, 1.0) * float(nmax)
    r = torch.floor(s.abs() + 0.5) * torch.sign(s)
    r = torch.where(ok & ~torch.isnan(r), r, torch.zeros_like(r))
    dtype = torch.int8 if nbytes == 1 else torch.int16
    return r.to(dtype).reshape(narrow_param.shape)


# ------------------------------------------------------------------ cast_model

_RUNNING_STAT_NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d,
                       torch.nn.SyncBatchNorm, torch.nn.InstanceNorm1d, torch.nn.InstanceNorm2d,
                       torch.nn.InstanceNorm3d)


def _matches(name: str, module: torch.nn.Module, specs) -> bool:
    return any(module is s if isinstance(s, torch.nn.Module) else fnmatch.fnmatch(name, s)
               for s in specs)


def _cast_key(t: torch.Tensor) -> Any:
    """What makes two tensors the same tensor: one storage seen at one offset with one size,
    stride and dtype (a zero-size tensor holds no memory: it is only itself)."""
    if t.numel() == 0:
        return ("empty", id(t))
    return (t.device, t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)


def cast_model(model: torch.nn.Module, dtype: torch.dtype = torch.bfloat16,
               selective: bool = True,
               full_precision_layers: Optional[List[Union[str, torch.nn.Module]]] = None,
               full_precision_recast_layers: Optional[List[Union[str, torch.nn.Module]]] = None
               ) -> None:
    """Casts a model's floating parameters and buffers to `dtype` in place (FlashOptim's
    ``cast_model``): with `selective`, norms with running statistics (BatchNorm, InstanceNorm) stay
    float32; modules matched by `full_precision_layers` (fnmatch patterns on module names, or the
    modules) stay float32 and get their inputs cast to float32, those of
    `full_precision_recast_layers` also their outputs cast back to `dtype` (either kind is marked,
    as by FlashOptim, with ``module._has_fp32_input_hook = True``). Tied parameters stay tied."""
    keep = list(full_precision_layers or [])
    recast = list(full_precision_recast_layers or [])
    kept_modules = {id(m) for n, m in model.named_modules() if _matches(n, m, keep + recast)}
    kept_ids = set()
    for n, m in model.named_modules():
        if id(m) in kept_modules:
            kept_ids.update(id(t) for t in m.parameters())
            kept_ids.update(id(t) for t in m.buffers())
    cast: Dict[Any, torch.Tensor] = {}
    for m in model.modules():
        if selective and isinstance(m, _RUNNING_STAT_NORMS):
            continue
        for t in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False)):
            if id(t) in kept_ids or not t.is_floating_point():
                continue
            # tensors that are the same memory seen the same way (tied parameters) share one
            # cast; any other view keeps its own shape, stride and values
            key = _cast_key(t)
            if key not in cast:
                cast[key] = t.data.to(dtype)
            t.data = cast[key]

    def to_fp32(module, args):
        return tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                     for a in args)

    def back(module, args, out):
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            return out.to(dtype)
        if isinstance(out, tuple):
            return tuple(o.to(dtype) if isinstance(o, torch.Tensor) and o.is_floating_point()
                         else o for o in out)
        return out

    for n, m in model.named_modules():
        if id(m) in kept_modules and not getattr(m, "_qopt_fp32_hooks", False):
            m.register_forward_pre_hook(to_fp32)
            if _matches(n, m, recast):
                m.register_forward_hook(back)
            m._qopt_fp32_hooks = True
            m._has_fp32_input_hook = True       # FlashOptim's marker of such a module

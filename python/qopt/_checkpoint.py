"""The checkpoints of a QoptOptimizer: state_dict and load_state_dict in PyTorch's layout plus a
"qopt" record, and the check of one parameter's state against what its kernel needs (also used when
a trainer replaces a state tensor between steps). The mesh-independent form of a DTensor
parameter's state (DCP, FSDP2) is _reshard.py's.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict

import torch

from . import _capi as C
from . import _reshard
from ._launch import _local, _size_error

#: param group key of the lr a group had when it was added (decouple_lr's reference); torch's
#: "initial_lr" is left to its schedulers
_INITIAL_LR = "_qopt_initial_lr"

#: param group key of the kernel's name (checked by load_state_dict, also where DCP dropped the
#: state_dict's "qopt" record)
_KERNEL_KEY = "_qopt_kernel"

STATE_FORMAT = "qopt-optimizer-state"
STATE_FORMAT_VERSION = 1


def _group_error(e: BaseException, cls: str, where: str, after: str) -> BaseException:
    """The error `e` of a param group check (PyTorch's wording, or "<cls>: ..."), of the same type,
    saying which group (`where`) and what was not done (`after`)."""
    msg = str(e)
    if msg.startswith(cls + ": "):
        msg = msg[len(cls) + 2:]
    return type(e)(f"{where}: {msg}; {after}")


def _check_layout(name: str, state_dict: Any) -> None:
    """PyTorch's state_dict layout: a dict with 'state' (a dict) and 'param_groups' (a list of
    dicts, each with 'params'); anything else is refused naming what is missing."""
    if not isinstance(state_dict, dict):
        raise TypeError(f"{name}.load_state_dict: a state_dict is a dict with 'state' and "
                        f"'param_groups', got {type(state_dict).__name__}")
    for key, kind in (("state", dict), ("param_groups", list)):
        if key not in state_dict:
            raise ValueError(f"{name}.load_state_dict: the state_dict has no '{key}' (PyTorch's "
                             f"layout: 'state' and 'param_groups'); nothing was loaded")
        if not isinstance(state_dict[key], kind):
            raise ValueError(f"{name}.load_state_dict: the state_dict's '{key}' is a "
                             f"{type(state_dict[key]).__name__}, expected a {kind.__name__}; "
                             f"nothing was loaded")
    for gi, g in enumerate(state_dict["param_groups"]):
        if not isinstance(g, dict) or "params" not in g:
            raise ValueError(f"{name}.load_state_dict: param_groups[{gi}] has no 'params' (the "
                             f"indices of its parameters in 'state'); nothing was loaded")


def _hooks(opt, kind: str):
    """torch.optim.Optimizer's hooks of `kind` on `opt` (its ``_optimizer_<kind>_hooks``
    dictionary, torch >= 2.1; none on older torch)."""
    return list(opt.__dict__.get(f"_optimizer_{kind}_hooks", {}).values())


class _Checkpoints:
    """Mixin of QoptOptimizer (_base.py): its checkpoints. It uses the optimizer's kernel specs
    (_kernel_spec, _param_kernel_spec), its expected state layout (_expected_state), its codebook
    tables (_table_keys, _device_tables) and its step cache (_cache, _generation)."""

    def state_dict(self) -> Dict[str, Any]:
        """PyTorch's layout ({"state", "param_groups"}) plus a "qopt" record with the format
        version and the kernel. The quantized state is kept as it is (codes, scales or absmax,
        error bits, the codebook tables, the step); tensors are referenced, not copied. torch's
        state_dict pre- and post-hooks (``register_state_dict_pre_hook``, torch >= 2.1) run
        before and after, as torch.optim runs them: a post-hook may return a new dict."""
        for hook in _hooks(self, "state_dict_pre"):
            hook(self)
        sd = self._qopt_state_dict()
        for hook in _hooks(self, "state_dict_post"):
            returned = hook(self, sd)
            if returned is not None:
                sd = returned
        return sd

    def _qopt_state_dict(self) -> Dict[str, Any]:
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
        state = {}
        for p, s in self.state.items():
            if id(p) in mapping and s:
                # a DTensor (FSDP2) parameter's state in the mesh-independent form, as DTensors
                # like the parameter (DCP; _reshard.py)
                state[mapping[id(p)]] = (_reshard.logical_state(self, p, s)
                                         if _reshard.is_dtensor(p) else dict(s))
        ks = self._kernel_spec(C.BACKEND_HOST)
        return {"state": state, "param_groups": groups,
                "qopt": {"format": STATE_FORMAT, "version": STATE_FORMAT_VERSION,
                         "optimizer": type(self).__name__, "kernel": ks.kernel, "spec": self._spec}}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Loads a state_dict of this optimizer class and kernel. Every state tensor must have the
        shape and dtype the kernel expects; anything else is refused with a ValueError (nothing is
        loaded then). Tensors are copied to the parameter's device; the dict is not modified.
        torch's load_state_dict pre-hooks (torch >= 2.1) are given a shallow copy of it first and
        may return another; its post-hooks run once it is loaded."""
        if isinstance(state_dict, dict):
            state_dict = state_dict.copy()
        for hook in _hooks(self, "load_state_dict_pre"):
            returned = hook(self, state_dict)
            if returned is not None:
                state_dict = returned
        self._qopt_load_state_dict(state_dict)
        for hook in _hooks(self, "load_state_dict_post"):
            hook(self)

    def _qopt_load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        name = type(self).__name__
        _check_layout(name, state_dict)
        meta = state_dict.get("qopt")
        ks_host = self._kernel_spec(C.BACKEND_HOST)
        saved_groups = state_dict.get("param_groups")
        marked = (isinstance(saved_groups, list) and saved_groups
                  and all(isinstance(g, dict) and _KERNEL_KEY in g for g in saved_groups))
        if meta is None and marked:
            # through torch.distributed.checkpoint, which keeps "state" and "param_groups" only:
            # the groups' kernel marker stands for the record
            kernels = sorted({str(g[_KERNEL_KEY]) for g in saved_groups})
            if kernels != [ks_host.kernel]:
                raise ValueError(f"{name}.load_state_dict: the state was saved with kernel "
                                 f"{', '.join(kernels)}, this optimizer uses kernel "
                                 f"{ks_host.kernel}; their states differ")
        else:
            if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
                raise ValueError(f"{name}.load_state_dict: not a qopt optimizer state (no 'qopt' "
                                 f"record with format '{STATE_FORMAT}', nor param groups with "
                                 f"'{_KERNEL_KEY}'); qopt loads its own checkpoints, and a Flash "
                                 f"optimizer a torch.optim checkpoint of its own algorithm "
                                 f"(python/README.md, \"FlashOptim's API\")")
            if meta.get("version") != STATE_FORMAT_VERSION:
                raise ValueError(f"{name}.load_state_dict: state format version "
                                 f"{meta.get('version')} is not supported (this qopt reads version "
                                 f"{STATE_FORMAT_VERSION})")
            if meta.get("kernel") != ks_host.kernel:
                raise ValueError(f"{name}.load_state_dict: the state was saved by "
                                 f"{meta.get('optimizer')} with kernel {meta.get('kernel')}, this "
                                 f"optimizer uses kernel {ks_host.kernel}; their states differ")
        groups = self.param_groups
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match "
                                 "the size of optimizer's group")
        # every loaded group checked as add_param_group checks a new one (its options and
        # hyperparameters), before anything is loaded
        for gi, (g, sg) in enumerate(zip(groups, saved_groups)):
            merged = dict(g)
            merged.update((k, v) for k, v in sg.items() if k != "params")
            self._check_loaded_group(gi, merged)
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
            self.state[p] = self._new_param_state(st)
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

    def _check_loaded_group(self, gi: int, group: Dict[str, Any]) -> None:
        """A loaded param group (the optimizer's group with the saved values) refused where
        add_param_group would refuse it, or where a hyperparameter is one the kernel cannot take
        (NaN, infinite, or infinite in float32): the error names the group."""
        where = f"{type(self).__name__}.load_state_dict: param_groups[{gi}]"
        try:
            self._check_group_options(group)
            self._validate_group(group)
        except (ValueError, TypeError, NotImplementedError) as e:
            raise _group_error(e, type(self).__name__, where, "nothing was loaded") from None
        if group["params"]:
            try:
                hv = self._kernel_hypers(group)
            except (ValueError, TypeError, KeyError) as e:
                raise ValueError(f"{where}: its values do not give the kernel's "
                                 f"hyperparameters ({type(e).__name__}: {e}); nothing was "
                                 f"loaded") from None
            self._check_hyper_values(hv, where, "nothing was loaded")

    def _load_param_state(self, p, group, idx, saved: Dict[str, Any]) -> Dict[str, Any]:
        where = (f"{type(self).__name__}.load_state_dict: parameter {idx} "
                 f"(shape {list(_local(p).shape)})")
        if _reshard.is_logical(self, p, saved):
            # the mesh-independent form (state_dict of a DTensor parameter, DCP): this shard's
            # elements, regrouped
            saved = _reshard.local_state(self, p, saved, where)
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
        ks = self._param_kernel_spec(p)
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
                if (b.per != C.PER_ELEMENT and t.is_floating_point() and t.numel()
                        and not bool(torch.isfinite(t).all())):
                    # a kernel stores a group's scale (absmax) saturated, never inf or NaN: such
                    # a value would make every code of its group NaN or inf
                    raise ValueError(f"{where}: '{key}' holds NaN or infinite values; the kernel "
                                     f"{ks.kernel} keeps every scale finite (a corrupt "
                                     f"checkpoint?)")
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
            value = step.item() if isinstance(step, torch.Tensor) else step
            step_val = int(value)
            # an integer count (2.5 is not one: truncating it would resume at another step)
            bad = (step_val < 0 or isinstance(value, bool)
                   or not isinstance(value, numbers.Real) or float(value) != step_val)
        except (TypeError, ValueError, RuntimeError, OverflowError):
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

"""Per-parameter state policy: which parameters keep 8-bit (quantized) state and which float32.

- ``min_8bit_size`` (bitsandbytes): a parameter with fewer elements keeps float32 state. The count is
  the parameter's own (``p.numel()``: for an FSDP2 DTensor the global tensor's, never the local
  shard's), so every rank of every mesh decides alike (bitsandbytes #2080 decided from the shard).
- ``quantize=False`` (FlashOptim): every parameter keeps float32 state.
- overrides: ``optimizer.override_config(params, "optim_bits", 32)`` (bitsandbytes'
  ``GlobalOptimManager.override_config``; also ``quantize=False``), by module type
  (``override_module_type``) or by parameter name (``override_by_name``, fnmatch patterns on the
  model's names), and bitsandbytes' process-wide ``GlobalOptimManager``.

A float32-state parameter steps with the spec's float32-state kernel (``specs/*_state32.qopt``,
``adamw_state32.qopt``); parameters of one group, dtype and policy share one launch, so a group takes
at most one launch per kernel variant, not one per parameter. Set the policy before the first step:
a parameter whose state exists keeps its layout (a state of the other layout is refused at the step,
naming the keys).
"""

from __future__ import annotations

import fnmatch
import weakref
from typing import Any, Dict, Iterable, Optional

import torch

#: spec stem -> its float32-state spec
STATE32_SPECS = {
    "flash_adamw": "flash_adamw_state32",
    "flash_adamw_ecc16": "flash_adamw_ecc16_state32",
    "flash_adamw_bf16": "flash_adamw_bf16_state32",
    "flash_adam": "flash_adam_state32",
    "flash_sgd": "flash_sgd_state32",
    "flash_sgdw": "flash_sgdw_state32",
    "flash_lion": "flash_lion_state32",
    "flash_adam_ecc16": "flash_adam_ecc16_state32",
    "flash_adam_bf16": "flash_adam_bf16_state32",
    "flash_sgd_ecc16": "flash_sgd_ecc16_state32",
    "flash_sgd_bf16": "flash_sgd_bf16_state32",
    "flash_sgdw_ecc16": "flash_sgdw_ecc16_state32",
    "flash_sgdw_bf16": "flash_sgdw_bf16_state32",
    "flash_lion_ecc16": "flash_lion_ecc16_state32",
    "flash_lion_bf16": "flash_lion_bf16_state32",
    "adamw8bit_block256": "adamw_state32",
    "adamw8bit_block2048": "adamw_state32",
    "rmsprop8bit": "rmsprop_state32",
    "adagrad8bit": "adagrad_state32",
    "lion8bit": "lion_state32",
    "ademamix8bit": "ademamix_state32",
    "lamb8bit": "lamb_state32",
    "lars8bit": "lars_state32",
}
#: the optimizer names (kernel name before any variant suffix) of those specs
STATE32_KERNELS = {"FlashAdamWState32", "FlashAdamWEcc16State32", "FlashAdamWBf16State32",
                   "FlashAdamState32", "FlashSGDState32", "FlashSGDWState32", "FlashLionState32",
                   "AdamWState32", "FlashSGDEcc16State32", "FlashSGDBf16State32",
                   "FlashSGDWEcc16State32", "FlashSGDWBf16State32", "FlashLionEcc16State32",
                   "FlashLionBf16State32", "FlashAdamEcc16State32", "FlashAdamBf16State32",
                   "RMSpropState32", "AdagradState32", "LionState32", "AdEMAMixState32",
                   "LAMB", "LARS"}

#: the override keys: bitsandbytes' optim_bits (8 or 32) and FlashOptim's quantize (bool)
_KEYS = ("optim_bits", "quantize")


def _check_config(config: Dict[str, Any], who: str) -> Dict[str, Any]:
    if not isinstance(config, dict):
        raise TypeError(f"{who}: a config is a dict, got {type(config).__name__}")
    unknown = [k for k in config if k not in _KEYS]
    if unknown:
        raise ValueError(f"{who}: override key {', '.join(map(repr, unknown))} is not supported; "
                         f"the keys are {', '.join(map(repr, _KEYS))} (per-parameter "
                         f"hyperparameters go in a param group)")
    if "optim_bits" in config and config["optim_bits"] not in (8, 32):
        raise ValueError(f"{who}: optim_bits={config['optim_bits']!r}; 8 or 32")
    if "quantize" in config and not isinstance(config["quantize"], bool):
        raise ValueError(f"{who}: quantize={config['quantize']!r}; True or False")
    return dict(config)


def _params(parameters) -> list:
    if isinstance(parameters, torch.Tensor):
        return [parameters]
    return list(parameters)


class _Overrides:
    """Parameter -> config, by identity (held weakly)."""

    def __init__(self):
        self._by_id: Dict[int, tuple] = {}

    def set(self, p: torch.Tensor, config: Dict[str, Any]) -> None:
        ref = weakref.ref(p)
        old = self._by_id.get(id(p))
        merged = dict(old[1]) if old is not None and old[0]() is p else {}
        merged.update(config)
        self._by_id[id(p)] = (ref, merged)

    def get(self, p: torch.Tensor) -> Optional[Dict[str, Any]]:
        e = self._by_id.get(id(p))
        return e[1] if e is not None and e[0]() is p else None


def _changed(owner) -> None:
    """An optimizer's launches are rebuilt at its next step after its policy changed (a parameter
    whose state exists in the other layout is then refused, naming the keys)."""
    if hasattr(owner, "_generation"):
        owner._generation += 1


def _override_api(owner: str):
    """override_config / register_module_override / override_module_type / override_by_name on
    an _Overrides held as self._overrides."""

    def override_config(self, parameters, key: Optional[str] = None, value: Any = None,
                        key_value_dict: Optional[Dict[str, Any]] = None) -> None:
        """bitsandbytes' override_config: ``(params, "optim_bits", 32)`` or
        ``(params, key_value_dict={"optim_bits": 32})``; FlashOptim's ``("quantize", False)``."""
        config = dict(key_value_dict or {})
        if key is not None:
            config[key] = value
        config = _check_config(config, f"{owner}.override_config")
        for p in _params(parameters):
            self._overrides.set(p, config)
        _changed(self)

    def register_module_override(self, module: torch.nn.Module, param_name: str,
                                 config: Dict[str, Any]) -> None:
        """bitsandbytes' register_module_override: ``module.<param_name>`` gets `config`."""
        config = _check_config(config, f"{owner}.register_module_override")
        p = getattr(module, param_name, None)
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"{owner}.register_module_override: {type(module).__name__} has no "
                             f"parameter '{param_name}'")
        self._overrides.set(p, config)
        _changed(self)

    def override_module_type(self, model: torch.nn.Module, module_types,
                             config: Dict[str, Any]) -> int:
        """Every parameter of every submodule of `model` of one of `module_types` (its own
        parameters, e.g. an Embedding's weight) gets `config`; returns how many."""
        config = _check_config(config, f"{owner}.override_module_type")
        types = tuple(module_types) if isinstance(module_types, (list, tuple)) else (module_types,)
        n = 0
        for m in model.modules():
            if isinstance(m, types):
                for p in m.parameters(recurse=False):
                    self._overrides.set(p, config)
                    n += 1
        _changed(self)
        return n

    def override_by_name(self, model: torch.nn.Module, pattern: str,
                         config: Dict[str, Any]) -> int:
        """Every parameter of `model` whose name (``model.named_parameters()``, the global name
        under FSDP2) matches the fnmatch `pattern` gets `config`; returns how many."""
        config = _check_config(config, f"{owner}.override_by_name")
        n = 0
        for name, p in model.named_parameters():
            if fnmatch.fnmatchcase(name, pattern):
                self._overrides.set(p, config)
                n += 1
        _changed(self)
        return n

    return override_config, register_module_override, override_module_type, override_by_name


class GlobalOptimManager:
    """bitsandbytes' process-wide override registry: ``GlobalOptimManager.get_instance()
    .override_config(model.fc1.weight, "optim_bits", 32)``; every qopt optimizer consults it (its
    own overrides first). ``register_parameters`` is accepted (qopt keys parameters by identity,
    which ``model.cuda()`` keeps)."""

    _instance: Optional["GlobalOptimManager"] = None

    def __init__(self):
        self._overrides = _Overrides()

    @classmethod
    def get_instance(cls) -> "GlobalOptimManager":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def initialize(self) -> None:
        self._overrides = _Overrides()

    def register_parameters(self, params: Iterable) -> None:
        for _ in _params(params):
            pass

    (override_config, register_module_override, override_module_type,
     override_by_name) = _override_api("GlobalOptimManager")


class PolicyMixin:
    """Per-parameter 8-bit / float32 state for a QoptOptimizer (see the module's docstring).
    Subclasses set STREAM_KEYS32 (the float32-state kernel's stream names -> state keys)."""

    STREAM_KEYS32: Dict[str, str] = {}

    def _init_policy(self, quantize: bool, min_8bit_size: int) -> None:
        if not isinstance(min_8bit_size, int) or isinstance(min_8bit_size, bool) or min_8bit_size < 0:
            raise ValueError(f"{type(self).__name__}: min_8bit_size={min_8bit_size!r}; a "
                             f"non-negative int")
        self.quantize = quantize
        self.min_8bit_size = min_8bit_size
        self._overrides = _Overrides()

    (override_config, register_module_override, override_module_type,
     override_by_name) = _override_api("optimizer")

    def _state32_spec(self) -> str:
        spec = STATE32_SPECS.get(self._spec)
        if spec is None:
            raise ValueError(f"{type(self).__name__}: spec '{self._spec}' has no float32-state "
                             f"kernel (quantize=False, optim_bits=32, min_8bit_size)")
        return spec

    def _config_of(self, p) -> Dict[str, Any]:
        own = self._overrides.get(p) if hasattr(self, "_overrides") else None
        glob = GlobalOptimManager.get_instance()._overrides.get(p)
        out = dict(glob or {})
        out.update(own or {})
        return out

    def uses_8bit_state(self, p: torch.Tensor) -> bool:
        """Whether p keeps quantized state: not if the optimizer has quantize=False, an override
        says optim_bits=32 or quantize=False, or p (the whole parameter, not a shard) has fewer
        than min_8bit_size elements."""
        cfg = self._config_of(p)
        if "quantize" in cfg:
            quantize = cfg["quantize"]
        elif "optim_bits" in cfg:
            quantize = cfg["optim_bits"] == 8
        else:
            quantize = getattr(self, "quantize", True)
        return quantize and p.numel() >= getattr(self, "min_8bit_size", 0)

    def _spec_of(self, p) -> str:
        return self._spec if self.uses_8bit_state(p) else self._state32_spec()

    def _stream_key_table(self, ks) -> Dict[str, str]:
        if ks.kernel.split("_")[0] in STATE32_KERNELS:
            return self.STREAM_KEYS32
        return self.STREAM_KEYS

    def _table_key_table(self, ks) -> Dict[str, str]:
        return {} if ks.kernel.split("_")[0] in STATE32_KERNELS else self.TABLE_KEYS

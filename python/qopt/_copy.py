"""Copies and pickles of an optimizer (copy.deepcopy, pickle): what they keep and how a copy is
made whole again (its caches, kernels and per-parameter overrides). A mixin of QoptOptimizer,
which names the attributes not copied (``_NOT_COPIED``)."""

from __future__ import annotations

import copy
from typing import Any, Dict

from ._state import _TrackedState


class _Copies:
    def _copied_state(self) -> Dict[str, Any]:
        """What copy.deepcopy and pickle keep: every attribute the optimizer was given or counted
        (its options such as ``max_grad_norm``, ``skip_nonfinite``, ``state_dtype``, its counters,
        ``process_group``), torch's ``defaults`` / ``state`` / ``param_groups``, and each
        parameter's effective per-parameter config (override_config, GlobalOptimManager) by its
        position (group, index), as bitsandbytes keeps overrides: the copy's parameters are new
        objects, so overrides by identity would not reach them while the state keeps its
        layout."""
        d = {k: v for k, v in self.__dict__.items()
             if k not in self._NOT_COPIED and not k.startswith("_optimizer_")}
        d.update(super().__getstate__() or {})
        if hasattr(self, "_config_of"):
            d["_override_positions"] = [
                (gi, pi, cfg) for gi, g in enumerate(self.param_groups)
                for pi, p in enumerate(g["params"]) if (cfg := self._config_of(p))]
        return d

    def __getstate__(self):
        if self.__dict__.get("process_group") is not None:
            raise TypeError(f"{type(self).__name__}: an optimizer with a process_group cannot be "
                            f"pickled (a process group belongs to its processes); save "
                            f"state_dict() instead, or copy.deepcopy it (the copy shares the "
                            f"group)")
        return self._copied_state()

    def __deepcopy__(self, memo):
        # The copy shares the process group (a communicator, not data) and copies the rest.
        pg = self.__dict__.get("process_group")
        if pg is not None:
            memo.setdefault(id(pg), pg)
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self._copied_state(), memo))
        return new

    def __setstate__(self, state):
        state = dict(state)
        positions = state.pop("_override_positions", [])
        super().__setstate__(state)
        if type(self.state) is not _TrackedState:
            self.state = _TrackedState(dict, self.state)
        self._cache = {}
        self._tables_dev = {}
        self._checked_groups = {}
        self._memory_checked = set()
        if hasattr(self, "min_8bit_size"):
            from ._policy import _Overrides
            self._overrides = _Overrides()
            for gi, pi, cfg in positions:
                self._overrides.set(self.param_groups[gi]["params"][pi], dict(cfg))
        self._init_kernels()
        self._generation = getattr(self, "_generation", 0) + 1
        self._tables_host = None

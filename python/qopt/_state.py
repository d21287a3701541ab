"""``optimizer.state`` as the optimizers keep it: a dict whose version every change of its keys
bumps, so that a step checks its launches' per-parameter dicts in O(1)."""

from __future__ import annotations

import collections


class _TrackedState(collections.defaultdict):
    """``optimizer.state`` with a version that every change of its keys bumps (a parameter's state
    dict added, removed or replaced), so that a step sees in O(1) that the per-parameter dicts
    are the ones its launches took, instead of looking every parameter up (a tensor's hash is a
    Python call). Changes inside a parameter's dict are seen by identity (_Launch.check)."""

    def __init__(self, default_factory=dict, *args):
        super().__init__(default_factory, *args)
        self.version = 0

    def __setitem__(self, key, value):
        self.version += 1
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self.version += 1
        super().__delitem__(key)

    def pop(self, *args):
        self.version += 1
        return super().pop(*args)

    def popitem(self):
        self.version += 1
        return super().popitem()

    def clear(self):
        self.version += 1
        super().clear()

    def update(self, *args, **kwargs):
        self.version += 1
        super().update(*args, **kwargs)

    def setdefault(self, key, default=None):
        self.version += 1
        return super().setdefault(key, default)

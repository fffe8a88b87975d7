"""An incremental, read-only view of an `AlertEngine`'s cumulative history for the tools and the views.

`AlertEngine.history()` and ``active()`` build fresh dicts of every alert on each call; readers that only
look (fingerprint checks, label look-ups, filters, observation features) call them several times per
invocation. The view follows the engine's change log (`AlertEngine.changes_since`) and keeps the engine's
shared per-alert dicts, so each read costs the changes since the previous one, not the whole history. The
dicts it hands out are SHARED and read-only by contract (the engine replaces, never mutates, them).

``AlertView.of(engine)`` gives the one view of an engine (None for an object without the change log, e.g. a
plain list double: callers then use ``history()``).

>>> from sremarathon_env.alerts import AlertEngine
>>> from sremarathon_env.telemetry.store import MetricStore
>>> import numpy as np
>>> store = MetricStore(step_s=15.0)
>>> fam = store.family("kube_node_status_condition", ("node", "condition", "status"))
>>> rows = fam.rows([("n1", "Ready", "true")])
>>> for k in range(20):
...     store.write(fam, rows, k, np.array([0.0 if 4 <= k < 12 else 1.0]))
>>> eng = AlertEngine(None, store)
>>> view = AlertView.of(eng)
>>> _ = eng.evaluate_until(150.0)
>>> view.history() == eng.history(), view.active() == eng.active(), len(view.active()) > 0
(True, True, True)
>>> view.fingerprints() == {d["fingerprint"] for d in eng.history()}
True
"""

from __future__ import annotations

import weakref
from typing import Any

_ACTIVE = ("pending", "firing")


class AlertView:
    """Shared dicts of an engine's alerts, kept up to date from its change log (see the module docstring)."""

    _views: "weakref.WeakKeyDictionary[Any, AlertView]" = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, engine: Any) -> "AlertView | None":
        """The view of ``engine`` (made on first use), or None when it has no change log."""
        if engine is None or not hasattr(engine, "changes_since") or not hasattr(engine, "history_keys"):
            return None
        try:
            v = cls._views.get(engine)
            if v is None:
                v = cls._views[engine] = cls(engine)
        except TypeError:  # not weakly referenceable: an unshared view
            v = cls(engine)
        return v

    def __init__(self, engine: Any):
        self.engine = engine
        self._pos = 0
        self._dicts: dict[Any, dict] = {}
        self._active: dict[Any, dict] = {}
        self._active_order: list | None = []      # keys of `_active` by (alertname, fingerprint)
        self._active_list: list[dict] | None = []
        self._history: list[dict] | None = []
        self._history_n = 0
        self._fps: set[str] = set()

    def sync(self) -> None:
        """Take the changes the engine logged since the last read."""
        pos, changes = self.engine.changes_since(self._pos)
        if pos == self._pos:
            return
        self._pos = pos
        dicts, active = self._dicts, self._active
        for k, d in changes:
            if k not in dicts:
                self._fps.add(str(d["fingerprint"]))
            dicts[k] = d
            if d["state"] in _ACTIVE:
                if k not in active:
                    self._active_order = None
                active[k] = d
            elif k in active:
                del active[k]
                self._active_order = None
        self._active_list = None
        self._history = None

    # -- reads (shared dicts, read-only) ----------------------------------------------------------
    def history(self) -> list[dict]:
        """Every alert of the cumulative history, in `AlertEngine.history` order (same contents)."""
        self.sync()
        keys = self.engine.history_keys()
        if self._history is None or self._history_n != len(keys):
            d = self._dicts
            self._history = [d[k] for k in keys]
            self._history_n = len(keys)
        return self._history

    def active(self) -> list[dict]:
        """Alerts now pending or firing, in `AlertEngine.active` order (by alertname, fingerprint)."""
        self.sync()
        if self._active_list is None:
            if self._active_order is None:
                act = self._active
                order = sorted(act, key=lambda k: (act[k]["alertname"], act[k]["fingerprint"]))
                if any((act[a]["alertname"], act[a]["fingerprint"]) == (act[b]["alertname"], act[b]["fingerprint"])
                       for a, b in zip(order, order[1:])):
                    # equal sort keys keep the engine's activation order, which the log does not give
                    return [d for d in self.engine.active()]
                self._active_order = order
            act = self._active
            self._active_list = [act[k] for k in self._active_order]
        return self._active_list

    def fingerprints(self) -> set[str]:
        """Fingerprints of every alert of the history (SHARED set, read-only)."""
        self.sync()
        return self._fps


__all__ = ["AlertView"]

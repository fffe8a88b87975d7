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

class AlertView:
    """Shared dicts of an engine's alerts, kept up to date from its change log (see the module docstring).

    With the engine's ``changed_alerts_since`` (live alert objects) the view builds an alert's dict only when
    `history` is read, so readers of `active_brief` and `fingerprints` never render annotations; otherwise it
    follows ``changes_since`` (the dicts)."""

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

    def __init__(self, engine: Any, objects: bool | None = None):
        """``objects``: follow ``changed_alerts_since`` (None: when the engine has it) or ``changes_since``."""
        # held weakly: the registry's values must not keep their keys (the engines and their stores) alive
        try:
            self._engine = weakref.ref(engine)
        except TypeError:
            self._engine = lambda: engine
        self._objects = hasattr(engine, "changed_alerts_since") if objects is None else bool(objects)
        self._pos = 0
        self._src: dict[Any, Any] = {}            # key -> alert object, or its shared dict
        self._active: dict[Any, Any] = {}         # the same, of the alerts now pending or firing
        self._active_order: list | None = []      # keys of `_active` by (alertname, fingerprint)
        self._active_list: list[dict] | None = []
        self._brief: list[tuple] | None = []
        self._history: list[dict] | None = []
        self._fps: set[str] = set()

    @property
    def engine(self) -> Any:
        eng = self._engine()
        if eng is None:
            raise ReferenceError("the alert engine of this view is gone")
        return eng

    def sync(self) -> None:
        """Take the changes the engine logged since the last read."""
        if self._objects:
            pos, changes = self.engine.changed_alerts_since(self._pos)
        else:
            pos, changes = self.engine.changes_since(self._pos)
        if pos == self._pos:
            return
        self._pos = pos
        src, active, objects = self._src, self._active, self._objects
        for k, x in changes:
            if objects:
                fp, state = x.fingerprint, x.state
            else:
                fp, state = x["fingerprint"], x["state"]
            if k not in src:
                self._fps.add(str(fp))
            src[k] = x
            if state == "pending" or state == "firing":
                if k not in active:
                    self._active_order = None
                active[k] = x
            elif k in active:
                del active[k]
                self._active_order = None
        self._active_list = self._brief = self._history = None

    def _dict(self, x: Any) -> dict:
        return x.shared_dict() if self._objects else x

    # -- reads (shared, read-only) ----------------------------------------------------------------
    def history(self) -> list[dict]:
        """Every alert of the cumulative history, in `AlertEngine.history` order (same contents)."""
        self.sync()
        if self._history is None:
            src, d = self._src, self._dict
            self._history = [d(src[k]) for k in self.engine.history_keys()]
        return self._history

    def _order(self) -> list | None:
        """Keys of the active alerts in `AlertEngine.active` order; None when two share a sort key (their order
        is the engine's activation order, which the log does not give)."""
        if self._active_order is None:
            act = self._active
            if self._objects:
                sk = {k: (a.labels["alertname"], a.fingerprint) for k, a in act.items()}
            else:
                sk = {k: (d["alertname"], d["fingerprint"]) for k, d in act.items()}
            order = sorted(act, key=sk.__getitem__)
            if any(sk[a] == sk[b] for a, b in zip(order, order[1:])):
                return None
            self._active_order = order
        return self._active_order

    def active(self) -> list[dict]:
        """Alerts now pending or firing, in `AlertEngine.active` order (by alertname, fingerprint)."""
        self.sync()
        if self._active_list is None:
            order = self._order()
            if order is None:
                return self.engine.active()
            act, d = self._active, self._dict
            self._active_list = [d(act[k]) for k in order]
        return self._active_list

    def active_brief(self) -> list[tuple[str, str, str, float, dict]]:
        """(alertname, fingerprint, state, active_at, labels) of `active`'s alerts, in its order, without
        building their dicts (labels: the alert's label dict, read-only)."""
        self.sync()
        if self._brief is None:
            order = self._order()
            if order is None:
                return [(d["alertname"], d["fingerprint"], d["state"], d["active_at"], d["labels"])
                        for d in self.engine.active()]
            act = self._active
            if self._objects:
                self._brief = [(a.labels["alertname"], a.fingerprint, a.state, a.active_at_ms / 1000, a.labels)
                               for a in map(act.__getitem__, order)]
            else:
                self._brief = [(d["alertname"], d["fingerprint"], d["state"], d["active_at"], d["labels"])
                               for d in map(act.__getitem__, order)]
        return self._brief

    def labels_of(self, fingerprints: set[str]) -> list[dict]:
        """Labels of the history's alerts whose fingerprint is in ``fingerprints``, in `history` order, without
        building their dicts (read-only; key order may differ from the dict's sorted labels)."""
        self.sync()
        src = self._src
        if self._objects:
            found = (src[k] for k in self.engine.history_keys() if str(src[k].fingerprint) in fingerprints)
            return [a.labels or {} for a in found]
        found = (src[k] for k in self.engine.history_keys() if str(src[k]["fingerprint"]) in fingerprints)
        return [d.get("labels") or {} for d in found]

    def fingerprints(self) -> set[str]:
        """Fingerprints of every alert of the history (SHARED set, read-only)."""
        self.sync()
        return self._fps


__all__ = ["AlertView"]

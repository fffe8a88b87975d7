"""The metric writer's state families: an object whose series are the same (family and labels, in order)
as at its last change takes the value-only fast path of `MetricWriter._update` (by its shape, or by its
series compared), and the store it writes
is exactly the one the full re-derivation writes (labels, rows and every sample), through rollouts,
crash loops, OOM kills, a drained node and scaling."""

import numpy as np

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.metrics import MetricWriter
from tests.backends.sim.twins import assert_same_store

OPS = {
    4: lambda s: s.apply_effect(Effect(kind="memory_hog", service="cartservice", mi=10_000)),
    8: lambda s: s.deploy("frontend", message="m", author="a", image_tag="v9.9.9"),
    12: lambda s: s.apply_effect(Effect(kind="crash", service="emailservice", reason="Error", exit_code=1)),
    20: lambda s: s.drain_node(s.app.topology.nodes[1].name),
    26: lambda s: s.scale("recommendationservice", 4),
    30: lambda s: s.apply_effect(Effect(kind="not_ready", service="adservice")),
}


def _run(monkeypatch, fast: bool):
    """A twin driven through OPS; ``fast=False`` forgets every object's kept order after each update (so
    every update re-derives in full). Returns the twin and how many updates took the fast path."""
    taken = [0]
    orig = MetricWriter._update

    def update(self, key, sig, series, dirty, shape=None, values=None):
        old = self._objects.get(key)
        hit = old is not None and old[0] != sig and old[2] is not None and series()[0] == old[2]
        out = orig(self, key, sig, series, dirty, shape, values)
        taken[0] += hit
        if not fast:
            o = self._objects[key]
            self._objects[key] = (o[0], o[1], None, None, None, None)
        return out

    with monkeypatch.context() as mp:
        mp.setattr(MetricWriter, "_update", update)
        sim = SimBackend("online-boutique", seed=5)
        for k in range(1, 48):
            sim.advance_to(k * 15.0)
            if k in OPS:
                OPS[k](sim)
    return sim, taken[0]


def _check_kept(sim: SimBackend) -> None:
    w = sim.writer
    kept = 0
    for sig, entries, keys, rows, vals, shape in w._objects.values():
        if keys is None:
            continue
        kept += 1
        assert len(keys) == len(rows) == len(vals) == len(entries)
        for (name, lv), row, v in zip(keys, rows, vals):
            assert w._fams[name]._index[lv] == row
            e = entries[(name, row)]
            assert e == v or (np.isnan(e) and np.isnan(v))
    assert kept > 20


def test_value_only_updates_write_what_full_rederivation_writes(monkeypatch):
    a, fast_a = _run(monkeypatch, fast=True)
    b, fast_b = _run(monkeypatch, fast=False)
    # (Deployments whose values did not change are left before `_update`: the updates counted here change values)
    assert fast_a > 12 and fast_b == 0, (fast_a, fast_b)
    assert any(p.restarts for p in a.cluster.pods) and any(p.deleted for p in a.cluster.pods)
    _check_kept(a)
    assert a.store.n_ticks == b.store.n_ticks
    assert_same_store(a, b)

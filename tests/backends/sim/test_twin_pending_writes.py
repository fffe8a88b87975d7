"""The metric writes a twin leaves pending until its store is read (`MetricStore.defer`: the state runs' flush
and the traffic counters, consecutive windows of one taped chunk joined into one write) give the store that
writing them at the end of every advance gives: same families, series and samples, in whole marathons of
all three apps, with faults, noise, agent actions and queries in between."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import metrics as metrics_mod
from sremarathon_env.marathon import Marathon, MarathonConfig
from sremarathon_env.telemetry.store import MetricStore
from tests.backends.sim.twins import assert_same_store

CALLS = {
    2: [{"tool": "query_metrics", "args": {"query": "sum(rate(istio_requests_total[5m]))"}}],
    6: [{"tool": "scale", "args": {"service": "{svc}", "replicas": 3}}],
    9: [{"tool": "restart", "args": {"service": "{svc}"}}],
}


def _marathon(app: str, seed: int, act: bool) -> Marathon:
    m = Marathon(MarathonConfig(app=app, seed=seed, injection_s=1500, observation_s=300))
    m.start()
    svc = m.backend.app.service_names[1]
    while True:
        calls = CALLS.get(m.invocation_index, []) if act else []
        m.invoke([{"tool": c["tool"], "args": {k: v.format(svc=svc) if isinstance(v, str) else v
                                                 for k, v in c["args"].items()}} for c in calls])
        if not m.advance_to_next_invocation():
            break
    return m


@pytest.mark.parametrize("app,seed,act", [("online-boutique", 1, False), ("online-boutique", 2, True),
                                          ("train-ticket", 1, False), ("train-ticket", 3, True),
                                          ("astronomy-shop", 2, False), ("astronomy-shop", 4, True)])
def test_pending_writes_give_the_store_of_writes_done_at_every_advance(monkeypatch, app, seed, act):
    writes = []
    orig_write = metrics_mod.MetricWriter.write_traffic

    def counted(self, k0, K, *a, **kw):
        writes.append(K)
        return orig_write(self, k0, K, *a, **kw)

    monkeypatch.setattr(metrics_mod.MetricWriter, "write_traffic", counted)
    lazy = _marathon(app, seed, act)
    n_lazy = len(writes)
    writes.clear()
    orig = SimBackend.advance_to

    def eager(self, t):
        out = orig(self, t)
        self.store.complete()   # the writes as an advance made them before (at its end)
        return out

    monkeypatch.setattr(SimBackend, "advance_to", eager)
    now = _marathon(app, seed, act)
    assert sum(writes) == now.backend.store.n_ticks == lazy.backend.store.n_ticks   # every tick once (warm tick 0 too)
    assert n_lazy < len(writes) / 2, (n_lazy, len(writes))   # (joined: the test is not vacuous)
    assert_same_store(lazy.backend, now.backend)
    assert lazy.finish().digest == now.finish().digest


def test_every_read_completes_the_pending_writes():
    done = []
    store = MetricStore(step_s=15.0, capacity=8)
    fam = store.family("up", ("service",))
    fam.row(("a",))
    for read in (lambda: store.n_ticks, lambda: store.family("up", ("service",)), lambda: store.families("up"),
                 lambda: store.names(), lambda: store.times(), lambda: store.n_series(), lambda: store.nbytes(),
                 lambda: fam.values(1), lambda: len(fam)):
        store.defer(lambda: done.append(1))
        read()
        assert len(done) == 1
        done.clear()
        read()   # nothing pending: nothing done again
        assert not done


def test_a_clone_completes_the_pending_writes_first():
    sim = SimBackend("online-boutique", seed=3)
    sim.advance_to(300.0)
    assert sim.store._pending[0] is not None
    twin = sim.clone()
    assert sim.store._pending[0] is None and twin.store._pending[0] is None
    sim.advance_to(600.0)
    twin.advance_to(600.0)
    assert_same_store(sim, twin)
    assert np.isfinite(sim.store.families("up")[0].values(sim.store.n_ticks)[:, -1]).any()

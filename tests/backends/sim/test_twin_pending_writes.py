"""The metric writes a twin leaves pending until its store is read (`MetricStore.defer`: the state runs' flush,
the traffic counters - consecutive windows of one taped chunk, or of stepped outputs, joined into one write - and
the cAdvisor counters - consecutive blocks of the same pods joined) give the store that writing them at the end of
every advance (the cAdvisor counters block by block) gives: same families, series and samples, in whole marathons of
all three apps, with faults, noise, agent actions and queries in between."""

from __future__ import annotations

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import backend as backend_mod
from sremarathon_env.backends.sim import metrics as metrics_mod
from sremarathon_env import marathon as marathon_mod
from sremarathon_env.marathon import Marathon, MarathonConfig
from sremarathon_env.telemetry.store import MetricStore
from tests.backends.sim.twins import assert_same_store, assert_same_twins

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
    blocks = []
    orig_block = metrics_mod.MetricWriter._pods_block

    def block(self, k0, K, *a):
        blocks.append(K)
        return orig_block(self, k0, K, *a)

    monkeypatch.setattr(metrics_mod.MetricWriter, "_pods_block", block)
    lazy = _marathon(app, seed, act)
    n_lazy, n_blocks = len(writes), len(blocks)
    writes.clear()
    blocks.clear()
    orig = SimBackend.advance_to

    def eager(self, t):
        out = orig(self, t)
        self.store.complete()   # the writes as an advance made them before (at its end)
        return out

    def pods_now(self, k0, K, dt, sl, lay, ppr, burn, running, mem, lag):   # each block's counters at once
        self._pods_block(k0, K, dt, sl, self.flow_rows, lay, ppr, burn, running, mem, lag)

    monkeypatch.setattr(SimBackend, "advance_to", eager)
    monkeypatch.setattr(metrics_mod.MetricWriter, "queue_pods", pods_now)
    # block by block (a deferred span's advances leave their traffic to its end: no store read may come between)
    monkeypatch.setattr(marathon_mod, "SPANS", False)
    now = _marathon(app, seed, act)
    assert sum(writes) == now.backend.store.n_ticks == lazy.backend.store.n_ticks   # every tick once (warm tick 0 too)
    assert sum(blocks) == now.backend.store.n_ticks   # every tick once, block by block
    assert n_lazy < len(writes) / 2, (n_lazy, len(writes))   # (joined: the test is not vacuous)
    assert n_blocks < len(blocks) * 0.8, (n_blocks, len(blocks))
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


def _ops(sim):
    s = sim.app.service_names
    return {
        12: lambda: sim.apply_effect(Effect(kind="memory_leak", service=s[2], mi_per_min=40.0)),
        20: lambda: sim.deploy(s[0], message="m", author="a", image_tag="v9.9.9"),
        33: lambda: sim.apply_effect(Effect(kind="crash", service=s[3], reason="Error", exit_code=1)),
        47: lambda: sim.apply_effect(Effect(kind="latency", service=s[1], ms=300)),
        60: lambda: sim.drain_node(sim.app.topology.nodes[1].name),
        71: lambda: sim.scale(s[4], 4),
        85: lambda: sim.restart(s[1]),
    }


def _stepped(app: str, seed: int, read_every: int):
    """A twin without a taped run (every advance steps its own traffic), advanced in uneven steps through
    interventions; its store read every ``read_every`` advances (1: the writes as each advance made them)."""
    sim = SimBackend(app, seed=seed)
    ops = _ops(sim)
    rng = np.random.default_rng(seed)
    k = n = 0
    while k < 120:
        k = min(120, k + int(rng.integers(1, 6)))
        sim.advance_to(k * 15.0)
        w = sim.writer   # (bounded: a store nobody reads holds at most PENDING_TICKS ticks of writes, and a few)
        assert sum(p[1] for p in w._pend_traffic) <= metrics_mod.PENDING_TICKS + 32
        assert sum(p[1] for p in w._pend_pods if isinstance(p, list)) <= metrics_mod.PENDING_TICKS + 32
        n += 1
        if n % read_every == 0:
            sim.store.n_ticks
        for due in [d for d in ops if d <= k]:   # (each once, at the first stop at or after its tick)
            ops.pop(due)()
    return sim


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_joined_writes_of_stepped_outputs_equal_the_writes_at_every_advance(app, monkeypatch):
    backend_mod._TAPES.clear()
    joined = []
    orig_write = metrics_mod.MetricWriter.write_traffic
    monkeypatch.setattr(metrics_mod.MetricWriter, "write_traffic",
                        lambda self, k0, K, *a, **kw: (joined.append(K), orig_write(self, k0, K, *a, **kw))[1])
    with monkeypatch.context() as mp:   # the definition: each block's cAdvisor counters at once
        mp.setattr(metrics_mod.MetricWriter, "queue_pods", lambda self, k0, K, dt, sl, lay, *a:
                   self._pods_block(k0, K, dt, sl, self.flow_rows, lay, *a))
        now = _stepped(app, 5, read_every=1)
    n_now = len(joined)
    assert any(p.restarts for p in now.cluster.pods)   # counter resets between blocks: not vacuous
    for every in (3, 1000):
        joined.clear()
        lazy = _stepped(app, 5, read_every=every)
        assert len(joined) < n_now
        assert_same_twins(now, lazy)

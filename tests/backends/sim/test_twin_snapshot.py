"""A state refresh's cluster snapshot (`SimBackend._snapshot`) equals the snapshot as first written (the
carried effects gathered through the Deployments' ReplicaSet lists) at every refresh of run loops with fault
schedules (revision-bound effects carried by revisions with and without pods) and of a hand-made run."""

import numpy as np
import pytest

from baselines.runner import run_marathon
from faults.effects import Effect, Marker
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.history import Epoch


def _snapshot_plain(sim) -> Epoch:
    c = sim.cluster
    n = len(c.pods)
    ready = np.flatnonzero(sim.pod_ready_eff[:n] & c.p_active[:n])
    rev = np.array([c.rs_by_id[i].revision for i in c.p_rs[ready].tolist()], dtype=np.int64)
    carried = {h for dep in c.deployments.values() for rs in dep.rss if rs.pods for h in rs.effects}
    active = []
    for h, e in sim.book.effects.items():
        if h in sim._oneshot:
            continue
        if e.bind == "direct" or (e.bind == "revision" and h in carried) or \
                (e.bind == "flag" and sim.flag_variant(e.flag) == e.variant):
            active.append(h)
    per_node = {}
    for p in c.active_pods():
        if p.node >= 0 and p.phase in ("Running", "Pending"):
            name = c.nodes[p.node].name
            per_node[name] = per_node.get(name, 0) + 1
    return Epoch(c.p_svc[ready].copy(), rev, frozenset(active), per_node)


@pytest.fixture
def checked(monkeypatch):
    seen = {"calls": 0, "carried": 0}
    snap = SimBackend._snapshot

    def both(self):
        got, want = snap(self), _snapshot_plain(self)
        assert got.ready_svc.dtype == want.ready_svc.dtype and got.ready_svc.tolist() == want.ready_svc.tolist()
        assert got.ready_rev.dtype == want.ready_rev.dtype and got.ready_rev.tolist() == want.ready_rev.tolist()
        assert got.active_effects == want.active_effects
        assert list(got.pods_on_node.items()) == list(want.pods_on_node.items())
        seen["calls"] += 1
        seen["carried"] += any(self.book.effects[h].bind == "revision" for h in got.active_effects)
        return got

    monkeypatch.setattr(SimBackend, "_snapshot", both)
    return seen


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_run_loops_snapshot_as_the_definition(checked, app):
    run_marathon(app, 5, "random")
    assert checked["calls"] > 100 and checked["carried"] > 0


def test_carried_effects_follow_the_revisions_pods(checked):
    sim = SimBackend("online-boutique", seed=6)
    sim.advance_to(60)
    mark = Marker(source_contains=("x.txt", "slow"))
    sim.deploy("adservice", message="m", author="a", files={"x.txt": "slow\n"},
               effects=[Effect(kind="latency", service="adservice", ms=200, bind="revision", marker=mark)])
    sim.advance_to(400)
    sim.rollback("adservice")   # the revision loses its pods: its effect is no longer carried
    sim.advance_to(800)
    assert checked["calls"] >= 5 and checked["carried"] > 0


@pytest.fixture
def refreshes(monkeypatch):
    """Every state refresh's snapshot (`SimBackend._refresh_snapshot`: the previous one where nothing it is made of
    changed) checked against the definition made afresh."""
    seen = {"calls": 0, "kept": 0}
    refresh_snapshot = SimBackend._refresh_snapshot

    def both(self):
        last = self._last_snapshot
        got, want = refresh_snapshot(self), _snapshot_plain(self)
        assert got.ready_svc.tolist() == want.ready_svc.tolist() and got.ready_rev.tolist() == want.ready_rev.tolist()
        assert got.active_effects == want.active_effects
        assert list(got.pods_on_node.items()) == list(want.pods_on_node.items())
        seen["calls"] += 1
        seen["kept"] += last is not None and got is last[2]
        return got

    monkeypatch.setattr(SimBackend, "_refresh_snapshot", both)
    return seen


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_a_refresh_keeps_the_last_snapshot_only_where_it_is_unchanged(refreshes, app):
    run_marathon(app, 5, "random")   # an agent's random calls: scaling, restarts, rollbacks, config, drains...
    assert refreshes["calls"] > 100 and 0 < refreshes["kept"] < refreshes["calls"]


def test_a_refresh_keeps_the_last_snapshot_through_churn(refreshes):
    from tests.backends.sim.test_twin_caches import _drive

    sim = SimBackend("online-boutique", seed=6)
    _drive(sim)   # OOM kills, restarts, drains, unschedulable pods, a bad image
    assert refreshes["calls"] > 10 and refreshes["kept"] > 0

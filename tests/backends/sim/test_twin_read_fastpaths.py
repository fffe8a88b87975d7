"""Fast paths of the twin's per-tick reads held to their definitions: `service_health` (the row's floats, the
p95 factor only where the rate is positive), `_tick_at` (the last time resolved, kept) and `_snapshot`'s pods per
node (kept while `Cluster.placement_version` is unchanged) and effects in force (the revisions' carried handles
made only when a revision-bound effect is met), through rollouts, OOM kills, restarts, a node outage
and its recovery, drains and scaling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import backend as backend_mod


def _service_health_plain(sim: SimBackend, service: str, at: float | None = None) -> dict:
    """The definition (as first written): every field from the history row at the tick of ``at``."""
    s = sim.m.svc_index.get(service)
    if s is None:
        return {}
    k = sim._tick if at is None else int(math.floor(float(at) / sim.tick_s + 1e-9))
    row = sim.history.svc[:, k, s].tolist()
    rate, fail, lat_w, sig_w, rho = row[:5]
    own_fail, own_lat_w = row[10], row[11]
    lat = lat_w / rate if rate > 0 else 0.0
    sig = sig_w / rate if rate > 0 else 0.45
    p95 = math.exp(-0.5 * sig * sig + 1.6448536269514722 * sig)
    out = {"ready": float(row[7]), "desired": float(row[8]),
           "error_ratio": fail / rate if rate > 0 else 0.0,
           "p95_ms": lat * p95 if rate > 0 else 0.0,
           "own_error_ratio": own_fail / rate if rate > 0 else 0.0,
           "own_p95_ms": own_lat_w / rate * p95 if rate > 0 else 0.0,
           "rate": rate, "cpu_util": rho if math.isfinite(rho) else 0.0,
           "mem_util": float(row[5]), "restarts": float(row[9])}
    if s in sim._lag_callee:
        out["lag"] = float(row[6])
    return out


def _per_node_plain(sim: SimBackend) -> dict:
    c = sim.cluster
    per_node: dict[str, int] = {}
    for p in c.active_pods():
        if p.node >= 0 and p.phase in ("Running", "Pending"):
            per_node[c.nodes[p.node].name] = per_node.get(c.nodes[p.node].name, 0) + 1
    return per_node


def _active_plain(sim: SimBackend) -> frozenset:
    """The effects in force as first written: the revisions' carried handles made before the loop."""
    c = sim.cluster
    carried = {h for dep in c.deployments.values() for rs in dep.rss if rs.pods for h in rs.effects}
    return frozenset(h for h, e in sim.book.effects.items() if h not in sim._oneshot and (
        e.bind == "direct" or (e.bind == "revision" and h in carried)
        or (e.bind == "flag" and sim.flag_variant(e.flag) == e.variant)))


def _bits(d: dict) -> list:
    """Keys in order and values bit for bit (NaN equals NaN)."""
    return [(k, np.float64(v).tobytes()) for k, v in d.items()]


@pytest.fixture
def checked_snapshots(monkeypatch):
    seen = {"snapshots": 0, "kept": 0, "revision_bound": 0}
    snapshot = SimBackend._snapshot

    def checked(self):
        kept = self._per_node[0] == self.cluster.placement_version
        epoch = snapshot(self)
        assert epoch.pods_on_node == _per_node_plain(self)
        assert epoch.active_effects == _active_plain(self)
        seen["snapshots"] += 1
        seen["kept"] += kept
        seen["revision_bound"] += any(e.bind == "revision" for e in self.book.effects.values())
        return epoch

    monkeypatch.setattr(SimBackend, "_snapshot", checked)
    return seen


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_reads_equal_their_definitions_through_churn(app, checked_snapshots):
    sim = SimBackend(app, seed=4)
    m = sim.m
    svcs = list(sim.app.service_names)
    nodes = list(m.node_names)
    handles = []
    actions = {
        3: lambda: handles.append(sim.apply_effect(Effect(kind="memory_leak", service=svcs[1], mi_per_min=80))),
        5: lambda: sim.scale(svcs[2], 3),
        8: lambda: sim.restart(svcs[0]),
        11: lambda: handles.append(sim.apply_effect(Effect(kind="node_down", node=nodes[1]))),
        13: lambda: sim.set_config(svcs[3], "EXTRA_LATENCY", "150ms"),
        19: lambda: sim.drain_node(nodes[0]),
        24: lambda: sim.remove_effect(handles[-1]),
        26: lambda: sim.uncordon_node(nodes[0]),
        30: lambda: sim.scale(svcs[2], 1),
        33: lambda: handles.append(sim.apply_effect(Effect(kind="crash", service=svcs[4], reason="Error",
                                                           exit_code=1))),
    }
    rng = np.random.default_rng(0)
    n = 45
    for k in range(1, n + 1):
        if k in actions:
            actions[k]()
        sim.advance_to(k * 15.0)
        for s in svcs + ["nope"]:
            assert _bits(sim.service_health(s)) == _bits(_service_health_plain(sim, s) if s != "nope" else {})
    # past ticks in random order (the kept time changes at each), as ints and floats, and again
    for k in rng.permutation(np.arange(0, n + 1)).tolist() * 2:
        at = float(k * 15) if k % 2 else k * 15
        view = sim.at(at)
        for s in svcs:
            assert _bits(view.service_health(s)) == _bits(_service_health_plain(sim, s, at))
            assert sim._tick_at(at + 7.0) == k == sim._tick_at(at)
    with pytest.raises(ValueError, match="no recorded tick"):
        sim._tick_at((n + 1) * 15.0)   # past the twin's tick, right after a kept valid time
    with pytest.raises(ValueError, match="no recorded tick"):
        sim._tick_at(-15.0)
    assert checked_snapshots["snapshots"] > 20 and 0 < checked_snapshots["kept"] < checked_snapshots["snapshots"]


def test_pods_per_node_through_a_marathon_with_faults(checked_snapshots):
    from baselines.runner import run_marathon

    backend_mod._TAPES.clear()
    run_marathon("online-boutique", 5, "oracle", injection_s=1200, observation_s=300)
    # (a refresh that changed nothing a snapshot is made of keeps the last one: `_refresh_snapshot`)
    assert checked_snapshots["snapshots"] > 40 and checked_snapshots["kept"] > 5
    assert 5 < checked_snapshots["revision_bound"] < checked_snapshots["snapshots"]   # with and without such effects

"""A plan refers to no node that refers back to it (nodes keep the plan's grid, its engine and its tape, not the
plan): a dropped plan or alert engine, with every node, selection, kernel group and cached value of its builds, is
freed by reference counting, and a rebuild frees the nodes it replaces, without the cyclic collector. Checked with
the collector off on the rule pack over a growing store (pods come and go: rebuilds, left-out rows, a generic
fallback node), on a healthy twin run through the alert engine, and on a plan that takes the generic path."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np

from sremarathon_env.alerts import AlertEngine, PromQLEngine, load_rule_pack
from sremarathon_env.alerts.compiled import warm
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.telemetry.store import MetricStore
from tests.collector import collector_off


def _grow(store, rng, k):
    m = store.family("kube_pod_status_ready", ("namespace", "pod", "condition"))
    c = store.family("container_cpu_cfs_throttled_periods_total", ("namespace", "pod", "container"))
    d = store.family("container_cpu_cfs_periods_total", ("namespace", "pod", "container"))
    for _ in range(int(rng.integers(0, 3))):
        pod = f"svc{int(rng.integers(3))}-{int(rng.integers(10**9)):010d}"[:16] + "-abcde"
        for fam, vals in ((m, ("ns", pod, "false")), (c, ("ns", pod, "app")), (d, ("ns", pod, "app"))):
            fam.row(vals)
    for fam in (m, c, d):
        rows = np.arange(len(fam))
        live = rows[rng.random(len(rows)) < 0.7]
        store.write(fam, live, k, rng.random(len(live)) * 10 + k) if len(live) else None
    store.n_ticks = max(store.n_ticks, k + 1)


@contextmanager
def _collector_off():
    """The cyclic collector off (after one collection of what came before), as it was again afterwards. The
    compiled kernels are loaded first where they are on at all: in the ``auto`` mode they would otherwise load
    in the middle of a checked round (once the numpy kernels have spent their share), and numba's loading leaves
    cyclic garbage of its own."""
    warm()
    with collector_off():
        yield


def _collect_quietly() -> int:
    """Cyclic garbage found now (the collector is off around the checks)."""
    return gc.collect()


def test_dropped_plans_and_rebuilds_leave_no_cyclic_garbage():
    rules = load_rule_pack().rules
    extra = [SimpleNamespace(name="generic", node=PromQLEngine(MetricStore()).compile(
        'quantile_over_time(0.5, kube_pod_status_ready[2m]) + on (pod) group_left kube_pod_status_ready'))]
    rng = np.random.default_rng(3)
    with _collector_off():
        for attempt in range(3):
            store = MetricStore(step_s=15.0)
            plan = PackPlan(PromQLEngine(store), list(rules) + extra)
            builds = 0
            for k in range(40):
                _grow(store, rng, k)
                if k % 4 == 3:
                    with np.errstate(all="ignore"):
                        plan.evaluate(np.arange(k - 3, k + 1, dtype=np.int64) * 15000)
                    if attempt:   # (the first round may leave one-time garbage of module-level setup)
                        assert _collect_quietly() == 0, (attempt, k)
            builds += plan.builds
            assert builds > 3
            del plan
            found = _collect_quietly()
            if attempt:
                assert found == 0, attempt


def test_dropped_alert_engine_leaves_no_cyclic_garbage():
    from apps import load_app
    from sremarathon_env.backends.sim import SimBackend

    pack = load_rule_pack()
    sim = SimBackend(load_app("online-boutique"), seed=0)
    for k in range(1, 6):
        sim.advance_to(k * 120.0)
    with _collector_off():
        for attempt in range(3):
            eng = AlertEngine(pack, sim.store)
            for k in range(1, 6):
                eng.evaluate_until(k * 120.0)
            del eng
            found = _collect_quietly()
            if attempt:
                assert found == 0, attempt

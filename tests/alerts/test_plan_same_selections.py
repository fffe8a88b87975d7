"""A rebuild keeps a rule that reads a changed metric name without walking it when each of its selectors selects the
very (parts, labels) objects of the rule's last walk (``plan.SAME_SELECTIONS``): its nodes are a pure function of
those selections where every selector is read through the plan's selection (``plan._plan_selected``). Held to the
walk: plans with and without the shortcut, and a fresh plan at every call, give the same results on growing stores
whose new rows often match only some selectors of a family or are left out at once, and on twin runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sremarathon_env.alerts import PromQLEngine, load_rule_pack
from sremarathon_env.alerts import plan as P
from sremarathon_env.telemetry.store import MetricStore

from .test_plan import _present
from .test_plan_empty import OTHER, engine_run, pod_families

#: expressions over the growing store's families whose selectors take some of a family's rows
EXTRA = [
    'sum by (pod) (kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"})',
    'count(kube_pod_container_status_waiting_reason{reason=~"ErrImagePull|Other"}) > 0',
    'kube_pod_status_ready{condition="false"} * on (pod) group_left () '
    'max by (pod) (kube_pod_container_status_waiting_reason{reason="Other"})',
    'label_replace(increase(container_oom_events_total{container="app"}[5m]), "svc", "$1", "pod", "(svc[0-9]).*")',
    'max_over_time(up{service="svc0"}[2m]) unless on (namespace) kube_pod_status_ready{condition="true"}',
    'deriv(kube_pod_status_ready{condition="true"}[5m]) > 0',
    'sum(rate(container_oom_events_total[1m])) / count(up)',
]


def test_plan_selected_by_definition():
    eng = PromQLEngine(MetricStore(step_s=15.0))
    yes = ['m', 'sum(rate(c[5m])) > 1', 'label_replace(m, "a", "$1", "b", "(.*)")', 'absent(m)', '-m', 'time() - m',
           'histogram_quantile(0.9, sum by (le) (rate(h[5m])))', 'topk(2, m)', 'vector(1)', 'm or n']
    no = ['{a="x"}', 'deriv(m[5m])', 'rate({a="x"}[5m])', 'absent_over_time(m[5m])', 'max_over_time(m[5m:1m])',
          'sum(m) + count({a="x"})', 'predict_linear(m[5m], 60)']
    for e in yes:
        assert P._plan_selected(eng.compile(e)), e
    for e in no:
        assert not P._plan_selected(eng.compile(e)), e


def _growing_store(seed):
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0)
    fams = pod_families(store)
    for k in range(80):
        for _ in range(int(rng.integers(0, 3))):
            pod = f"svc{int(rng.integers(3))}-abcdfghjkl-bcdfg{int(rng.integers(40))}"
            fi = int(rng.integers(len(fams)))
            vals = {0: ("online-boutique", pod, str(rng.choice(["app", "side"])),
                        str(rng.choice(["CrashLoopBackOff", "ErrImagePull", "Other"]))),
                    1: ("online-boutique", pod, str(rng.choice(["true", "false"]))),
                    2: ("online-boutique", pod, str(rng.choice(["app", "side"]))),
                    3: ("kube", "online-boutique", f"svc{int(rng.integers(4))}")}[fi]
            if vals not in fams[fi]._label_values:
                fams[fi].row(vals)
        for f in fams:
            if len(f):
                # rows come and go: many rows have no sample for a while (left out, taken back)
                live = np.flatnonzero(rng.random(len(f)) < 0.5)
                if len(live):
                    store.write(f, live, k, rng.integers(0, 3, size=len(live)).astype(float) + k)
        store.n_ticks = k + 1
    return store


def _same(a, b) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    if not hasattr(a, "labels"):   # (a scalar rule: the generic evaluator's result)
        return type(a) is type(b) and np.array_equal(a.v.view(np.int64), b.v.view(np.int64))
    return _present(a) == _present(b)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kept_rules_equal_walked_and_fresh_plans_as_the_store_grows(seed, monkeypatch):
    eng0 = PromQLEngine(MetricStore(step_s=15.0))
    rules = list(load_rule_pack().rules) + [SimpleNamespace(name=f"x{i}", node=eng0.compile(e))
                                           for i, e in enumerate(OTHER + EXTRA)]
    full = _growing_store(seed)
    src = [(f.name, f.label_names, list(f._label_values), f._data[:len(f)].copy()) for f in full._order]
    store = MetricStore(step_s=15.0)
    made = [store.family(n, ln) for n, ln, _, _ in src]
    on, off = P.PackPlan(PromQLEngine(store), rules), P.PackPlan(PromQLEngine(store), rules)
    for k in range(0, 80, 2):
        for f, (_, _, lvs, data) in zip(made, src):
            n = sum(1 for r in range(len(lvs)) if np.isfinite(data[r, : k + 1]).any())
            while len(f) < n:
                f.row(lvs[len(f)])
            for kk in range(max(0, k - 1), k + 1):
                if n:
                    store.write(f, np.arange(n), kk, data[:n, kk])
        store.n_ticks = k + 1
        times = np.arange(max(0, k - 3), k + 1, dtype=np.int64) * 15000
        before = list(on._records)
        kept_before = on.kept_same
        with np.errstate(all="ignore"):
            a = on.evaluate(times)
            monkeypatch.setattr(P, "SAME_SELECTIONS", False)
            b = off.evaluate(times)
            monkeypatch.setattr(P, "SAME_SELECTIONS", True)
            fresh = P.PackPlan(PromQLEngine(store), rules).evaluate(times)
        for r, x, y, z in zip(rules, a, b, fresh):
            assert _same(x, y) and _same(x, z), (k, r.name)
        # a rule kept with the same selections keeps its record object (what the lowering reuses)
        same = on.kept_same - kept_before
        assert sum(x is y and x is not None for x, y in zip(before, on._records)) >= same
    assert on.kept_same > 5 and off.kept_same == 0
    assert on.builds == off.builds > 10


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_alert_engine_results_equal_without_the_same_selection_keep(app, monkeypatch):
    """Twin runs: the engine's transitions and every rule's results equal those of walking every rule that reads a
    changed name."""
    from apps import load_app
    from sremarathon_env.backends.sim import SimBackend

    pack = load_rule_pack()
    sims = [SimBackend(load_app(app), seed=3) for _ in range(2)]
    runs = []
    for variant in ("on", "off"):
        monkeypatch.setattr(P, "SAME_SELECTIONS", variant == "on")
        sim = sims[0 if variant == "on" else 1]
        runs.append(engine_run(pack, sim))
    assert runs[0] == runs[1]

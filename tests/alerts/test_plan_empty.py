"""Two build shortcuts held to the full build.

* A rule whose plan is an ``_Empty`` root whenever each of its selectors selects nothing (``plan._strict``, by
  ``_make``'s branches) skips the walk while that is so: for every rule of the pack and a set of other expressions,
  the full walk gives an ``_Empty`` root wherever ``_strict`` says so, on an empty store and on one whose families
  exist but match none of the selectors; expressions that give series from nothing (absent, vector, or, scalar
  arithmetic, a non-batched range function...) are not taken. Plans with and without the shortcut give the same
  results, call after call, on a growing store and on twin runs of the three apps.
* A first selection taken from an earlier store's (``_take_shared``) keeps the kept per-family lists until a family
  gains rows (then copies them): the kept lists never change, and the selection equals a fresh one.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sremarathon_env.alerts import PromQLEngine, load_rule_pack
from sremarathon_env.alerts import plan as P
from sremarathon_env.telemetry.store import MetricStore

from .test_plan import _present

OTHER = [
    'm', 'sum(m)', 'count by (a) (m > 1)', 'max(rate(c_total[5m]))', 'group(m) * 3', '2 ^ m',
    'm / on (a) group_left (b) n', 'm and n', 'm unless n', 'm and on (a) (n > 0)', 'm == bool 1',
    'label_replace(sum by (a) (increase(c_total[5m])), "x", "$1", "a", "(.*)")',
    'histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))', '{a="x"}', 'min without (a) (m) - 1',
    'count(m) == 0',   # (count of nothing is nothing)
    # not empty from nothing, or not a fast-path branch: never taken
    'absent(m)', 'vector(1)', 'm or n', 'scalar(m) * 2', '-m', 'deriv(m[5m])', 'topk(2, m)', 'quantile(0.5, m)',
    'time() - m', 'histogram_quantile(scalar(n), m)', 'absent_over_time(m[5m])',
    'sum(m) + time()', 'm + scalar(n)',
]


def _plan_roots(store, rules):
    plan = P.PackPlan(PromQLEngine(store), rules)
    with np.errstate(all="ignore"):
        plan.evaluate(np.arange(1, 5, dtype=np.int64) * 15000)
    return plan


@pytest.mark.parametrize("filled", [False, True])
def test_strict_rules_have_an_empty_plan_when_nothing_is_selected(filled, monkeypatch):
    monkeypatch.setattr(P, "EMPTY_SHORTCUT", False)
    eng = PromQLEngine(MetricStore(step_s=15.0))
    rules = list(load_rule_pack().rules) + [SimpleNamespace(name=f"x{i}", node=eng.compile(e))
                                           for i, e in enumerate(OTHER)]
    store = MetricStore(step_s=15.0)
    if filled:   # every family the rules read exists, with rows no matcher of theirs takes
        names = {s.name for r in rules for s in P._selectors(r.node) if s.name}
        for n in sorted(names):
            f = store.family(n, ("zz_only",))
            rows = f.rows([("v1",), ("v2",)])
            for k in range(4):
                store.write(f, rows, k, np.array([1.0, 2.0]))
        # a name-less selector ('{a="x"}') reads every family: none of them has a label a
    store.n_ticks = 4
    plan = _plan_roots(store, rules)
    taken = 0
    for r, root in zip(rules, plan._roots):
        sels = P._empty_when_unselected(r.node)
        if sels is None:
            continue
        assert sels == tuple(P._selectors(r.node))
        if any(plan._selection(sel)[1] for sel in sels):
            continue   # (a selector without matchers takes the filler rows)
        taken += 1
        assert isinstance(root, P._Empty), r.name
    assert taken >= (30 if filled else len(load_rule_pack().rules) - 2)
    names = [r.name for r in rules if P._empty_when_unselected(r.node) is None]
    assert names[-13:] == [f"x{OTHER.index(e)}" for e in OTHER[-13:]]


def pod_families(store) -> list:
    """The four families the growing-store tests add pod (and service) rows to, in the order their draws index."""
    return [store.family("kube_pod_container_status_waiting_reason", ("namespace", "pod", "container", "reason")),
            store.family("kube_pod_status_ready", ("namespace", "pod", "condition")),
            store.family("container_oom_events_total", ("namespace", "pod", "container")),
            store.family("up", ("job", "namespace", "service"))]


def _growing_store(seed):
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0)
    fams = pod_families(store)
    steps = []
    for k in range(60):
        if rng.random() < 0.3:
            pod = f"svc{int(rng.integers(3))}-abcdfghjkl-bcdfg{int(rng.integers(10))}"
            fi = int(rng.integers(len(fams)))
            f = fams[fi]
            vals = {0: ("online-boutique", pod, "app", str(rng.choice(["CrashLoopBackOff", "ErrImagePull", "Other"]))),
                    1: ("online-boutique", pod, str(rng.choice(["true", "false"]))),
                    2: ("online-boutique", pod, "app"),
                    3: ("kube", "online-boutique", pod[:4])}[fi]
            f.row(vals)
        for f in fams:
            if len(f):
                live = np.flatnonzero(rng.random(len(f)) < 0.8)
                if len(live):
                    store.write(f, live, k, rng.integers(0, 3, size=len(live)).astype(float))
        store.n_ticks = k + 1
        steps.append(k)
    return store


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plans_with_and_without_the_empty_shortcut_agree_as_the_store_grows(seed, monkeypatch):
    rules = list(load_rule_pack().rules)
    full = _growing_store(seed)
    # replay the growth: two plans over one store that is extended between calls
    store = MetricStore(step_s=15.0)
    src = [(f.name, f.label_names, list(f._label_values), f._data[:len(f)].copy()) for f in full._order]
    made = [store.family(n, ln) for n, ln, _, _ in src]
    on, off = P.PackPlan(PromQLEngine(store), rules), P.PackPlan(PromQLEngine(store), rules)
    shortcut = 0
    for k in range(0, 60, 3):
        for f, (_, _, lvs, data) in zip(made, src):
            # rows that have a sample up to tick k exist by then
            n = sum(1 for r in range(len(lvs)) if np.isfinite(data[r, : k + 1]).any())
            while len(f) < n:
                f.row(lvs[len(f)])
            store_rows = np.arange(n)
            for kk in range(max(0, k - 2), k + 1):
                if n:
                    store.write(f, store_rows, kk, data[:n, kk])
        store.n_ticks = k + 1
        times = np.arange(max(0, k - 2), k + 1, dtype=np.int64) * 15000
        with np.errstate(all="ignore"):
            a = on.evaluate(times)
            monkeypatch.setattr(P, "EMPTY_SHORTCUT", False)
            b = off.evaluate(times)
            monkeypatch.setattr(P, "EMPTY_SHORTCUT", True)
        for r, x, y in zip(rules, a, b):
            assert type(x) is type(y), (k, r.name)
            if not isinstance(x, Exception):
                assert x.labels == y.labels and _present(x) == _present(y), (k, r.name)
        shortcut += sum(isinstance(rt, P._Empty) and rec is not None and not rec[1]
                        for rt, rec in zip(on._roots, on._records))
        assert all(rec is None or rec[1] or isinstance(rt, P._Empty) for rt, rec in zip(on._roots, on._records))
    assert shortcut > 0
    assert on.builds == off.builds > 2


def engine_run(pack, sim) -> tuple:
    """An alert engine's transitions over 15 calls of a twin advanced call by call, and every rule's plan results
    (label sets and presence) over eight ticks after them: what two variants of a build path must agree on."""
    from sremarathon_env.alerts import AlertEngine

    eng = AlertEngine(pack, sim.store)
    out = []
    for k in range(1, 16):
        sim.advance_to(k * 120.0)
        out += [(tr.t, tr.alertname, tuple(sorted(tr.labels.items())), tr.state, repr(tr.value))
                for tr in eng.evaluate_until(k * 120.0)]
    with np.errstate(all="ignore"):
        res = eng._plan.evaluate(np.arange(100, 108, dtype=np.int64) * 15000)
    return out, [None if isinstance(x, Exception) else (x.labels, _present(x)) for x in res]


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_alert_engine_results_equal_without_the_build_shortcuts(app, monkeypatch):
    """Twin runs: the engine's transitions and every rule's plan results with the shortcuts equal those without
    (the empty-rule shortcut off, first selections copied eagerly as before)."""
    from apps import load_app
    from sremarathon_env.backends.sim import SimBackend

    pack = load_rule_pack()
    sims = [SimBackend(load_app(app), seed=2) for _ in range(2)]
    runs = []
    for variant in ("on", "off"):
        if variant == "off":
            monkeypatch.setattr(P, "EMPTY_SHORTCUT", False)
            real_take = P._take_shared

            def eager(st, key, fams):   # the former eager copy of the kept lists
                if not real_take(st, key, fams):
                    return False
                st.rows = [list(x) for x in st.rows]
                st.lbs = [list(x) for x in st.lbs]
                st.keys = [list(x) for x in st.keys]
                st.own = [True] * len(fams)
                return True
            monkeypatch.setattr(P, "_take_shared", eager)
        sim = sims[0 if variant == "on" else 1]
        runs.append(engine_run(pack, sim))
    assert runs[0] == runs[1]


def test_kept_first_selections_are_never_changed(monkeypatch):
    """Stores with equal families: a later plan's first selections are the first's kept ones; growing the
    second store copies a family's lists before extending them, so the kept lists (and the first plan's view) stay
    as they were, and the grown selection equals a fresh plan's."""
    def store_with(rows):
        st = MetricStore(step_s=15.0)
        f = st.family("kube_pod_status_ready", ("namespace", "pod", "condition"))
        f.rows(rows)
        for k in range(3):
            st.write(f, np.arange(len(f)), k, np.zeros(len(f)))
        st.n_ticks = 3
        return st, f

    base = [("ns", f"p{i}", c) for i in range(6) for c in ("true", "false")]
    rules = [r for r in load_rule_pack().rules if r.name in ("KubePodNotReady", "PodNotReady")]
    times = np.arange(0, 3, dtype=np.int64) * 15000
    for _ in range(2):   # (a store's content is recorded first, then the next one with it keeps its selections)
        s1, _ = store_with(base)
        p1 = P.PackPlan(PromQLEngine(s1), rules)
        with np.errstate(all="ignore"):
            r1 = p1.evaluate(times)
    kept = {k: ([list(x) for x in v[1]], [list(x) for x in v[2]], [list(x) for x in v[3]])
            for k, v in P._SHARED_SEL.items()}
    s2, f2 = store_with(base)
    p2 = P.PackPlan(PromQLEngine(s2), rules)
    with np.errstate(all="ignore"):
        r2 = p2.evaluate(times)
    assert [_present(x) for x in r1] == [_present(x) for x in r2]
    assert any(not all(st.own) for st in p2._sels.values())   # (taken from the kept selection)
    f2.row(("ns", "p0a", "false"))
    s2.write(f2, np.arange(len(f2)), 2, np.ones(len(f2)))
    with np.errstate(all="ignore"):
        grown = p2.evaluate(times)
        fresh = P.PackPlan(PromQLEngine(s2), rules).evaluate(times)
    assert [_present(x) for x in grown] == [_present(x) for x in fresh]
    for k, v in P._SHARED_SEL.items():
        if k in kept:
            assert ([list(x) for x in v[1]], [list(x) for x in v[2]], [list(x) for x in v[3]]) == kept[k]

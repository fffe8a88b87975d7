"""The plan's series-set signature (read per call) and its per-name signatures (read per rebuild) take the families
the plan reads from a list kept while the store's family count stands. Held to their definitions (every family of
every read name, through the store's public reads) on random growth: new families of read and unread names, rows
appended to any of them, calls in between; the signature changes exactly when the definition's does."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.telemetry.store import MetricStore


def _defined_sig(plan) -> tuple:
    store = plan.store
    names = store.names() if plan._all_families else plan._names
    return tuple((id(f), len(f)) for n in names for f in store.families(n))


def _defined_name_sigs(plan) -> dict:
    store = plan.store
    names = store.names() if plan._all_families else plan._names
    ex = plan._excl
    return {n: tuple((id(f), len(f), ex[id(f)].version if id(f) in ex else 0) for f in store.families(n))
            for n in names}


def _rules(eng, exprs):
    return [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(exprs)]


@pytest.mark.parametrize("exprs", [
    ['sum by (svc) (m) > 1', 'rate(c_total[1m])', 'x'],
    ['{svc="a"}', 'm'],   # a name-less selector: every family of the store is read
])
@pytest.mark.parametrize("seed", [0, 1])
def test_signatures_equal_their_definitions_under_growth(exprs, seed):
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0)
    eng = PromQLEngine(store)
    plan = PackPlan(eng, _rules(eng, exprs))
    shapes = [("m", ("pod", "svc")), ("m", ("pod",)), ("c_total", ("pod", "svc")), ("x", ("a",)),
              ("unread", ("pod",)), ("other_total", ("svc",))]
    fams = []
    prev_sig, prev_def = plan.signature(), _defined_sig(plan)
    changes = 0
    for step in range(300):
        r = rng.random()
        if r < 0.08 or not fams:
            name, lnames = shapes[int(rng.integers(len(shapes)))]
            fams.append(store.family(name, lnames))
        elif r < 0.6:
            f = fams[int(rng.integers(len(fams)))]
            f.row(tuple(f"v{int(rng.integers(60))}" for _ in f.label_names))
        elif r < 0.7:
            times = np.arange(1, 3, dtype=np.int64) * 15000
            with np.errstate(all="ignore"):
                plan.evaluate(times)
        sig, want = plan.signature(), _defined_sig(plan)
        assert (sig != prev_sig) == (want != prev_def), step
        changes += want != prev_def
        prev_sig, prev_def = sig, want
        assert plan._name_sigs() == _defined_name_sigs(plan)
    assert changes > 50


def _instant_cols_definition(g, E, at_ms, offset_ms):
    """The former body of ``_instant_cols`` (np.clip, np.diff, ndarray.all)."""
    ref = E.times if at_ms is None else np.full(E.T, at_ms, dtype=np.int64)
    ref = ref - offset_ms
    idx = (ref - g.t0_ms) // g.step_ms
    j = np.clip(idx, 0, E.n_ticks - 1)
    tj = g.t0_ms + j * g.step_ms
    ok = ((ref - tj) <= g.lookback_ms) & (idx >= 0)
    js = slice(int(j[0]), int(j[0]) + E.T) if E.T and (np.diff(j) == 1).all() else None
    return ref, j, ok, js, bool(ok.all())


def test_instant_columns_equal_their_definition():
    """Instant selectors' columns, lookback mask, consecutive-column slice and all-present flag equal the former
    computation: random grids, times (consecutive, gapped, unsorted, repeated, before the first tick, past the last
    one, none), offsets, @ times and tick counts (none written too)."""
    from sremarathon_env.alerts.engine import _Ctx
    from sremarathon_env.alerts.plan import _Env, _Grid, _instant_cols

    rng = np.random.default_rng(9)
    for case in range(3000):
        step = int(rng.choice([15000, 30000, 1000]))
        g = _Grid(int(rng.choice([0, 7000, -15000])), step, int(rng.choice([300000, 15000, 0])))
        T = int(rng.integers(0, 12))
        kind = rng.random()
        start = int(rng.integers(-5, 40)) * step + int(rng.choice([0, 0, 1, step // 2]))
        if kind < 0.5:
            times = start + np.arange(T, dtype=np.int64) * step
        elif kind < 0.8:
            times = np.sort(start + rng.integers(-3, 60, size=T).astype(np.int64) * step)
        else:
            times = start + rng.integers(-3, 60, size=T).astype(np.int64) * step
        n_ticks = int(rng.integers(0, 50))
        at = None if rng.random() < 0.7 else int(rng.integers(-2, 50)) * step
        off = int(rng.choice([0, 0, 60000, -30000, 600000]))
        E = _Env(times.astype(np.int64), n_ticks, _Ctx(np.zeros(1, dtype=np.int64), 60000))
        got = _instant_cols(g, E, at, off)
        want = _instant_cols_definition(g, E, at, off)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[1].dtype == want[1].dtype
        assert np.array_equal(got[2], want[2]) and got[3] == want[3] and got[4] == want[4], case


@pytest.mark.parametrize("seed", range(4))
def test_changed_names_equal_the_definition_at_every_build(seed, monkeypatch):
    """``_changed_names`` (row counts compared in C, left-out versions per record) gives, at every build, the names
    whose ``_name_sigs`` entry differs from the one at the build before (the definition), on random growth: new
    families of read and unread names, rows appended, rows that stop getting samples (left out) and come back,
    calls at random times, earlier calls (every left-out row back)."""
    rng = np.random.default_rng(100 + seed)
    store = MetricStore(step_s=15.0)
    eng = PromQLEngine(store)
    plan = PackPlan(eng, _rules(eng, ['sum by (svc) (m) > 1', 'rate(c_total[1m])', 'max_over_time(x[2m])']))
    shapes = [("m", ("pod", "svc")), ("m", ("pod",)), ("c_total", ("pod", "svc")), ("x", ("a",)),
              ("unread", ("pod",))]
    seen = {"prev": {}, "builds": 0, "nonempty": 0}
    orig = PackPlan._changed_names

    def checked(self):
        want_sigs = _defined_name_sigs(self)
        got = orig(self)
        want = {n for n, sg in want_sigs.items() if seen["prev"].get(n) != sg}
        assert got == want, (seen["builds"], got, want)
        seen["prev"] = want_sigs
        seen["builds"] += 1
        seen["nonempty"] += bool(got)
        return got

    monkeypatch.setattr(PackPlan, "_changed_names", checked)
    fams, live = [], {}
    tick = 0
    for step in range(400):
        r = rng.random()
        if r < 0.05 or not fams:
            name, lnames = shapes[int(rng.integers(len(shapes)))]
            fams.append(store.family(name, lnames))
        elif r < 0.35:
            f = fams[int(rng.integers(len(fams)))]
            row = f.row(tuple(f"v{int(rng.integers(40))}" for _ in f.label_names))
            live[(id(f), row)] = (f, row)
        elif r < 0.45 and live:
            k = list(live)[int(rng.integers(len(live)))]   # a series stops getting samples
            del live[k]
        else:
            for f, row in list(live.values()):
                store.write(f, np.array([row]), tick, np.array([float(rng.integers(5))]))
            tick += 1
            if rng.random() < 0.5 and tick > 2:
                t_hi = tick - 1 if rng.random() < 0.9 else int(rng.integers(0, tick))
                times = np.arange(max(0, t_hi - 1), t_hi + 1, dtype=np.int64) * 15000
                with np.errstate(all="ignore"):
                    plan.evaluate(times)
    assert seen["builds"] > 20 and seen["nonempty"] > 10
    assert any(e.version for e in plan._excl.values())   # (rows were left out and taken back)

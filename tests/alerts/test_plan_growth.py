"""A long-lived plan that extends itself as series come and go gives exactly what a plan built from scratch
and the generic evaluator give.

Pods come and go at random (new names sort before, between and after the old ones; some go silent and are
left out, some come back; a second family of the same metric name gains rows too): after every call, each
rule's result of the long-lived plan equals the result of a fresh plan on the same store and of the generic
evaluator (every present sample, bit for bit), and each selector's incremental selection equals the generic
selection without the left-out rows (labels, order and the rows it gathers) and its record of how it was made
from the previous one (removed and inserted items) is exact.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts import syntax as S
from sremarathon_env.alerts.plan import PackPlan, _flatten, _gather, _selectors
from sremarathon_env.alerts.values import edited_from
from sremarathon_env.telemetry.store import MetricStore

from .test_plan import _present

EXPRS = [
    'm', 'm{phase="Running"}', 'm{svc=~"a|b"} > 1', 'm offset 1m',
    'sum by (svc) (m)', 'max without (pod) (m)', 'count by (phase) (m)', 'min by (svc, phase) (m)',
    'group without (phase, pod) (m)', 'sum(m)',
    'label_replace(m, "s2", "x-$1", "pod", "(.)-.*")', 'sum by (s2) (label_replace(m, "s2", "$1", "pod", "(.).*"))',
    'm * on (svc) group_left (team) info', 'info * on (svc) group_right m{phase="Running"}',
    'm / on (pod, svc) group_left c_total', 'm{phase="Running"} - on (pod) c_total',
    'm and on (pod) c_total', 'm unless on (pod) m{phase="Running"}', 'c_total and on (svc) (m > 2)',
    'histogram_quantile(0.9, sum by (svc, le) (rate(h_bucket[2m])))', 'histogram_quantile(0.5, h_bucket)',
    'sum by (svc) (increase(c_total[3m])) > 0', 'max_over_time(c_total[2m])', 'rate(c_total[1m] offset 1m)',
    'changes(m[2m])', 'count_over_time(m{phase="Pending"}[90s])', 'last_over_time(m[1m])',
    'max by (svc) (label_replace(rate(c_total[2m]) / on (pod) group_left m{phase="Running"}, "q", "$1", "svc", "(.*)"))',
]


def _same(a, b) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    return _present(a) == _present(b)


def _count_excl_steps(monkeypatch) -> list[int]:
    """Count the plan's consultations of ``_excl_steps``: ``[taken from the step, compared by the masks]`` (None)."""
    from sremarathon_env.alerts import plan as P
    taken = [0, 0]
    real_steps = P._excl_steps

    def counting(*a):
        out = real_steps(*a)
        taken[out is None] += 1
        return out
    monkeypatch.setattr(P, "_excl_steps", counting)
    return taken


def _pod_name(rng) -> str:
    letters = "abcmqz0"
    return "".join(rng.choice(list(letters), size=3)) + "-" + str(int(rng.integers(100)))


@pytest.mark.parametrize("steps", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_growing_plan_equals_fresh_plan_and_generic(seed, steps, monkeypatch):
    """(``steps``: a selection takes a change of the left-out rows from the record's last change where it is its only
    one, ``plan._excl_steps``, else from the masks.)"""
    from sremarathon_env.alerts import plan as P
    monkeypatch.setattr(P, "EXCL_STEPS", steps)
    taken = _count_excl_steps(monkeypatch)
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0)
    m = store.family("m", ("pod", "svc", "phase"))
    m2 = store.family("m", ("pod", "svc"))   # same name, other label names: a two-family selection
    c = store.family("c_total", ("pod", "svc"))
    h = store.family("h_bucket", ("pod", "svc", "le"))
    info = store.family("info", ("svc", "team"))
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(EXPRS)]
    plan = PackPlan(eng, rules)
    generic = PromQLEngine(store)
    sels = {s.key: s for r in rules for s in _selectors(r.node)}
    live = {}
    counts: dict = {}
    silent: dict = {}
    checked = grown = edited = 0
    for tick in range(150):
        # churn: new pods, pods going silent, silent pods coming back
        for _ in range(int(rng.integers(0, 3)) if tick % 3 == 0 else 0):
            live[_pod_name(rng)] = str(rng.choice(["a", "b", "c"]))
        if live and rng.random() < 0.25:
            gone = sorted(live)[int(rng.integers(len(live)))]
            silent[gone] = live.pop(gone)
        if silent and rng.random() < 0.04:
            back = sorted(silent)[int(rng.integers(len(silent)))]
            live[back] = silent.pop(back)
        keys = sorted(live.items())
        if keys:
            phases = [("Running", "Pending")[int(rng.integers(2))] for _ in keys]
            rows = m.rows([(p, s, ph) for (p, s), ph in zip(keys, phases)])
            store.write(m, rows, tick, rng.integers(0, 5, size=len(keys)).astype(float))
            crow = c.rows(keys)
            for (p, _), r in zip(keys, crow):
                counts[p] = counts.get(p, 0.0) + float(rng.integers(0, 4))
            store.write(c, crow, tick, np.array([counts[p] for p, _ in keys]))
            for le_i, le in enumerate(("0.1", "1", "+Inf")):
                hr = h.rows([(p, s, le) for p, s in keys])
                store.write(h, hr, tick, np.array([counts[p] * (le_i + 1) for p, _ in keys]))
            if tick % 4 == 0:
                few = keys[: int(rng.integers(0, 3))]
                if few:
                    store.write(m2, m2.rows(few), tick, np.ones(len(few)))
        if tick % 10 == 0:
            store.write(info, info.rows([("a", "x"), ("b", "y"), ("c", "z")]), tick, np.array([1.0, 2.0, 3.0]))
        if tick % 4 != 3:
            continue
        times = np.arange(max(tick - 7, 0), tick + 1, dtype=np.int64) * 15000
        got = plan.evaluate(times)
        fresh = PackPlan(PromQLEngine(store), rules).evaluate(times)
        for e, rule, a, b in zip(EXPRS, rules, got, fresh):
            assert _same(a, b), (e, tick)
            assert _same(a, generic.evaluate(rule.node, times)), (e, tick)
        # each selector: the incremental selection is the generic one without the left-out rows
        for sel in sels.values():
            parts, labels = plan._selection(sel)
            want_parts, want_labels = plan._live(sel.key, *eng._select(sel, plan._dummy))
            assert labels == want_labels, (sel.key, tick)
            if labels:
                cols = slice(0, store.n_ticks)
                a = _gather(*_flatten(parts), store.n_ticks, cols)
                b = _gather(*_flatten(want_parts), store.n_ticks, cols)
                assert np.array_equal(a, b, equal_nan=True), (sel.key, tick)
            assert plan._selection(sel)[1] is labels   # nothing changed: the same list
            g = edited_from(labels)
            if g is not None:   # the list is the earlier one less the removed items, with the new ones inserted
                old, pos, keep = g
                grown += 1
                edited += keep is not None
                kept = list(old) if keep is None else [lb for lb, k in zip(old, keep) if k]
                assert len(keep or old) == len(old)
                for p in pos:
                    kept.insert(p, labels[p])
                assert kept == labels
            checked += 1
    assert checked > 100 and grown > 20 and edited > 3 and plan.builds > 10 and plan.excluded > 0
    if steps:   # (the changes were taken from the records' steps)
        assert taken[0] > 3, taken


def test_selection_without_sort_keys_takes_the_generic_path():
    """A label value holding the sort key's separator characters: the generic selection (sorted by label
    sets) is used, with the same results as a fresh plan."""
    store = MetricStore(step_s=15.0)
    m = store.family("m", ("pod",))
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name="r", node=eng.compile("sum by (pod) (m)")),
             SimpleNamespace(name="s", node=eng.compile("m"))]
    plan = PackPlan(eng, rules)
    names = ["b", "a", "a\x01z", "a\x00", "0"]
    for tick, name in enumerate(names):
        store.write(m, m.rows([(n,) for n in names[: tick + 1]]), tick, np.arange(tick + 1, dtype=float))
        times = np.array([tick * 15000], dtype=np.int64)
        got = plan.evaluate(times)
        fresh = PackPlan(PromQLEngine(store), rules).evaluate(times)
        assert all(_same(a, b) for a, b in zip(got, fresh)), tick
        sel = rules[1].node
        assert isinstance(sel, S.Sel)
        assert plan._selection(sel)[1] == eng._select(sel, plan._dummy)[1]


def test_label_work_follows_edited_lists():
    """map_labels and has_dup on a list recorded as made from an earlier one (items removed, then inserted)
    equal their definitions, and so do the results derived from them in turn."""
    from sremarathon_env.alerts.values import has_dup, map_labels, memo, note_grown

    rng = np.random.default_rng(5)

    def fn(lb):
        return tuple(x for x in lb if x[0] != "b")

    labels = [(("a", str(i)), ("b", str(i % 3))) for i in range(20)]
    tag = ("test-edit", int(rng.integers(1 << 30)))
    memo(tag, (labels,), lambda: map_labels(tag, ("test-edit-fn",), labels, fn))
    assert not has_dup(labels)
    for step in range(60):
        keep = (rng.random(len(labels)) > 0.2).tolist() if rng.random() < 0.6 else None
        kept = list(labels) if keep is None else [lb for lb, k in zip(labels, keep) if k]
        n_new = int(rng.integers(0, 4))
        pos = sorted(rng.choice(len(kept) + n_new, size=n_new, replace=False).tolist()) if n_new else []
        new = list(kept)
        removed = [lb for lb in labels if lb not in kept]
        for j, p in enumerate(pos):
            if step % 7 == 0 and kept:   # sometimes a duplicate of a kept label set
                new.insert(p, kept[0])
            elif step % 5 == 0 and removed:   # a removed label set back (no duplicate)
                new.insert(p, removed.pop())
            else:
                new.insert(p, (("a", f"{step}-{j}"), ("b", str(j % 3))))
        note_grown(new, labels, pos, keep)
        out = memo(tag, (new,), lambda: map_labels(tag, ("test-edit-fn",), new, fn))
        assert out == [fn(lb) for lb in new]
        assert has_dup(new) == (len(set(new)) != len(new))
        if has_dup(new):
            new = [lb for i, lb in enumerate(new) if lb not in new[:i]]
            memo(tag, (new,), lambda: map_labels(tag, ("test-edit-fn",), new, fn))
            assert not has_dup(new)
        labels = new


@pytest.mark.parametrize("seed", range(6))
def test_selection_follows_left_out_changes_told_or_not(seed, monkeypatch):
    """A selection brought up to date after one change of its families' left-out rows (told as rows added and
    removed: ``_excl_steps``), after several, or after changes not told (masks compared), equals the generic selection
    without the left-out rows (labels, order, gathered rows), over random rows and random left-out sets of a
    two-family metric, selections consulted at random."""
    from sremarathon_env.alerts import plan as P
    taken = _count_excl_steps(monkeypatch)
    rng = np.random.default_rng(50 + seed)
    store = MetricStore(step_s=15.0)
    fams = [store.family("m", ("pod", "svc")), store.family("m", ("pod",))]
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(['m', 'm{svc=~"a|"}'])]
    plan = PackPlan(eng, rules)
    sels = [s for r in rules for s in _selectors(r.node)]
    for f in fams:
        f.row(tuple(_pod_name(rng) for _ in f.label_names))
        store.write(f, np.arange(len(f)), 0, np.ones(len(f)))
    plan.evaluate(np.zeros(1, dtype=np.int64))   # (its context for the generic selection)
    for _ in range(150):
        f = fams[int(rng.integers(2))]
        if rng.random() < 0.3:
            f.row((_pod_name(rng), str(rng.choice(["a", "b", ""])))[: len(f.label_names)])
        if rng.random() < 0.6:
            ent = plan._excl.get(id(f))
            if ent is None:
                ent = plan._excl[id(f)] = P._Excluded(f)
            out = set(ent.rows.tolist())
            add = sorted({int(r) for r in rng.integers(0, len(f), size=int(rng.integers(0, 3)))} - out)
            rem = sorted(r for r in out if rng.random() < 0.3)
            rows = np.asarray(sorted((out - set(rem)) | set(add)), dtype=np.intp)
            if rng.random() < 0.8:
                ent.set(rows, added=np.asarray(add, dtype=np.intp), removed=np.asarray(rem, dtype=np.intp))
            else:
                ent.set(rows)
        if rng.random() < 0.5:
            for sel in sels:
                parts, labels = plan._select_now(sel)
                want_parts, want_labels = plan._live(sel.key, *eng._select(sel, plan._dummy))
                assert labels == want_labels
                if labels:
                    cols = slice(0, store.n_ticks)
                    a = _gather(*_flatten(parts), store.n_ticks, cols)
                    b = _gather(*_flatten(want_parts), store.n_ticks, cols)
                    assert np.array_equal(a, b, equal_nan=True)
    assert taken[0] > 5 and taken[1] > 5, taken

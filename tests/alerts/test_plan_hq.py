"""The plan's ``histogram_quantile`` (batches of bucket groups with the same bounds, a constant quantile computed
bucket-wise on (groups x buckets x times) arrays, the preparation shared by the quantiles over one child) gives
what the generic evaluator gives, bit for bit: random bounds (negative, zero, repeated, without +Inf), counts with
NaN, zeros and decreasing runs, missing buckets at some times, quantiles below 0, above 1 and NaN."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sremarathon_env.alerts.engine import PromQLEngine, _Ctx
from sremarathon_env.alerts.plan import _Const, _HistQuantile
from sremarathon_env.alerts.values import Vec
from sremarathon_env.telemetry.store import MetricStore


def _bits(a: np.ndarray) -> list:
    """Values as bit patterns, every NaN as one pattern (no result shows a NaN's payload)."""
    a = np.where(np.isnan(a), np.nan, a)
    return a.view(np.int64).tolist()


def _case(rng):
    bounds = [-1.0, 0.0, 0.5, 1.0, 2.5, 5.0, 10.0, 100.0, np.inf]
    labels, groups = [], int(rng.integers(1, 6))
    for g in range(groups):
        kind = rng.random()
        if kind < 0.6:
            ubs = sorted(rng.choice(bounds[1:-1], size=int(rng.integers(0, 6)), replace=False).tolist()) + [np.inf]
        elif kind < 0.75:
            ubs = sorted(rng.choice(bounds, size=int(rng.integers(1, 5)), replace=False).tolist())   # maybe no +Inf
        elif kind < 0.85:
            ubs = [1.0, 1.0, 5.0, np.inf]   # a repeated bound: the per-time path
        else:
            ubs = [-1.0, 0.0, 2.5, np.inf]
        for ub in ubs:
            le = "+Inf" if ub == np.inf else repr(ub)
            labels.append((("__name__", "h_bucket"), ("g", f"g{g}"), ("le", le)))
    order = rng.permutation(len(labels))
    labels = [labels[i] for i in order]
    n, T = len(labels), int(rng.integers(1, 9))
    v = np.cumsum(rng.integers(0, 4, size=(n, T)).astype(np.float64), axis=0)
    v = np.where(rng.random((n, T)) < 0.1, np.nan, v)
    v = np.where(rng.random((n, T)) < 0.1, 0.0, v)
    v = np.where(rng.random((n, T)) < 0.05, -v, v)
    p = rng.random((n, T)) < (0.75 if rng.random() < 0.5 else 1.01)
    return labels, v, p, T


def test_plan_histogram_quantile_equals_the_generic_one():
    rng = np.random.default_rng(5)
    eng = PromQLEngine(MetricStore(step_s=15.0))
    qs = [0.0, 0.5, 0.9, 0.99, 1.0, -0.5, 1.5, np.nan]
    for case in range(300):
        labels, v, p, T = _case(rng)
        layout = eng._hq_layout(labels)
        if not layout:
            continue
        child = SimpleNamespace(value=lambda E, v=v, p=p: (v, p), labels=labels, kind="v")
        E = SimpleNamespace(T=T, ctx=_Ctx(np.zeros(T, dtype=np.int64), 60000))
        outs = []
        for q in rng.choice(qs, size=3):   # quantiles over one child share their preparation within a call
            node = _HistQuantile(_Const(float(q)), child, layout)
            with np.errstate(all="ignore"):
                got_v, got_p = node.compute(E)
                want = eng._histogram_quantile(np.full(T, float(q)), Vec(labels, v, p))
            assert node.labels == want.labels
            assert np.array_equal(got_p, want.p), (case, q)
            assert _bits(np.where(got_p, got_v, 0.0)) == _bits(np.where(want.p, want.v, 0.0)), (case, q)
            outs.append((got_v, got_p))
        # a non-constant quantile (per time) takes the generic bucket computation
        qv = rng.choice(qs, size=T)
        node = _HistQuantile(SimpleNamespace(value=lambda E, qv=qv: qv, kind="s"), child, layout)
        with np.errstate(all="ignore"):
            got_v, got_p = node.compute(SimpleNamespace(T=T, ctx=_Ctx(np.zeros(T, dtype=np.int64), 60000)))
            want = eng._histogram_quantile(qv, Vec(labels, v, p))
        assert np.array_equal(got_p, want.p), case
        assert _bits(np.where(got_p, got_v, 0.0)) == _bits(np.where(want.p, want.v, 0.0)), case


def test_constant_quantiles_over_one_child_are_computed_together_bit_for_bit():
    """The constant quantiles of all nodes over one child are one stacked computation per call (``quantiles``): each
    equals its own ``quantile`` pass and the generic evaluator, whatever the order in which nodes are made and
    computed, with 0.0 and -0.0 both present, and past the bound on quantiles computed together."""
    from sremarathon_env.alerts import plan as P

    rng = np.random.default_rng(11)
    eng = PromQLEngine(MetricStore(step_s=15.0))
    pool = [0.0, -0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0, 0.1, 0.3, 0.7, 0.05]
    stacked = 0
    for case in range(200):
        labels, v, p, T = _case(rng)
        layout = eng._hq_layout(labels)
        if not layout:
            continue
        child = SimpleNamespace(value=lambda E, v=v, p=p: (v, p), labels=labels, kind="v")
        qs = list(rng.choice(pool, size=int(rng.integers(1, len(pool) + 1)), replace=False))
        nodes = [_HistQuantile(_Const(float(q)), child, layout) for q in qs]
        E = SimpleNamespace(T=T, ctx=_Ctx(np.zeros(T, dtype=np.int64), 60000))
        with np.errstate(all="ignore"):   # (as PackPlan.evaluate runs its nodes)
            for bt in nodes[0].batches:
                assert len(bt.qs) <= P.HQ_QUANTILES_MAX
                prep = bt.prepare(v, p)
                Cc, obs = prep[4], prep[5]
                if Cc is None or not bt.qs:
                    continue
                together = bt.quantiles(Cc, obs)
                stacked += len(bt.qs) > 1
                assert list(together) == list(bt.qs)
                for key, q in bt.qs.items():
                    one = bt.quantile(q, Cc, obs, obs.shape)
                    assert _bits(together[key]) == _bits(one), (case, q)
        for i in rng.permutation(len(nodes)):
            q = float(qs[i])
            with np.errstate(all="ignore"):
                got_v, got_p = nodes[i].compute(E)
                want = eng._histogram_quantile(np.full(T, q), Vec(labels, v, p))
            assert np.array_equal(got_p, want.p), (case, q)
            assert _bits(np.where(got_p, got_v, 0.0)) == _bits(np.where(want.p, want.v, 0.0)), (case, q)
    assert stacked > 50

"""The compiled pack plan gives exactly the generic evaluator's results, on a marathon with faults.

The reference is an ``AlertEngine`` with explicit limits, which evaluates every rule through the
generic ``PromQLEngine`` path; the default engine uses the plan. Both watch the same store while a
faulted Online Boutique marathon runs (series sets grow as pods are replaced), and must agree on
every transition (values included, bit for bit), on ``history()`` and on ``active()``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from sremarathon_env.alerts import AlertEngine, Limits, PromQLEngine, load_rule_pack
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.telemetry.store import MetricStore


def _key(tr) -> tuple:
    return (tr.t, tr.alertname, tuple(sorted(tr.labels.items())), tr.state, tr.fingerprint, repr(tr.value))


def _digest(rows: list) -> str:
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3])
def test_plan_matches_generic_over_faulted_marathon(seed):
    from sremarathon_env.marathon import Marathon, MarathonConfig

    m = Marathon(MarathonConfig(seed=seed, reference_run=False, injection_s=2400, observation_s=600))
    m.start()
    store = m.backend.store
    pack = load_rule_pack()
    fast = AlertEngine(pack, store)
    ref = AlertEngine(pack, store, limits=Limits(max_series=10**7, max_points=10**9))
    assert fast._plan is not None and ref._plan is None
    ref.steady_fast_path = False  # the reference also steps every alert tick by tick
    got, want = [], []
    while True:
        got += [_key(tr) for tr in fast.evaluate_until(m.now)]
        want += [_key(tr) for tr in ref.evaluate_until(m.now)]
        assert got == want, f"transitions differ by t={m.now}"
        m.invoke([])
        if not m.advance_to_next_invocation():
            break
    assert _digest(got) == _digest(want)
    assert {s for *_, s, _, _ in got} >= {"pending", "firing"}  # the run really raised alerts
    assert fast.history() == ref.history()
    assert fast.active() == ref.active()
    assert fast.errors == ref.errors
    assert fast._plan.builds > 1  # series sets grew during the run and the plan followed them
    assert fast._plan.kept > 0  # rules over unchanged families kept their nodes through rebuilds


def _counter_store(n_ticks: int) -> MetricStore:
    store = MetricStore(step_s=15.0)
    req = store.family("istio_requests_total", ("namespace", "destination_workload", "reporter", "response_code"))
    rows = req.rows([("ob", "cart", "destination", "200"), ("ob", "cart", "destination", "503"),
                     ("ob", "ads", "destination", "200")])
    rng = np.random.default_rng(7)
    acc = np.zeros(3)
    for k in range(n_ticks):
        acc += rng.integers(0, 20, size=3)
        if k == 30:
            acc[0] = 0.0  # a counter reset
        store.write(req, rows, k, acc.copy())
    return store


def test_plan_batches_range_functions_and_handles_growth():
    store = _counter_store(60)
    rules = load_rule_pack().rules
    plan = PackPlan(PromQLEngine(store), rules)
    generic = PromQLEngine(store)
    times = np.arange(40, 48, dtype=np.int64) * 15000
    out = plan.evaluate(times)
    for rule, vec in zip(rules, out):
        ref = generic.evaluate(rule.node, times)
        assert vec.labels == ref.labels, rule.name
        assert np.array_equal(vec.p, ref.p), rule.name
        assert np.array_equal(np.where(vec.p, vec.v, 0.0), np.where(ref.p, ref.v, 0.0)), rule.name
    assert plan.builds == 1
    plan.evaluate(times + 8 * 15000)
    assert plan.builds == 1  # same series sets: no rebuild
    fam = store.families("istio_requests_total")[0]
    store.write(fam, fam.rows([("ob", "ads", "destination", "503")]), 59, np.array([4.0]))
    out = plan.evaluate(times + 8 * 15000)
    assert plan.builds == 2
    names = [r.name for r in rules]
    ref = generic.evaluate(rules[names.index("ServiceErrorRateHigh")].node, times + 8 * 15000)
    assert out[names.index("ServiceErrorRateHigh")].labels == ref.labels

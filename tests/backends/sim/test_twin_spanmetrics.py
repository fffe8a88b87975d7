"""Messaging span metrics (the collector's spanmetrics connector) of the Astronomy Shop twin."""

from __future__ import annotations

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.spanmetrics import CALLS, CONSUMER, PRODUCER, messaging_spans

ERR = "STATUS_CODE_ERROR"


def _ratio(eng, kind, t):
    q = (f'sum by (service_name) (rate({CALLS}{{span_kind="{kind}",status_code="{ERR}"}}[5m])) / '
         f'sum by (service_name) (rate({CALLS}{{span_kind="{kind}"}}[5m]))')
    return {r["metric"]["service_name"]: float(r["value"][1]) for r in eng.instant(q, t)["result"]}


def _p95(eng, t):
    q = 'histogram_quantile(0.95, sum by (service_name, le) (rate(traces_span_metrics_duration_milliseconds_bucket[5m])))'
    return {r["metric"]["service_name"]: float(r["value"][1]) for r in eng.instant(q, t)["result"]}


def test_spans_of_the_messaging_edges():
    sim = SimBackend("astronomy-shop", seed=0)
    assert [(s.service, s.span_name, s.kind) for s in messaging_spans(sim.m)] == [
        ("checkout", "PublishOrders", PRODUCER), ("accounting", "ConsumeOrders", CONSUMER),
        ("fraud-detection", "ConsumeOrders", CONSUMER)]
    assert SimBackend("online-boutique", seed=0).writer.spans is None   # its model runs no connector


def test_healthy_counts_follow_the_edges_and_no_error_series():
    sim = SimBackend("astronomy-shop", seed=1)
    sim.advance_to(900)
    fam = sim.store.families(CALLS)[0]
    assert all(lv[-1] != ERR for lv in fam._label_values)     # no error span yet: no error series
    v = fam.values(sim.store.n_ticks)
    assert np.all(np.diff(v, axis=1) >= -1e-9)                  # counters
    eng = PromQLEngine(sim.store)
    q = f'sum by (service_name) (rate({CALLS}[5m]))'
    rates = {r["metric"]["service_name"]: float(r["value"][1]) for r in eng.instant(q, 900.0)["result"]}
    edge = sim.edge_health("kafka", "accounting")["rate"]
    assert rates["accounting"] == pytest.approx(edge, rel=0.2) and rates["checkout"] == pytest.approx(edge, rel=0.2)
    p95 = _p95(eng, 900.0)
    assert p95["accounting"] < 200 and p95["fraud-detection"] < 200


def test_consumer_errors_and_latency_and_producer_errors_show():
    sim = SimBackend("astronomy-shop", seed=1)
    sim.advance_to(600)
    h1 = sim.apply_effect(Effect(kind="error_rate", service="accounting", rate=0.5))
    h2 = sim.apply_effect(Effect(kind="latency", service="fraud-detection", ms=2000))
    sim.advance_to(900)
    eng = PromQLEngine(sim.store)
    assert _ratio(eng, CONSUMER, 900.0)["accounting"] > 0.2
    assert "fraud-detection" not in _ratio(eng, CONSUMER, 900.0)
    assert _p95(eng, 900.0)["fraud-detection"] > 1000 and _p95(eng, 900.0)["accounting"] < 200
    # the error series starts at the tick its count first reaches one half (NaN before, as in Prometheus)
    fam = sim.store.families(CALLS)[0]
    row = fam._index[("astronomy-shop", "accounting", "ConsumeOrders", CONSUMER, ERR)]
    v = fam._data[row, :sim.store.n_ticks]
    first = int(np.flatnonzero(~np.isnan(v))[0])
    assert 40 <= first <= 44 and v[first] >= 0.5 and np.all(np.isnan(v[:first]))
    sim.remove_effect(h1)
    sim.remove_effect(h2)
    sim.advance_to(1500)
    assert _ratio(eng, CONSUMER, 1500.0).get("accounting", 0.0) == 0.0   # flat error counter: no errors now
    sim.apply_effect(Effect(kind="error_rate", service="kafka", rate=1.0))
    sim.advance_to(1800)
    assert _ratio(eng, PRODUCER, 1800.0)["checkout"] > 0.5


def test_block_size_does_not_change_the_series():
    """Advanced in one call or tick by tick: the same floats (counters are running sums per tick)."""
    a, b = SimBackend("astronomy-shop", seed=4), SimBackend("astronomy-shop", seed=4)
    for sim in (a, b):
        sim.advance_to(300)
        sim.apply_effect(Effect(kind="error_rate", service="fraud-detection", rate=0.3))
    a.advance_to(900)
    for t in range(315, 901, 15):
        b.advance_to(float(t))
    for name in (CALLS, "traces_span_metrics_duration_milliseconds_bucket"):
        fa, fb = a.store.families(name)[0], b.store.families(name)[0]
        assert fa._label_values == fb._label_values
        np.testing.assert_array_equal(fa.values(a.store.n_ticks), fb.values(b.store.n_ticks))


def test_a_consumer_without_ready_pods_has_no_spans_instead_of_error_spans():
    """Messages wait in the topic while no consumer pod is ready (a restart, not-ready): fewer spans, no errors."""
    sim = SimBackend("astronomy-shop", seed=0)
    sim.advance_to(600)
    h = sim.apply_effect(Effect(kind="not_ready", service="fraud-detection"))
    sim.advance_to(700)
    sim.remove_effect(h)
    sim.advance_to(900)
    eng = PromQLEngine(sim.store)
    q = f'sum by (service_name, status_code) (increase({CALLS}[5m]))'
    got = {(r["metric"]["service_name"], r["metric"]["status_code"]): float(r["value"][1])
           for r in eng.instant(q, 900.0)["result"]}
    assert ("fraud-detection", ERR) not in got
    assert got[("fraud-detection", "STATUS_CODE_UNSET")] < 0.9 * got[("accounting", "STATUS_CODE_UNSET")]

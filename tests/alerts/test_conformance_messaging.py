"""The messaging span rules (Astronomy Shop) over a faulted twin run, checked by promtool: a consumer that fails,
one that slows down, a producer that cannot publish and a slow broker, with their recoveries."""

from __future__ import annotations

import pytest

from faults.effects import Effect
from sremarathon_env.alerts import AlertEngine
from sremarathon_env.alerts.conformance import classify_expr_failures, promtool_path, run_promtool, write_test_file

from .twin import promtool_setup

pytestmark = [pytest.mark.promtool, pytest.mark.slow,
              pytest.mark.skipif(promtool_path() is None, reason="promtool not installed (Debian package 'prometheus')")]

RULES = ("MessagingSpanErrorsHigh", "MessagingSpanLatencyHigh")
EXPR_TIMES = [300.0 + 75.0 * i for i in range(17)]   # 300 .. 1500 s
ALERT_TIMES = [420.0, 600.0, 900.0, 1200.0, 1500.0]


def _run():
    from sremarathon_env.backends.sim import SimBackend

    sim = SimBackend("astronomy-shop", seed=3)
    sim.advance_to(240)
    h1 = sim.apply_effect(Effect(kind="error_rate", service="accounting", rate=0.4))
    sim.advance_to(450)
    h2 = sim.apply_effect(Effect(kind="latency", service="fraud-detection", ms=1500))
    sim.advance_to(700)
    sim.remove_effect(h1)
    h3 = sim.apply_effect(Effect(kind="error_rate", service="kafka", rate=1.0))
    sim.advance_to(1000)
    sim.remove_effect(h2)
    sim.remove_effect(h3)
    h4 = sim.apply_effect(Effect(kind="latency", service="kafka", ms=1200))
    sim.advance_to(1300)
    sim.remove_effect(h4)
    sim.advance_to(1500)
    return sim


def test_messaging_rules_agree_with_promtool(tmp_path):
    sim = _run()
    store = sim.store
    pack, rules_path, test_pack, eng, batch = promtool_setup(store, tmp_path)
    mine = [r for r in pack.rules if r.name in RULES]
    assert [r.name for r in mine] == list(RULES)
    for rule in mine:
        for t in EXPR_TIMES:
            batch.add_expr(rule.expr, t, eng.instant(rule.expr, t))
    alerts = AlertEngine(test_pack, store)
    fired = set()
    for t in ALERT_TIMES:
        alerts.evaluate_until(t)
        firing = alerts.firing()
        for name in RULES:
            got = [(a["labels"], a["annotations"]) for a in firing if a["alertname"] == name]
            fired |= {(name, labels["service"], labels["span_kind"]) for labels, _ in got}
            batch.add_alerts(name, t, got)
    # each rule fires for the service the fault is on, and only there
    assert fired == {("MessagingSpanErrorsHigh", "accounting", "SPAN_KIND_CONSUMER"),
                     ("MessagingSpanLatencyHigh", "fraud-detection", "SPAN_KIND_CONSUMER"),
                     ("MessagingSpanErrorsHigh", "checkout", "SPAN_KIND_PRODUCER"),
                     ("MessagingSpanLatencyHigh", "checkout", "SPAN_KIND_PRODUCER")}
    assert batch.n_cases >= 40
    path = tmp_path / "messaging.yml"
    write_test_file(path, batch, [rules_path.name])
    report = run_promtool(path, batch.n_cases, timeout_s=300)
    reorder, real = classify_expr_failures(report.output)
    alert_fail = [f for f in report.failures if f.strip().startswith("alertname")]
    assert not real and not alert_fail, report.output[-6000:]

"""The messaging span rules (Astronomy Shop) over a faulted twin run, checked by promtool: a consumer that fails,
one that slows down, a producer that cannot publish and a slow broker, with their recoveries."""

from __future__ import annotations

import pytest

from faults.effects import Effect
from sremarathon_env.alerts.conformance import promtool_path

from .twin import promtool_check_rules

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
    fired = {(name, labels["service"], labels["span_kind"])
             for name, _, labels in promtool_check_rules(_run().store, tmp_path, RULES, EXPR_TIMES, ALERT_TIMES).fired}
    # each rule fires for the service the fault is on, and only there
    assert fired == {("MessagingSpanErrorsHigh", "accounting", "SPAN_KIND_CONSUMER"),
                     ("MessagingSpanLatencyHigh", "fraud-detection", "SPAN_KIND_CONSUMER"),
                     ("MessagingSpanErrorsHigh", "checkout", "SPAN_KIND_PRODUCER"),
                     ("MessagingSpanLatencyHigh", "checkout", "SPAN_KIND_PRODUCER")}

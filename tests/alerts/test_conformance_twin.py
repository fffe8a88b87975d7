"""Every rule of the pack over series from a faulted twin run, checked by promtool.

promql_expr_test: each rule's expression at several times; alert_rule_test: the firing alerts of
each rule (labels and annotations) at several times, with our AlertEngine's state as expected.
"""

from __future__ import annotations

import pytest

from sremarathon_env.alerts import AlertEngine
from sremarathon_env.alerts.conformance import classify_expr_failures, promtool_path, run_promtool, write_test_file

from .twin import faulted_run, promtool_setup

pytestmark = [pytest.mark.promtool, pytest.mark.slow,
              pytest.mark.skipif(promtool_path() is None, reason="promtool not installed (Debian package 'prometheus')")]

EXPR_TIMES = [450.0, 600.0, 780.0, 900.0, 1050.0, 1200.0, 1380.0, 1500.0]
ALERT_TIMES = [600.0, 900.0, 1200.0, 1500.0, 2400.0]


def test_rule_pack_agrees_with_promtool_on_twin_series(tmp_path):
    sim = faulted_run()
    store = sim.store
    pack, rules_path, test_pack, eng, batch = promtool_setup(store, tmp_path)
    for rule in pack.rules:
        for t in EXPR_TIMES:
            batch.add_expr(rule.expr, t, eng.instant(rule.expr, t))
    alerts = AlertEngine(test_pack, store)
    n_firing = 0
    for t in ALERT_TIMES:
        alerts.evaluate_until(t)
        firing = alerts.firing()
        for rule in test_pack.rules:
            mine = [(a["labels"], a["annotations"]) for a in firing if a["alertname"] == rule.name]
            n_firing += len(mine)
            batch.add_alerts(rule.name, t, mine)
    assert batch.n_cases >= 800 and n_firing >= 20
    path = tmp_path / "twin.yml"
    write_test_file(path, batch, [rules_path.name])
    report = run_promtool(path, batch.n_cases, timeout_s=600)
    reorder, real = classify_expr_failures(report.output)
    alert_fail = [f for f in report.failures if f.strip().startswith("alertname")]
    assert not real and not alert_fail, report.output[-6000:]
    print(f"twin conformance: {batch.n_cases} cases ({len(batch.expr_cases)} expr, {len(batch.alert_cases)} alert, "
          f"{n_firing} firing alerts expected); promtool exact disagreements: {len(report.failures)}, "
          f"of which reordering-only: {len(reorder)}, real: {len(real)}")
    assert len(reorder) <= batch.n_cases // 10

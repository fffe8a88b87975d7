"""A twin run of Online Boutique with overlapping faults, for rule-pack and conformance tests."""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

from faults.effects import Effect

END_S = 2400.0


@lru_cache(maxsize=2)
def faulted_run(seed: int = 2):
    from sremarathon_env.backends.sim import SimBackend

    sim = SimBackend("online-boutique", seed=seed)
    sim.advance_to(120)
    h1 = sim.apply_effect(Effect(kind="error_rate", service="paymentservice", rate=0.6))
    sim.advance_to(300)
    h2 = sim.apply_effect(Effect(kind="crash", service="cartservice"))
    sim.advance_to(480)
    h3 = sim.apply_effect(Effect(kind="latency", service="productcatalogservice", ms=1500))
    sim.advance_to(700)
    sim.remove_effect(h1)
    sim.deploy("currencyservice", image_tag="bad", message="bump currency", author="dev")
    h4 = sim.apply_effect(Effect(kind="not_ready", service="emailservice"))
    sim.advance_to(900)
    h5 = sim.apply_effect(Effect(kind="node_down", node="node-a1"))
    sim.remove_effect(h2)
    sim.advance_to(1200)
    sim.remove_effect(h5)
    sim.remove_effect(h3)
    h6 = sim.apply_effect(Effect(kind="no_endpoints", service="shippingservice"))
    sim.advance_to(1500)
    sim.remove_effect(h4)
    sim.remove_effect(h6)
    sim.advance_to(END_S)
    return sim


def promtool_setup(store, tmp_path):
    """(pack, rules file for promtool, the pack loaded from it, engine, batch) for a conformance test over
    ``store``: ``$value`` renders the last bits of sums that promtool adds in a random order, so the alert tests
    check labels, state and ``$labels`` rendering (exact ``$value`` rendering is checked on synthetic series)."""
    from sremarathon_env.alerts import PromQLEngine, load_rule_pack
    from sremarathon_env.alerts.conformance import Batch

    pack = load_rule_pack()
    rules_path = tmp_path / "pack.yaml"
    rules_path.write_text(pack.text.replace("{{ $value }}", "(value)"))
    test_pack = load_rule_pack(rules_path)
    eng = PromQLEngine(store, default_step_s=15)
    batch = Batch(store, stale_on_gap=True, evaluation_interval_ms=15000)
    return pack, rules_path, test_pack, eng, batch


def promtool_check_rules(store, tmp_path, names, expr_times, alert_times, min_cases: int = 40,
                         timeout_s: int = 300) -> SimpleNamespace:
    """Check the rules ``names`` of the pack over ``store`` with promtool: our engine's value of each rule's
    expression at ``expr_times`` (``promql_expr_test``) and the firing alerts at ``alert_times``
    (``alert_rule_test``) are written as expected results, and promtool must agree (differences in the order of
    float additions aside, see ``classify_expr_failures``). Returns ``fired`` (``(rule name, time, labels)`` of
    every firing alert checked, for the test's own claims), ``batch`` and ``report``, and ``reorder`` (promtool's
    exact disagreements that are reordering only)."""
    from sremarathon_env.alerts import AlertEngine
    from sremarathon_env.alerts.conformance import classify_expr_failures, run_promtool, write_test_file

    pack, rules_path, test_pack, eng, batch = promtool_setup(store, tmp_path)
    mine = [r for r in pack.rules if r.name in names]
    assert {r.name for r in mine} == set(names)   # (several rules may share a name: each app has its own entry rules)
    for rule in mine:
        for t in expr_times:
            batch.add_expr(rule.expr, t, eng.instant(rule.expr, t))
    alerts = AlertEngine(test_pack, store)
    fired = []
    for t in alert_times:
        alerts.evaluate_until(t)
        firing = alerts.firing()
        for name in names:
            got = [(a["labels"], a["annotations"]) for a in firing if a["alertname"] == name]
            fired += [(name, t, labels) for labels, _ in got]
            batch.add_alerts(name, t, got)
    assert batch.n_cases >= min_cases
    path = tmp_path / "rules_test.yml"
    write_test_file(path, batch, [rules_path.name])
    report = run_promtool(path, batch.n_cases, timeout_s=timeout_s)
    reorder, real = classify_expr_failures(report.output)
    alert_fail = [f for f in report.failures if f.strip().startswith("alertname")]
    assert not real and not alert_fail, report.output[-6000:]
    return SimpleNamespace(fired=fired, batch=batch, report=report, reorder=reorder)


def same_result(a, b) -> bool:
    """Two rule results equal: the same error, or the same present (labels, values) per time."""
    from .test_plan import _present

    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    return _present(a) == _present(b)


def fresh_results(plan, times, evaluate, fuse: bool = True) -> list:
    """``evaluate`` (`PackPlan.evaluate`) of a new plan of ``plan``'s rules on a new engine over the same store, at
    ``times`` (``fuse=False``: built without the fused aggregations of a label_replace, the unfused definition)."""
    from sremarathon_env.alerts import plan as P
    from sremarathon_env.alerts.engine import PromQLEngine

    src = plan.promql
    old = P.FUSE_LABEL_REPLACE
    P.FUSE_LABEL_REPLACE = fuse
    try:
        eng = PromQLEngine(src.store, src.limits, default_step_s=src.default_step_ms / 1000)
        return evaluate(P.PackPlan(eng, plan.rules), times)
    finally:
        P.FUSE_LABEL_REPLACE = old


def noop_marathon_checked(env, monkeypatch, fuse_fresh: bool = True, label=()) -> int:
    """Step ``env`` (reset) through a no-op marathon, checking at every call of its alert plan that each rule's result
    equals `fresh_results`' on that call's store; the number of calls checked."""
    from sremarathon_env.alerts import plan as P

    main = env.marathon.alert_engine._plan
    calls = [0]
    orig = P.PackPlan.evaluate

    def checked(self, times):
        out = orig(self, times)
        if self is main:
            fresh = fresh_results(self, times, orig, fuse_fresh)
            for rule, a, b in zip(self.rules, out, fresh):
                assert same_result(a, b), (*label, calls[0], rule.name)
            calls[0] += 1
        return out

    monkeypatch.setattr(P.PackPlan, "evaluate", checked)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step("[]")
        done = term or trunc
    return calls[0]

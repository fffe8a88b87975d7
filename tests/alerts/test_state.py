"""Alert state machine and attribution labels over real twin runs."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import AlertEngine, load_rule_pack
from sremarathon_env.alerts.state import fingerprint
from sremarathon_env.telemetry.store import MetricStore

from .twin import END_S, faulted_run

RULES = """groups:
- name: g
  interval: 15s
  rules:
  - alert: High
    expr: g > 5
    for: 1m
    labels: {severity: warning}
    annotations: {summary: "{{ $labels.a }} at {{ $value }}"}
"""


def _engine(tmp_path, values):
    st = MetricStore(step_s=15.0)
    fam = st.family("g", ("a",))
    rows = fam.rows([("x",)])
    for k, v in enumerate(values):
        st.write(fam, rows, k, np.array([v]))
    p = tmp_path / "r.yaml"
    p.write_text(RULES)
    return AlertEngine(load_rule_pack(p), st)


def test_pending_firing_resolved_and_refire(tmp_path):
    #          0  15 30 45 60 75 90 105 120 135 150 165 180
    values = [0, 9, 9, 9, 9, 9, 1, 9, 1, 9, 9, 9, 9, 9, 9]
    eng = _engine(tmp_path, values)
    tr = eng.evaluate_until(60)
    assert [(t.t, t.state) for t in tr] == [(15.0, "pending")]  # for: 1m not yet elapsed at 60 s
    tr = eng.evaluate_until(210)
    assert [(t.t, t.state) for t in tr] == [
        (75.0, "firing"), (90.0, "resolved"), (105.0, "pending"), (120.0, "inactive"),
        (135.0, "pending"), (195.0, "firing")]
    hist = eng.history()
    assert len(hist) == 1
    h = hist[0]
    assert h["first_pending_at"] == 15.0 and h["first_firing_at"] == 75.0 and h["resolved_at"] == 90.0
    assert h["episodes"] == 3 and h["state"] == "firing"
    assert h["annotations"] == {"summary": "x at 9"}
    assert h["fingerprint"] == fingerprint({"alertname": "High", "a": "x", "severity": "warning"})
    assert eng.evaluate_until(210) == []  # nothing evaluated twice


def test_changed_alerts_since_follows_changes_since(tmp_path):
    values = [0, 9, 9, 9, 9, 9, 1, 9, 1, 9, 9, 9, 9, 9, 9]
    eng = _engine(tmp_path, values)
    pos_d = pos_a = 0
    for t in (30, 60, 90, 120, 150, 210, 210):
        eng.evaluate_until(t)
        pos_d, dicts = eng.changes_since(pos_d)
        pos_a, objs = eng.changed_alerts_since(pos_a)
        assert pos_a == pos_d
        assert [k for k, _ in objs] == [k for k, _ in dicts]
        for (_, a), (_, d) in zip(objs, dicts):
            assert a.shared_dict() is d and a.fingerprint == d["fingerprint"]
    assert eng.changed_alerts_since(pos_a) == (pos_a, [])


def test_incremental_equals_single_pass():
    sim = faulted_run()
    pack = load_rule_pack()
    one = AlertEngine(pack, sim.store)
    whole = [t.to_dict() for t in one.evaluate_until(END_S)]
    inc = AlertEngine(pack, sim.store)
    parts = []
    for k in range(1, int(END_S // 120) + 1):
        parts += [t.to_dict() for t in inc.evaluate_until(120.0 * k)]
    assert whole == parts and len(whole) > 50
    assert one.history() == inc.history()


def test_alerts_carry_attribution_labels():
    sim = faulted_run()
    eng = AlertEngine(load_rule_pack(), sim.store)
    eng.evaluate_until(END_S)
    hist = eng.history()
    assert not eng.errors
    deployments = {d["metadata"]["name"] for d in sim.k8s_get("deployment")}
    for a in hist:
        lb = a["labels"]
        if a["alertname"].startswith(("KubeNode", "Node")):
            assert lb["node"].startswith("node-")
        elif a["alertname"] not in ("KubeCPUOvercommit", "KubeMemoryOvercommit") and not a["alertname"].startswith("KubeQuota"):
            assert lb["namespace"] == "online-boutique", a
            assert lb["service"] in deployments | {"frontend"}, a
    fired = {(a["alertname"], a["labels"].get("service", a["labels"].get("node"))) for a in hist if a["first_firing_at"]}
    for expected in [("PodCrashLooping", "cartservice"), ("ImagePullFailing", "currencyservice"),
                     ("PodNotReady", "emailservice"), ("ServiceHasNoEndpoints", "shippingservice"),
                     ("NodeNotReady", "node-a1"), ("ServiceErrorRateCritical", "paymentservice"),
                     ("ServiceLatencyP99Critical", "productcatalogservice"), ("EntryErrorRateHigh", "frontend")]:
        assert expected in fired, expected


@pytest.mark.promtool
def test_value_annotation_rendering_agrees_with_promtool(tmp_path):
    from sremarathon_env.alerts.conformance import Batch, promtool_path, run_promtool, write_test_file
    if promtool_path() is None:
        pytest.skip("promtool not installed")
    values = [0, 9, 9, 9, 9, 9, 1, 9, 1, 9.25, 1234567, 0.00001, 12.5, 100000, 7]
    eng = _engine(tmp_path, values)
    batch = Batch(eng.store, evaluation_interval_ms=15000)
    for k in range(1, len(values)):
        eng.evaluate_until(15.0 * k)
        batch.add_alerts("High", 15.0 * k, [(a["labels"], a["annotations"]) for a in eng.firing()])
    path = tmp_path / "t.yml"
    write_test_file(path, batch, ["r.yaml"])
    rep = run_promtool(path, batch.n_cases)
    assert rep.ok, rep.output


def test_json_text_is_the_sorted_compact_ascii_json_of_to_dict():
    """``json_text`` writes its keys and values itself: it must equal the encoder's text of ``to_dict()`` for any
    labels, annotations (odd characters, non-string values) and edge numbers, at every revision."""
    import json
    import random

    from sremarathon_env.alerts.state import _Alert

    rng = random.Random(6)
    chars = 'ab"\\\u00e9\u2603\n\t\x00\x1f/<>&\' \U0001f600'

    def text(n):
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, n)))

    numbers = [0.0, -0.0, 1.5, float("nan"), float("inf"), -float("inf"), 1e-300, 10 ** 20, 3]
    for k in range(300):
        labels = {"alertname": text(5) or "A", **{text(4): text(6) for _ in range(rng.randint(0, 3))}}
        a = _Alert(k % 3, labels, text(8), rng.choice(["pending", "firing", "inactive"]), 15000 * k, 0.5, {}, 15000)
        for _ in range(3):
            ann = {text(5): text(9) for _ in range(rng.randint(0, 3))}
            if rng.random() < 0.2:
                ann[text(3) + "n"] = rng.choice([1, 2.5, None])   # not a string: the encoder's way
            a.annotations = ann
            a.state = rng.choice(["pending", "firing", "inactive"])
            a.value = rng.choice(numbers)
            a.first_firing_ms, a.firing_ms, a.resolved_ms = (rng.choice([None, 30000, 45015]) for _ in range(3))
            a.episodes = rng.choice([1, 7, 10 ** 20])
            a.rev += 1
            want = json.dumps(a.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
            assert a.json_text() == want

"""Property-based fuzz: 10,000 random and malformed tool calls; no exception escapes `ToolRuntime.call`
and every result is a consistent, JSON-able `ToolResult`.

Hypothesis draws a short byte string per example and `_decode` turns it into a call (tool name,
argument shape, keys and values from pools of valid, boundary and hostile values). Drawing bytes is
what keeps 10,000 examples within seconds; shrinking still works on the bytes.
"""

import json

import numpy as np

from hypothesis import HealthCheck, given, settings, strategies as st

from sremarathon_env.tools import TOOL_NAMES, TOOLS, ToolResult
from tool_doubles import OB

_NAMES_JUNK = [None, 12, "", "x" * 300, "get_logs ", "GET_LOGS", "rm -rf /", "__init__", "call", ["get_logs"]]
_VALUES = [
    None, True, False, 0, -1, 1, 2, 15, 60, 300, 5400, 10**6, 2**63, -(2**63), 1e308, 3.5, float("nan"),
    float("inf"), float("-inf"), "", "x", "10", "true", "null", *OB.service_names, "ghost", "kube-dns",
    "../../etc/passwd", "/etc/shadow", "a\x00b", "a\\b", "\ud800", "kube-system", "online-boutique", "default",
    "INC-0001", "INC-0002", "INC-9999", "node-a1", "node-b2", "node-z", "zone-a", "zone-b", "up",
    'sum by (destination_workload) (rate(istio_requests_total{reporter="destination"}[5m]))', "sum(", "{x=}",
    "secret", "Secret/db", "pods", "deploy", "nodes", "json", "table", "firing", "Warning", "overwrite", "append",
    "delete", "x" * 5000, "é" * 100, [], ["fp-cart"], [1, 2], ["cartservice", "ghost"], {}, {"a": 1},
    "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "--- /dev/null\n+++ b/../../x\n@@ -0,0 +1 @@\n+a\n",
]
_ARGS_JUNK = [None, "", " ", "null", "[]", "{", '{"a":', "\x00", "[" * 50_000, "x" * 600_000, 42, 3.5, [1, {}],
              ("t",), b"{}", True]
_EXTRA_KEYS = ["bogus", "namespace", "incident_id", "", "service", "__class__"]


#: one valid call per tool; the decoder mutates these so that deep paths (handlers, backend) are reached
_VALID = {
    "get_alerts": {"state": "firing"}, "query_metrics": {"query": "sum(rate(istio_requests_total[5m]))"},
    "get_logs": {"service": "cartservice", "limit": 5}, "get_traces": {"service": "frontend", "limit": 2},
    "get_topology": {}, "kubectl_get": {"kind": "pods"}, "get_events": {}, "get_deploy_history": {"service": "adservice"},
    "read_source": {"service": "frontend"}, "list_workspace": {}, "read_workspace": {"path": "notes.md"},
    "write_workspace": {"path": "notes.md", "content": "x", "mode": "append"},
    "report_incident": {"title": "t", "culprit_services": ["cartservice"]},
    "update_incident": {"incident_id": "INC-0001", "summary": "s"}, "resolve_incident": {"incident_id": "INC-0002"},
    "rollback": {"service": "cartservice", "incident_id": "INC-0001"},
    "scale": {"service": "cartservice", "replicas": 2, "incident_id": "INC-0001"},
    "restart": {"service": "adservice", "incident_id": "INC-0001"},
    "set_config": {"target": "cartservice", "key": "REDIS_ADDR", "value": "redis-cart:6379", "incident_id": "INC-0001"},
    "set_resources": {"service": "cartservice", "cpu_limit_m": 400, "incident_id": "INC-0001"},
    "patch_source": {"service": "frontend", "diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "incident_id": "INC-0001"},
    "drain_node": {"node": "node-b2", "incident_id": "INC-0001"}, "uncordon_node": {"node": "node-b2", "incident_id": "INC-0001"},
    "failover_zone": {"zone": "zone-b", "incident_id": "INC-0001"},
    "read_secret": {"name": "x"}, "delete_namespace": {"namespace": "online-boutique"},
    "edit_alert_rules": {"alertname": "X"},
}


class _Bytes:
    def __init__(self, data: bytes):
        self.data, self.i = data, 0

    def byte(self) -> int:
        b = self.data[self.i] if self.i < len(self.data) else 0
        self.i += 1
        return b

    def pick(self, seq):
        return seq[(self.byte() * 256 + self.byte()) % len(seq)]


def _decode(data: bytes):
    b = _Bytes(data)
    name = b.pick(TOOL_NAMES) if b.byte() < 220 else b.pick(_NAMES_JUNK)
    model = TOOLS.get(name) if isinstance(name, str) else None
    keys = (list(model.model_fields) if model else []) + _EXTRA_KEYS
    args = dict(_VALID.get(name, {})) if isinstance(name, str) and b.byte() < 128 else {}
    for _ in range(b.byte() % (3 if args else 6)):
        k = b.pick(keys)
        r = b.byte()
        if r < 200:
            args[k] = b.pick(_VALUES)
        elif r < 230:
            args[k] = (b.byte() * 256 + b.byte()) - 32768
        else:
            args[k] = (b.byte() * 256 + b.byte()) / 7.0
    shape = b.byte()
    if shape < 170:
        return name, args
    text = json.dumps(args, default=str)
    if shape < 210:
        return name, text
    if shape < 230:
        return name, text[: b.byte() % (len(text) + 1)]
    return name, b.pick(_ARGS_JUNK)


def _check(r: ToolResult) -> None:
    assert isinstance(r, ToolResult)
    assert r.ok == (r.error is None)
    assert r.cost_s >= 0 and r.budget_left_s >= 0
    assert r.policy.decision in ("allowed", "refused", "forbidden", "out_of_scope")
    assert (r.error is not None and r.error.type == "forbidden") == (r.policy.decision == "forbidden")
    if r.policy.decision == "out_of_scope":
        assert r.category == "intervention" and r.cited_incident
    json.dumps(r.to_json(), allow_nan=False)


def test_valid_templates_are_valid():
    for name, args in _VALID.items():
        TOOLS[name].model_validate(args)
    assert set(_VALID) == set(TOOL_NAMES)


def test_decoder_reaches_every_tool_and_shape():
    rng = np.random.default_rng(0)
    seen, shapes = set(), set()
    for _ in range(5000):
        name, args = _decode(rng.bytes(32))
        seen.add(name if isinstance(name, str) else None)
        shapes.add(type(args).__name__)
    assert set(TOOL_NAMES) <= seen and {"dict", "str", "NoneType", "list", "int"} <= shapes


def test_fuzz_ten_thousand_calls(fuzz_runtime):
    rt = fuzz_runtime
    assert rt.call("report_incident", {"title": "fuzz target", "culprit_services": ["cartservice"]}).ok
    counts: dict[str, int] = {}

    @settings(max_examples=10_000, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.binary(min_size=8, max_size=40))
    def run(data):
        rt.begin_invocation(rt.ctx.now)
        name, args = _decode(data)
        r = rt.call(name, args)
        _check(r)
        assert r.error is None or not r.error.message.startswith("internal error"), r.error
        key = ("ok" if r.category != "intervention" else "intervention_ok") if r.ok else r.error.type
        counts[key] = counts.get(key, 0) + 1

    run()
    assert sum(counts.values()) >= 10_000
    # the fuzz exercises successes and every refusal path, not just one kind of error
    assert {"ok", "intervention_ok", "validation_error", "unknown_tool", "forbidden", "policy_refused",
            "not_found"} <= set(counts), counts

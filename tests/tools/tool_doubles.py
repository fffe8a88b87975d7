"""Tiny test doubles for policy-only unit tests: `Recorder` records which backend operations were
called and answers reads with empty data; `History` serves a fixed alert history. Tool behaviour
against a real cluster model is tested with the twin (`SimBackend`)."""

from __future__ import annotations

from apps import load_app
from sremarathon_env.backends.base import OpResult

OB = load_app("online-boutique")


class Recorder:
    app_name = "online-boutique"
    tick_s = 15.0

    def __init__(self, app=OB, fail: bool = False):
        self.app = app
        self.ops: list[tuple] = []
        self.fail = fail

    def _op(self, *call):
        self.ops.append(call)
        return OpResult(not self.fail, "refused by test double" if self.fail else f"{call[0]} done", {"op": call[0]})

    def k8s_get(self, kind, name=None):
        if kind != "Pod":
            return []
        return [{"metadata": {"name": f"{s.name}-abc-{i}", "labels": {"app": s.name}}, "spec": {"nodeName": s.node},
                 "status": {"phase": "Running"}} for i, s in enumerate(self.app.services)]

    def events(self, since, until): return []
    def logs(self, service, since, until, pattern, limit): return []
    def traces(self, service, endpoint, since, until, errors_only, limit): return []
    def deploy_history(self, service): return []
    def source_files(self, service): return []
    def read_source(self, service, path): return None
    def rollback(self, service, revision): return self._op("rollback", service, revision)
    def scale(self, service, replicas): return self._op("scale", service, replicas)
    def restart(self, service): return self._op("restart", service)
    def set_config(self, target, key, value): return self._op("set_config", target, key, value)
    def set_resources(self, service, **kw): return self._op("set_resources", service, tuple(sorted(kw.items())))
    def drain_node(self, node): return self._op("drain_node", node)
    def uncordon_node(self, node): return self._op("uncordon_node", node)
    def deploy(self, service, **kw): return self._op("deploy", service)


class History:
    """An alert history as plain data (the shape AlertEngine.history() yields, as dicts)."""

    def __init__(self, alerts):
        self.alerts = alerts

    def history(self):
        return list(self.alerts)


ALERTS = [
    {"alertname": "KubePodCrashLooping", "fingerprint": "fp-cart", "state": "firing",
     "labels": {"alertname": "KubePodCrashLooping", "namespace": "online-boutique",
                "pod": "cartservice-6d5b8c-x2x9q", "severity": "warning"}, "firing_at": 300.0},
    {"alertname": "HighErrorRate", "fingerprint": "fp-pay", "state": "resolved",
     "labels": {"alertname": "HighErrorRate", "destination_workload": "paymentservice", "severity": "critical"},
     "firing_at": 120.0, "resolved_at": 240.0},
]



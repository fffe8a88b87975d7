"""Hand-built bundles for the report tests (no twin needed)."""

from __future__ import annotations

import json
from pathlib import Path

from sremarathon_env.bundle import Recorder

RUN = {"app": "online-boutique", "seed": 0, "catalogue_version": "t", "rule_pack_version": "t", "cadence_s": 120.0,
       "tick_s": 15.0, "injection_s": 600.0, "observation_s": 240.0, "n_invocations": 7, "hold_s": 30.0,
       "grace_s": 60.0}


def _fault(iid, start, end, svc, art):
    return {"instance_id": iid, "fault_id": f"ob-test-{iid}", "category": "config", "mechanism": "config_push",
            "start_s": start, "end_s": end, "target": svc, "culprits": [svc],
            "artifact": {"kind": "config_key", "canonical": art}, "scope": [svc, "frontend"]}


def build_bundle(path: Path, policy: str, seed: int = 0, app: str = "online-boutique", skill: int = 0) -> Path:
    """A 2-fault bundle. ``skill`` 0: nothing; 1: correlate fault f0; 2: localise it; 3: also repair it."""
    rec = Recorder(path)
    rec.append("run", 0.0, {**RUN, "app": app, "seed": seed})
    rec.append("schedule", 0.0, {"faults": [_fault("f0", 100.0, 700.0, "cartservice", "cartservice:REDIS_ADDR"),
                                            _fault("f1", 300.0, 800.0, "adservice", "adservice:PORT")]})
    rec.append("reference", 0.0, {"t": [15.0 * k for k in range(1, 57)], "total": [100.0] * 56,
                                  "failed": [10.0] * 56, "slow": [0.0] * 56, "degraded": [0.0] * 56})
    repaired_at = None
    for k in range(1, 57):
        t = 15.0 * k
        healthy0 = not (100 <= t < 700) or (repaired_at is not None and t > repaired_at)
        faults = {}
        if 100 <= t < 700:
            faults["f0"] = {"active": True, "probe_ok": healthy0, "artifact_ok": healthy0}
        if 300 <= t < 800:
            faults["f1"] = {"active": True, "probe_ok": False, "artifact_ok": False}
        rec.append("tick", t, {"t": t, "entry": {"total": 100.0, "failed": 0.0 if healthy0 else 10.0, "slow": 0.0,
                                                "degraded": 0.0}, "faults": faults})
        if t == 180.0:
            rec.append("alert", t, {"t": t, "alertname": "ServiceErrorRateHigh", "labels": {"service": "cartservice"},
                                    "fingerprint": "fp-cart", "state": "firing"})
        if t == 420.0:
            rec.append("alert", t, {"t": t, "alertname": "KubePodNotReady", "labels": {"service": "adservice"},
                                    "fingerprint": "fp-ad", "state": "firing"})
        if t % 120 == 0:
            inv = int(t // 120)
            calls = [{"tool": "get_alerts", "args": {}, "ok": True, "result": "{\"alerts\": []}", "cost_s": 2.0}]
            rec.append("invocation", t, {"index": inv, "t": t, "calls": calls, "budget_used_s": 2.0})
            if inv == 2 and skill >= 1:
                rec.append("incident", t, {"t": t, "invocation": inv, "op": "report", "incident_id": "INC-0001",
                                           "title": "cart <errors>", "alerts": ["fp-cart"], "culprits": ["cartservice"],
                                           "artifact": "cartservice:REDIS_ADDR" if skill >= 2 else "redis"})
            if inv == 3 and skill >= 3:
                rec.append("action", t, {"t": t, "invocation": inv, "tool": "set_config",
                                         "args": {"target": "cartservice"}, "targets": ["cartservice"],
                                         "incident_id": "INC-0001", "in_scope": True, "ok": True})
                repaired_at = t
            rec.append("usage", t, {"t": t, "invocation": inv, "model_calls": skill, "prompt_tokens": 100 * skill,
                                    "completion_tokens": 10 * skill, "cost_usd": 0.001 * skill, "model": "m"})
    rec.seal()
    (path / "meta.json").write_text(json.dumps({"policy": policy, "app": app, "seed": seed}))
    return path

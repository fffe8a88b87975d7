"""Hand-built bundles for the scoring tests: a tiny builder and a seeded synthetic marathon."""

from __future__ import annotations

from typing import Any

import numpy as np

from sremarathon_env.bundle import Recorder


def fault(iid: str, start: float, end: float, culprits=("cartservice",), scope=("cartservice", "frontend"),
          artifact=("commit", "3f9a2c1d8e7b", ()), silent: bool = False, **kw) -> dict[str, Any]:
    kind, canonical, aliases = artifact
    return {"instance_id": iid, "fault_id": kw.get("fault_id", iid + "-def"), "category": kw.get("category", "code"),
            "mechanism": kw.get("mechanism", "deploy"), "start_s": float(start), "end_s": float(end),
            "target": culprits[0], "culprits": list(culprits), "scope": list(scope),
            "artifact": {"kind": kind, "canonical": canonical, "aliases": list(aliases)}, "silent": silent}


class B:
    """Append records in time order with little ceremony."""

    def __init__(self, faults: list[dict[str, Any]], *, reference: dict[str, list[float]] | None = None, **run):
        self.rec = Recorder(None)
        self.rec.append("run", 0.0, {"app": "online-boutique", "seed": 1, "catalogue_version": "t",
                                     "rule_pack_version": "t", **run})
        self.rec.append("schedule", 0.0, {"faults": faults})
        if reference is not None:
            self.rec.append("reference", 0.0, reference)
        self.inv = -1

    @property
    def records(self):
        return self.rec.records

    def tick(self, t: float, faults: dict[str, tuple[bool, bool]] | None = None, entry=(100.0, 0.0, 0.0, 0.0)):
        tot, failed, slow, degraded = entry
        self.rec.append("tick", t, {"t": t, "entry": {"total": tot, "failed": failed, "slow": slow,
                                                       "degraded": degraded},
                                    "faults": {k: {"active": True, "probe_ok": p, "artifact_ok": a}
                                               for k, (p, a) in (faults or {}).items()}})
        return self

    def ticks(self, t0: float, t1: float, iid: str, probe_ok: bool, artifact_ok: bool):
        """Ticks t0, t0 + 15, ..., t1 (inclusive) with one fault's probe state."""
        t = t0
        while t <= t1 + 1e-9:
            self.tick(t, {iid: (probe_ok, artifact_ok)})
            t += 15.0
        return self

    def alert(self, t: float, fp: str, state: str = "firing", **labels):
        self.rec.append("alert", t, {"t": t, "alertname": "A_" + fp, "labels": labels, "fingerprint": fp,
                                     "state": state})
        return self

    def invocation(self, t: float, policies=("allowed",)):
        self.inv += 1
        self.rec.append("invocation", t, {"index": self.inv, "t": t, "calls": [
            {"tool": "get_alerts", "ok": p == "allowed", "policy": p} for p in policies]})
        return self

    def incident(self, t: float, inc: str, alerts, culprits=(), artifact=None, op="report"):
        self.rec.append("incident", t, {"t": t, "invocation": self.inv, "op": op, "incident_id": inc,
                                        "alerts": list(alerts), "culprits": list(culprits), "artifact": artifact})
        return self

    def action(self, t: float, targets, inc=None, tool="rollback", ok=True, in_scope=True, refused=None,
               forbidden=False):
        self.rec.append("action", t, {"t": t, "invocation": self.inv, "tool": tool, "targets": list(targets),
                                      "incident_id": inc, "in_scope": in_scope, "ok": ok, "forbidden": forbidden,
                                      "refused": refused})
        return self

    def usage(self, t: float, calls=1, prompt=0, completion=0, cost=0.0):
        self.rec.append("usage", t, {"t": t, "invocation": self.inv, "model_calls": calls,
                                     "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": cost})
        return self


SERVICES = ["frontend", "cartservice", "productcatalogservice", "currencyservice", "paymentservice",
            "shippingservice", "emailservice", "checkoutservice", "recommendationservice", "adservice",
            "redis-cart"]


def synthetic_marathon(seed: int, n_faults: int = 60, n_ticks: int = 360, cadence: float = 120.0,
                       alert_rate: float = 0.9, noise_rate: float = 0.8, seal: bool = True) -> Recorder:
    """A seeded marathon-shaped bundle exercising every scoring path (for equivalence and speed tests).

    Agent behaviour is random but causal: incidents cite alerts already fired, actions cite incidents,
    and an action on a fault's culprit repairs it (or only hides the symptom) with some probability."""
    rng = np.random.default_rng(seed)
    tick_s = 15.0
    horizon = n_ticks * tick_s
    inj = horizon * 2 / 3
    faults = []
    for i in range(n_faults):
        start = float(np.round(rng.uniform(0, inj) / tick_s) * tick_s)
        dur = float(np.round(rng.uniform(240, 720) / tick_s) * tick_s)
        scope = sorted(rng.choice(SERVICES, size=int(rng.integers(2, 5)), replace=False).tolist())
        culprits = scope[: int(rng.integers(1, 3))]
        sha = "".join(rng.choice(list("0123456789abcdef"), size=12))
        art = ("commit", sha, (f"{culprits[0]}@{sha[:7]}",)) if rng.random() < 0.6 else \
            ("config_key", f"{culprits[0]}:MAX_CONN", (f"{culprits[0]}/MAX_CONN",))
        faults.append(fault(f"f{i:02d}", start, start + dur, culprits=culprits, scope=scope, artifact=art,
                            silent=bool(rng.random() < 0.15)))
    ts = [tick_s * k for k in range(1, n_ticks + 1)]
    ref = {"t": ts, "total": [1000.0] * n_ticks, "failed": [float(x) for x in rng.integers(0, 80, n_ticks)],
           "slow": [float(x) for x in rng.integers(0, 40, n_ticks)], "degraded": [0.0] * n_ticks}
    b = B(faults, reference=ref)
    state = {f["instance_id"]: "bad" for f in faults}  # bad | fixed | hidden:<ticks left>
    fps = {f["instance_id"]: [f"{f['instance_id']}-{k}" for k in range(3)] for f in faults}
    firing: dict[str, bool] = {}
    fp_service: dict[str, str] = {}
    fired_recent: list[tuple[str, str]] = []  # (fingerprint, instance)
    incidents: dict[str, dict[str, Any]] = {}
    n_inc = 0
    for t in ts:
        active = [f for f in faults if f["start_s"] <= t < f["end_s"]]
        probes = {}
        for f in active:
            iid = f["instance_id"]
            st = state[iid]
            if st.startswith("hidden"):
                left = int(st.split(":")[1]) - 1
                state[iid] = "bad" if left <= 0 else f"hidden:{left}"
                probes[iid] = (True, False)
            elif st == "fixed":
                probes[iid] = (True, True)
            else:
                probes[iid] = (bool(f["silent"] or rng.random() < 0.25), False)
        tot = float(rng.integers(800, 1200))
        b.tick(t, probes, entry=(tot, float(rng.integers(0, 60)), float(rng.integers(0, 30)),
                                 float(rng.integers(0, 5))))
        for f in active:
            if state[f["instance_id"]] != "bad" or rng.random() > alert_rate:
                continue
            fp = fps[f["instance_id"]][int(rng.integers(0, 3))]
            r = rng.random()
            svc = fp_service.setdefault(fp, f["scope"][int(rng.integers(0, len(f["scope"])))])
            if r < 0.15:
                b.alert(t, fp, "pending", service=svc)
            elif not firing.get(fp):
                firing[fp] = True
                b.alert(t, fp, "firing", service=svc, severity="page")
                fired_recent.append((fp, f["instance_id"]))
            else:
                firing[fp] = False
                b.alert(t, fp, "resolved", service=svc)
        if rng.random() < noise_rate:  # noise: flapping alerts with fixed labels
            k = int(rng.integers(0, 22))
            fp = f"noise-{k}"
            firing[fp] = not firing.get(fp, False)
            b.alert(t, fp, "firing" if firing[fp] else "resolved", service=SERVICES[k % 11])
        if t % cadence:
            continue
        pol = rng.choice(["allowed", "allowed", "allowed", "refused", "out_of_scope", "forbidden"],
                         size=int(rng.integers(1, 5))).tolist()
        b.invocation(t, pol)
        by_id = {f["instance_id"]: f for f in faults}
        for _ in range(int(rng.integers(0, 3))):
            if not fired_recent:
                break
            fp, iid = fired_recent[int(rng.integers(max(0, len(fired_recent) - 15), len(fired_recent)))]
            f = by_id[iid]
            culprits = f["culprits"] if rng.random() < 0.6 else [SERVICES[int(rng.integers(0, 11))]]
            r = rng.random()
            art = f["artifact"]
            artifact = (art["canonical"][:7].upper() if art["kind"] == "commit" else art["canonical"]) if r < 0.4 \
                else (art["aliases"][0] if r < 0.6 else ("deadbeef" if r < 0.8 else None))
            extra = [fp2 for fp2, _ in fired_recent[-3:]] if rng.random() < 0.3 else []
            if incidents and rng.random() < 0.3:
                inc = sorted(incidents)[int(rng.integers(0, len(incidents)))]
                incidents[inc] = {"alerts": sorted(set(incidents[inc]["alerts"] + [fp] + extra)),
                                  "culprits": culprits, "artifact": artifact, "iid": iid}
                b.incident(t, inc, incidents[inc]["alerts"], culprits, artifact, op="update")
            else:
                n_inc += 1
                inc = f"inc-{n_inc}"
                incidents[inc] = {"alerts": sorted({fp, *extra}), "culprits": culprits, "artifact": artifact,
                                  "iid": iid}
                b.incident(t, inc, incidents[inc]["alerts"], culprits, artifact)
        if incidents and rng.random() < 0.8:
            inc = sorted(incidents)[int(rng.integers(max(0, len(incidents) - 4), len(incidents)))]
            info = incidents[inc]
            f = by_id[info["iid"]]
            targets = f["culprits"][:1] if rng.random() < 0.75 else [SERVICES[int(rng.integers(0, 11))]]
            ok = bool(rng.random() < 0.9)
            refused = None if ok else "budget"
            b.action(t, targets, inc, tool="rollback" if rng.random() < 0.6 else "restart", ok=ok,
                     in_scope=bool(rng.random() < 0.85), refused=refused)
            if ok and targets[0] in f["culprits"] and state[f["instance_id"]] == "bad":
                r = rng.random()
                state[f["instance_id"]] = "fixed" if r < 0.55 else (f"hidden:{int(rng.integers(3, 12))}"
                                                                  if r < 0.85 else "bad")
        b.usage(t, calls=int(rng.integers(1, 4)), prompt=int(rng.integers(100, 5000)),
                completion=int(rng.integers(10, 500)), cost=float(rng.integers(1, 100)) / 1000)
    if seal:
        b.rec.seal()
    return b.rec

"""`IncrementalScorer`: the scorer fed one record at a time, for the environment's reward.

Feed it every record as it is appended (``Recorder(listeners=[scorer.feed])``) and read ``score``
after each step: it is exactly ``score(records_so_far).marathon_score`` (checked by the tests on every
prefix), at a cost of a few microseconds per record, because it keeps per-fault state instead of
replaying the bundle. ``report()`` builds the full `ScoreReport` for the records fed so far.

>>> from sremarathon_env.bundle import Recorder
>>> sc = IncrementalScorer()
>>> rec = Recorder(None, listeners=[sc.feed])
>>> _ = rec.append("schedule", 0.0, {"faults": [{"instance_id": "f0", "fault_id": "x", "category": "code",
...     "mechanism": "deploy", "start_s": 0.0, "end_s": 600.0, "target": "cart", "culprits": ["cart"],
...     "artifact": {"kind": "commit", "canonical": "abcdef123456"}, "scope": ["cart"]}]})
>>> _ = rec.append("alert", 90.0, {"t": 90.0, "alertname": "E", "labels": {"service": "cart"},
...     "fingerprint": "a1", "state": "firing"})
>>> before = sc.score
>>> _ = rec.append("incident", 120.0, {"t": 120.0, "invocation": 0, "op": "report", "incident_id": "i1",
...     "alerts": ["a1"], "culprits": ["cart"], "artifact": "wrong"})
>>> before, sc.score
(0.0, 33.333333333333336)
"""

from __future__ import annotations

from typing import Any

from .aggregate import build_report, marathon_score, outcome
from .matching import alert_scope_values, artifact_matches, culprits_match, fault_scope, norm, with_aliases
from .params import Params
from .report import FaultScore, ScoreReport

INF = float("inf")


class _Hold:
    """Tracks the repair hold after the earliest qualifying action of one kind."""

    __slots__ = ("armed", "last_t", "probe_run", "art_run", "done_t")

    def __init__(self) -> None:
        self.armed = False
        self.last_t: float | None = None
        self.probe_run = 0
        self.art_run = 0
        self.done_t: float | None = None


class _Fault:
    __slots__ = ("d", "iid", "S", "E", "sigma", "culprits", "corr_t", "loc_t", "corr_inc", "loc_inc",
                 "acted", "ever_failed", "handle", "act")

    def __init__(self, d: dict[str, Any]) -> None:
        self.d = d
        self.iid = d["instance_id"]
        self.S = d["start_s"]
        self.E = d["end_s"]
        self.sigma = fault_scope(d)
        self.culprits = frozenset(norm(c) for c in d["culprits"])
        self.corr_t: float | None = None
        self.loc_t: float | None = None
        self.corr_inc: set[str] = set()
        self.loc_inc: set[str] = set()
        self.acted = False
        self.ever_failed = False
        self.handle = _Hold()
        self.act = _Hold()

    @property
    def stages(self) -> int:
        return (self.corr_t is not None) + (self.loc_t is not None) + (self.handle.done_t is not None)


class IncrementalScorer:
    """Streaming scorer; `feed` records in bundle order."""

    def __init__(self) -> None:
        self.params = Params()
        self.faults: list[_Fault] = []
        self._by_id: dict[str, _Fault] = {}
        self._alert_iv: dict[str, list[list[Any]]] = {}   # fp -> [[fs, fe, scope]] (fe inf while open)
        self.stages_total = 0
        self.n_forbidden = 0
        self.n_actions = 0
        self.n_risky = 0
        self.bad = self.total = 0.0
        self.ref_bad = self.ref_total = 0.0
        self._ref: dict[str, list[float]] | None = None
        self._ref_i = 0
        self._last_tick_t: float | None = None
        self.n_ticks = 0
        self._armed = False   # some fault's hold is armed (`_on_tick` follows the holds from then on)
        self.usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        self.n_invocations = 0
        self.final_t = 0.0
        self.complete = False
        self.n_records = 0

    # -- the reward ------------------------------------------------------------------------------
    @property
    def score(self) -> float:
        return marathon_score(self.stages_total, len(self.faults), self.n_forbidden,
                              self.params.penalty_per_forbidden)

    # -- feeding ---------------------------------------------------------------------------------
    def feed(self, record: Any) -> None:
        self.n_records += 1
        self.final_t = record.t
        getattr(self, "_on_" + record.kind)(record.t, record.data)

    def feed_all(self, records) -> "IncrementalScorer":
        for r in records:
            self.feed(r)
        return self

    def _on_run(self, t: float, d: dict[str, Any]) -> None:
        self.params = Params.from_run(d)

    def _on_schedule(self, t: float, d: dict[str, Any]) -> None:
        self.faults = [_Fault(f) for f in d["faults"]]
        self._by_id = {f.iid: f for f in self.faults}

    def _on_reference(self, t: float, d: dict[str, Any]) -> None:
        self._ref = d
        self._advance_ref()

    def _advance_ref(self) -> None:
        d, last = self._ref, self._last_tick_t
        if d is None or last is None:
            return
        ts, i = d["t"], self._ref_i
        while i < len(ts) and ts[i] <= last:
            tot = d["total"][i]
            self.ref_total += tot
            self.ref_bad += min(tot, d["failed"][i] + d["slow"][i] + d["degraded"][i])
            i += 1
        self._ref_i = i

    def _on_tick(self, t: float, d: dict[str, Any]) -> None:
        e = d["entry"]
        tot = e["total"]
        self.total += tot
        self.bad += min(tot, e["failed"] + e["slow"] + e["degraded"])
        self.n_ticks += 1
        self._last_tick_t = t
        self._advance_ref()
        for ev in d.get("events", ()):
            if ev.get("aliases") and ev.get("event") == "injected":
                f = self._by_id.get(ev["instance_id"])
                if f is not None:
                    f.d = with_aliases(f.d, ev["aliases"])
        p = self.params
        armed = self._armed
        for iid, pr in d["faults"].items():
            f = self._by_id.get(iid)
            if f is None:
                continue
            if not pr["probe_ok"]:
                f.ever_failed = True
            if not armed:   # (no hold armed yet: the loop below would skip both)
                continue
            for h, handled in ((f.handle, True), (f.act, False)):
                if not h.armed or h.done_t is not None or t >= f.E:
                    continue
                if h.last_t is None or not p.contiguous(h.last_t, t):
                    h.probe_run = h.art_run = 0
                h.last_t = t
                h.probe_run = h.probe_run + 1 if pr["probe_ok"] else 0
                h.art_run = h.art_run + 1 if pr["artifact_ok"] else 0
                if f.ever_failed:
                    ok = h.probe_run >= p.n_hold and pr["artifact_ok"]
                else:
                    ok = h.art_run >= p.n_hold
                if ok:
                    h.done_t = t
                    if handled:
                        self.stages_total += 1

    def _on_alert(self, t: float, d: dict[str, Any]) -> None:
        fp = d["fingerprint"]
        ivs = self._alert_iv.setdefault(fp, [])
        is_open = bool(ivs) and ivs[-1][1] == INF
        if d["state"] == "firing":
            if not is_open:
                ivs.append([t, INF, alert_scope_values(d["labels"])])
        elif is_open:
            ivs[-1][1] = t

    def _attributable(self, fp: str, f: _Fault) -> bool:
        hi = f.E + self.params.grace_s
        for fs, fe, scope in self._alert_iv.get(fp, ()):
            if not scope & f.sigma:
                continue
            if f.S <= fs <= hi or (scope & f.culprits and fs <= hi and fe > f.S):
                return True
        return False

    def _on_incident(self, t: float, d: dict[str, Any]) -> None:
        inc = d["incident_id"]
        alerts = d["alerts"]
        for f in self.faults:
            if t < f.S:
                continue
            if not any(self._attributable(fp, f) for fp in alerts):
                continue
            if f.corr_t is None:
                f.corr_t = t
                self.stages_total += 1
            f.corr_inc.add(inc)
            if not culprits_match(d["culprits"], f.d["culprits"]):
                continue
            if artifact_matches(d["artifact"], f.d["artifact"]):
                if f.loc_t is None:
                    f.loc_t = t
                    self.stages_total += 1
                f.loc_inc.add(inc)

    def _on_action(self, t: float, d: dict[str, Any]) -> None:
        self.n_actions += 1
        if (not d["in_scope"]) or d["forbidden"] or d["refused"] is not None:
            self.n_risky += 1
        if not d["ok"]:
            return
        inc = d["incident_id"]
        targets = {norm(x) for x in d["targets"]}
        for f in self.faults:
            if not (f.S <= t < f.E):
                continue
            if inc is not None and inc in f.loc_inc and targets & f.sigma:
                f.handle.armed = self._armed = True
            if (inc is not None and inc in f.corr_inc) or targets & f.culprits:
                f.acted = True
                f.act.armed = self._armed = True

    def _on_invocation(self, t: float, d: dict[str, Any]) -> None:
        self.n_invocations += 1
        for c in d["calls"]:
            if c["policy"] == "forbidden":
                self.n_forbidden += 1

    def _on_usage(self, t: float, d: dict[str, Any]) -> None:
        u = self.usage
        for k in u:
            u[k] += d[k]

    def _on_end(self, t: float, d: dict[str, Any]) -> None:
        self.complete = d["reason"] == "completed"

    # -- the full report -------------------------------------------------------------------------
    def report(self) -> ScoreReport:
        out = []
        for f in self.faults:
            st = f.stages
            handled = f.handle.done_t is not None
            out.append(FaultScore(
                instance_id=f.iid, fault_id=f.d["fault_id"], category=f.d["category"], start_s=f.S, end_s=f.E,
                correlated_t=f.corr_t, localised_t=f.loc_t, repaired_t=f.handle.done_t, stages=st, credit=st / 3,
                outcome=outcome(handled=handled, repaired_unhandled=not handled and f.act.done_t is not None,
                                acted=f.acted, localised=f.loc_t is not None, correlated=f.corr_t is not None)))
        return build_report(self.params, out, n_forbidden=self.n_forbidden, n_actions=self.n_actions,
                            n_risky=self.n_risky, bad=self.bad, total=self.total, ref_bad=self.ref_bad,
                            ref_total=self.ref_total, n_ticks=self.n_ticks, usage=dict(self.usage),
                            n_invocations=self.n_invocations, final_t=self.final_t, complete=self.complete)

"""The batch scorer: a direct transcription of the definitions in scoring/README.md.

`score(records)` reads the records of a verified bundle (or any prefix of one) and returns a
`ScoreReport`. It uses nothing but the records: no backend, no clock, no randomness. Written for
clarity; `IncrementalScorer` computes the same numbers record by record, and the tests check that the
two agree on every prefix.

>>> from sremarathon_env.bundle import Recorder
>>> rec = Recorder(None)
>>> _ = rec.append("schedule", 0.0, {"faults": [{"instance_id": "f0", "fault_id": "x", "category": "code",
...     "mechanism": "deploy", "start_s": 0.0, "end_s": 600.0, "target": "cart", "culprits": ["cart"],
...     "artifact": {"kind": "commit", "canonical": "abcdef123456"}, "scope": ["cart"]}]})
>>> _ = rec.append("alert", 90.0, {"t": 90.0, "alertname": "E", "labels": {"service": "cart"},
...     "fingerprint": "a1", "state": "firing"})
>>> _ = rec.append("incident", 120.0, {"t": 120.0, "invocation": 0, "op": "report", "incident_id": "i1",
...     "alerts": ["a1"], "culprits": ["cart"], "artifact": "abcdef1"})
>>> r = score(rec.records)
>>> r.marathon_score, r.faults[0].outcome, r.mttl_s
(66.66666666666667, 'located_without_action', 120.0)
"""

from __future__ import annotations

from typing import Any, Iterable

from .aggregate import build_report, outcome
from .matching import alert_scope_values, artifact_matches, culprits_match, fault_scope, norm, with_aliases
from .params import Params
from .report import FaultScore, ScoreReport

INF = float("inf")


def _intervals(alert_events: list[tuple[int, float, str, frozenset[str]]]):
    """Firing intervals (fs, pos_open, fe, pos_close, scope values) of one fingerprint; fe = inf while
    open; the scope values are those of the record that opened the interval."""
    out = []
    open_at = None
    for pos, t, state, scope in alert_events:
        if state == "firing":
            if open_at is None:
                open_at = (t, pos, scope)
        elif open_at is not None:
            out.append((open_at[0], open_at[1], t, pos, open_at[2]))
            open_at = None
    if open_at is not None:
        out.append((open_at[0], open_at[1], INF, 1 << 62, open_at[2]))
    return out


def score(records: Iterable[Any], *, complete: bool | None = None) -> ScoreReport:
    """Score a sequence of bundle records (a whole bundle or a prefix)."""
    recs = list(records)
    by_kind: dict[str, list[tuple[int, Any]]] = {}
    for pos, r in enumerate(recs):
        by_kind.setdefault(r.kind, []).append((pos, r))
    run = by_kind.get("run", [(0, None)])[0][1]
    params = Params.from_run(run.data if run else None)
    sched = by_kind.get("schedule", [(0, None)])[0][1]
    faults = sched.data["faults"] if sched else []

    # alerts: per fingerprint, its transitions and scope values
    alert_events: dict[str, list[tuple[int, float, str, frozenset[str]]]] = {}
    for pos, r in by_kind.get("alert", []):
        fp = r.data["fingerprint"]
        alert_events.setdefault(fp, []).append((pos, r.t, r.data["state"], alert_scope_values(r.data["labels"])))
    intervals = {fp: _intervals(ev) for fp, ev in alert_events.items()}

    def attributable(fp: str, f: dict[str, Any], sigma: frozenset[str], culprits: set[str], pos: int) -> bool:
        """fp, as known before record ``pos``, in scope and either started firing in [start, end + grace],
        or names one of f's culprits and was firing at some time in that window."""
        lo, hi = f["start_s"], f["end_s"] + params.grace_s
        for fs, p_open, fe, p_close, scope in intervals.get(fp, ()):
            if p_open >= pos or not (scope & sigma):
                continue
            if lo <= fs <= hi:
                return True
            fe_known = fe if p_close < pos else INF
            if scope & culprits and fs <= hi and fe_known > lo:
                return True
        return False

    realised: dict[str, list[str]] = {}
    for _, r in by_kind.get("tick", []):
        for ev in r.data.get("events", ()):
            if ev.get("aliases") and ev.get("event") == "injected":
                realised.setdefault(ev["instance_id"], []).extend(ev["aliases"])
    faults = [with_aliases(f, realised[f["instance_id"]]) if f["instance_id"] in realised else f for f in faults]

    incidents = [(pos, r.t, r.data) for pos, r in by_kind.get("incident", [])]
    actions = [(pos, r.t, r.data) for pos, r in by_kind.get("action", [])]
    ticks = [(pos, r.t, r.data) for pos, r in by_kind.get("tick", [])]
    fault_ticks: dict[str, list[tuple[int, float, dict[str, Any]]]] = {}
    for pos, t, d in ticks:
        for iid, p in d["faults"].items():
            fault_ticks.setdefault(iid, []).append((pos, t, p))

    results: list[FaultScore] = []
    for f in faults:
        iid, S, E = f["instance_id"], f["start_s"], f["end_s"]
        sigma = fault_scope(f)
        culprits = {norm(c) for c in f["culprits"]}

        # 1-2. correlation and localisation, per incident version (full state after each op)
        corr_versions = [(pos, t, d) for pos, t, d in incidents
                         if t >= S and any(attributable(fp, f, sigma, culprits, pos) for fp in d["alerts"])]
        loc_versions = [(pos, t, d) for pos, t, d in corr_versions
                        if culprits_match(d["culprits"], f["culprits"]) and artifact_matches(d["artifact"], f["artifact"])]
        correlated_t = corr_versions[0][1] if corr_versions else None
        localised_t = loc_versions[0][1] if loc_versions else None

        # 3. interventions during the fault: handling (cites a localising incident, in scope) and acting on
        def cites(a_pos: int, a: dict[str, Any], versions) -> bool:
            return a["incident_id"] is not None and any(p < a_pos and d["incident_id"] == a["incident_id"]
                                                        for p, _, d in versions)

        def targets(a: dict[str, Any]) -> set[str]:
            return {norm(x) for x in a["targets"]}

        live = [(pos, t, a) for pos, t, a in actions if a["ok"] and S <= t < E]
        handling = [(pos, t, a) for pos, t, a in live if cites(pos, a, loc_versions) and targets(a) & sigma]
        acting = [(pos, t, a) for pos, t, a in live if cites(pos, a, corr_versions) or targets(a) & culprits]

        # 4. repair: n_hold consecutive healthy ticks after the action, completing before the end.
        # For each tick j of f (before E): the length of the run of consecutive ticks ending at j, and
        # of the runs of healthy probe / correct artifact ending at j.
        fticks = [x for x in fault_ticks.get(iid, []) if x[1] < E]
        first_fail = next((pos for pos, _, p in fault_ticks.get(iid, []) if not p["probe_ok"]), INF)
        n = params.n_hold
        cont, prun, arun = [], [], []
        for j, (pos, t, p) in enumerate(fticks):
            c = cont[-1] + 1 if j and params.contiguous(fticks[j - 1][1], t) else 1
            cont.append(c)
            prun.append((prun[-1] + 1 if c > 1 else 1) if p["probe_ok"] else 0)
            arun.append((arun[-1] + 1 if c > 1 else 1) if p["artifact_ok"] else 0)

        def repair_time(after: list[tuple[int, float, Any]]) -> float | None:
            best = None
            for a_pos, _, _ in after:
                for j, (pos_j, t_j, p_j) in enumerate(fticks):
                    # the window is the n ticks ending at j; all must come after the action
                    if cont[j] < n or fticks[j - n + 1][0] <= a_pos:
                        continue
                    if first_fail <= pos_j:  # the probe showed a symptom
                        ok = prun[j] >= n and p_j["artifact_ok"]
                    else:  # silent: the artifact must be right throughout the hold
                        ok = arun[j] >= n
                    if ok:
                        best = t_j if best is None else min(best, t_j)
                        break
            return best

        repaired_t = repair_time(handling)
        unhandled_t = repair_time(acting) if repaired_t is None else None
        stages = (correlated_t is not None) + (localised_t is not None) + (repaired_t is not None)
        results.append(FaultScore(
            instance_id=iid, fault_id=f["fault_id"], category=f["category"], start_s=S, end_s=E,
            correlated_t=correlated_t, localised_t=localised_t, repaired_t=repaired_t, stages=stages,
            credit=stages / 3,
            outcome=outcome(handled=repaired_t is not None, repaired_unhandled=unhandled_t is not None,
                            acted=bool(acting), localised=localised_t is not None,
                            correlated=correlated_t is not None)))

    # forbidden attempts, intervention risk
    n_forbidden = sum(c["policy"] == "forbidden" for _, r in by_kind.get("invocation", []) for c in r.data["calls"])
    n_risky = sum((not a["in_scope"]) or a["forbidden"] or a["refused"] is not None for _, _, a in actions)

    # degradation: bad / total over the ticks so far, and the reference run over the same ticks
    bad = total = 0.0
    for _, _, d in ticks:
        e = d["entry"]
        total += e["total"]
        bad += min(e["total"], e["failed"] + e["slow"] + e["degraded"])
    ref_bad = ref_total = 0.0
    ref = by_kind.get("reference")
    if ref and ticks:
        last = ticks[-1][1]
        d = ref[0][1].data
        for i, t in enumerate(d["t"]):
            if t > last:
                break
            ref_total += d["total"][i]
            ref_bad += min(d["total"][i], d["failed"][i] + d["slow"][i] + d["degraded"][i])

    usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    for _, r in by_kind.get("usage", []):
        for k in usage:
            usage[k] += r.data[k]

    end = by_kind.get("end")
    if complete is None:
        complete = bool(end) and end[0][1].data["reason"] == "completed"
    return build_report(params, results, n_forbidden=n_forbidden, n_actions=len(actions), n_risky=n_risky,
                        bad=bad, total=total, ref_bad=ref_bad, ref_total=ref_total, n_ticks=len(ticks),
                        usage=usage, n_invocations=len(by_kind.get("invocation", [])),
                        final_t=recs[-1].t if recs else 0.0, complete=complete)

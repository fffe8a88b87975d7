"""Detectability: does a fault, alone in a healthy twin, raise an alert the scorer attributes to it?

Correlation (DESIGN section 6) needs an alert that fires while the fault is active (plus the scorer's
grace) with labels inside the fault's affected scope. A fault whose symptoms never reach such an alert
can never be correlated, whatever the agent does, except by the luck of another fault's alert; that
is a catalogue bug (a scope that misses where the symptoms show, or a symptom no rule watches).

`detect` injects each fault alone into a copy of one warmed-up twin with metrics, evaluates the frozen
rule pack per invocation interval as a marathon does, and reports the first alert that starts firing
with a label (service, node, zone, entry service) in the fault's scope or culprits. ``detect_s`` is
seconds from injection to that alert. A fault is *detectable* when it fires within the shortest
scheduled duration plus the scorer's grace (`LIMIT_S`): then even its shortest occurrence can be
correlated. Silent faults (wrong answers, no symptom) are reported but never expected to alert.

>>> from faults.catalogue import load_catalogue
>>> f = next(f for f in load_catalogue("online-boutique") if f.id == "ob-resource-adservice-memory-oom")
>>> d = detect("online-boutique", [f])[0]
>>> d.fault_id, d.ok, d.alertname is not None
('ob-resource-adservice-memory-oom', True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from faults.model import Fault
from faults.orchestrator import MAX_DURATION_S, MIN_DURATION_S
from faults.realise import inject

GRACE_S = 60.0                       # the scorer's default grace (scoring.params.Params.grace_s)
LIMIT_S = MIN_DURATION_S + GRACE_S   # the shortest occurrence's window for an attributable alert
HORIZON_S = MAX_DURATION_S + GRACE_S  # how long a run watches for the first alert
WARMUP_S = 600.0                     # history before injection: every range window of the pack is filled
INTERVAL_S = 120.0                   # alert evaluation per invocation interval, as in a marathon


@dataclass
class Detection:
    fault_id: str
    app: str
    category: str
    silent: bool
    detect_s: float | None          # injection -> first attributable alert firing; None: none in HORIZON_S
    alertname: str | None = None
    service: str | None = None      # the scope value that matched
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Detectable in its shortest occurrence (silent faults: always ok; they are not meant to alert)."""
        return self.silent or (self.detect_s is not None and self.detect_s <= LIMIT_S)


def _norm(s: str) -> str:
    from scoring.matching import norm

    return norm(s)


def warm_twin_factory(app: str, seed: int = 0) -> Callable[[], object]:
    """Fresh copies of one healthy twin with metrics, warmed up for `WARMUP_S`."""
    from sremarathon_env.backends.sim import SimBackend

    base = SimBackend(app, seed, metrics=True)
    base.advance_to(base.now + WARMUP_S)
    return base.clone


def detect_fault(fault: Fault, fresh: Callable[[], object]) -> Detection:
    from scoring.matching import alert_scope_values
    from sremarathon_env.alerts import AlertEngine
    from sremarathon_env.marathon import _rule_pack

    out = Detection(fault.id, fault.app, fault.category, bool(getattr(fault, "silent", False)), None)
    b = fresh()
    eng = AlertEngine(_rule_pack(), b.store)
    eng.evaluate_until(b.now)
    before = {a["fingerprint"] for a in eng.active()}   # a healthy twin: normally none
    scope = frozenset(_norm(s) for s in [*fault.scope, *fault.culprits])
    t0 = float(b.now)
    h = inject(fault, b)
    if not h.ok:
        out.detail = f"injection refused: {h.message}"
        return out
    t = t0
    while t < t0 + HORIZON_S:
        t = min(t + INTERVAL_S, t0 + HORIZON_S)
        b.advance_to(t)
        for tr in eng.evaluate_until(t):
            if tr.state != "firing" or tr.fingerprint in before:
                continue
            hit = alert_scope_values(dict(tr.labels)) & scope
            if hit:
                out.detect_s = float(tr.t) - t0
                out.alertname = tr.alertname
                out.service = sorted(hit)[0]
                return out
    out.detail = f"no attributable alert within {HORIZON_S:.0f} s"
    return out


def detect(app: str, faults: list[Fault] | None = None, *, seed: int = 0,
           progress: Callable[[Detection], None] | None = None) -> list[Detection]:
    """`detect_fault` for every fault of ``app`` (or the given ones), each in its own copy of one warm twin."""
    from faults.catalogue import load_catalogue

    from faults.validate import each_fault

    fs = faults if faults is not None else load_catalogue(app)
    fresh = warm_twin_factory(app, seed)
    return each_fault(fs, lambda f: detect_fault(f, fresh),
                      lambda f, why: Detection(f.id, f.app, f.category, bool(getattr(f, "silent", False)), None,
                                               detail=why), progress)

"""Validate catalogue faults one by one in a healthy twin (what ``sremarathon faults validate`` runs).

For each fault, alone, in a fresh settled twin:

1. the probe is healthy before injection;
2. after `inject`, the probe turns unhealthy within ``probe.within_ticks`` ticks (silent faults: the
   artifact reads as broken instead);
3. after `revert`, the probe is healthy again (two consecutive healthy ticks) within
   ``probe.recover_ticks`` ticks and the artifact reads as correct;
4. for EVERY declared `RepairOption`, in its own fresh twin: injected again, the option applied through
   `apply_repair` once the symptom shows heals it on its own (probe healthy for two consecutive ticks
   and artifact corrected). Options are alternatives, never steps: agents and the oracle rely on any one.
   Saturation faults (probe ``cpu_util_max``) are repaired at the marathon's peak base load (diurnal crest
   and jitter, ``faults.catalogue.peak_load_factor``) and must then stay healthy ``PEAK_HOLD_TICKS`` more.

Fresh twins are clones of one warmed-up twin per app when the backend offers ``clone()``, otherwise
new twins advanced through the same warm-up, so every fault starts from the same state.

>>> from faults.validate import Outcome
>>> Outcome("ob-x", "online-boutique", "code", True, "ok").ok
True
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from faults.model import Fault
from faults.realise import apply_repair, artifact_ok, inject, probe_ok, revert

WARMUP_TICKS = 8
HOLD_TICKS = 2
PEAK_HOLD_TICKS = 8     # a marathon credits a repair after 120 s healthy: saturation repairs must hold that


@dataclass
class Outcome:
    fault_id: str
    app: str
    category: str
    ok: bool
    detail: str
    symptom_tick: int | None = None
    recovered_tick: int | None = None
    repaired_by: str | None = None
    notes: list[str] = field(default_factory=list)


def twin_factory(app: str, seed: int = 0) -> Callable[[], Any]:
    """A callable returning fresh, settled twins of ``app`` (clones of one warm twin when possible)."""
    from sremarathon_env.backends.sim import SimBackend

    base = SimBackend(app, seed, metrics=False)   # probes and artifacts read health and specs, never series
    base.advance_to(base.now + WARMUP_TICKS * base.tick_s)
    if hasattr(base, "clone"):
        return base.clone
    import copy

    return lambda: copy.deepcopy(base)


def _tick(b: Any) -> None:
    b.advance_to(b.now + b.tick_s)


def _symptom(fault: Fault, b: Any, h: Any, memo: dict) -> int | None:
    for k in range(1, fault.probe.within_ticks + 1):
        _tick(b)
        bad = (not artifact_ok(fault, h, b)) if fault.silent else (not probe_ok(fault, b, memo, h))
        if bad:
            return k
    return None


def _healed(fault: Fault, b: Any, h: Any, memo: dict, ticks: int, need_artifact: bool) -> int | None:
    streak = 0
    for k in range(1, ticks + 1):
        _tick(b)
        ok = probe_ok(fault, b, memo, h) and (not need_artifact or artifact_ok(fault, h, b))
        streak = streak + 1 if ok else 0
        if streak >= HOLD_TICKS:
            return k
    return None


def _peak_load(fault: Fault, b: Any) -> float | None:
    """Saturation faults (probe: cpu_util) are repaired in a marathon at whatever the base load is then,
    up to its diurnal crest plus jitter: their repair runs put the twin at that peak load (an extra
    all-path load factor through the fault hook) and return it; None for other faults."""
    if fault.probe.kind != "cpu_util_max" or not hasattr(b, "apply_effect"):
        return None
    from apps import load_app
    from faults.catalogue import peak_load_factor
    from faults.effects import Effect

    peak = peak_load_factor(load_app(fault.app))
    b.apply_effect(Effect(kind="load_factor", path=None, factor=peak))
    return peak


def _stays_healthy(fault: Fault, b: Any, h: Any, memo: dict, ticks: int) -> bool:
    for _ in range(ticks):
        _tick(b)
        if not probe_ok(fault, b, memo, h):
            return False
    return True


def validate_fault(fault: Fault, fresh: Callable[[], Any]) -> Outcome:
    out = Outcome(fault.id, fault.app, fault.category, False, "")
    b = fresh()
    memo: dict = {}
    if not probe_ok(fault, b, memo):
        out.detail = "probe unhealthy before injection"
        return out
    h = inject(fault, b)
    if not h.ok:
        out.detail = f"injection refused: {h.message}"
        return out
    out.symptom_tick = _symptom(fault, b, h, memo)
    if out.symptom_tick is None:
        out.detail = f"no symptom within {fault.probe.within_ticks} ticks"
        return out
    revert(h, b)
    out.recovered_tick = _healed(fault, b, h, memo, fault.probe.recover_ticks, need_artifact=fault.silent)
    if out.recovered_tick is None:
        out.detail = f"not healthy within {fault.probe.recover_ticks} ticks of revert"
        return out
    failed, healed = [], []
    for opt in fault.repairs:
        # every declared option must heal on its own (agents and the oracle may pick any of them),
        # each in a fresh copy of the warm twin
        b2, memo2 = fresh(), {}
        peak = _peak_load(fault, b2)
        probe_ok(fault, b2, memo2)
        h2 = inject(fault, b2)
        if not h2.ok or _symptom(fault, b2, h2, memo2) is None:
            failed.append(f"{opt.tool}: no symptom in repair run")
            continue
        res = apply_repair(opt, fault, b2)
        if not getattr(res, "ok", True):
            failed.append(f"{opt.tool}: refused ({getattr(res, 'message', '')})")
            continue
        # direct effects have no artifact to read unless the backend exposes effect_active
        need = fault.realisation.kind != "effects" or hasattr(b2, "effect_active")
        if _healed(fault, b2, h2, memo2, fault.probe.recover_ticks + 4, need_artifact=need) is None:
            failed.append(f"{opt.tool}: did not heal" + (f" at peak base load x{peak:.2f}" if peak else ""))
            continue
        if peak and not _stays_healthy(fault, b2, h2, memo2, PEAK_HOLD_TICKS):
            failed.append(f"{opt.tool}: relapsed within {PEAK_HOLD_TICKS} ticks at peak base load x{peak:.2f}")
            continue
        healed.append(opt.tool)
    out.repaired_by = ",".join(healed) or None
    if failed:
        out.detail = f"{len(failed)} of {len(fault.repairs)} repair options do not heal it: " + "; ".join(failed)
        return out
    out.ok, out.detail = True, "ok"
    return out


def validate(app: str, faults: list[Fault] | None = None, *, seed: int = 0,
             progress: Callable[[Outcome], None] | None = None) -> tuple[list[Outcome], float]:
    """Validate every fault of ``app`` (or the given ones). Returns outcomes and seconds taken
    (wall time: reported, never recorded in anything hashed)."""
    from faults.catalogue import load_catalogue

    t0 = time.perf_counter()
    fs = faults if faults is not None else load_catalogue(app)
    fresh = twin_factory(app, seed)
    outs = each_fault(fs, lambda f: validate_fault(f, fresh),
                      lambda f, why: Outcome(f.id, f.app, f.category, False, why), progress)
    return outs, time.perf_counter() - t0


def each_fault(faults: list[Fault], check: Callable[[Fault], Any], failed: Callable[[Fault, str], Any],
               progress: Callable[[Any], None] | None = None) -> list[Any]:
    """``check(f)`` for every fault in order; an exception becomes ``failed(f, "error: ...")`` (a failing fault
    is reported, not fatal); ``progress`` sees each result as it comes."""
    outs = []
    for f in faults:
        try:
            o = check(f)
        except Exception as exc:  # noqa: BLE001 - reported in the result
            o = failed(f, f"error: {type(exc).__name__}: {exc}")
        outs.append(o)
        if progress:
            progress(o)
    return outs


def summary(outcomes: list[Outcome]) -> dict[tuple[str, str], tuple[int, int]]:
    """(app, category) -> (passed, total)."""
    agg: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        agg[(o.app, o.category)][1] += 1
        agg[(o.app, o.category)][0] += int(o.ok)
    return {k: (v[0], v[1]) for k, v in sorted(agg.items())}

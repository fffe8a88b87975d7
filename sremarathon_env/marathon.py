"""The marathon run loop: clock, cadence, orchestrator, backend, alerts, tools and the recorder.

A `Marathon` is usable without Gymnasium (scripted policies, the leaderboard). Time only moves in
`advance_to_next_invocation`; an invocation's reads see the frozen clock.

>>> m = Marathon(MarathonConfig(app="online-boutique", seed=0, injection_s=600, observation_s=240))
>>> obs = m.start()
>>> obs["t"], m.n_invocations
(120.0, 7)
>>> results = m.invoke([{"tool": "get_topology", "args": {}}])
>>> results[0].ok
True
>>> while m.advance_to_next_invocation():
...     _ = m.invoke([])
>>> report = m.finish()
>>> 0.0 <= report.marathon_score <= 100.0
True

Per tick (every ``tick_s``), in this order: orchestrator events due by then (fault injections and
scheduled reverts, noise), one twin tick, each live fault's symptom probe and artifact check; then
the tick record. Alert rules are evaluated once per invocation interval over all its ticks (one
vectorised pass) and their transitions are recorded after the tick records of the same times.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from apps import load_app
from faults.catalogue import CATALOGUE_VERSION, catalogue_apps, load_catalogue
from faults.noise import apply_noise, end_noise
from faults.orchestrator import Schedule, build_schedule
from faults.realise import FaultHandle, artifact_ok, check_at, check_live, inject, probe_ok, revert
from sremarathon_env.bundle import Recorder
from sremarathon_env.pipeline import BuildPipeline
from sremarathon_env.tools import Limits, ToolContext, ToolResult, ToolRuntime

ENV_VERSION = "0.1.0"

#: backend names a config accepts ("kubernetes" is taken as "live")
BACKENDS = ("sim", "live")
#: a call's result text kept in the bundle (longer results keep this prefix and a digest of the whole)
RESULT_CHARS_IN_BUNDLE = 4000


class MarathonConfig(BaseModel):
    """Everything that determines a run (together with the agent's calls)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str = "online-boutique"
    seed: int = 0
    backend: str = "sim"
    cadence_s: float = Field(120.0, gt=0)
    budget_s: float = Field(110.0, gt=0)
    tick_s: float = Field(15.0, gt=0)
    injection_s: int = Field(3600, gt=0)
    observation_s: int = Field(1800, ge=0)
    noise: bool = True
    noise_rate: float = Field(1.0, ge=0)
    hold_s: float = Field(120.0, ge=0)
    grace_s: float = Field(60.0, ge=0)
    penalty_per_forbidden: float = Field(1.0, ge=0)
    bundle_dir: str | None = None
    reference_run: bool = Field(True, description="compute the matched no-action run for the degradation figure")

    @field_validator("app")
    @classmethod
    def _known_app(cls, v: str) -> str:
        avail = catalogue_apps()
        if v not in avail:
            raise ValueError(f"unknown app {v!r}; available: {', '.join(avail)}")
        return v

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        if v == "kubernetes":   # the product's name for the live backend
            return "live"
        if v not in BACKENDS:
            raise ValueError(f"unknown backend {v!r}: 'sim' (the digital twin) or 'live' (alias 'kubernetes': "
                             "a Kubernetes cluster)")
        return v

    @property
    def horizon_s(self) -> float:
        return float(self.injection_s + self.observation_s)

    @property
    def n_invocations(self) -> int:
        return int(self.horizon_s // self.cadence_s)

    def schedule_key(self) -> tuple:
        return (self.app, self.seed, self.injection_s, self.observation_s, self.noise, self.noise_rate)


def _make_backend(cfg: MarathonConfig, metrics: bool = True, records: bool = True):
    if cfg.backend == "live":
        from sremarathon_env.backends.kubernetes import KubernetesBackend

        return KubernetesBackend(cfg.app, tick_s=cfg.tick_s)
    if cfg.backend != "sim":
        raise ValueError(f"unknown backend {cfg.backend!r}: 'sim' (the twin) or 'live' (a Kubernetes cluster)")
    from sremarathon_env.backends.sim import SimBackend

    return SimBackend(cfg.app, cfg.seed, tick_s=cfg.tick_s, metrics=metrics, horizon_s=cfg.horizon_s, records=records)


@lru_cache(maxsize=64)
def _schedule(key: tuple) -> Schedule:
    app, seed, injection_s, observation_s, noise, noise_rate = key
    return build_schedule(app, seed, injection_s=injection_s, observation_s=observation_s, noise=noise,
                          noise_rate=noise_rate)


@lru_cache(maxsize=1)
def _rule_pack():
    """The frozen rule pack, parsed and compiled once per process (it is read-only)."""
    from sremarathon_env.alerts import load_rule_pack

    return load_rule_pack()


@lru_cache(maxsize=8)
def _faults_by_id(app: str) -> dict:
    return {f.id: f for f in load_catalogue(app)}


#: the scored run advances a twin with metrics in deferred spans (`_Driver._run_span`); False: block by block
#: (`_Driver.tick`'s definition; the tests compare the two)
SPANS = True


def _health_event(fault: Any, start_s: float, end_s: float, t: float) -> bool:
    """Whether the fault's events due by ``t`` (its injection when ``start_s <= t``, its end when ``end_s <= t``) read
    the twin's health (see `_Driver._reads_health`)."""
    r = fault.realisation
    if r.kind == "scale":
        return True
    if end_s <= t and r.kind == "effects":
        return any(e.kind == "load_factor" for e in r.effects)
    return False


@dataclass
class _Live:
    """A scheduled fault the run loop is tracking."""

    instance_id: str
    fault: Any
    start_s: float
    end_s: float
    handle: FaultHandle | None = None
    done: bool = False
    index: int = 0    # its place in the driver's `live` list (schedule order)


@dataclass
class _Driver:
    """Drives the orchestrator's schedule against a backend (shared by the scored run and the
    no-action reference run, so both see exactly the same faults at the same times).

    `tick(t)` gives tick ``t``'s entry evidence, the live faults' probe and artifact results and the
    orchestrator events applied before it, exactly as if the twin were advanced one tick at a time:
    events due by ``t`` are applied, then the twin ticks, then each live fault is checked. After
    `plan_until(t_end)` (nobody else touches the backend before ``t_end``), the driver advances a
    backend that offers per-tick reads (``backend.at(t)``) in blocks between orchestrator events and
    evaluates each tick's checks against that tick's recorded state. Without checks (the reference
    run on a metric-less twin) it runs to the plan's end in one go, the twin's traffic deferred across
    events and computed in one step (`SimBackend.begin_deferred`; the same numbers)."""

    cfg: MarathonConfig
    backend: Any
    schedule: Schedule
    checks: bool = True          # False: the reference run, which reads only entry evidence
    live: list[_Live] = field(default_factory=list)
    noise_pending: list = field(default_factory=list)
    noise_active: list = field(default_factory=list)

    def __post_init__(self) -> None:
        by_id = _faults_by_id(self.cfg.app)
        self.live = [_Live(sf.instance_id, by_id[sf.fault_id], float(sf.start_s), float(sf.end_s), index=i)
                     for i, sf in enumerate(self.schedule.faults)]
        # the faults by start time (ties in `live` order): the ones not injected yet are always a suffix of it
        # (`_apply_events` injects every fault whose start is due), from `self._n_started` on
        self._by_start = sorted(self.live, key=lambda lf: (lf.start_s, lf.index))
        self._n_started = 0
        self.noise_pending = sorted(self.schedule.noise, key=lambda e: (e.start_s, e.id))
        self._ready: dict[int, tuple[Any, dict, list]] = {}   # tick index -> result, computed ahead
        self._limit_k = 0                                      # ticks up to here may be computed ahead
        self._blocks = hasattr(self.backend, "at")
        # the scored run on a twin with metrics and deferred spans runs each plan in spans (`_run_span`)
        self._spans = SPANS and self._blocks and hasattr(self.backend, "begin_deferred") \
            and bool(getattr(self.backend, "metrics", False))
        self._pipeline = BuildPipeline(load_app(self.cfg.app))
        self._active: list[_Live] = []   # the injected faults not yet ended (`live` order): what `_checks` checks

    def _build(self, service: str, files: dict[str, str]) -> Any:
        """Change-driven faults enter through the build pipeline the agent's patches use. (A method, not a closure
        kept on the driver: a dropped driver is freed by reference counting, with its faults' handles.)"""
        return self._pipeline.build_change(self.backend, service, files)

    def _k(self, t: float) -> int:
        return int(round(t / self.cfg.tick_s))

    def plan_until(self, t_end: float) -> None:
        """Promise that nothing but this driver acts on the backend before ``t_end``."""
        self._limit_k = max(self._limit_k, int(t_end / self.cfg.tick_s + 1e-9))

    def _apply_events(self, t: float, record: bool = True) -> list[dict]:
        """Apply the orchestrator events due by ``t``: for each fault in `live` order, its injection (start due, not
        injected yet), then its scheduled end (end due, injected, not ended); then the noise events starting and
        ending by ``t``. Only the faults with something due are visited: the not-injected ones whose start is due (a
        prefix of the not-injected part of `_by_start`) and the active ones whose end is due, in `live` order -
        the other faults' steps do nothing (tests/test_marathon.py holds this to the loop over every fault).
        ``record=False`` (a run that keeps no event records: `evidence`): the same events applied, none recorded
        (and the read that only a fault end's record takes, whether it was repaired, not made)."""
        events: list[dict] | None = [] if record else None
        due: list[_Live] = [lf for lf in self._active if lf.end_s <= t]
        n0 = n = self._n_started
        by_start = self._by_start
        while n < len(by_start) and by_start[n].start_s <= t:
            n += 1
        if n > n0:
            self._n_started = n
            due.extend(by_start[n0:n])
            due.sort(key=lambda lf: lf.index)
        for lf in due:
            self._fault_step(lf, t, events)
        self._noise_step(t, events)
        if due:   # the injected faults not yet ended, in `live` order
            active = [lf for lf in self._active if not lf.done]
            active.extend(lf for lf in by_start[n0:n] if not lf.done)
            if n > n0:
                active.sort(key=lambda lf: lf.index)
            self._active = active
        return events

    def _fault_step(self, lf: _Live, t: float, events: list[dict] | None) -> None:
        """One fault's events due by ``t``, appended to ``events`` (None: not recorded): its injection if its start is
        due and it is not injected, then its scheduled end if that is due and it is injected and not ended."""
        if lf.handle is None and lf.start_s <= t:
            lf.handle = inject(lf.fault, self.backend, build=self._build)
            if events is not None:
                self._injected(lf, events)
        if lf.handle is not None and not lf.done and lf.end_s <= t:
            # (`artifact_ok` is a pure read: a run that records nothing need not make it)
            repaired = events is not None and lf.handle.ok and artifact_ok(lf.fault, lf.handle, self.backend)
            revert(lf.handle, self.backend)
            lf.done = True
            if events is not None:
                events.append({"instance_id": lf.instance_id, "event": "ended_repaired" if repaired else "reverted"})

    @staticmethod
    def _injected(lf: _Live, events: list[dict]) -> None:
        """The record of a fault's injection (its handle made), appended to ``events``."""
        ev = {"instance_id": lf.instance_id, "event": "injected", "detail": "" if lf.handle.ok else lf.handle.message[:200]}
        realised = lf.handle.artifact.aliases if lf.handle.artifact is not None else []
        extra = [a for a in realised if a not in lf.fault.artifact.aliases]
        if extra:
            ev["aliases"] = extra
        events.append(ev)

    def _noise_step(self, t: float, events: list[dict] | None) -> None:
        """The noise events starting and ending by ``t``, appended to ``events`` (None: not recorded)."""
        while self.noise_pending and self.noise_pending[0].start_s <= t:
            ev = self.noise_pending.pop(0)
            handles = apply_noise(ev, self.backend)
            self.noise_active.append((ev, handles))
            if events is not None:
                events.append({"instance_id": ev.id, "event": "noise_start", "detail": ev.kind})
        if self.noise_active:
            still = []
            for ev, handles in self.noise_active:
                if ev.end_s <= t:
                    end_noise(handles, self.backend)
                    if events is not None:
                        events.append({"instance_id": ev.id, "event": "noise_end", "detail": ev.kind})
                else:
                    still.append((ev, handles))
            self.noise_active = still

    def _next_event_k(self) -> int:
        """The first tick at which an orchestrator event is due (a very large number when none is): the earliest of
        the next start of a fault not injected yet, the ends of the active faults, the next noise start and the
        ends of the noise events in force."""
        t = math.inf
        if self._n_started < len(self._by_start):
            t = self._by_start[self._n_started].start_s
        for lf in self._active:
            if lf.end_s < t:
                t = lf.end_s
        if self.noise_pending and self.noise_pending[0].start_s < t:
            t = self.noise_pending[0].start_s
        for ev, _ in self.noise_active:
            if ev.end_s < t:
                t = ev.end_s
        if t == math.inf:
            return 1 << 40
        return int(math.ceil(t / self.cfg.tick_s - 1e-9))

    def _checks(self, view: Any) -> dict:
        probes: dict = {}
        if not self.checks:
            return probes
        memo: dict = {}
        for lf in self._active:
            art = bool(artifact_ok(lf.fault, lf.handle, view))   # a pure read: also serves `artifact` probes
            probes[lf.instance_id] = {
                "active": bool(lf.handle.ok),
                "probe_ok": bool(probe_ok(lf.fault, view, memo, lf.handle, artifact=art)),
                "artifact_ok": art,
            }
        return probes

    def _run_deferred(self, k: int) -> tuple[Any, dict, list]:
        """Without checks (only entry evidence is read): run every tick up to the plan's end, events
        applied at their ticks exactly as `tick` would, with the twin's traffic deferred and computed
        for all those ticks at once (`begin_deferred`): the same numbers, one traffic step instead of
        one per run between events."""
        evidence, starts = self._deferred_span(k, record=True)
        first = dict(starts)
        for i, ev in enumerate(evidence):
            self._ready[k + i] = (ev, {}, first.get(k + i, []))
        return self._ready.pop(k)

    def evidence(self, n: int) -> list:
        """The entry evidence of ticks 1 .. ``n`` alone, for a run that reads nothing else (the reference run: a fresh
        driver without checks, nothing but it acting on the backend): ``[tick(k * tick_s)[0] for k in 1 .. n]`` after
        `plan_until` ``(n * tick_s)``, the same events applied at the same ticks, without the per-tick results nobody
        reads (probe and event records). On a metric-less twin with deferred spans, all ``n`` ticks in one
        evidence-only span (what `tick` does through `_run_deferred`); otherwise tick by tick."""
        tick_s = self.cfg.tick_s
        b = self.backend
        if self.checks or self._limit_k > n or self._ready or b.now != 0.0:
            raise ValueError("evidence() is for a fresh driver without checks, up to its plan's end")
        self.plan_until(n * tick_s)
        if not (self._blocks and hasattr(b, "begin_deferred") and not getattr(b, "metrics", True)):
            return [self.tick(k * tick_s)[0] for k in range(1, n + 1)]
        evidence, _ = self._deferred_span(1, record=False)
        if len(evidence) != n:   # pragma: no cover - the twin returns one entry per tick
            raise RuntimeError(f"expected {n} ticks of evidence, got {len(evidence)}")
        return evidence

    def _deferred_span(self, k: int, record: bool) -> tuple[list, list[tuple[int, list]]]:
        """Ticks ``k`` .. the plan's end in one evidence-only deferred span (`begin_deferred`), events applied at their
        ticks: (the entry evidence of each tick, (first tick, event records) of each block; ``record=False``: None for
        the records, none made)."""
        tick_s = self.cfg.tick_s
        starts: list[tuple[int, list]] = []
        self.backend.begin_deferred(evidence_only=True)   # only entry evidence is read
        try:
            kk = k
            while kk <= self._limit_k:
                events = self._apply_events(kk * tick_s, record=record)
                k_end = self._advance_block(kk)
                starts.append((kk, events))
                kk = k_end + 1
        finally:
            evidence = self.backend.end_deferred()
        return evidence, starts

    def _advance_block(self, kk: int) -> int:
        """Advance the twin from tick ``kk`` (its events applied) to the tick before the next event, within the plan
        (`plan_until`); that last tick's index."""
        k_end = max(kk, min(self._limit_k, self._next_event_k() - 1))
        n = len(self.backend.advance_to(k_end * self.cfg.tick_s))
        if n != k_end - kk + 1:   # pragma: no cover - the twin returns one entry per tick
            raise RuntimeError(f"expected {k_end - kk + 1} ticks of evidence, got {n}")
        return k_end

    def _reads_health(self, t: float) -> bool:
        """Whether applying the events due by ``t`` reads the twin's health of the current tick (which a deferred
        span has not computed yet): a ``scale`` fault's injection (the prior replica count), and the end of a
        ``scale`` fault or of effects with a ``load_factor`` (their artifact check at the end and in `revert`).
        Every other event only intervenes and reads the live state (configuration, sources, pods, effects)."""
        for lf in self._by_start[self._n_started:]:
            if lf.start_s > t:
                break
            if _health_event(lf.fault, lf.start_s, lf.end_s, t):
                return True
        for lf in self._active:
            if lf.end_s <= t and _health_event(lf.fault, math.inf, lf.end_s, t):
                return True
        return False

    def _run_span(self, k: int) -> tuple[Any, dict, list]:
        """The scored run on a twin with metrics (`_spans`): every tick up to the plan's end, events applied at their
        ticks and the twin advanced in the same blocks as `tick` would, inside deferred spans (`begin_deferred`: the
        twin's traffic of all the span's blocks in one step, the same numbers). A tick's checks read its own state:
        the live state's part (`check_live`) is taken right after its block, before the next events; the tick
        reads (`check_at`, against ``at(tick)``) once the span has ended. A span starts after a block's events and
        ends before events that read the twin's health (`_reads_health`). (tests/test_marathon_spans.py holds the
        records to those of `tick`'s blocks.)"""
        tick_s = self.cfg.tick_s
        b = self.backend
        pending: list[tuple[int, list, list]] = []   # (tick, [(live fault, its live part)], events)
        kk = k
        span = False
        try:
            while kk <= self._limit_k:
                if span and self._reads_health(kk * tick_s):
                    span = False
                    self._end_span(pending)
                events = self._apply_events(kk * tick_s)
                if not span:
                    b.begin_deferred()
                    span = True
                k_end = self._advance_block(kk)
                live = [(lf, check_live(lf.fault, lf.handle, b)) for lf in self._active]
                pending.append((kk, live, events))
                pending.extend((j, live, []) for j in range(kk + 1, k_end + 1))
                kk = k_end + 1
        except BaseException:
            if span:   # the twin leaves its deferred span; the error goes on (the span's ticks are lost with it)
                self.backend.end_deferred()
            raise
        if span:
            self._end_span(pending)
        return self._ready.pop(k)

    def _end_span(self, pending: list) -> None:
        """End the deferred span (`end_deferred`) and make the ready results of its ticks (``pending``, emptied)."""
        evidence = self.backend.end_deferred()
        if len(evidence) != len(pending):   # pragma: no cover - the twin returns one entry per tick
            raise RuntimeError(f"expected {len(pending)} ticks of evidence, got {len(evidence)}")
        tick_s = self.cfg.tick_s
        at = self.backend.at
        for ev, (kk, live, events) in zip(evidence, pending):
            view = at(kk * tick_s)
            memo: dict = {}
            probes: dict = {}
            for lf, lv in live:
                art, ok = check_at(lf.fault, lf.handle, lv, view, memo)
                probes[lf.instance_id] = {"active": bool(lf.handle.ok), "probe_ok": ok, "artifact_ok": art}
            self._ready[kk] = (ev, probes, events)
        pending.clear()

    def tick(self, t: float) -> tuple[Any, dict, list]:
        """Apply the events due by ``t``, run the twin tick at ``t``, check the live faults."""
        k = self._k(t)
        hit = self._ready.pop(k, None)
        if hit is not None:
            return hit
        self._ready.clear()
        if not self.checks and self._blocks and self._limit_k > k and hasattr(self.backend, "begin_deferred") \
                and not getattr(self.backend, "metrics", True):
            return self._run_deferred(k)
        if self.checks and self._spans and self._limit_k > k:
            return self._run_span(k)
        events = self._apply_events(t)
        tick_s = self.cfg.tick_s
        k_end = k
        if self._blocks and self._limit_k > k:
            k_end = max(k, min(self._limit_k, self._next_event_k() - 1))
        evidence = self.backend.advance_to(k_end * tick_s)
        if k_end == k:
            view = self.backend.at(t) if self._blocks else self.backend
            return evidence[-1], self._checks(view), events
        if len(evidence) != k_end - k + 1:   # pragma: no cover - the twin returns one entry per tick
            raise RuntimeError(f"expected {k_end - k + 1} ticks of evidence, got {len(evidence)}")
        for i, ev in enumerate(evidence):
            kk = k + i
            self._ready[kk] = (ev, self._checks(self.backend.at(kk * tick_s)) if self.checks else {},
                               events if i == 0 else [])
        return self._ready.pop(k)


@lru_cache(maxsize=32)
def reference_evidence(cfg: MarathonConfig) -> dict[str, list[float]]:
    """Entry evidence per tick of the matched no-action run (same app, seed and schedule). Its twin
    exports no metrics and its driver skips the per-tick probe/artifact checks: neither acts on the
    twin, and nothing but the entry evidence is kept (nor any of the twin's event and log records: ``records=False``)."""
    backend = _make_backend(cfg, metrics=False, records=False)
    drv = _Driver(cfg, backend, _schedule(cfg.schedule_key()), checks=False)
    evidence = drv.evidence(int(round(cfg.horizon_s / cfg.tick_s)))
    return {"t": [float(e.t) for e in evidence], "total": [float(e.total) for e in evidence],
            "failed": [float(e.failed) for e in evidence], "slow": [float(e.slow) for e in evidence],
            "degraded": [float(e.degraded) for e in evidence]}


def _versions() -> dict[str, str]:
    """The recorded package versions (a fresh dict; looked up once per process: metadata reads cost ~1 ms)."""
    return dict(_versions_once())


@lru_cache(maxsize=1)
def _versions_once() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"sremarathon-env": ENV_VERSION}
    for pkg in ("numpy", "pydantic", "gymnasium"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover
            pass
    return out


class Marathon:
    """One run: `start`, then repeatedly `invoke` and `advance_to_next_invocation`, then `finish`."""

    def __init__(self, config: MarathonConfig | None = None, **overrides: Any):
        cfg = config or MarathonConfig()
        if overrides:
            cfg = cfg.model_copy(update=overrides)
            cfg = MarathonConfig.model_validate(cfg.model_dump())
        self.config = cfg
        self.app = load_app(cfg.app)
        self.n_invocations = cfg.n_invocations
        self.invocation_index = 0
        self.now = 0.0
        self.started = False
        self.finished = False
        self.last_results: list[ToolResult] = []
        self.scorer = None
        self._pending: list[ToolResult] = []
        self._invocation_closed = True

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, observe: bool = True) -> dict[str, Any] | None:
        """Build schedule, backend, alerts and recorder; run to the first invocation. Returns the `observation`
        (None with ``observe=False``: for callers that observe the marathon their own way, like the env)."""
        from scoring import IncrementalScorer
        from sremarathon_env.alerts import AlertEngine, PromQLEngine

        cfg = self.config
        self.schedule = _schedule(cfg.schedule_key())
        self.schedule_digest = self.schedule.digest()   # recorded in the schedule record; the env reports it
        self.backend = _make_backend(cfg)
        self.driver = _Driver(cfg, self.backend, self.schedule)
        self.rule_pack = _rule_pack()
        self.alert_engine = AlertEngine(self.rule_pack, self.backend.store)
        self.promql = PromQLEngine(self.backend.store)
        self.ctx = ToolContext(backend=self.backend, app=self.app, alerts=self.alert_engine, promql=self.promql,
                               limits=Limits(budget_s=cfg.budget_s))
        self.runtime = ToolRuntime(self.ctx)
        self.recorder = Recorder(cfg.bundle_dir)
        self.scorer = IncrementalScorer()
        self._append("run", 0.0, {
            "app": cfg.app, "seed": cfg.seed, "backend": cfg.backend, "catalogue_version": CATALOGUE_VERSION,
            "rule_pack_version": str(getattr(self.rule_pack, "version", "")), "cadence_s": cfg.cadence_s,
            "budget_s": cfg.budget_s, "tick_s": cfg.tick_s, "injection_s": float(cfg.injection_s),
            "observation_s": float(cfg.observation_s), "n_invocations": self.n_invocations,
            "hold_s": cfg.hold_s, "grace_s": cfg.grace_s, "penalty_per_forbidden": cfg.penalty_per_forbidden,
            "versions": _versions(),
            "config": {"noise": cfg.noise, "noise_rate": cfg.noise_rate,
                       "request_metrics": "modelled" if cfg.backend == "sim" else "unavailable"},
        })
        self._append("schedule", 0.0, self._schedule_record())
        if cfg.reference_run and cfg.backend == "sim":  # a live cluster cannot replay the no-action run
            ref = reference_evidence(cfg.model_copy(update={"bundle_dir": None}))
            self._append("reference", 0.0, {"policy": "noop", **ref})
        self.started = True
        self._run_until(cfg.cadence_s)
        self._begin_invocation()
        return self.observation() if observe else None

    def _schedule_record(self) -> dict[str, Any]:
        faults = []
        for lf in self.driver.live:
            f = lf.fault
            faults.append({
                "instance_id": lf.instance_id, "fault_id": f.id, "category": f.category,
                "mechanism": f.mechanism, "start_s": lf.start_s, "end_s": lf.end_s, "target": f.target,
                "culprits": list(f.culprits),
                "artifact": {"kind": f.artifact.kind, "canonical": f.artifact.canonical,
                             "aliases": list(f.artifact.aliases)},
                "scope": list(f.scope), "silent": bool(getattr(f, "silent", False)),
                "expected_alerts": list(getattr(f, "expected_alerts", [])),
            })
        noise = [{"noise_id": e.id, "kind": e.kind, "t": float(e.start_s), "duration_s": float(e.end_s - e.start_s),
                  "target": e.service or e.path or "", "detail": dict(e.params)} for e in self.schedule.noise]
        return {"faults": faults, "noise": noise, "schedule_digest": self.schedule_digest}

    def _append(self, kind: str, t: float, data: Any) -> None:
        rec = self.recorder.append(kind, t, data)
        self.scorer.feed(rec)

    def _run_until(self, t_end: float) -> None:
        """Run ticks from now to ``t_end``, then evaluate alerts over them; record in order."""
        cfg = self.config
        ticks: list[tuple[float, Any, dict, list]] = []
        t = self.now
        self.driver.plan_until(t_end)
        tick = self.driver.tick
        while t + cfg.tick_s <= t_end + 1e-9:
            t = round(t + cfg.tick_s, 6)
            ev, probes, events = tick(t)
            ticks.append((t, ev, probes, events))
        self.now = t
        transitions = self.alert_engine.evaluate_until(t)
        by_t: dict[float, list] = {}
        for tr in transitions:
            if tr.state == "inactive":  # pending that never fired: not a bundle alert state
                continue
            by_t.setdefault(float(tr.t), []).append(tr)
        # the records from their parts (`Recorder.append_tick` / `append_alert`: the records of ``append("tick", t,
        # {"t": t, "entry": {counts}, "faults": probes, "events": events})`` and ``append("alert", t, {"t": t,
        # "alertname": ..., "labels": dict(tr.labels), ..., "severity": labels.get("severity")})``); the driver's
        # probes and events of a tick and a transition's labels are fresh, handed over to the records
        rec, feed = self.recorder, self.scorer.feed
        append_tick, append_alert = rec.append_tick, rec.append_alert
        for tt, ev, probes, events in ticks:
            feed(append_tick(tt, _count(ev.total), _count(ev.failed), _count(ev.slow), _count(ev.degraded), probes,
                             events))
            if by_t:
                for tr in by_t.pop(tt, ()):
                    labels = tr.labels if type(tr.labels) is dict else dict(tr.labels)
                    feed(append_alert(tt, tr.alertname, labels, tr.fingerprint, tr.state, labels.get("severity")))
        for tt in sorted(by_t):  # transitions at times without a tick record (not expected): keep order
            for tr in by_t[tt]:
                rt = max(tt, self.now)
                self._append("alert", rt, {"t": rt, "alertname": tr.alertname, "labels": dict(tr.labels),
                                           "fingerprint": tr.fingerprint, "state": tr.state})

    def _begin_invocation(self) -> None:
        self.invocation_index += 1
        self.runtime.begin_invocation(self.now, self.config.budget_s)
        self._pending: list[ToolResult] = []
        self._invocation_closed = False

    def call(self, tool: Any, args: Any = None) -> ToolResult:
        """Run one tool call inside the current invocation (clock frozen). Never raises for a bad
        call: the result carries a structured error instead."""
        if not self.started or self.finished:
            raise RuntimeError("call() needs a started, unfinished marathon")
        if self._invocation_closed:
            raise RuntimeError("this invocation has ended; advance_to_next_invocation() first")
        res = self.runtime.call(tool, args)
        self._pending.append(res)
        return res

    def end_invocation(self, usage: dict[str, Any] | None = None, error: str | None = None) -> list[ToolResult]:
        """Close the current invocation and record it with its calls (idempotent)."""
        if self._invocation_closed:
            return self.last_results
        self._invocation_closed = True
        results, self._pending = self._pending, []
        self._record_invocation(results, error, usage)
        self.last_results = results
        return results

    def invoke(self, calls: Iterable[Any], usage: dict[str, Any] | None = None) -> list[ToolResult]:
        """Run one invocation's tool calls and close it. ``calls`` items are ``{"tool": name,
        "args": {...}}`` (or OpenAI-style ``{"name", "arguments"}``, or ``(name, args)``). Never raises
        for a bad call; an action that is not a sequence is recorded as an invocation error."""
        error = None
        try:
            items = list(calls) if calls is not None else []
        except TypeError:
            items, error = [], f"action is not a sequence of tool calls: {type(calls).__name__}"
        for item in items:
            name, args = _split_call(item)
            self.call(name, args)
        return self.end_invocation(usage, error)

    def _record_invocation(self, results: list[ToolResult], error: str | None, usage: dict | None) -> None:
        t, inv = self.now, self.invocation_index
        calls = []
        for r in results:
            c = r.as_tool_call()
            text = c.get("result")
            if text is not None and len(text) > RESULT_CHARS_IN_BUNDLE:
                c["result_digest"] = hashlib.sha256(text.encode()).hexdigest()
                c["result"] = text[:RESULT_CHARS_IN_BUNDLE]
            calls.append(c)
        used = float(sum(r.cost_s for r in results))   # (0.0 without calls: what the record's float field holds)
        self._append("invocation", t, {"index": inv, "t": t, "calls": calls, "budget_used_s": used, "error": error})
        for r in results:
            inc = r.as_incident_op()
            if inc is not None:
                self._append("incident", t, {"t": t, "invocation": inv, **inc})
                continue
            act = r.as_action()
            if act is not None:
                self._append("action", t, {"t": t, "invocation": inv, **act})
        if usage:
            self._append("usage", t, {"t": t, "invocation": inv, **usage})

    def advance_to_next_invocation(self) -> bool:
        """Run the ticks to the next invocation. False (and nothing run) when the marathon is over."""
        if not self._invocation_closed:
            self.end_invocation()
        if self.invocation_index >= self.n_invocations:
            return False
        self._run_until(self.now + self.config.cadence_s)
        self._begin_invocation()
        return True

    def finish(self):
        """Seal the bundle and return the final `ScoreReport`: the incremental scorer's report, which has been fed
        every record (the end record too), the same report as the batch scorer's over the sealed bundle
        (``scoring.score(self.recorder.records, complete=True)``, checked by the tests) without replaying it."""
        if not self.finished:
            if self.started and not self._invocation_closed:
                self.end_invocation()
            self.recorder.seal()
            self.scorer.feed(self.recorder.records[-1])   # the end record, appended by the recorder itself
            self.finished = True
        report = self.scorer.report()
        report.digest = self.recorder.digest
        return report

    def release(self) -> None:
        """Hand the large buffers of this marathon's alert engine to the next marathon of this process (the env
        calls it when it drops a marathon, at reset and close). Nothing observable changes: the engine stays
        usable and gives the same results (see `AlertEngine.release`)."""
        eng = getattr(self, "alert_engine", None)
        if eng is not None:
            eng.release()

    # -- the oracle's door (test-only) ------------------------------------------------------------
    def oracle_ground_truth_TEST_ONLY(self) -> list[dict[str, Any]]:
        """The sealed ground truth of the faults injected so far: for the `oracle` baseline, which
        validates that every fault is reachable through the tools and that the scorer credits
        correct work. Never exposed through the environment's observation or any tool."""
        out = []
        for lf in self.driver.live:
            if lf.handle is None:
                continue
            out.append({"instance_id": lf.instance_id, "fault": lf.fault, "start_s": lf.start_s, "end_s": lf.end_s,
                        "injected_ok": lf.handle.ok, "ended": lf.done, "revision": lf.handle.revision,
                        "sha": lf.handle.sha, "prior": dict(lf.handle.prior)})
        return out

    # -- views ----------------------------------------------------------------------------------
    @property
    def score(self) -> float:
        """Marathon-Score of the evidence recorded so far (the env's cumulative reward)."""
        return float(self.scorer.score) if self.scorer is not None else 0.0

    def observation(self) -> dict[str, Any]:
        """What the agent sees at an invocation: sim time, cumulative alert history, incidents,
        workspace listing and the previous invocation's results. Never the schedule."""
        return {
            "t": self.now,
            "invocation": self.invocation_index,
            "budget_s": self.config.budget_s,
            "alerts": [a if isinstance(a, dict) else a.model_dump(mode="json") if hasattr(a, "model_dump") else dict(a)
                       for a in self.alert_engine.history()],
            "incidents": self.ctx.incidents.snapshot(),
            "workspace": self.ctx.workspace.list(),
            "last_results": [r.to_json() for r in self.last_results],
        }


def _count(x: float) -> float:
    """Entry counts as recorded: a backend without request-level telemetry (kwok) reports NaN, recorded as
    0 (the run record's ``config.request_metrics`` says they are unavailable, so nothing reads them as real)."""
    return 0.0 if x != x else float(x)


def _split_call(item: Any) -> tuple[Any, Any]:
    if isinstance(item, dict):
        if "tool" in item:
            return item.get("tool"), item.get("args", {})
        fn = item.get("function", item)
        if isinstance(fn, dict) and "name" in fn:
            return fn.get("name"), fn.get("arguments", {})
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return item[0], item[1]
    return None, item

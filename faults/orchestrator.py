"""The seeded marathon orchestrator: (catalogue release, app, seed) -> `Schedule`.

Semantics (DESIGN.md section 4):

- Arrivals over the injection window (60 min by default) with *rising intensity*: the arrival density
  grows linearly, ``lambda(t) ~ 1 + slope * t / T``; arrival times are drawn by stratified inverse-CDF
  sampling so that every run has the same count profile but different times.
- Per run about sixty faults (uniform in ``n_faults`` +- 3). Durations 4-12 minutes,
  ``4 + 8 * Beta(a, b)`` minutes with an app-specific mean (`APP_PROFILES`), but never shorter than the
  fault needs to be repairable (`repairable_min_s`: onset + detection + the repair's pod boot + the
  scorer's hold): an arrival prefers faults repairable in its drawn window, otherwise it takes the
  quickest-to-repair candidate and stretches the window. Train Ticket's JVMs boot in ~4 min, so its
  windows are mostly set by that minimum (fewer, longer faults: 52 +- 3 with the same concurrency).
- The category of each arrival follows `CATEGORY_MIX`, the production mix the SRE-Marathon paper
  cites: code and configuration defects together 39.5 % of high-severity incidents (here 20 % code,
  20 % config); the rest is split over resource exhaustion, network, dependency/datastore,
  deployment/image, node/zone and load. Categories an app lacks are dropped and the rest renormalised.
- Overlaps are allowed, but two faults that share a conflict key (`Fault.conflict_keys`: the same
  artifact, the same service's revision, resources, replicas, node, flag or load path) are never
  active at once; an arrival picks among the faults that fit, each fault at most once per run.
- Then the observation window (30 min) with no new faults. No fault-start notification is given to the
  agent (the schedule is sealed ground truth); each fault is reverted at ``end_s`` unless repaired.
- Noise (`faults.noise`) is drawn from its own child stream of the same seed.

Calibration (paper section 4: average simultaneous faults 5.8 / 6.1 / 6.5 and peak 10 / 11 / 11 for
Online Boutique / Train Ticket / Astronomy Shop): *average* is the time-average of the number of active
faults from the first injection to the last scheduled revert; *peak* is the maximum of that count. Both
are averaged over seeds by `calibration`. Tests check each within 15 % over 20 seeds.

>>> from faults.orchestrator import build_schedule
>>> s = build_schedule("online-boutique", 7)
>>> s == build_schedule("online-boutique", 7), s.digest() == build_schedule("online-boutique", 7).digest()
(True, True)
>>> 45 <= len(s.faults) <= 70
True
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from faults.model import CATEGORIES, Fault

#: share of arrivals per category (by cause). Code + config = 40 % (paper: 39.5 %).
CATEGORY_MIX: dict[str, float] = {
    "code": 0.20,
    "config": 0.20,
    "resource": 0.14,
    "network": 0.12,
    "dependency": 0.11,
    "deployment": 0.10,
    "node": 0.05,
    "load": 0.08,
}


@dataclass(frozen=True)
class AppProfile:
    """Per-app schedule shape, fitted so the calibration figures match the paper."""

    n_faults: int = 60
    slope: float = 1.0            # intensity at the end of the window is (1 + slope) x that at the start
    mean_duration_min: float = 6.5
    concentration: float = 4.0    # Beta(a, b) with a + b = concentration


APP_PROFILES: dict[str, AppProfile] = {
    "online-boutique": AppProfile(slope=1.0, mean_duration_min=6.4, concentration=4.0),
    "train-ticket": AppProfile(n_faults=52, slope=0.8, mean_duration_min=4.2, concentration=4.0),
    "astronomy-shop": AppProfile(slope=1.0, mean_duration_min=7.2, concentration=4.0),
}
DEFAULT_PROFILE = AppProfile()
MIN_DURATION_S = 240
MAX_DURATION_S = 720
#: allowances of `repairable_min_s`: from symptom to the agent acting (alert ``for:`` plus the wait for the
#: next 120 s invocation), and the scorer's healthy hold (8 ticks) plus one tick of slack
DETECT_S = 180.0
HOLD_S = 135.0


def _boot_s(spec, service: str | None) -> float:
    """Seconds a new pod of ``service`` needs until it serves (readiness initial delay + start-up); 0 if unknown."""
    if not service:
        return 0.0
    try:
        s = spec.service(service)
    except KeyError:
        return 0.0
    return (s.readiness_probe.initial_delay_s if s.readiness_probe else 0.0) + s.behaviour.startup_s


def _repair_s(spec, fault: Fault) -> float:
    """Seconds from the fastest declared repair until the fault's service serves again (new pods boot)."""
    best = float("inf")
    for r in fault.repairs:
        a = r.args
        if r.tool == "drain_node":
            t = max((_boot_s(spec, s.name) for s in spec.services if s.node == a.get("node")), default=0.0)
        elif r.tool == "set_config":
            target = a.get("target")
            knob = target is not None and any(s.name == target for s in spec.services)
            t = _boot_s(spec, target) if knob else 0.0   # an env knob rolls the service out; a flag does not
        elif r.tool == "rollback" and fault.realisation.kind == "deploy" and fault.category == "deployment":
            t = 0.0   # the bad revision never became ready: the previous pods still serve
        else:       # rollback, restart, set_resources, patch_source, scale: replacement pods must boot
            t = _boot_s(spec, a.get("service"))
        best = min(best, t)
    return 0.0 if best == float("inf") else best


def repairable_min_s(fault: Fault, spec) -> int:
    """The shortest window in which a perfect agent can repair ``fault`` before the scheduled revert.

    Symptom onset (a new revision only shows once its pods boot), `DETECT_S`, the fastest repair's pod
    boot (`_repair_s`) and the scorer's hold (`HOLD_S`), rounded up to 5 s and clipped to
    [`MIN_DURATION_S`, `MAX_DURATION_S`]. ``spec`` is the app's `apps.spec.AppSpec`."""
    r = fault.realisation
    slow_show = (r.kind in ("deploy", "resources") or (r.kind == "config" and r.service)) \
        and fault.category != "deployment"
    onset = _boot_s(spec, r.service or fault.target) if slow_show else 0.0
    need = onset + DETECT_S + _repair_s(spec, fault) + HOLD_S
    return int(min(MAX_DURATION_S, max(MIN_DURATION_S, 5 * -(-need // 5))))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScheduledFault(_Strict):
    instance_id: str
    fault_id: str
    start_s: int
    end_s: int
    category: str = ""
    target: str = ""

    @property
    def duration_s(self) -> int:
        return self.end_s - self.start_s


class NoiseEvent(_Strict):
    """A benign event: recorded as noise in the ground truth, never scored as a fault."""

    id: str
    kind: str  # benign_deploy | pod_restart | latency_blip | load_burst | alert_flap
    start_s: int
    end_s: int
    service: str | None = None
    path: str | None = None
    params: dict[str, float | int | str] = Field(default_factory=dict)


class Schedule(_Strict):
    app: str
    seed: int
    catalogue_version: str
    injection_s: int
    observation_s: int
    noise_rate: float
    faults: list[ScheduledFault]
    noise: list[NoiseEvent] = Field(default_factory=list)

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    @property
    def horizon_s(self) -> int:
        return self.injection_s + self.observation_s

    def active_at(self, t: float) -> list[ScheduledFault]:
        return [f for f in self.faults if f.start_s <= t < f.end_s]

    def concurrency(self, step_s: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
        """(grid, number of active faults at each grid time) over the whole marathon."""
        grid = np.arange(0.0, float(self.horizon_s), step_s)
        if not self.faults:
            return grid, np.zeros_like(grid, dtype=np.int64)
        st = np.array([f.start_s for f in self.faults], dtype=float)
        en = np.array([f.end_s for f in self.faults], dtype=float)
        act = ((st[None, :] <= grid[:, None]) & (en[None, :] > grid[:, None])).sum(axis=1)
        return grid, act

    def stats(self) -> dict[str, float]:
        """n_faults, avg_active (time-average from first injection to last revert), peak_active,
        category shares, noise events."""
        grid, act = self.concurrency()
        if self.faults:
            lo = min(f.start_s for f in self.faults)
            hi = max(f.end_s for f in self.faults)
            sel = (grid >= lo) & (grid < hi)
            avg = float(act[sel].mean())
        else:
            avg = 0.0
        out: dict[str, float] = {
            "n_faults": float(len(self.faults)),
            "avg_active": avg,
            "peak_active": float(act.max() if act.size else 0),
            "n_noise": float(len(self.noise)),
        }
        for c in CATEGORIES:
            out[f"share_{c}"] = (sum(1 for f in self.faults if f.category == c) / len(self.faults)) if self.faults else 0.0
        return out

    def table(self) -> list[tuple[str, str, str, str, str]]:
        """Rows (time mm:ss, instance, fault id, target, duration) in start order."""
        return [(f"{f.start_s // 60:02d}:{f.start_s % 60:02d}", f.instance_id, f.fault_id, f.target,
                 f"{f.duration_s // 60}m{f.duration_s % 60:02d}s") for f in self.faults]


def seed_sequence(*parts: object) -> np.random.SeedSequence:
    """A SeedSequence from a stable hash of the parts (no Python hash randomisation)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return np.random.SeedSequence([int.from_bytes(h[i:i + 4], "little") for i in range(0, 16, 4)])


def arrival_times(rng: np.random.Generator, n: int, window_s: float, slope: float) -> np.ndarray:
    """n sorted arrival times in (0, window_s) with linearly rising density (stratified)."""
    u = (np.arange(n) + rng.random(n)) / n
    if slope <= 0:
        x = u
    else:
        c = u * (1.0 + slope / 2.0)
        x = (-1.0 + np.sqrt(1.0 + 2.0 * slope * c)) / slope
    t = np.clip(np.round(x * window_s), 1, window_s - 1)
    return np.sort(t).astype(np.int64)


def _pick_category(rng: np.random.Generator, available: list[str]) -> list[str]:
    """A category order for one arrival: the first drawn by the mix, then the rest by the mix.

    Each pick is ``rng.choice(len(cats), p=a / a.sum())`` over the categories left (the
    definition; the last choice, among one, still draws from the generator). ``Generator.choice`` with ``p`` and
    no size draws one ``rng.random()`` and takes the first index whose normalised cumulative weight exceeds it
    (``searchsorted(..., side="right")``): here the uniforms of all picks are drawn in one call (the same stream)
    and each pick bisects the cumulative weights of the categories left, made once per weight list by the same
    numpy operations (`_category_cdf`). tests/faults/test_orchestrator.py holds the two to the same orders and the
    same generator state afterwards."""
    cats = [c for c in CATEGORIES if c in available]
    w = [float(CATEGORY_MIX[c]) for c in cats]
    order = []
    for u in rng.random(len(cats)).tolist():
        i = bisect_right(_category_cdf(tuple(w)), u)
        order.append(cats.pop(i))
        w.pop(i)
    return order


@lru_cache(maxsize=1024)
def _category_cdf(w: tuple[float, ...]) -> tuple[float, ...]:
    """The cumulative distribution ``Generator.choice`` searches for weights ``w``: ``p = a / a.sum()``, then
    ``cdf = p.cumsum(); cdf /= cdf[-1]`` (numpy's own operations, so the same floats). A pure function of the
    weights (at most 2**8 lists of the eight categories occur)."""
    a = np.array(w)
    cdf = (a / a.sum()).cumsum()
    cdf /= cdf[-1]
    return tuple(cdf.tolist())


def fault_min_durations(app: str, faults: list[Fault]) -> dict[str, int]:
    """`repairable_min_s` of each fault (``MIN_DURATION_S`` for all when the app model is not available).
    Faults are immutable: the values are computed once per fault object and app (a schedule asks for the
    whole catalogue's)."""
    try:
        from apps import load_app

        spec = load_app(app)
    except (KeyError, ValueError, FileNotFoundError):
        return {f.id: MIN_DURATION_S for f in faults}
    memo = _MIN_S.setdefault((app, id(spec)), {})
    out = {}
    for f in faults:
        hit = memo.get(id(f))
        if hit is None or hit[0] is not f:
            if len(memo) > 20000:
                memo.clear()
            hit = memo[id(f)] = (f, repairable_min_s(f, spec))
        out[f.id] = hit[1]
    return out


#: (app, id of its spec) -> id(fault) -> (fault, repairable_min_s); the fault is kept so that its id stays its own
_MIN_S: dict[tuple[str, int], dict[int, tuple[Fault, int]]] = {}


def _conflict_keys(f: Fault) -> frozenset[str]:
    """`Fault.conflict_keys` as a set, made once per fault object (faults are immutable; a schedule asks for
    the whole catalogue's)."""
    hit = _KEYS.get(id(f))
    if hit is None or hit[0] is not f:
        if len(_KEYS) > 20000:
            _KEYS.clear()
        hit = _KEYS[id(f)] = (f, frozenset(f.conflict_keys()))
    return hit[1]


#: id(fault) -> (fault, its conflict keys); the fault is kept so that its id stays its own
_KEYS: dict[int, tuple[Fault, frozenset[str]]] = {}


def _index_pool(app: str, faults: list[Fault], min_durations: dict[str, int] | None) -> tuple:
    """(pool, by category, conflict keys, minimum duration, faults by key, pick index) of a fault list: what a
    schedule draws from (the faults that are not noise, by id), each fault's conflict keys, its repairable duration
    clipped to the allowed range (``min_durations``, default `fault_min_durations`), the ids of the faults holding
    each key and each non-empty category's `_pick_index`."""
    pool = sorted((f for f in faults if not f.noise), key=lambda f: f.id)
    mins = min_durations if min_durations is not None else fault_min_durations(app, pool) if pool else {}
    by_cat: dict[str, list[Fault]] = {c: [] for c in CATEGORIES}
    for f in pool:
        by_cat[f.category].append(f)
    keys = {f.id: _conflict_keys(f) for f in pool}
    need = {f.id: max(MIN_DURATION_S, min(MAX_DURATION_S, int(mins.get(f.id, MIN_DURATION_S)))) for f in pool}
    by_key: dict[str, set[str]] = {}
    for f in pool:
        for k in keys[f.id]:
            by_key.setdefault(k, set()).add(f.id)
    index = {c: _pick_index(fs, need) for c, fs in by_cat.items() if fs}
    return pool, by_cat, keys, need, {k: frozenset(v) for k, v in by_key.items()}, index


def _pool_parts(app: str, faults: list[Fault]) -> tuple | None:
    """`_index_pool` of a fault list with the default durations, kept per (app, app model, the very fault objects):
    every schedule of an app indexes the same catalogue (faults and app models are immutable; the entry holds
    them, so their ids stay theirs). None where the app model is not available (computed afresh then). The parts
    are shared: read-only."""
    try:
        from apps import load_app

        spec = load_app(app)
    except (KeyError, ValueError, FileNotFoundError):
        return None
    faults = tuple(faults)
    key = (app, id(spec), tuple(map(id, faults)))
    hit = _POOL_PARTS.get(key)
    if hit is None or hit[0] is not spec or any(a is not b for a, b in zip(hit[1], faults)):
        if len(_POOL_PARTS) >= POOL_PARTS_MAX:
            _POOL_PARTS.clear()
        hit = _POOL_PARTS[key] = (spec, faults, _index_pool(app, list(faults), None))
    return hit[2]


#: (app, id of its model, ids of the faults) -> (model, faults, `_index_pool` parts); at most POOL_PARTS_MAX lists
_POOL_PARTS: dict[tuple, tuple] = {}
POOL_PARTS_MAX = 16


def _blocked(st: int, d: int, busy: set[str], later: list[tuple[int, frozenset[str]]],
             by_key: dict[str, frozenset[str]], need: dict[str, int]) -> set[str]:
    """The ids of the faults an arrival at ``st`` with drawn window ``d`` may not take: those sharing a conflict key
    with a fault active during the window (``busy``), and those sharing one with a fault that starts after the
    drawn window's end (``later``: (start, keys)) but before the end of the fault's own window
    (``st + max(d, need)``). Found from the faults holding each key (``by_key``) instead of testing every fault
    of a category against every key set (tests/faults/test_orchestrator.py compares it with that test)."""
    out: set[str] = set()
    for k in busy:
        ids = by_key.get(k)
        if ids:
            out |= ids
    for s0, ks in later:
        for k in ks:
            for fid in by_key.get(k, ()):
                if s0 < st + max(d, need[fid]):
                    out.add(fid)
    return out


def schedule_faults(app: str, seed: int, faults: list[Fault], *, catalogue_version: str,
                    injection_s: int = 3600, profile: AppProfile | None = None,
                    min_durations: dict[str, int] | None = None) -> list[ScheduledFault]:
    """The fault part of a schedule, from an explicit fault list (see `build_schedule`).

    Each arrival draws a duration; within the drawn category it prefers faults that are repairable in that
    window (``min_durations``, default `fault_min_durations`); when none fits, it takes any candidate and
    stretches the window to that fault's minimum, so that no fault is scheduled shorter than a perfect agent
    needs to repair it (detect, repair, hold)."""
    prof = profile or APP_PROFILES.get(app, DEFAULT_PROFILE)
    parts = _pool_parts(app, faults) if min_durations is None else None
    if parts is None:
        parts = _index_pool(app, faults, min_durations)
    pool, by_cat, keys, need, by_key, index = parts
    if not pool:
        return []
    ss = seed_sequence("schedule", catalogue_version, app, seed)
    r_count, r_times, r_dur, r_pick = (np.random.default_rng(s) for s in ss.spawn(4))
    scale = injection_s / 3600.0
    n = max(1, int(round((prof.n_faults + int(r_count.integers(-3, 4))) * scale)))
    starts = arrival_times(r_times, n, float(injection_s), prof.slope)
    m = (prof.mean_duration_min - 4.0) / 8.0
    a, b = m * prof.concentration, (1.0 - m) * prof.concentration
    durs = np.round((240.0 + 480.0 * r_dur.beta(a, b, n)) / 5.0).astype(np.int64) * 5
    durs = np.clip(durs, MIN_DURATION_S, MAX_DURATION_S)

    used: set[str] = set()
    active: list[tuple[int, int, set[str]]] = []   # (start, end, keys)
    out: list[ScheduledFault] = []
    avail = [c for c in CATEGORIES if by_cat[c]]
    for i in range(n):
        st, d = int(starts[i]), int(durs[i])
        near = [(s0, ks) for (s0, e0, ks) in active if st < e0 and s0 < st + MAX_DURATION_S]
        busy: set[str] = set()
        for s0, ks in near:
            if s0 < st + d:
                busy |= ks
        later = [(s0, ks) for s0, ks in near if s0 >= st + d]   # faults starting after this window's end
        blocked = _blocked(st, d, busy, later, by_key, need)

        chosen = None
        for c in _pick_category(r_pick, avail):
            pick_from = _pick_list(index[c], used, blocked, d)
            if pick_from:
                chosen = pick_from[int(r_pick.integers(len(pick_from)))]
                break
        if chosen is None:
            continue
        en = st + max(d, need[chosen.id])
        used.add(chosen.id)
        active.append((st, en, keys[chosen.id]))
        out.append((st, chosen.id, en, chosen))
    out.sort(key=lambda x: (x[0], x[1]))
    return [ScheduledFault(instance_id=f"F{i + 1:03d}", fault_id=fid, start_s=st, end_s=en, category=f.category,
                           target=f.target) for i, (st, fid, en, f) in enumerate(out)]


def _pick_index(faults: list[Fault], need: dict[str, int]) -> tuple[list[tuple[Fault, str, int]], list[tuple]]:
    """What `_pick_list` reads of one category: its (fault, id, need) in order, and its faults grouped by need in
    ascending need, each group ``(need, [(fault, id), ...])`` in the category's order."""
    entries = [(f, f.id, need[f.id]) for f in faults]
    groups: dict[int, list[tuple[Fault, str]]] = {}
    for f, fid, nf in entries:
        groups.setdefault(nf, []).append((f, fid))
    return entries, sorted(groups.items())


def _pick_list(index: tuple[list, list], used: set[str], blocked: set[str], d: int) -> list[Fault]:
    """The faults of one category an arrival with drawn window ``d`` picks from, in their order: the candidates
    (neither used nor blocked) repairable in the window (``need <= d``); when none is, the candidates quickest to
    repair (least ``need``: the window is stretched to it); empty when there is no candidate. ``index``: the
    category's `_pick_index`. The fitting ones are taken in one pass, and only where some fault of the category
    needs no more than ``d``; the quickest candidates are the first need group holding one (the definition makes
    the candidate list, then the fitting list, then the least need's list; tests/faults/test_orchestrator.py holds
    the two to each other)."""
    entries, groups = index
    if groups and groups[0][0] <= d:
        fit = [f for f, fid, nf in entries if nf <= d and fid not in used and fid not in blocked]
        if fit:
            return fit
    for nf, members in groups:   # no candidate fits: those of the least need (the groups up to d hold none)
        if nf <= d:
            continue
        got = [f for f, fid in members if fid not in used and fid not in blocked]
        if got:
            return got
    return []


def build_schedule(app: str, seed: int, *, catalogue_version: str | None = None, injection_s: int = 3600,
                   observation_s: int = 1800, noise: bool = True, noise_rate: float = 1.0,
                   faults: list[Fault] | None = None) -> Schedule:
    """The schedule for (catalogue release, app, seed). ``faults`` overrides the catalogue (tests)."""
    from faults.catalogue import CATALOGUE_VERSION, load_catalogue
    from faults.noise import draw_noise

    version = catalogue_version or CATALOGUE_VERSION
    if faults is None:
        if version != CATALOGUE_VERSION:
            raise ValueError(f"catalogue release {version!r} is not available (this build has {CATALOGUE_VERSION!r})")
        faults = load_catalogue(app)
    if injection_s <= 0 or observation_s < 0:
        raise ValueError("injection_s must be > 0 and observation_s >= 0")
    if noise_rate < 0:
        raise ValueError("noise_rate must be >= 0")
    sched = schedule_faults(app, seed, faults, catalogue_version=version, injection_s=injection_s)
    by_id = {f.id: f for f in faults}
    decoys = [(sf.instance_id, sf.start_s, by_id[sf.fault_id].realisation.service) for sf in sched
              if by_id[sf.fault_id].realisation.kind == "deploy" and by_id[sf.fault_id].realisation.files]
    events = draw_noise(app, seed, catalogue_version=version, horizon_s=injection_s + observation_s,
                        rate=noise_rate, decoy_for=decoys) if noise and noise_rate > 0 else []
    return Schedule(app=app, seed=int(seed), catalogue_version=version, injection_s=injection_s,
                    observation_s=observation_s, noise_rate=float(noise_rate) if noise else 0.0,
                    faults=sched, noise=events)


def calibration(app: str, seeds: Iterable[int], **kw) -> dict[str, float]:
    """Mean n_faults, avg_active and peak_active over seeds (plus category shares)."""
    rows = [build_schedule(app, s, noise=False, **kw).stats() for s in seeds]
    keys = rows[0].keys()
    return {k: float(np.mean([r[k] for r in rows])) for k in keys}


#: the paper's figures (section 4) the calibration targets: (avg simultaneous, peak)
PAPER_TARGETS: dict[str, tuple[float, float]] = {
    "online-boutique": (5.8, 10.0),
    "train-ticket": (6.1, 11.0),
    "astronomy-shop": (6.5, 11.0),
}

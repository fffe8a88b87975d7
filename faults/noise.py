"""Seeded noise: benign events that make signals realistic and are never scored as faults.

Kinds and base rates per hour of marathon (multiplied by ``rate``, 1.0 by default):

- ``benign_deploy`` (4/h): a harmless source change (a comment line) delivered through the build
  pipeline with a plausible commit message; it sits in the deploy history as a decoy.
- ``pod_restart`` (3/h): one pod of a service is deleted and comes back by itself.
- ``latency_blip`` (6/h): 30-90 s of added latency (150-600 ms) on one service.
- ``load_burst`` (3/h): 60-180 s of 1.5-2.5x entry traffic on one path (or all).
- ``alert_flap`` (2/h): three short error pulses (45-60 s, 5-12 % errors) on one service with
  60-90 s gaps, so that error alerts with short ``for`` fire and resolve repeatedly. The pulses are
  recorded as separate events sharing ``params["group"]``.

Decoys: every change-driven fault (a code change delivered through the build pipeline) gets a
``benign_deploy`` to the same service 1-4 minutes before or after it (``params["decoy_for"]`` names the
fault instance), so the deploy history around a bad commit also holds innocent ones, as in production.

Events come from their own child streams of the run seed (one for the base noise, one for the decoys),
so turning noise on or off never changes the fault schedule. `apply_noise` starts an event on a backend and returns handles; `end_noise` undoes it.

>>> ev = draw_noise("online-boutique", 3, catalogue_version="test", horizon_s=5400)
>>> ev == draw_noise("online-boutique", 3, catalogue_version="test", horizon_s=5400)
True
>>> sorted({e.kind for e in ev}) <= ["alert_flap", "benign_deploy", "latency_blip", "load_burst", "pod_restart"]
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from faults.effects import Effect
from faults.orchestrator import NoiseEvent, seed_sequence

BASE_RATES_PER_H: dict[str, float] = {
    "benign_deploy": 4.0,
    "pod_restart": 3.0,
    "latency_blip": 6.0,
    "load_burst": 3.0,
    "alert_flap": 2.0,
}

DEVELOPERS = ("ana.ribeiro", "bo.lindqvist", "chen.wei", "dara.okafor", "eli.novak", "farah.haddad",
              "gus.moreau", "hana.sato", "ivan.petrov", "jo.mensah")

BENIGN_MESSAGES = (
    "docs: clarify handler comment",
    "chore: note follow-up for request logging",
    "docs: explain retry semantics in comment",
    "chore: annotate metrics label choice",
    "docs: describe cache invalidation assumption",
    "chore: add TODO for pagination",
    "docs: document env var defaults",
    "chore: mark deprecated helper",
    "docs: reference runbook in comment",
    "chore: leave note about timeout tuning",
)

_COMMENT = {".go": "//", ".java": "//", ".cs": "//", ".js": "//", ".ts": "//", ".kt": "//", ".rs": "//",
            ".cpp": "//", ".cc": "//", ".h": "//", ".php": "//", ".py": "#", ".rb": "#", ".ex": "#",
            ".exs": "#", ".yaml": "#", ".yml": "#", ".toml": "#", ".sh": "#", ".conf": "#"}


def _services(app: str) -> tuple[list[str], list[str]]:
    from apps import load_app

    spec = load_app(app)
    svcs = [s.name for s in spec.services if s.role in ("service", "gateway")]
    return svcs, [p.name for p in spec.load.paths]


def draw_noise(app: str, seed: int, *, catalogue_version: str, horizon_s: int, rate: float = 1.0,
               decoy_for: list[tuple[str, int, str]] = ()) -> list[NoiseEvent]:
    """Noise events for a run, sorted by start time then id. ``decoy_for`` lists (fault instance id,
    start_s, service) of the change-driven faults that get a benign deploy next to them."""
    svcs, paths = _services(app)
    rng = np.random.default_rng(seed_sequence("noise", catalogue_version, app, seed))
    hours = horizon_s / 3600.0
    raw: list[tuple[int, str, NoiseEvent]] = []
    for kind in sorted(BASE_RATES_PER_H):
        n = int(rng.poisson(BASE_RATES_PER_H[kind] * rate * hours))
        for j in range(n):
            start = int(rng.integers(60, max(61, horizon_s - 240)))
            svc = svcs[int(rng.integers(len(svcs)))]
            if kind == "benign_deploy":
                raw.append((start, kind, NoiseEvent(id="", kind=kind, start_s=start, end_s=start, service=svc, params={
                    "message": BENIGN_MESSAGES[int(rng.integers(len(BENIGN_MESSAGES)))],
                    "author": DEVELOPERS[int(rng.integers(len(DEVELOPERS)))],
                    "file_index": int(rng.integers(1 << 16))})))
            elif kind == "pod_restart":
                raw.append((start, kind, NoiseEvent(id="", kind=kind, start_s=start, end_s=start + 15, service=svc)))
            elif kind == "latency_blip":
                d = int(rng.integers(2, 7)) * 15
                raw.append((start, kind, NoiseEvent(id="", kind=kind, start_s=start, end_s=start + d, service=svc,
                                                     params={"ms": float(np.round(rng.uniform(150, 600)))})))
            elif kind == "load_burst":
                d = int(rng.integers(4, 13)) * 15
                path = paths[int(rng.integers(len(paths)))] if rng.random() < 0.6 else None
                raw.append((start, kind, NoiseEvent(id="", kind=kind, start_s=start, end_s=start + d, path=path,
                                                     params={"factor": float(np.round(rng.uniform(1.5, 2.5), 2))})))
            else:  # alert_flap: three pulses
                t = start
                r = float(np.round(rng.uniform(0.05, 0.12), 3))
                for k in range(3):
                    on = int(rng.integers(3, 5)) * 15
                    raw.append((t, kind, NoiseEvent(id="", kind=kind, start_s=t, end_s=t + on, service=svc,
                                                     params={"rate": r, "group": f"{kind}-{j}", "pulse": k})))
                    t += on + int(rng.integers(4, 7)) * 15
    drng = np.random.default_rng(seed_sequence("decoys", catalogue_version, app, seed))
    for iid, fstart, svc in decoy_for:
        offset = int(drng.integers(60, 241)) * (1 if drng.random() < 0.5 else -1)
        start = int(min(max(15, fstart + offset), horizon_s - 15))
        raw.append((start, "benign_deploy", NoiseEvent(id="", kind="benign_deploy", start_s=start, end_s=start,
                                                        service=svc, params={
            "message": BENIGN_MESSAGES[int(drng.integers(len(BENIGN_MESSAGES)))],
            "author": DEVELOPERS[int(drng.integers(len(DEVELOPERS)))],
            "file_index": int(drng.integers(1 << 16)), "decoy_for": iid})))
    raw.sort(key=lambda x: (x[0], x[1], x[2].service or "", x[2].path or "", str(sorted(x[2].params.items()))))
    return [ev.model_copy(update={"id": f"N{i + 1:03d}"}) for i, (_, _, ev) in enumerate(raw)]


def benign_change(backend: Any, service: str, file_index: int, message: str) -> dict[str, str] | None:
    """A harmless edit (one comment line appended) of one of the service's source files."""
    files = sorted(backend.source_files(service) or [])
    eligible = [p for p in files if any(p.endswith(ext) for ext in _COMMENT)]
    if not eligible:
        return None
    path = eligible[file_index % len(eligible)]
    text = backend.read_source(service, path)
    if text is None:
        return None
    ext = next(e for e in _COMMENT if path.endswith(e))
    sep = "" if text.endswith("\n") or not text else "\n"
    return {path: f"{text}{sep}{_COMMENT[ext]} {message.split(': ', 1)[-1]}\n"}


def apply_noise(event: NoiseEvent, backend: Any) -> list[str]:
    """Start a noise event on the backend; returns effect handles to pass to `end_noise`."""
    k = event.kind
    if k == "benign_deploy":
        files = benign_change(backend, event.service, int(event.params.get("file_index", 0)),
                              str(event.params.get("message", "chore: tidy")))
        if files:
            backend.deploy(event.service, message=str(event.params["message"]), author=str(event.params["author"]),
                           files=files, noise=True)
        return []
    if k == "pod_restart":
        return [backend.apply_effect(Effect(kind="pod_kill", service=event.service))]
    if k == "latency_blip":
        return [backend.apply_effect(Effect(kind="latency", service=event.service, ms=float(event.params["ms"])))]
    if k == "load_burst":
        return [backend.apply_effect(Effect(kind="load_factor", path=event.path, factor=float(event.params["factor"])))]
    if k == "alert_flap":
        return [backend.apply_effect(Effect(kind="error_rate", service=event.service, rate=float(event.params["rate"])))]
    raise ValueError(f"unknown noise kind {k!r}")


def end_noise(handles: list[str], backend: Any) -> None:
    for h in handles:
        backend.remove_effect(h)

"""Apply a catalogue fault to a backend and take it back; check its artifact and probe.

`inject` turns a `Fault`'s `Realisation` into Backend calls and returns a `FaultHandle` that records
what is needed to revert (previous config value, resources, replicas, revision) and the artifact as
resolved at injection (a commit fault's sha and ``service@revision`` become aliases). `revert` is the
orchestrator's scheduled end: it removes direct effects and undoes the change unless the artifact is
already corrected (the fault was repaired). `artifact_ok` says whether the responsible artifact is
verifiably corrected; `apply_repair` performs one `RepairOption` on a backend (used by validation).

>>> from faults.catalogue import load_catalogue
>>> f = next(f for f in load_catalogue("online-boutique") if f.realisation.kind == "scale")
>>> class Twin:
...     replicas = {}
...     def scale(self, s, n): self.replicas[s] = n; from sremarathon_env.backends.base import OpResult; return OpResult(True, "ok")
...     def service_health(self, s): return {"desired": float(self.replicas.get(s, 1)), "ready": float(self.replicas.get(s, 1))}
>>> tw = Twin(); h = inject(f, tw)
>>> tw.replicas[f.target], artifact_ok(f, h, tw)
(0, False)
>>> revert(h, tw); tw.replicas[f.target], artifact_ok(f, h, tw)
(1, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from faults.model import Artifact, Fault, FileChange, RepairOption
from faults.probes import probe_ok as _probe_ok
from faults.probes import probe_reader
from faults.probes import rollout_revision


@dataclass
class FaultHandle:
    fault: Fault
    ok: bool = True
    message: str = ""
    effect_handles: list[str] = field(default_factory=list)
    prior: dict[str, Any] = field(default_factory=dict)
    revision: int | None = None
    sha: str | None = None
    artifact: Artifact | None = None
    reverted: bool = False
    reader: Any = field(default=None, repr=False, compare=False)   # `check_at`'s `probe_reader` of the fault's probe


def _spec(fault: Fault):
    from apps import load_app

    return load_app(fault.app)


def _dep_spec(backend: Any, service: str) -> dict[str, Any] | None:
    """The backend's cheap typed read of a Deployment's current template (None: not offered/unknown)."""
    fn = getattr(backend, "deployment_spec", None)
    if fn is None:
        return None
    try:
        return fn(service)
    except Exception:  # noqa: BLE001 - a backend that cannot answer
        return None


def _latest_revision(backend: Any, service: str) -> int | None:
    spec = _dep_spec(backend, service)
    if spec is not None and spec.get("revision") is not None:   # the current template is the newest revision
        return int(spec["revision"])
    try:
        hist = backend.deploy_history(service) or []
    except Exception:  # noqa: BLE001 - a backend without history
        return None
    revs = [h.get("revision") for h in hist if isinstance(h, dict) and h.get("revision") is not None]
    return int(revs[-1]) if revs else None


def _image_of(backend: Any, service: str) -> str | None:
    spec = _dep_spec(backend, service)
    if spec is not None:
        return str(spec["image"])
    try:
        objs = backend.k8s_get("deployment", service) or []
        c = objs[0]["spec"]["template"]["spec"]["containers"][0]
        return str(c.get("image"))
    except Exception:  # noqa: BLE001
        return None


def _qty_mi(v: Any) -> float | None:
    if v is None:
        return None
    s = str(v)
    m = re.fullmatch(r"([\d.]+)(Ki|Mi|Gi|K|M|G)?", s)
    if not m:
        return None
    mult = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1 / 1000, "M": 1, "G": 1000, None: 1 / (1024 * 1024)}[m.group(2)]
    return float(m.group(1)) * mult


def _qty_m(v: Any) -> float | None:
    if v is None:
        return None
    s = str(v)
    return float(s[:-1]) if s.endswith("m") else float(s) * 1000.0


_RES_KEYS = ("mem_limit_mi", "cpu_limit_m", "mem_request_mi", "cpu_request_m")


def _resources_of(backend: Any, service: str) -> dict[str, float | None]:
    spec = _dep_spec(backend, service)
    if spec is not None:   # typed values; unset (or zero, which a manifest leaves out) is None
        res = spec.get("resources") or {}
        return {k: float(res[k]) if res.get(k) else None for k in _RES_KEYS}
    try:
        objs = backend.k8s_get("deployment", service) or []
        r = objs[0]["spec"]["template"]["spec"]["containers"][0].get("resources", {})
    except Exception:  # noqa: BLE001
        return {}
    lim, req = r.get("limits", {}) or {}, r.get("requests", {}) or {}
    return {"mem_limit_mi": _qty_mi(lim.get("memory")), "cpu_limit_m": _qty_m(lim.get("cpu")),
            "mem_request_mi": _qty_mi(req.get("memory")), "cpu_request_m": _qty_m(req.get("cpu"))}


def _pods_on_node(backend: Any, node: str) -> int:
    fn = getattr(backend, "pods_on_node", None)
    if fn is not None:
        return int(fn(node))
    try:
        pods = backend.k8s_get("pod") or []
    except Exception:  # noqa: BLE001
        return 0
    return sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") == node
               and (p.get("status") or {}).get("phase") in ("Running", "Pending"))


def _scaled_as_repaired(fault: Fault, backend: Any) -> bool:
    for opt in fault.repairs:
        if opt.tool == "scale":
            d = backend.service_health(opt.args["service"]).get("desired")
            if d is not None and d >= int(opt.args["replicas"]):
                return True
    return False


def _apply_files(backend: Any, service: str, changes: list[FileChange]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for fc in changes:
        text = out.get(fc.path) or backend.read_source(service, fc.path)
        if text is None or fc.old not in text:
            return None
        out[fc.path] = text.replace(fc.old, fc.new, 1)
    return out


def inject(fault: Fault, backend: Any, rng: Any = None, build: Any = None) -> FaultHandle:
    """Apply the fault; never raises for a backend refusal (``handle.ok`` is False instead).

    ``build(service, changed_files)``, when given, is the build pipeline a source change goes through
    before it is deployed (the run loop passes `BuildPipeline.build_change`): a result with ``ok``,
    ``files`` (the built tree), ``log`` and ``stage_failed``; a rejected build leaves the fault
    unrealised with the pipeline's verdict in ``handle.message``."""
    r = fault.realisation
    h = FaultHandle(fault=fault, artifact=fault.artifact)
    if r.kind == "effects":
        h.effect_handles = [backend.apply_effect(e) for e in r.effects]
        return h
    if r.kind == "scale":
        cur = backend.service_health(r.service).get("desired")
        h.prior["replicas"] = int(cur) if cur is not None and cur == cur else _spec(fault).service(r.service).replicas
        res = backend.scale(r.service, int(r.replicas))
    elif r.kind == "resources":
        spec_res = _spec(fault).service(r.service).resources
        h.prior["resources"] = {k: getattr(spec_res, k) for k in r.resources}
        res = backend.set_resources(r.service, **r.resources)
    elif r.kind == "config":
        if r.service:
            h.prior["value"] = backend.env_of(r.target).get(r.key)
        else:
            h.prior["value"] = backend.flag_variant(r.key)
            h.effect_handles = [backend.apply_effect(e) for e in r.effects]
        res = backend.set_config(r.target, r.key, r.value)
    elif r.kind == "deploy":
        h.prior["revision"] = _latest_revision(backend, r.service)
        env_now = backend.env_of(r.service) if r.env else {}
        h.prior["env"] = {k: env_now.get(k) for k in r.env}
        if r.image_tag:
            h.prior["image"] = _image_of(backend, r.service)
        files = _apply_files(backend, r.service, r.files) if r.files else None
        if r.files and files is None:
            h.ok, h.message = False, "the change does not apply to the service's current source"
            return h
        if files and build is not None:
            built = build(r.service, files)
            if not built.ok:
                h.ok, h.message = False, f"build rejected at stage {built.stage_failed}: {built.log[-300:]}"
                return h
            files = built.files
        res = backend.deploy(r.service, message=r.message, author=r.author, files=files, env=dict(r.env) or None,
                             image_tag=r.image_tag, effects=list(r.effects))
        data = getattr(res, "data", {}) or {}
        h.revision = data.get("revision", _latest_revision(backend, r.service))
        h.sha = data.get("sha") or data.get("commit")
        if fault.artifact.kind == "commit":
            extra = [a for a in ([h.sha, h.sha[:7]] if h.sha else []) + (
                [f"{r.service}@{h.revision}", f"{r.service}@rev{h.revision}"] if h.revision is not None else [])]
            h.artifact = fault.artifact.model_copy(update={"aliases": [*fault.artifact.aliases, *extra]})
    else:  # pragma: no cover - guarded by the model
        raise ValueError(r.kind)
    h.ok = bool(getattr(res, "ok", True))
    h.message = getattr(res, "message", "")
    return h


def artifact_ok(fault: Fault, handle: FaultHandle, backend: Any) -> bool:
    """True when the responsible artifact is verifiably corrected (or the fault reverted)."""
    r = fault.realisation
    if r.kind == "effects":
        return handle.reverted or _effects_ok(fault, handle, backend)
    if r.kind == "scale":
        d = backend.service_health(r.service).get("desired")
        return d is not None and d >= max(1, handle.prior.get("replicas", 1))
    if r.kind == "resources":
        cur = _resources_of(backend, r.service)
        for k, bad in r.resources.items():
            if "limit" not in k:  # requests were lowered only to stay under the limit
                continue
            v = cur.get(k)
            if v is None or v <= bad:
                return False
        return True
    if r.kind == "config":
        now = backend.env_of(r.target).get(r.key) if r.service else backend.flag_variant(r.key)
        return now != r.value
    # deploy: the current spec no longer carries the change and no ready pod of the bad revision is left
    return not _bad_revision_serves(fault, handle, backend) and _deploy_spec_ok(fault, backend)


def _effects_ok(fault: Fault, handle: FaultHandle, backend: Any) -> bool:
    """`artifact_ok` of a fault realised as effects that is not reverted: its effects' state (tick reads)."""
    active = getattr(backend, "effect_active", None)
    if active is None:
        return False
    for x, e in zip(handle.effect_handles, fault.realisation.effects):
        if not active(x):
            continue
        if e.kind == "node_down":   # nobody can fix the node: corrected once nothing runs on it
            if _pods_on_node(backend, e.node):
                return False
        elif e.kind == "load_factor":  # nobody can stop the users: corrected once capacity is added
            if not _scaled_as_repaired(fault, backend):
                return False
        else:
            return False
    return True


def _bad_revision_serves(fault: Fault, handle: FaultHandle, backend: Any) -> bool:
    """A deploy's part of `artifact_ok` that reads the pods (a tick read): a ready pod of the bad revision is left."""
    return handle.revision is not None and backend.serving_revisions(fault.realisation.service).get(handle.revision, 0) > 0


def _deploy_spec_ok(fault: Fault, backend: Any) -> bool:
    """A deploy's part of `artifact_ok` that reads the configuration, image and sources (the live state): the
    current spec no longer carries the change."""
    r = fault.realisation
    if r.env:
        env = backend.env_of(r.service)
        if any(env.get(k) == v for k, v in r.env.items()):
            return False
    if r.image_tag:
        img = _image_of(backend, r.service)
        if img is not None and img.endswith(":" + r.image_tag):
            return False
    for fc in r.files:
        text = backend.read_source(r.service, fc.path)
        if text is not None and fc.new in text and fc.new not in fc.old:
            return False
    return True


def check_live(fault: Fault, handle: FaultHandle, backend: Any) -> tuple:
    """What `artifact_ok` and `probe_ok` of a fault read of the live state (the handle, configuration, sources,
    deploy history), taken now, for `check_at` to finish the two against a tick's view later, once the twin has
    the tick's numbers (the run loop's deferred spans: events in between may change the live state, never a past
    tick's reads). ``(artifact part, rollout revision)``: the handle's reverted flag (effects), the whole verdict
    (resources, config: live reads only), the spec part (deploy: `_deploy_spec_ok`) or None (scale: tick reads
    only); the revision a ``rollout_ok`` probe checks (`probes.rollout_revision`), else None.
    (tests/faults/test_checks_split.py holds ``check_at(.., check_live(..), view)`` to `artifact_ok` and `probe_ok`.)"""
    r = fault.realisation
    if r.kind == "effects":
        art: Any = handle.reverted
    elif r.kind in ("resources", "config"):
        art = artifact_ok(fault, handle, backend)
    elif r.kind == "deploy":
        art = _deploy_spec_ok(fault, backend)
    else:
        art = None
    rev = rollout_revision(fault.probe, backend) if fault.probe.kind == "rollout_ok" else None
    return art, rev


def check_at(fault: Fault, handle: FaultHandle, live: tuple, view: Any, memo: dict | None = None) -> tuple[bool, bool]:
    """``(artifact_ok, probe_ok)`` of the fault against ``view`` (a tick's reads), the live state's part from ``live``
    (`check_live`, taken at that tick): what ``artifact_ok(fault, handle, view)`` and ``probe_ok(fault, view, memo,
    handle, artifact=...)`` give when the live state is still that tick's.

    >>> from faults.catalogue import load_catalogue
    >>> from sremarathon_env.backends.sim import SimBackend
    >>> b = SimBackend("online-boutique", 0, tick_s=15.0)
    >>> f = next(f for f in load_catalogue("online-boutique") if f.realisation.kind == "config" and f.realisation.service)
    >>> h = inject(f, b)
    >>> _ = b.advance_to(60.0)
    >>> live, view = check_live(f, h, b), b.at(60.0)
    >>> art = artifact_ok(f, h, view)
    >>> check_at(f, h, live, view, {}) == (art, probe_ok(f, view, {}, h, artifact=art))
    True
    """
    art_live, rev = live
    r = fault.realisation
    if r.kind == "effects":
        art = bool(art_live or _effects_ok(fault, handle, view))
    elif r.kind in ("resources", "config"):
        art = bool(art_live)
    elif r.kind == "deploy":   # the pods are read only when the spec no longer carries the change
        art = bool(art_live) and not _bad_revision_serves(fault, handle, view)
    else:
        art = bool(artifact_ok(fault, handle, view))
    reader = handle.reader
    if reader is None:
        reader = handle.reader = probe_reader(fault.probe)
    return art, bool(reader(view, memo, art, (rev,)))


def probe_ok(fault: Fault, backend: Any, memo: dict | None = None, handle: FaultHandle | None = None,
             artifact: bool | None = None) -> bool:
    """The fault's symptom probe on ``backend``. ``artifact``: `artifact_ok` of the same fault, handle and
    backend when the caller already has it (``artifact`` probes read it instead of checking again)."""
    if artifact is not None:
        return _probe_ok(fault.probe, backend, memo, artifact_ok=lambda: artifact)
    return _probe_ok(fault.probe, backend, memo,
                     artifact_ok=(lambda: artifact_ok(fault, handle, backend)) if handle is not None else None)


def revert(handle: FaultHandle, backend: Any) -> None:
    """The orchestrator's scheduled end: undo the fault unless already repaired."""
    if handle.reverted:
        return
    f, r = handle.fault, handle.fault.realisation
    for x in handle.effect_handles:
        backend.remove_effect(x)
    handle.reverted = True
    if r.kind == "effects" or not handle.ok:
        return
    if artifact_ok(f, handle, backend):
        return
    if r.kind == "scale":
        backend.scale(r.service, int(handle.prior["replicas"]))
    elif r.kind == "resources":
        backend.set_resources(r.service, **{k: v for k, v in handle.prior["resources"].items()})
    elif r.kind == "config":
        backend.set_config(r.target, r.key, handle.prior.get("value"))
    elif r.kind == "deploy":
        latest = _latest_revision(backend, r.service)
        prev = handle.prior.get("revision")
        if prev is not None and latest is not None and latest == handle.revision:
            backend.rollback(r.service, prev)
            return
        files = _apply_files(backend, r.service, [FileChange(path=c.path, old=c.new, new=c.old) for c in r.files]) \
            if r.files else None
        image = handle.prior.get("image")
        backend.deploy(r.service, message=f'Revert "{r.message}"', author="release-bot", files=files or None,
                       env=dict(handle.prior.get("env") or {}) or None,
                       image_tag=image.rsplit(":", 1)[-1] if r.image_tag and image else None)


def apply_repair(option: RepairOption, fault: Fault, backend: Any) -> Any:
    """Perform one repair option on a backend (as the intervention tool would)."""
    a = dict(option.args)
    t = option.tool
    if t == "rollback":
        return backend.rollback(a["service"], a.get("revision"))
    if t == "scale":
        return backend.scale(a["service"], int(a["replicas"]))
    if t == "restart":
        return backend.restart(a["service"])
    if t == "set_config":
        return backend.set_config(a["target"], a["key"], a.get("value"))
    if t == "set_resources":
        svc = a.pop("service")
        return backend.set_resources(svc, **a)
    if t == "drain_node":
        return backend.drain_node(a["node"])
    if t == "patch_source":
        from faults.diffs import apply_unified_diff

        svc = a["service"]
        files = apply_unified_diff(a["diff"], lambda p: backend.read_source(svc, p))
        return backend.deploy(svc, message=f"{svc}: fix regression", author="oncall", files=files)
    raise ValueError(f"unknown repair tool {t!r}")

"""The fault model: what one catalogue fault is, how it shows, how it is localised and repaired.

A `Fault` is data. It says *what* is wrong (category by cause, target and culprit services, the
responsible `Artifact` with the aliases an agent may use to name it), *how* it is delivered
(`mechanism` and a `Realisation`), *how it shows* (a machine-checkable `Probe`, expected alerts, the
affected scope from the call graph) and *what repairs it* (`RepairOption`s written exactly like the
intervention tools' calls). `faults.realise` turns a fault into twin operations; `faults.probes`
evaluates probes against any `Backend`.

>>> p = Probe(kind="service_ready_min", service="cartservice", threshold=1)
>>> a = Artifact(kind="replicas", canonical="cartservice:replicas", aliases=["cartservice/replicas"])
>>> a.matches("CartService/Replicas")
True
>>> r = RepairOption(tool="scale", args={"service": "cartservice", "replicas": 1})
>>> f = Fault(id="ob-deploy-cartservice-scale-zero", app="online-boutique", category="deployment",
...           mechanism="direct", target="cartservice", culprits=["cartservice"], artifact=a,
...           scope=["cartservice", "frontend"], probe=p, repairs=[r],
...           realisation=Realisation(kind="scale", service="cartservice", replicas=0))
>>> f.conflict_keys()
['cartservice:replicas']
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from faults.effects import Effect

Category = Literal["code", "config", "resource", "network", "dependency", "deployment", "node", "load"]
CATEGORIES: tuple[str, ...] = ("code", "config", "resource", "network", "dependency", "deployment", "node", "load")
Mechanism = Literal["deploy", "config_push", "direct"]

ProbeKind = Literal[
    "path_error_ratio_max",     # entry path (or all entry traffic when path is None): error ratio <= threshold
    "path_p95_ms_max",          # entry path (or all): p95 latency <= threshold ms
    "service_ready_min",        # ready replicas of `service` >= threshold
    "service_error_ratio_max",  # calls into `service` failing at that hop (own_error_ratio, below) <= threshold
    "service_p95_ms_max",       # p95 of calls into `service` without its downstream calls (own_p95_ms) <= threshold ms
    "edge_error_ratio_max",     # calls caller -> callee failing at that hop (own_error_ratio) <= threshold
    "edge_p95_ms_max",          # calls caller -> callee: p95 without the callee's downstream (own_p95_ms) <= threshold ms
    "restarts_stable",          # no container restart of `service` since the previous evaluation
    "degraded_ratio_max",       # entry path (or all): degraded (feature missing) ratio <= threshold
    "memory_util_max",          # working set / memory limit of `service` <= threshold
    "cpu_util_max",             # cpu use (demand) / cpu limit of `service` <= threshold; load faults: their tier's saturation
    "rollout_ok",               # the Deployment's current revision has all desired pods ready
    "queue_lag_max",            # consumer lag (messages) of async consumer `service` <= threshold
    "artifact",                 # silent by design: healthy iff the responsible artifact is correct
]
"""Probe kinds. Edge and service probes read the *own* part of a hop where the backend reports it
(``own_error_ratio``, ``own_p95_ms`` of `edge_health`/`service_health`): a call fails at its own hop
when the callee is unreachable (no endpoints, refused, unknown host), answers with its own application
error, or the caller's deadline on that call expires; errors the callee only propagates from its
downstream, and the shedding of a saturated callee (a load condition, probed by `cpu_util_max` of the
saturated tier), are excluded; own latency leaves out the callee's downstream calls. So a probe fails
while its own fault is active (`faults.validate` checks it) and is not held failing by an overlapping
fault elsewhere on the path. Path probes read whole entry requests."""

ArtifactKind = Literal["commit", "config_key", "image_tag", "resource_spec", "node", "flag", "replicas",
                       "service_spec", "load", "pod", "network", "datastore"]

RepairTool = Literal["rollback", "scale", "restart", "set_config", "set_resources", "patch_source",
                     "drain_node"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _norm(s: str) -> str:
    return s.strip().lower().replace(" ", "")


class Probe(_Strict):
    """A health condition that holds while the system is healthy with respect to one fault."""

    kind: ProbeKind
    threshold: float = 0.0
    service: str | None = None
    path: str | None = Field(default=None, description="entry path name; None = all entry traffic")
    caller: str | None = None
    callee: str | None = None
    within_ticks: int = Field(default=8, ge=1, description="ticks after injection by which it must fail")
    recover_ticks: int = Field(default=12, ge=1, description="ticks after revert/repair by which it must hold")

    @model_validator(mode="after")
    def _targets(self) -> "Probe":
        k = self.kind
        if k.startswith("service_") or k in ("restarts_stable", "memory_util_max", "cpu_util_max", "rollout_ok",
                                             "queue_lag_max"):
            if not self.service:
                raise ValueError(f"probe {k} needs service")
        if k.startswith("edge_") and not (self.caller and self.callee):
            raise ValueError(f"probe {k} needs caller and callee")
        return self

    def describe(self) -> str:
        where = self.path or self.service or (f"{self.caller}->{self.callee}" if self.caller else "all")
        return f"{self.kind}({where}){'' if self.kind in ('restarts_stable', 'rollout_ok', 'artifact') else f' {self.threshold:g}'}"


class Artifact(_Strict):
    """The responsible artifact: what a root cause must name. ``canonical`` plus ``aliases`` are the
    accepted spellings (compared case- and space-insensitively)."""

    kind: ArtifactKind
    canonical: str
    aliases: list[str] = Field(default_factory=list)

    def names(self) -> list[str]:
        return [self.canonical, *self.aliases]

    def matches(self, name: str) -> bool:
        n = _norm(name)
        return any(_norm(a) == n for a in self.names())


class RepairOption(_Strict):
    """One intervention (tool name and arguments as the agent would call it) that repairs the fault.

    A fault's ``repairs`` are ALTERNATIVES, never steps: each option alone heals the fault (probe
    healthy and artifact corrected); `faults.validate` checks every one of them in its own twin.
    For ``patch_source``, ``args["diff"]`` is the unified diff that undoes the change."""

    tool: RepairTool
    args: dict[str, Any] = Field(default_factory=dict)


class FileChange(_Strict):
    """A textual edit of one source file: ``old`` (exact, present once) becomes ``new``."""

    path: str
    old: str
    new: str


class Realisation(_Strict):
    """How a fault is applied to a backend.

    - ``effects``: direct effects (`Backend.apply_effect`), removed on revert.
    - ``deploy``: a new revision through the build pipeline (files and/or env and/or image tag, with
      revision-bound effects); reverted by a revert revision.
    - ``config``: `Backend.set_config(target, key, value)` (env knob or flag), reverted by restoring
      the previous value; flag-bound ``effects`` are registered alongside.
    - ``resources``: `Backend.set_resources` with the given fields; reverted to the spec's values.
    - ``scale``: `Backend.scale(service, replicas)`; reverted to the spec's replicas.
    """

    kind: Literal["effects", "deploy", "config", "resources", "scale"]
    service: str | None = None
    effects: list[Effect] = Field(default_factory=list)
    # deploy
    files: list[FileChange] = Field(default_factory=list)
    env: dict[str, str | None] = Field(default_factory=dict)
    image_tag: str | None = None
    message: str = ""
    author: str = ""
    # config
    target: str | None = None
    key: str | None = None
    value: str | None = None
    # resources / scale
    resources: dict[str, int] = Field(default_factory=dict)
    replicas: int | None = None

    @model_validator(mode="after")
    def _shape(self) -> "Realisation":
        k = self.kind
        if k == "effects" and not self.effects:
            raise ValueError("an effects realisation needs at least one effect")
        if k == "deploy":
            if not self.service or not self.message or not self.author:
                raise ValueError("a deploy realisation needs service, message and author")
            if not (self.files or self.env or self.image_tag):
                raise ValueError("a deploy realisation changes files, env or the image tag")
        if k == "config" and not (self.target and self.key):
            raise ValueError("a config realisation needs target and key")
        if k == "resources" and not (self.service and self.resources):
            raise ValueError("a resources realisation needs service and resources")
        if k == "scale" and (not self.service or self.replicas is None):
            raise ValueError("a scale realisation needs service and replicas")
        return self


class Fault(_Strict):
    id: str = Field(pattern=r"^[a-z]{2}-[a-z]+-[a-z0-9][-a-z0-9.]*$")
    app: str
    category: Category
    mechanism: Mechanism
    target: str
    culprits: list[str] = Field(min_length=1)
    artifact: Artifact
    scope: list[str] = Field(min_length=1, description="services whose symptoms it can cause")
    probe: Probe
    silent: bool = Field(default=False, description="no probe-visible symptom by design; checked by artifact")
    expected_alerts: list[str] = Field(default_factory=list)
    repairs: list[RepairOption] = Field(min_length=1)
    realisation: Realisation
    description: str = ""
    difficulty: str = ""
    template: str = Field(default="", description="template id, or 'change' for hand-written change faults")
    noise: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "Fault":
        if self.target not in self.scope:
            raise ValueError(f"{self.id}: target {self.target!r} not in scope")
        if self.silent != (self.probe.kind == "artifact"):
            raise ValueError(f"{self.id}: silent faults (and only they) use the artifact probe")
        return self

    def conflict_keys(self) -> list[str]:
        """Keys of what this fault mutates; two faults sharing a key must never be active together.

        The artifact itself, plus what the realisation touches (a service's revision for deploys, its
        resources, its replicas, a node, a flag)."""
        keys = {_norm(self.artifact.canonical)}
        r = self.realisation
        if r.kind == "deploy":
            keys.add(f"{r.service}:revision")
        elif r.kind == "config":
            keys.add(f"{r.target}:{r.key}".lower())
            if r.service:  # an env push rolls out a new revision of that service
                keys.add(f"{r.service}:revision")
        elif r.kind == "resources":
            keys.add(f"{r.service}:resources")
        elif r.kind == "scale":
            keys.add(f"{r.service}:replicas")
        for e in r.effects:
            if e.node:
                keys.add(f"node:{e.node}")
            if e.kind == "load_factor":
                keys.add(f"load:{e.path or '*'}")
            if e.flag:
                keys.add(f"flag:{e.flag}")
        return sorted(keys)

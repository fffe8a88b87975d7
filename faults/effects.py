"""The twin's fault hook language: what a fault does to the running system, as data.

A fault (see `faults.model`) is realised as one or more `Effect`s. How an effect is *bound* says what
keeps it alive, which is what makes repair real rather than bookkeeping:

- ``direct``: injected from outside (chaos: CPU/memory stress, network delay, node failure); active
  from `Backend.apply_effect` until `Backend.remove_effect` (the orchestrator's revert) or until the
  stated repair removes its cause (e.g. draining a failed node moves the pods away).
- ``revision``: baked into a build (a code change). Delivered with `Backend.deploy(..., effects=...)`
  and active in proportion to the ready pods of a revision that still carries it. A later build
  keeps the effect only while its ``marker`` still holds in that build's source (``source_contains``)
  or env (``env_equals``); a rollback to a revision without it removes it.
- ``flag``: active while the app's flag config has ``flag`` at ``variant`` (Astronomy Shop flagd).

Resource faults (a low memory limit, a bad image tag, replicas 0, a missing env var...) need no
effect at all: they are spec changes and the twin's own model produces OOM kills, image pull
back-off or crash loops from them.

>>> e = Effect(kind="error_rate", service="paymentservice", rate=0.5)
>>> e.kind, e.rate
('error_rate', 0.5)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EffectKind = Literal[
    "error_rate",        # a fraction of calls to `service` (optionally one `operation`) fail
    "latency",           # `ms` added to every call to `service` (optionally one `operation`)
    "edge_error",        # a fraction of calls `caller -> callee` fail (wrong address, partition, DNS, loss)
    "edge_latency",      # `ms` added to calls `caller -> callee` (netem delay)
    "cpu_burn",          # `millicores` of extra CPU demand in every pod of `service` (stress, hot loop)
    "memory_leak",       # working set grows by `mi_per_min` per minute per pod until OOM-killed
    "memory_hog",        # `mi` of extra working set in every pod of `service`
    "crash",             # containers exit right after start -> CrashLoopBackOff (`reason`, `exit_code`)
    "not_ready",         # readiness probe fails: pods Running, NotReady, no endpoints
    "no_endpoints",      # the Service selects nothing (wrong selector / targetPort): callers fail
    "pod_kill",          # one-shot: delete every pod of `service` now (the ReplicaSet recreates them)
    "node_down",         # `node` NotReady: its pods stop serving until rescheduled or the node returns
    "load_factor",       # entry traffic (optionally one `path`) multiplied by `factor`
    "consumer_slow",     # async consumer `service` processes `factor` x slower (queue lag grows)
    "silent",            # wrong answers without errors; only the artifact shows it
]


class Marker(BaseModel):
    """What must still hold in a later build for a revision-bound effect to carry over."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source_contains: tuple[str, str] | None = Field(default=None, description="(path, snippet) in the service's source")
    env_equals: tuple[str, str] | None = Field(default=None, description="(key, value) in the service's env")

    @model_validator(mode="after")
    def _one(self) -> "Marker":
        if (self.source_contains is None) == (self.env_equals is None):
            raise ValueError("a marker needs exactly one of source_contains or env_equals")
        return self


class Effect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: EffectKind
    service: str | None = None
    operation: str | None = None
    caller: str | None = None
    callee: str | None = None
    node: str | None = None
    path: str | None = None
    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    ms: float = Field(default=0.0, ge=0.0)
    millicores: float = Field(default=0.0, ge=0.0)
    mi: float = Field(default=0.0, ge=0.0)
    mi_per_min: float = Field(default=0.0, ge=0.0)
    factor: float = Field(default=1.0, gt=0.0)
    reason: str = "Error"
    exit_code: int = 1
    log_signature: str = Field(default="", description="a line the service logs while the effect is active")
    marker: Marker | None = None
    bind: Literal["direct", "revision", "flag"] = "direct"
    until_restart: bool = Field(default=False, description=(
        "direct effects injected into the running containers of `service` (a stress process, netem in the "
        "pod's network namespace, a pause container): replacing the pods (rollout restart, pod deletion) "
        "ends them. For edge effects the containers are the caller's."))
    flag: str | None = None
    variant: str | None = None

    @model_validator(mode="after")
    def _targets(self) -> "Effect":
        k = self.kind
        if k in ("edge_error", "edge_latency") and not (self.caller and self.callee):
            raise ValueError(f"{k} needs caller and callee")
        if k == "node_down" and not self.node:
            raise ValueError("node_down needs node")
        if k not in ("edge_error", "edge_latency", "node_down", "load_factor") and not self.service:
            raise ValueError(f"{k} needs service")
        if self.bind == "flag" and not (self.flag and self.variant):
            raise ValueError("a flag-bound effect needs flag and variant")
        if self.bind == "revision" and self.marker is None:
            raise ValueError("a revision-bound effect needs a marker")
        return self

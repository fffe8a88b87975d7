"""The `Backend` protocol: what the run loop and the tools need from a cluster, twin or live.

Both backends implement it: `backends.sim.SimBackend` (the deterministic digital twin) and, later,
`backends.kubernetes.KubernetesBackend`. Everything is in sim seconds since the start of the
marathon; nothing here reads the wall clock.

Reads return plain JSON-able values shaped like the Kubernetes API (``kubectl get -o json``) so that
an agent sees the same thing on both backends. Interventions return an `OpResult`; they never raise
for a bad argument (unknown service, bad revision...): ``ok=False`` with a message instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from faults.effects import Effect


@dataclass(frozen=True)
class OpResult:
    ok: bool
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EntryEvidence:
    """Entry-point traffic during one tick: requests, failed ones, slow ones (over 2.5 s), degraded
    ones (succeeded with a feature missing)."""

    t: float
    total: float
    failed: float
    slow: float
    degraded: float


@runtime_checkable
class Backend(Protocol):
    app_name: str
    tick_s: float

    # -- clock -----------------------------------------------------------------------------
    @property
    def now(self) -> float: ...
    def advance_to(self, t: float) -> list[EntryEvidence]:
        """Run ticks up to and including time ``t``; return one evidence record per tick run."""

    # -- fault hook ------------------------------------------------------------------------
    def apply_effect(self, effect: Effect) -> str:
        """Start an effect (direct or flag-bound); returns a handle for `remove_effect`."""
    def remove_effect(self, handle: str) -> None: ...
    def deploy(self, service: str, *, message: str, author: str, files: dict[str, str] | None = None,
               env: dict[str, str | None] | None = None, image_tag: str | None = None,
               effects: list[Effect] = (), noise: bool = False) -> OpResult:
        """Deliver a new revision (source files replaced, env keys set or removed with None, image
        tag) through a normal rollout; ``effects`` are revision-bound to the new revision."""

    # -- reads (free tools) ---------------------------------------------------------------
    def k8s_get(self, kind: str, name: str | None = None) -> list[dict[str, Any]]: ...
    def events(self, since: float, until: float) -> list[dict[str, Any]]: ...
    def logs(self, service: str, since: float, until: float, pattern: str | None, limit: int) -> list[str]: ...
    def traces(self, service: str | None, endpoint: str | None, since: float, until: float,
               errors_only: bool, limit: int) -> list[dict[str, Any]]: ...
    def deploy_history(self, service: str) -> list[dict[str, Any]]: ...
    def source_files(self, service: str) -> list[str]: ...
    def read_source(self, service: str, path: str) -> str | None: ...

    # -- interventions --------------------------------------------------------------------
    def rollback(self, service: str, revision: int | None) -> OpResult: ...
    def scale(self, service: str, replicas: int) -> OpResult: ...
    def restart(self, service: str) -> OpResult: ...
    def set_config(self, target: str, key: str, value: str | None) -> OpResult: ...
    def set_resources(self, service: str, *, cpu_request_m: int | None = None, cpu_limit_m: int | None = None,
                      mem_request_mi: int | None = None, mem_limit_mi: int | None = None) -> OpResult: ...
    def drain_node(self, node: str) -> OpResult: ...
    def uncordon_node(self, node: str) -> OpResult: ...

    # -- health and evidence ---------------------------------------------------------------
    def service_health(self, service: str) -> dict[str, float]:
        """Current per-service health: ready replicas, desired, error ratio, p95 latency (ms),
        request rate, cpu and memory utilisation of the limit."""
    def path_health(self, path: str | None) -> dict[str, float]:
        """Entry-point health of one request path (or all): rate, error ratio, p95 latency (ms)."""
    def edge_health(self, caller: str, callee: str) -> dict[str, float]:
        """Current health of one call edge: rate, error ratio, p95 latency (ms)."""
    def env_of(self, service: str) -> dict[str, str]:
        """Env of the revision the Deployment currently specifies."""
    def flag_variant(self, flag: str) -> str | None:
        """Current default variant of a feature flag (None when the app has no such flag)."""
    def serving_revisions(self, service: str) -> dict[int, int]:
        """Ready pods per revision number of a service right now."""
    def state_digest(self) -> str:
        """Digest of the desired and observed cluster state (for revert and determinism tests)."""

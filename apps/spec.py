"""The application model: one `AppSpec` schema for every app the twin can run.

An app is data: services (with their datastores as services of their own), the call graph, the
user-facing request paths with per-request fan-out, the load generator's mix, config knobs and
feature flags, images, resources, probes and placement on nodes in zones. The three bundled apps
live in ``apps/data/<name>.yaml``; a user-defined app is a YAML file in the same schema.

>>> from apps import load_app
>>> ob = load_app("online-boutique")
>>> ob.entry_service
'frontend'
>>> sorted(ob.callees("checkoutservice"))[:3]
['cartservice', 'currencyservice', 'emailservice']

Validation is strict: unknown fields are rejected, every edge and every call in a request path
must name a known service and a declared edge, and a malformed file gives a `AppSpecError` whose
message names the bad field (``services.3.resources.cpu_limit_m``...).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["service", "datastore", "broker", "flags", "gateway", "loadgen"]
Language = Literal[
    "go", "csharp", "nodejs", "python", "java", "kotlin", "cpp", "ruby", "php", "rust",
    "typescript", "elixir", "redis", "valkey", "postgres", "mongodb", "mysql", "kafka",
    "rabbitmq", "nginx", "envoy", "openresty",
]
Protocol = Literal["grpc", "http", "tcp", "kafka", "amqp", "sql", "resp", "mongo"]
OnError = Literal["fail", "degrade", "ignore"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Port(_Strict):
    name: str = "main"
    port: int = Field(ge=1, le=65535)
    target_port: int = Field(ge=1, le=65535)
    protocol: Protocol


class Resources(_Strict):
    """Container resources in millicores and MiB. ``None`` means unset (no limit)."""

    cpu_request_m: int | None = Field(default=None, ge=1)
    cpu_limit_m: int | None = Field(default=None, ge=1)
    mem_request_mi: int | None = Field(default=None, ge=1)
    mem_limit_mi: int | None = Field(default=None, ge=1)


class ProbeSpec(_Strict):
    type: Literal["http", "grpc", "tcp"]
    port: int
    path: str | None = None
    initial_delay_s: float = 0.0
    period_s: float = 10.0
    failure_threshold: int = 3


class Behaviour(_Strict):
    """How the twin models one request to this service (per call, before its downstream calls)."""

    service_ms: float = Field(default=2.0, gt=0, description="own processing time per call at no load")
    cpu_ms_per_call: float = Field(default=1.0, gt=0, description="CPU time consumed per call")
    mem_base_mi: float = Field(default=40.0, gt=0, description="steady working set at idle")
    mem_per_rps_mi: float = Field(default=0.2, ge=0, description="extra working set per request/s")
    startup_s: float = Field(default=5.0, ge=0, description="container start until it can serve")
    error_rate: float = Field(default=0.0, ge=0, le=1, description="intrinsic error ratio when healthy")


class ConfigKnob(_Strict):
    """An environment variable or config-map key a fault or a repair may set."""

    key: str
    default: str
    kind: Literal["address", "duration", "int", "bool", "string", "port", "flag"] = "string"
    description: str = ""
    config_map: str | None = Field(default=None, description="config map holding it (None: container env)")


class FeatureFlag(_Strict):
    """A flagd flag (Astronomy Shop): variants and the default variant that is 'off'."""

    name: str
    aliases: list[str] = Field(default_factory=list, description="older names (1.x) accepted as the same flag")
    variants: dict[str, float | bool | int | str]
    default_variant: str
    consumers: list[str]
    description: str = ""

    @model_validator(mode="after")
    def _default_known(self) -> "FeatureFlag":
        if self.default_variant not in self.variants:
            raise ValueError(f"default_variant {self.default_variant!r} is not one of the variants")
        return self


class ServiceSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    role: Role = "service"
    language: Language
    protocol: Protocol
    ports: list[Port] = Field(min_length=1)
    replicas: int = Field(default=1, ge=0)
    image: str
    tag: str
    resources: Resources = Resources()
    env: dict[str, str] = Field(default_factory=dict)
    knobs: list[ConfigKnob] = Field(default_factory=list)
    readiness_probe: ProbeSpec | None = None
    liveness_probe: ProbeSpec | None = None
    node: str = Field(description="node the single (first) replica is placed on")
    behaviour: Behaviour = Behaviour()
    description: str = ""


class Edge(_Strict):
    """A call edge. ``on_error``: fail propagates the error to the caller's request, degrade drops a
    feature silently (the request still succeeds, counted as degraded), ignore has no visible effect."""

    caller: str
    callee: str
    protocol: Protocol
    operations: list[str] = Field(default_factory=list)
    on_error: OnError = "fail"
    deadline_ms: float | None = Field(default=None, gt=0, description="caller-side deadline; past it the call errors")
    asynchronous: bool = Field(default=False, description="fire-and-forget (Kafka, AMQP): no latency or errors upstream")
    dormant: bool = Field(default=False, description="edge exists in code but no load path uses it")


class Call(_Strict):
    """One downstream call in a request path; ``count`` calls per parent call."""

    to: str
    op: str = ""
    count: float = Field(default=1.0, gt=0)
    on_error: OnError | None = Field(default=None, description="override of the edge's on_error for this call")
    calls: list["Call"] = Field(default_factory=list)


class RequestPath(_Strict):
    name: str
    method: Literal["GET", "POST", "PUT", "DELETE"] = "GET"
    route: str
    weight: float = Field(gt=0)
    requests_per_task: float = Field(default=1.0, gt=0, description="entry-point HTTP requests per load task")
    calls: list[Call] = Field(default_factory=list, description="calls made by the entry service")
    gated_by_flag: str | None = Field(
        default=None,
        description="feature flag that gates this load task (Astronomy Shop flood_home): while the flag's "
                    "current variant value is 0/false the task makes no entry request (it still takes its "
                    "share of the task mix); otherwise requests_per_task is multiplied by the numeric value")


class LoadSpec(_Strict):
    tool: str = "locust"
    users: int = Field(ge=1)
    think_time_s: tuple[float, float]
    paths: list[RequestPath] = Field(min_length=1)
    diurnal_amplitude: float = Field(default=0.15, ge=0, lt=1, description="relative slow swing of the load")
    jitter: float = Field(default=0.08, ge=0, lt=1, description="relative per-tick noise of the load")


class NodeSpec(_Strict):
    name: str
    zone: str
    cpu_m: int = Field(ge=100)
    mem_mi: int = Field(ge=256)


class Topology(_Strict):
    nodes: list[NodeSpec] = Field(min_length=1)
    inter_zone_latency_ms: float = 25.0
    intra_zone_latency_ms: float = 0.3


class AppSpec(_Strict):
    name: str
    display_name: str
    version: str
    namespace: str
    variant_note: str = ""
    entry_service: str
    services: list[ServiceSpec] = Field(min_length=1)
    edges: list[Edge] = Field(default_factory=list)
    load: LoadSpec
    topology: Topology
    flags: list[FeatureFlag] = Field(default_factory=list)
    flags_config_map: str | None = None
    #: the app's OpenTelemetry collector derives metrics from spans (spanmetrics connector): the twin exports
    #: them for the messaging spans the mesh cannot see (`sremarathon_env.backends.sim.spanmetrics`)
    span_metrics: bool = False

    @model_validator(mode="after")
    def _check_graph(self) -> "AppSpec":
        names = [s.name for s in self.services]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"services: duplicate service names {dup}")
        known = set(names)
        nodes = {n.name for n in self.topology.nodes}
        if self.entry_service not in known:
            raise ValueError(f"entry_service: unknown service {self.entry_service!r}")
        for i, s in enumerate(self.services):
            if s.node not in nodes:
                raise ValueError(f"services.{i}.node: unknown node {s.node!r} for service {s.name!r}")
        edge_keys = set()
        for i, e in enumerate(self.edges):
            for fld in ("caller", "callee"):
                if getattr(e, fld) not in known:
                    raise ValueError(f"edges.{i}.{fld}: unknown service {getattr(e, fld)!r}")
            if (e.caller, e.callee) in edge_keys:
                raise ValueError(f"edges.{i}: duplicate edge {e.caller} -> {e.callee}")
            edge_keys.add((e.caller, e.callee))

        def walk(caller: str, calls: list[Call], where: str) -> None:
            for j, c in enumerate(calls):
                here = f"{where}.calls.{j}"
                if c.to not in known:
                    raise ValueError(f"{here}.to: unknown service {c.to!r}")
                if (caller, c.to) not in edge_keys:
                    raise ValueError(f"{here}: no edge declared for {caller} -> {c.to}")
                walk(c.to, c.calls, here)

        for i, p in enumerate(self.load.paths):
            walk(self.entry_service, p.calls, f"load.paths.{i}")
        flag_names = set()
        for i, f in enumerate(self.flags):
            for c in f.consumers:
                if c not in known:
                    raise ValueError(f"flags.{i}.consumers: unknown service {c!r}")
            for n in [f.name, *f.aliases]:
                if n in flag_names:
                    raise ValueError(f"flags.{i}.name: duplicate flag name {n!r}")
                flag_names.add(n)
        for i, p in enumerate(self.load.paths):
            if p.gated_by_flag is not None and p.gated_by_flag not in flag_names:
                raise ValueError(f"load.paths.{i}.gated_by_flag: unknown flag {p.gated_by_flag!r}")
        return self

    # -- convenience views (deterministic order: declaration order) --------------------------
    def service(self, name: str) -> ServiceSpec:
        for s in self.services:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def service_names(self) -> list[str]:
        return [s.name for s in self.services]

    def callees(self, name: str) -> list[str]:
        return [e.callee for e in self.edges if e.caller == name]

    def callers(self, name: str) -> list[str]:
        return [e.caller for e in self.edges if e.callee == name]

    def edge(self, caller: str, callee: str) -> Edge:
        for e in self.edges:
            if e.caller == caller and e.callee == callee:
                return e
        raise KeyError((caller, callee))

    def zone_of(self, service: str) -> str:
        node = self.service(service).node
        return next(n.zone for n in self.topology.nodes if n.name == node)

    def upstream_closure(self, name: str) -> list[str]:
        """Services whose requests can be affected by ``name`` (itself and every transitive caller)."""
        return list(self._closure_of(name, "up"))

    def downstream_closure(self, name: str) -> list[str]:
        """``name`` and every service it calls, transitively."""
        return list(self._closure_of(name, "down"))

    def _closure_of(self, name: str, way: str) -> tuple[str, ...]:
        """A closure, walked once per spec, name and direction (the spec is frozen; every intervention's scope
        check asks for its services' closures). Kept outside the model, so that equality stays the fields'."""
        ent = _CLOSURES.get(id(self))
        if ent is None or ent[0] is not self:
            if len(_CLOSURES) >= CLOSURE_SPECS_MAX:
                _CLOSURES.clear()
            ent = _CLOSURES[id(self)] = (self, {})
        memo = ent[1]
        key = (name, way)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = tuple(self._closure(name, self.callers if way == "up" else self.callees))
        return hit

    @staticmethod
    def _closure(name: str, step) -> list[str]:
        seen = [name]
        frontier = [name]
        while frontier:
            nxt = []
            for s in frontier:
                for c in step(s):
                    if c not in seen:
                        seen.append(c)
                        nxt.append(c)
            frontier = nxt
        return seen


#: id(spec) -> (spec, {(service, "up"|"down"): closure}); the spec is kept so that its id stays its own
_CLOSURES: dict[int, tuple[AppSpec, dict[tuple[str, str], tuple[str, ...]]]] = {}
CLOSURE_SPECS_MAX = 64  #: specs whose closures are kept before the memo starts again


Call.model_rebuild()

"""The fault catalogue: templates x targets plus hand-written change-driven faults, versioned.

Templates (``faults/data/templates.yaml``) are expanded over an app's services, datastores, config
knobs, client blocks and handler calls of its synthetic source (`apps.sources`), call edges, nodes
and load paths. Hand-written change-driven faults live in ``faults/data/changes/<app>.yaml`` and
Astronomy Shop's flagd flags in ``faults/data/flags.yaml``. Change-driven faults carry real edits of
the service's initial source tree; `change_diff` renders them as unified diffs, and the catalogue
test checks that every changed tree still passes `apps.sources.lint` and `unit_tests` (the build
pipeline would accept it). Faults listed in ``faults/data/excluded.yaml`` (with a reason) are dropped
after validation showed they cannot be realised faithfully in the twin.

>>> from faults.catalogue import load_catalogue, CATALOGUE_VERSION
>>> ob = load_catalogue("online-boutique")
>>> len(ob) > 150, len({f.id for f in ob}) == len(ob)
(True, True)
>>> sorted({f.category for f in ob})
['code', 'config', 'dependency', 'deployment', 'load', 'network', 'node', 'resource']
"""

from __future__ import annotations

import difflib
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import yaml

from apps import load_app
from apps.spec import AppSpec, Call
from faults.effects import Effect, Marker
from faults.model import Artifact, Fault, FileChange, Probe, Realisation, RepairOption

CATALOGUE_VERSION = "2025.06-r3"
DATA = Path(__file__).parent / "data"
PREFIX = {"online-boutique": "ob", "train-ticket": "tt", "astronomy-shop": "as"}
DEVELOPERS = ("Ana Ruiz", "Bo Chen", "Chidi Okafor", "Dana Levi", "Emil Novak", "Farah Haddad",
              "Goran Petrov", "Hana Sato", "Ivan Duarte", "Jun Park", "Kiri Walker", "Lena Vogel")


#: languages whose services check required env at startup and exit when it is missing
_STARTUP_CHECKED = frozenset({"go", "java", "kotlin", "csharp", "rust", "cpp"})


class CatalogueError(ValueError):
    pass


#: CPU one pod of a service without a CPU limit serves, in millicores: the twin's capacity for such a
#: pod (one core), so that demand-over-capacity here is the cpu_util the twin reports and probes read
UNLIMITED_POD_CPU_M = 1000


def pod_cpu_m(service) -> float:
    """Millicores of CPU one pod of ``service`` can use (its limit, or one core without one)."""
    return float(service.resources.cpu_limit_m or UNLIMITED_POD_CPU_M)


def peak_load_factor(app: AppSpec) -> float:
    """How far above its mean the base load goes in a marathon: the diurnal swing's crest times a
    two-sigma tick of the per-tick jitter (a path's load is ``mean x diurnal x lognormal jitter``)."""
    return (1.0 + app.load.diurnal_amplitude) * (1.0 + 2.0 * app.load.jitter)


def repair_replicas(app: AppSpec, pods_at_mean: float, *, saturation: float, headroom: float,
                    floor: int = 1) -> int:
    """Replicas that keep a tier's cpu_util under ``saturation x headroom`` at peak base load, when
    ``pods_at_mean`` pods' worth of CPU is demanded at the mean load (never fewer than ``floor``).

    >>> from apps import load_app
    >>> repair_replicas(load_app("online-boutique"), 4.0, saturation=0.95, headroom=0.8)
    8
    """
    need = pods_at_mean * peak_load_factor(app) / (saturation * headroom)
    return max(int(floor), int(math.ceil(need - 1e-9)))


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", s.lower()).strip("-")


def _templates() -> list[dict[str, Any]]:
    return yaml.safe_load((DATA / "templates.yaml").read_text())


def _excluded(app: str) -> dict[str, str]:
    p = DATA / "excluded.yaml"
    if not p.exists():
        return {}
    data = yaml.safe_load(p.read_text()) or {}
    return {k: v for k, v in (data.get(app) or {}).items()}


def _dev(*parts: str) -> str:
    import hashlib

    h = hashlib.sha256("/".join(parts).encode()).digest()
    return DEVELOPERS[h[0] % len(DEVELOPERS)]


# ---------------------------------------------------------------------------------------------
# scope helpers
def _path_services(app: AppSpec, calls: list[Call]) -> list[str]:
    out: list[str] = []

    def walk(cs: list[Call]) -> None:
        for c in cs:
            if c.to not in out:
                out.append(c.to)
            walk(c.calls)

    walk(calls)
    return out


def _scope(app: AppSpec, *services: str, callee: str | None = None) -> list[str]:
    """The services whose symptoms a fault at ``services`` can cause: each one and everything upstream of it
    (callers see its failures and slowness); plus ``callee`` where the callers' view of their calls to it,
    labelled with the callee, shows the fault (a wrong or missing address of it)."""
    seen: list[str] = []
    for s in services:
        for u in app.upstream_closure(s):
            if u not in seen:
                seen.append(u)
    if callee and callee not in seen:
        seen.append(callee)
    return seen


def _is_service(app: AppSpec, name: str) -> bool:
    return app.service(name).role in ("service", "gateway")


def _traffic(app: AppSpec) -> tuple[set[str], set[tuple[str, str]]]:
    """Services and edges that the load generator's paths actually exercise."""
    svcs, edges = {app.entry_service}, set()

    def walk(caller: str, calls: list[Call]) -> None:
        for c in calls:
            svcs.add(c.to)
            edges.add((caller, c.to))
            walk(c.to, c.calls)

    for p in app.load.paths:
        walk(app.entry_service, p.calls)
    return svcs, edges


def _live_edges(app: AppSpec) -> list:
    """Synchronous edges that carry load (a fault on an idle edge would show nothing)."""
    _, used = _traffic(app)
    return [e for e in app.edges if not e.dormant and not e.asynchronous and (e.caller, e.callee) in used]


def _host(addr: str) -> str:
    a = re.sub(r"^[a-z]+://", "", addr)
    return a.split(":")[0].split("/")[0]


def _typo(host: str) -> str:
    if len(host) < 4:
        return host + "x"
    i = 2 if host[2] != host[3] else 3
    return host[:i] + host[i + 1] + host[i] + host[i + 2:] if host[i] != host[i + 1] else host[:i] + host[i + 1:]


# ---------------------------------------------------------------------------------------------
# source-config edits (language-neutral: the client block of the service's config file)
def _client_edit(text: str, address: str, key: str, new_value: int) -> tuple[str, str, int] | None:
    """Change ``key`` of the client block whose address line holds ``address``. Returns (old snippet,
    new snippet, old value): the lines from the address line to the changed line, before and after."""
    lines = text.split("\n")
    idx = next((i for i, ln in enumerate(lines) if address in ln), None)
    if idx is None:
        return None
    for j in range(idx + 1, min(idx + 8, len(lines))):
        m = re.search(rf"({re.escape(key)}\D*?)(\d+)", lines[j])
        if m:
            old = int(m.group(2))
            changed = lines[j][: m.start(2)] + str(new_value) + lines[j][m.end(2):]
            # the snippets end with the newline so "pool_size: 1" never matches "pool_size: 16"
            return "\n".join(lines[idx: j + 1]) + "\n", "\n".join([*lines[idx: j], changed]) + "\n", old
        if "address" in lines[j]:
            break
    return None


def change_diff(service: str, before: dict[str, str], files: list[FileChange]) -> str:
    """Unified diff (a/ b/ paths) of applying ``files`` to ``before``."""
    out = []
    for fc in sorted(files, key=lambda f: f.path):
        old = before[fc.path]
        new = old.replace(fc.old, fc.new, 1)
        out.extend(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{fc.path}", tofile=f"b/{fc.path}"))
    return "".join(out)


def apply_changes(tree: dict[str, str], files: list[FileChange]) -> dict[str, str]:
    out = dict(tree)
    for fc in files:
        if fc.path not in out or out[fc.path].count(fc.old) != 1:
            raise CatalogueError(f"change does not apply to {fc.path}: snippet not found exactly once")
        out[fc.path] = out[fc.path].replace(fc.old, fc.new, 1)
    return out


def revert_diff(service: str, tree: dict[str, str], files: list[FileChange]) -> str:
    """The diff that undoes ``files`` (what a patch_source repair submits)."""
    changed = apply_changes(tree, files)
    back = [FileChange(path=f.path, old=f.new, new=f.old) for f in files]
    return change_diff(service, changed, back)


# ---------------------------------------------------------------------------------------------
class _Gen:
    def __init__(self, app: AppSpec):
        self.app = app
        self.p = PREFIX.get(app.name, _slug(app.name)[:2])
        self.out: list[Fault] = []

    def add(self, tpl: dict, tid: str, **kw: Any) -> None:
        fid = f"{self.p}-{tpl['category']}-{tid}"
        kw.setdefault("expected_alerts", list(tpl.get("alerts", [])))   # a variant may name its own
        kw.setdefault("difficulty", tpl.get("difficulty", ""))
        self.out.append(Fault(id=fid, app=self.app.name, category=tpl["category"], mechanism=tpl["mechanism"],
                              template=tpl["id"], **kw))

    # -- target sets ---------------------------------------------------------------------------
    def services(self) -> list[str]:
        live, _ = _traffic(self.app)
        return [s.name for s in self.app.services if s.role in ("service", "gateway") and s.name in live]

    def datastores(self) -> list[str]:
        live, _ = _traffic(self.app)
        return [s.name for s in self.app.services if s.role in ("datastore", "broker") and s.name in live]


def _pod_artifact(s: str, what: str) -> Artifact:
    return Artifact(kind="pod", canonical=f"{s}:{what}", aliases=[s, f"pod/{s}", f"deployment/{s}", f"{s}/{what}"])


def _expand(g: _Gen, tpl: dict) -> None:  # noqa: C901 - one branch per template, kept together
    from apps.sources import config_path, initial_tree

    app, t, P = g.app, tpl["id"], tpl.get("params", {}) or {}

    def desc(**kw: Any) -> str:
        return tpl["description"].format(**{**P, **kw})

    if tpl["over"] == "service":
        for s in g.services():
            spec = app.service(s)
            res = spec.resources
            scope = _scope(app, s)
            restart = [RepairOption(tool="restart", args={"service": s})]
            if t == "cpu-stress":
                mc = float((res.cpu_limit_m or 1000) * P["limit_factor"])
                probe = (Probe(kind="cpu_util_max", service=s, threshold=P["probe_threshold"]) if res.cpu_limit_m
                         else Probe(kind="service_p95_ms_max", service=s, threshold=P["p95_threshold"]))
                g.add(tpl, f"{s}-cpu-stress", target=s, culprits=[s], artifact=_pod_artifact(s, "cpu-stress"),
                      scope=scope, probe=probe,
                      repairs=restart + ([RepairOption(tool="set_resources", args={
                          "service": s, "cpu_limit_m": int(res.cpu_limit_m * (P["limit_factor"] + 2))})]
                          if res.cpu_limit_m else []), description=desc(target=s),
                      realisation=Realisation(kind="effects", effects=[Effect(kind="cpu_burn", service=s, millicores=mc, until_restart=True)]))
            elif t == "memory-oom":
                if res.mem_limit_mi is None:  # nothing to exceed: no OOM kill without a limit
                    continue
                mi = float(res.mem_limit_mi * P["limit_factor"])
                g.add(tpl, f"{s}-memory-oom", target=s, culprits=[s], artifact=_pod_artifact(s, "memory-stress"),
                      scope=scope, probe=Probe(kind="restarts_stable", service=s, threshold=1),
                      # the hog outgrows the limit again after a restart (the OOM kill is itself a restart):
                      # only a limit above the hog's working set repairs it
                      repairs=[RepairOption(tool="set_resources", args={
                          "service": s, "mem_limit_mi": int(mi + (res.mem_limit_mi or 2048))})],
                      description=desc(target=s),
                      realisation=Realisation(kind="effects", effects=[Effect(
                          kind="memory_hog", service=s, mi=mi, log_signature="OOMKilled", until_restart=True)]))
            elif t == "low-memory-limit":
                lim = max(4, int(spec.behaviour.mem_base_mi * P["limit_fraction"]))
                orig = res.mem_limit_mi
                if orig is None:
                    continue
                g.add(tpl, f"{s}-low-memory-limit", target=s, culprits=[s],
                      artifact=Artifact(kind="resource_spec", canonical=f"{s}:resources.limits.memory",
                                        aliases=[f"{s}:limits.memory", f"{s}/memory-limit", f"deployment/{s}:memory",
                                                 "limits.memory"]),
                      scope=scope, probe=Probe(kind="restarts_stable", service=s, threshold=1),
                      repairs=[RepairOption(tool="set_resources", args={"service": s, "mem_limit_mi": orig})],
                      description=desc(target=s),
                      realisation=Realisation(kind="resources", service=s, resources={
                          "mem_limit_mi": lim, **({"mem_request_mi": lim} if res.mem_request_mi else {})}))
            elif t == "low-cpu-limit":
                orig = res.cpu_limit_m
                if orig is None:
                    continue
                g.add(tpl, f"{s}-low-cpu-limit", target=s, culprits=[s],
                      artifact=Artifact(kind="resource_spec", canonical=f"{s}:resources.limits.cpu",
                                        aliases=[f"{s}:limits.cpu", f"{s}/cpu-limit", f"deployment/{s}:cpu", "limits.cpu"]),
                      scope=scope, probe=Probe(kind="cpu_util_max", service=s, threshold=P["probe_threshold"]),
                      repairs=[RepairOption(tool="set_resources", args={"service": s, "cpu_limit_m": orig})],
                      description=desc(target=s),
                      realisation=Realisation(kind="resources", service=s, resources={
                          "cpu_limit_m": int(P["limit_m"]), **({"cpu_request_m": int(P["limit_m"])} if res.cpu_request_m else {})}))
            elif t == "pod-latency":
                dl = [e for e in _live_edges(app) if e.callee == s and e.deadline_ms and e.deadline_ms < P["ms"]]
                probe = (Probe(kind="edge_error_ratio_max", caller=dl[0].caller, callee=s, threshold=0.2) if dl
                         else Probe(kind="service_p95_ms_max", service=s, threshold=P["probe_threshold"]))
                g.add(tpl, f"{s}-pod-latency", target=s, culprits=[s], artifact=_pod_artifact(s, "network-delay"),
                      scope=scope, probe=probe,
                      repairs=restart, description=desc(target=s),
                      realisation=Realisation(kind="effects", effects=[Effect(kind="latency", service=s, ms=float(P["ms"]), until_restart=True)]))
            elif t == "pod-failure":
                g.add(tpl, f"{s}-pod-failure", target=s, culprits=[s], artifact=_pod_artifact(s, "pod-failure"),
                      scope=scope, probe=Probe(kind="service_ready_min", service=s, threshold=max(1, spec.replicas)),
                      repairs=restart, description=desc(target=s),
                      realisation=Realisation(kind="effects", effects=[Effect(kind="not_ready", service=s, until_restart=True)]))
            elif t == "http-abort":
                g.add(tpl, f"{s}-http-abort", target=s, culprits=[s], artifact=_pod_artifact(s, "http-abort"),
                      scope=scope, probe=Probe(kind="service_error_ratio_max", service=s, threshold=P["probe_threshold"]),
                      repairs=restart, description=desc(target=s),
                      realisation=Realisation(kind="effects", effects=[Effect(
                          kind="error_rate", service=s, rate=float(P["rate"]), log_signature="injected abort: 503",
                          until_restart=True)]))
            elif t == "scale-zero":
                if spec.replicas < 1:
                    continue
                g.add(tpl, f"{s}-scale-zero", target=s, culprits=[s],
                      artifact=Artifact(kind="replicas", canonical=f"{s}:replicas",
                                        aliases=[f"{s}/replicas", f"deployment/{s}:replicas", f"{s}:spec.replicas"]),
                      scope=scope, probe=Probe(kind="service_ready_min", service=s, threshold=1),
                      repairs=[RepairOption(tool="scale", args={"service": s, "replicas": spec.replicas})],
                      description=desc(target=s), realisation=Realisation(kind="scale", service=s, replicas=0))
            elif t == "bad-image":
                bad = spec.tag.replace(".", ",", 1) if "." in spec.tag else f"{spec.tag}_latest"  # a typo
                g.add(tpl, f"{s}-bad-image", target=s, culprits=[s],
                      artifact=Artifact(kind="image_tag", canonical=f"{s}:{bad}",
                                        aliases=[bad, f"{spec.image}:{bad}", f"{s}:image", f"deployment/{s}:image"]),
                      scope=[s], probe=Probe(kind="rollout_ok", service=s, within_ticks=4),
                      repairs=[RepairOption(tool="rollback", args={"service": s})], description=desc(target=s),
                      realisation=Realisation(kind="deploy", service=s, image_tag=bad,
                                              message=f"{s}: release {spec.tag} (hotfix build)", author=_dev(s, t)))
        return

    if tpl["over"] == "datastore":
        for d in g.datastores():
            scope = _scope(app, d)
            restart = [RepairOption(tool="restart", args={"service": d})]
            art = Artifact(kind="datastore", canonical=f"{d}:{t.removeprefix('datastore-')}",
                           aliases=[d, f"statefulset/{d}", f"deployment/{d}", f"pod/{d}"])
            if t == "datastore-down":
                probe = Probe(kind="service_ready_min", service=d, threshold=1)
                eff = Effect(kind="not_ready", service=d, until_restart=True)
            elif t == "datastore-slow-io":
                probe = Probe(kind="service_p95_ms_max", service=d, threshold=P["probe_threshold"])
                eff = Effect(kind="latency", service=d, ms=float(P["ms"]), until_restart=True)
            else:
                probe = Probe(kind="service_error_ratio_max", service=d, threshold=P["probe_threshold"])
                eff = Effect(kind="error_rate", service=d, rate=float(P["rate"]), log_signature="NOAUTH Authentication required",
                             until_restart=True)
            g.add(tpl, f"{d}-{t.removeprefix('datastore-')}", target=d, culprits=[d], artifact=art, scope=scope,
                  probe=probe, repairs=restart, description=desc(target=d),
                  realisation=Realisation(kind="effects", effects=[eff]))
        return

    if tpl["over"] in ("address_knob", "port_knob"):
        names = set(app.service_names)
        for s in g.services():
            spec = app.service(s)
            for k in spec.knobs:
                if k.config_map is not None:
                    continue
                key_alias = [f"{s}/{k.key}", f"{s}.env.{k.key}", f"deployment/{s}:env.{k.key}", k.key]
                art = Artifact(kind="config_key", canonical=f"{s}:{k.key}", aliases=key_alias)
                if tpl["over"] == "address_knob" and k.kind == "address":
                    callee = _host(k.default)
                    if callee not in names or callee == s:
                        continue
                    try:
                        app.edge(s, callee)
                    except KeyError:
                        continue
                    if t == "wrong-address":
                        bad = k.default.replace(callee, _typo(callee), 1)
                        # the failing calls show upstream of s and as the callee's failing calls (callers'
                        # view, labelled with the callee): both are the fault's symptoms
                        g.add(tpl, f"{s}-wrong-address-{_slug(k.key)}", target=s, culprits=[s], artifact=art,
                              scope=_scope(app, s, callee=callee), description=desc(target=s, key=k.key, callee=callee),
                              probe=Probe(kind="edge_error_ratio_max", caller=s, callee=callee, threshold=P["probe_threshold"]),
                              repairs=[RepairOption(tool="set_config", args={"target": s, "key": k.key, "value": k.default}),
                                       RepairOption(tool="rollback", args={"service": s})],
                              realisation=Realisation(kind="config", service=s, target=s, key=k.key, value=bad))
                    elif t == "missing-env":
                        # compiled services refuse to start without the address (panic, exit 2): the new
                        # revision crash-loops, the old pods keep serving, only s shows it. Dynamic ones
                        # start and fail every call to the missing dependency: the errors reach s's callers
                        # (scope: s and everything upstream) and the error-rate rules, not the crash rules
                        dynamic = spec.language not in _STARTUP_CHECKED
                        variant: dict[str, Any] = {}
                        if dynamic:
                            variant = {"expected_alerts": list(tpl.get("dynamic_alerts", [])),
                                       "difficulty": tpl.get("dynamic_difficulty", "").format(callee=callee)}
                        g.add(tpl, f"{s}-missing-env-{_slug(k.key)}", target=s, culprits=[s], artifact=art,
                              scope=_scope(app, s, callee=callee) if dynamic else [s],
                              description=(tpl["dynamic_description"] if dynamic else tpl["description"]).format(
                                  target=s, key=k.key, callee=callee),
                              probe=(Probe(kind="edge_error_ratio_max", caller=s, callee=callee, threshold=0.2)
                                     if dynamic else
                                     Probe(kind="rollout_ok", service=s, within_ticks=6) if spec.readiness_probe
                                     else Probe(kind="restarts_stable", service=s, threshold=1, within_ticks=8)),
                              **variant,
                              repairs=[RepairOption(tool="rollback", args={"service": s}),
                                       RepairOption(tool="set_config", args={"target": s, "key": k.key, "value": k.default})],
                              realisation=Realisation(kind="deploy", service=s, env={k.key: None}, author=_dev(s, t, k.key),
                                                      message=f"{s}: read {callee} address from service discovery"))
                elif tpl["over"] == "port_knob" and k.kind == "port" and k.key == "PORT":
                    val = str(int(k.default) + 1) if k.default.isdigit() else "8081"
                    g.add(tpl, f"{s}-wrong-port", target=s, culprits=[s], artifact=art, scope=[s],
                          description=desc(target=s, value=val),
                          probe=Probe(kind="rollout_ok", service=s, within_ticks=6),
                          repairs=[RepairOption(tool="set_config", args={"target": s, "key": k.key, "value": k.default}),
                                   RepairOption(tool="rollback", args={"service": s})],
                          realisation=Realisation(kind="deploy", service=s, env={k.key: val}, author=_dev(s, t),
                                                  message=f"config: move {s} to port {val}",
                                                  effects=[Effect(kind="not_ready", service=s, bind="revision",
                                                                  marker=Marker(env_equals=(k.key, val)))]))
        return

    if tpl["over"] in ("client", "op_call"):
        for s in g.services():
            try:
                tree = initial_tree(app, s)
                cpath = config_path(app, s)
            except Exception:  # a service without a code tree
                continue
            if tpl["over"] == "client":
                for e in _live_edges(app):
                    if e.caller != s:
                        continue
                    addr = next((v for v in (app.service(s).env or {}).values() if _host(v) == e.callee), None)
                    text = tree.get(cpath, "")
                    addr = addr if addr and addr in text else next(
                        (m.group(1) for m in re.finditer(r'"?(' + re.escape(e.callee) + r':\d+)', text)), None)
                    if not addr:
                        continue
                    if t == "timeout-too-low":
                        m = re.search(re.escape(addr) + r"[\s\S]{0,200}?timeout_ms\D*?(\d+)", text)
                        if not m:
                            continue
                        new = max(1, int(m.group(1)) // int(P["divisor"]))
                        ed = _client_edit(text, addr, "timeout_ms", new)
                        eff = dict(kind="edge_error", rate=float(P["rate"]), log_signature="context deadline exceeded")
                        probe = Probe(kind="edge_error_ratio_max", caller=s, callee=e.callee, threshold=P["probe_threshold"])
                        msg, what = f"{s}: fail fast on slow {e.callee} calls", "timeout"
                    else:
                        new = int(P["pool"])
                        ed = _client_edit(text, addr, "pool_size", new)
                        eff = dict(kind="edge_latency", ms=float(P["ms"]), log_signature="waiting for a free connection")
                        probe = (Probe(kind="edge_error_ratio_max", caller=s, callee=e.callee, threshold=0.2)
                                 if e.deadline_ms and e.deadline_ms < P["ms"] else
                                 Probe(kind="edge_p95_ms_max", caller=s, callee=e.callee, threshold=P["probe_threshold"]))
                        msg, what = f"{s}: trim idle {e.callee} connections", "pool"
                    if ed is None or ed[2] == new or text.count(ed[0]) != 1:
                        continue
                    old_snip, new_snip, old = ed
                    fc = FileChange(path=cpath, old=old_snip, new=new_snip)
                    _add_change(g, tpl, f"{s}-{what}-{e.callee}", s, [s], tree, [fc], msg,
                                effects=[Effect(caller=s, callee=e.callee, bind="revision",
                                                marker=Marker(source_contains=(cpath, new_snip)), **eff)],
                                probe=probe, scope=_scope(app, s) + [e.callee],
                                description=desc(target=s, callee=e.callee, old=old, new=new))
            else:
                hpath = next((p for p in tree if re.search(r"handler", p, re.I) and "test" not in p.lower()), None)
                if hpath is None:
                    continue
                text = tree[hpath]
                seen: set[tuple[str, str]] = set()
                for e in _live_edges(app):
                    if e.caller != s or e.on_error == "ignore":
                        continue
                    for op in e.operations:
                        lines = [ln for ln in text.split("\n") if f'"{e.callee}"' in ln and f'"{op}"' in ln]
                        if not lines or (e.callee, op) in seen:
                            continue
                        seen.add((e.callee, op))
                        all_lines = text.split("\n")
                        k = all_lines.index(lines[0])
                        lo = k
                        while text.count("\n".join(all_lines[lo: k + 1])) != 1 and lo > 0:
                            lo -= 1
                        old_snip = "\n".join(all_lines[lo: k + 1])
                        new_op = f"{op}V2"
                        new_snip = "\n".join([*all_lines[lo:k], all_lines[k].replace(f'"{op}"', f'"{new_op}"', 1)])
                        fc = FileChange(path=hpath, old=old_snip, new=new_snip)
                        _add_change(g, tpl, f"{s}-call-{e.callee}-{_slug(op)}", s, [s], tree, [fc],
                                    f"{s}: move {e.callee} {op} to the v2 API",
                                    effects=[Effect(kind="edge_error", caller=s, callee=e.callee, operation=op, rate=1.0,
                                                    bind="revision", marker=Marker(source_contains=(hpath, new_snip)),
                                                    log_signature=f"UNIMPLEMENTED: unknown method {new_op}")],
                                    probe=Probe(kind="edge_error_ratio_max", caller=s, callee=e.callee,
                                                threshold=P["probe_threshold"]),
                                    scope=_scope(app, s) + [e.callee],
                                    description=desc(target=s, callee=e.callee, op=op, new_op=new_op))
        return

    if tpl["over"] == "edge":
        for e in _live_edges(app):
            c, d = e.caller, e.callee
            art = Artifact(kind="network", canonical=f"{c}->{d}", aliases=[f"{c}-{d}", f"{c} -> {d}", f"networkchaos/{c}-{d}"])
            if t == "edge-delay":
                eff = Effect(kind="edge_latency", caller=c, callee=d, ms=float(P["ms"]), until_restart=True)
                probe = (Probe(kind="edge_error_ratio_max", caller=c, callee=d, threshold=0.2)
                         if e.deadline_ms and e.deadline_ms < P["ms"]
                         else Probe(kind="edge_p95_ms_max", caller=c, callee=d, threshold=P["probe_threshold"]))
            else:
                eff = Effect(kind="edge_error", caller=c, callee=d, rate=float(P["rate"]),
                             log_signature="connection timed out", until_restart=True)
                probe = Probe(kind="edge_error_ratio_max", caller=c, callee=d, threshold=P["probe_threshold"])
            tpl_e = {**tpl, "category": "dependency"} if app.service(d).role in ("datastore", "broker") else tpl
            g.add(tpl_e, f"{c}-{d}-{t.removeprefix('edge-')}", target=c, culprits=[c, d], artifact=art,
                  scope=_scope(app, c) + [d], probe=probe, description=desc(caller=c, callee=d),
                  repairs=[RepairOption(tool="restart", args={"service": c})],
                  realisation=Realisation(kind="effects", effects=[eff]))
        return

    if tpl["over"] == "node":
        for n in app.topology.nodes:
            on = [s.name for s in app.services if s.node == n.name]
            svc = [s for s in on if _is_service(app, s)] or on
            if not svc:
                continue
            g.add(tpl, f"{n.name}-down", target=svc[0], culprits=sorted(on),
                  artifact=Artifact(kind="node", canonical=n.name, aliases=[f"node/{n.name}", f"{n.name} ({n.zone})"]),
                  scope=[n.name, n.zone, *_scope(app, *on)], probe=Probe(kind="service_ready_min", service=svc[0],
                                                      threshold=max(1, app.service(svc[0]).replicas)),
                  repairs=[RepairOption(tool="drain_node", args={"node": n.name})], description=desc(target=n.name),
                  realisation=Realisation(kind="effects", effects=[Effect(kind="node_down", node=n.name)]))
        return

    if tpl["over"] in ("path", "entry"):
        entry = app.entry_service
        paths = [p for p in app.load.paths if p.calls] if tpl["over"] == "path" else [None]
        w_tot = sum(x.weight for x in app.load.paths)
        task_rate = app.load.users / (sum(app.load.think_time_s) / 2.0)   # load tasks per second

        def demand(path) -> dict[str, float]:
            """CPU ms per second per service at the base load, for one path (or all)."""
            out: dict[str, float] = {}

            def walk(calls: list[Call], mult: float) -> None:
                for c in calls:
                    n = mult * c.count
                    out[c.to] = out.get(c.to, 0.0) + n * app.service(c.to).behaviour.cpu_ms_per_call
                    walk(c.calls, n)

            for x in ([path] if path else app.load.paths):
                if x.gated_by_flag if hasattr(x, "gated_by_flag") else False:
                    continue
                rate = task_rate * x.weight / w_tot
                out[entry] = out.get(entry, 0.0) + rate * x.requests_per_task * app.service(entry).behaviour.cpu_ms_per_call
                walk(x.calls, rate)
            return out

        for p in paths:
            name = p.name if p else None
            d = demand(p)
            cands = []
            for svc_name, ms_per_s in sorted(d.items()):
                sv = app.service(svc_name)
                if ms_per_s <= 0 or sv.role not in ("service", "gateway"):
                    continue
                cap = pod_cpu_m(sv) * max(1, sv.replicas)  # ms of CPU per second
                cands.append((cap / ms_per_s, svc_name))   # factor at which it saturates
            if not cands:
                continue
            cands.sort()
            # one tier must saturate alone, so that scaling it (the one declared repair) heals: the surge
            # stays below what the next tier can serve; when two tiers saturate together there is no
            # single-step repair and the path gets no load fault
            f0, bottleneck = cands[0]
            f1 = cands[1][0] if len(cands) > 1 else float("inf")
            factor = round(min(P["overload"] * f0, P["next_tier_margin"] * f1), 1)
            if factor < P["min_overload"] * f0 or factor > P["max_factor"] or factor < 2:
                continue
            # enough replicas of the bottleneck for the surge at the marathon's peak base load, kept
            # under the probe's threshold with headroom (the count follows from the capacity needed)
            replicas = repair_replicas(app, factor / f0 * max(1, app.service(bottleneck).replicas),
                                       saturation=P["saturation"], headroom=P["headroom"],
                                       floor=int(P["replicas"]))
            touched = [entry, *(_path_services(app, p.calls) if p else app.service_names)]
            touched = list(dict.fromkeys(x for x in touched if x))
            g.add(tpl, f"{entry}-{_slug(name) if name else 'all'}-{t}", target=entry, culprits=[entry],
                  artifact=Artifact(kind="load", canonical=f"load:{name or '*'}",
                                    aliases=[f"traffic:{name or 'all'}", f"{name or 'all'} traffic", "load"]),
                  # the fault's own symptom is its tier saturating (demand over capacity): a path error
                  # probe would also fail for any other fault on the path, or for a further tier that
                  # only overlapping surges together saturate
                  scope=touched, probe=Probe(kind="cpu_util_max", service=bottleneck, threshold=P["saturation"]),
                  repairs=[RepairOption(tool="scale", args={"service": bottleneck, "replicas": replicas})],
                  description=desc(path=name or "all paths", factor=factor, bottleneck=bottleneck,
                                   overload=round(factor / f0, 2)),
                  realisation=Realisation(kind="effects", effects=[Effect(kind="load_factor", path=name, factor=factor)]))
        return
    raise CatalogueError(f"template {t}: unknown target set {tpl['over']!r}")


def _add_change(g: _Gen, tpl: dict, tid: str, service: str, culprits: list[str], tree: dict[str, str],
                files: list[FileChange], message: str, *, effects: list[Effect], probe: Probe, scope: list[str],
                description: str, category: str | None = None, silent: bool = False,
                alerts: list[str] | None = None, difficulty: str | None = None) -> None:
    apply_changes(tree, files)  # raises if the edit does not apply
    cid = f"{g.p}-{category or tpl['category']}-{tid}"
    fault = Fault(
        id=cid, app=g.app.name, category=category or tpl["category"], mechanism="deploy", target=service,
        culprits=culprits, scope=list(dict.fromkeys(scope)), probe=probe, silent=silent,
        artifact=Artifact(kind="commit", canonical=f"{service}:change:{tid}",
                          aliases=[f"{service}:{tid}", *(f"{service}:{f.path}" for f in files)]),
        expected_alerts=list(alerts if alerts is not None else tpl.get("alerts", [])),
        difficulty=difficulty if difficulty is not None else tpl.get("difficulty", ""),
        repairs=[RepairOption(tool="rollback", args={"service": service}),
                 RepairOption(tool="patch_source", args={"service": service, "diff": revert_diff(service, tree, files)})],
        realisation=Realisation(kind="deploy", service=service, files=files, message=message,
                                author=_dev(service, tid), effects=effects),
        description=description, template=tpl["id"])
    g.out.append(fault)


# ---------------------------------------------------------------------------------------------
def _hand_written(g: _Gen) -> None:
    """Hand-written change-driven faults (``faults/data/changes/<app>.yaml``)."""
    from apps.sources import initial_tree

    p = DATA / "changes" / f"{g.app.name}.yaml"
    if not p.exists():
        return
    for i, c in enumerate(yaml.safe_load(p.read_text()) or []):
        s = c["service"]
        tree = initial_tree(g.app, s)
        files = [FileChange(**f) for f in c["files"]]
        effects = []
        for e in c.get("effects", []):
            if "marker" in e:
                m = e["marker"]
                mk = Marker(env_equals=tuple(m[1:])) if m[0] == "env" else Marker(source_contains=tuple(m))
                effects.append(Effect(**{**e, "bind": "revision", "marker": mk}))
            else:
                effects.append(Effect(**e))
        tpl = {"id": "change", "category": c["category"], "alerts": c.get("alerts", []),
               "difficulty": c.get("difficulty", "")}
        _add_change(g, tpl, c["id"], s, c.get("culprits", [s]), tree, files, c["message"], effects=effects,
                    probe=Probe(**c["probe"]), scope=_scope(g.app, s) + c.get("extra_scope", []),
                    description=c.get("description", ""), silent=c.get("silent", False))


def _flags(g: _Gen) -> None:
    """Astronomy Shop flagd flags (``faults/data/flags.yaml``): one fault per flag and variant."""
    p = DATA / "flags.yaml"
    if not g.app.flags or not p.exists():
        return
    data = yaml.safe_load(p.read_text()) or {}
    target_cm = g.app.flags_config_map or "flagd"
    known = {f.name: f for f in g.app.flags}
    for name in sorted(data.get(g.app.name, {})):
        entry = data[g.app.name][name]
        f = known.get(name)
        if f is None:
            continue
        for variant in entry.get("variants", ["on"]):
            if variant not in f.variants:
                raise CatalogueError(f"flags.yaml: {name} has no variant {variant!r}")
            over: dict[str, float] = {}
            for key, field in (("variant_rates", "rate"), ("variant_ms", "ms"), ("variant_leak", "mi_per_min")):
                if variant in (entry.get(key) or {}):
                    over[field] = float(entry[key][variant])
            effects = [Effect(**{**e, **{k: v for k, v in over.items() if k in e}, "bind": "flag", "flag": name,
                                 "variant": variant}) for e in entry["effects"]]
            tid = f"{_slug(name)}" + ("" if variant == "on" else f"-{_slug(variant)}")
            g.out.append(Fault(
                id=f"{g.p}-{entry['category']}-flag-{tid}", app=g.app.name, category=entry["category"],
                mechanism="config_push", target=entry["target"], culprits=entry.get("culprits", [entry["target"]]),
                artifact=Artifact(kind="flag", canonical=f"flag:{name}",
                                  aliases=[name, *f.aliases, f"flagd:{name}", f"{target_cm}:{name}"]),
                scope=_scope(g.app, *entry.get("scope_roots", [entry["target"]])),
                probe=Probe(**entry["probe"]), silent=entry["probe"]["kind"] == "artifact",
                expected_alerts=entry.get("alerts", []), difficulty=entry.get("difficulty", ""),
                repairs=[RepairOption(tool="set_config", args={"target": target_cm, "key": name, "value": f.default_variant})],
                realisation=Realisation(kind="config", target=target_cm, key=name, value=variant, effects=effects),
                description=entry.get("description", f.description), template="flag"))


def _with_boot_time(app: AppSpec, f: Fault, tick_s: float = 15.0) -> Fault:
    """Stretch the probe's windows by the time a new pod of the service needs to become ready
    (readiness initial delay + start-up): a new revision only shows once its pods serve, and a revert or
    repair only heals once replacement pods serve (Train Ticket's JVMs take minutes)."""
    svc = f.realisation.service or f.target
    try:
        spec = app.service(svc)
    except KeyError:
        return f
    boot = (spec.readiness_probe.initial_delay_s if spec.readiness_probe else 0.0) + spec.behaviour.startup_s
    extra = int(-(-boot // tick_s))
    if extra <= 1:
        return f
    slow_show = f.realisation.kind in ("deploy", "resources") or (f.realisation.kind == "config" and f.realisation.service)
    probe = f.probe.model_copy(update={"within_ticks": f.probe.within_ticks + (extra if slow_show else 0),
                                       "recover_ticks": f.probe.recover_ticks + 2 * extra})
    return f.model_copy(update={"probe": probe})


@lru_cache(maxsize=None)
def _build(app_name: str) -> tuple[Fault, ...]:
    app = load_app(app_name)
    g = _Gen(app)
    for tpl in _templates():
        _expand(g, tpl)
    _hand_written(g)
    _flags(g)
    g.out = [_with_boot_time(app, f) for f in g.out]
    excluded = _excluded(app_name)
    out = sorted((f for f in g.out if f.id not in excluded), key=lambda f: f.id)
    ids = [f.id for f in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise CatalogueError(f"{app_name}: duplicate fault ids {dup}")
    return tuple(out)


def load_catalogue(app: str) -> list[Fault]:
    """Every fault of an app (sorted by id)."""
    return list(_build(app))


def catalogue_apps() -> list[str]:
    """Apps whose model is present (a catalogue can be built for them)."""
    from apps import APP_NAMES, DATA_DIR

    return [a for a in APP_NAMES if (DATA_DIR / f"{a}.yaml").exists()]


def fault_by_id(fault_id: str) -> Fault:
    for a in catalogue_apps():
        if fault_id.startswith(PREFIX.get(a, "") + "-"):
            for f in _build(a):
                if f.id == fault_id:
                    return f
    raise KeyError(fault_id)


def iter_all() -> Iterator[Fault]:
    for a in catalogue_apps():
        yield from _build(a)

"""Kubernetes-shaped cluster state and its controllers: nodes, Deployments with ReplicaSets per
revision, pods with a kubelet-like lifecycle, a scheduler, a quota, and events.

Pods change state only at discrete moments (pull finished, container started, probe passed,
container exited, back-off elapsed); each pod carries its next moment in a heap, so a tick costs
nothing for pods whose state does not change. Per-pod numbers the tick needs (service, node,
readiness, limits, start time) are mirrored into numpy arrays indexed by pod *slot* (creation
order), which the traffic model and the metric writer read in bulk.

Rolling updates follow the Deployment controller: maxSurge 25 % (rounded up), maxUnavailable 25 %
(rounded down, 1 if both are 0), unhealthy old pods cleaned up first, progress deadline 600 s.
Container restarts back off 10 s doubling to 300 s, reset after 10 minutes of running.

>>> from apps import load_app
>>> c = Cluster(load_app("online-boutique"), seed=1)
>>> c.bootstrap(lambda pod, t: None)
>>> sorted({p.phase for p in c.active_pods()}), len(c.active_pods())
(['Running'], 11)
"""

from __future__ import annotations

import copy
import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from apps.spec import AppSpec, ServiceSpec
from sremarathon_env.backends.sim.util import KeyedDraws, child_rng, suffix, template_hash

BACKOFF_START_S = 10.0
BACKOFF_MAX_S = 300.0
BACKOFF_RESET_S = 600.0
PROGRESS_DEADLINE_S = 600.0
POD_EVICTION_TIMEOUT_S = 300.0

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_NOT_PLACED = object()   # (a placement not found: None is a placement, no feasible node)


def _deepcopy_fields(obj: Any, memo: dict, deep: tuple[str, ...]) -> Any:
    """A deep copy of a plain-field object that deep-copies only the fields named in ``deep`` (the
    others hold numbers, strings, booleans or None): what `copy.deepcopy` does, without its per-field
    dispatch (a twin's `clone` copies hundreds of pods)."""
    new = object.__new__(type(obj))
    memo[id(obj)] = new
    d = dict(obj.__dict__)
    for k in deep:
        d[k] = copy.deepcopy(d[k], memo)
    new.__dict__.update(d)
    return new


@dataclass
class CrashPlan:
    """How the next container run of a pod ends: after ``after_s`` with ``reason``/``exit_code``."""

    reason: str
    exit_code: int
    after_s: float
    log: str
    liveness: bool = False


@dataclass(eq=False)
class ReplicaSet:
    id: int
    deployment: str
    hash: str
    template: dict[str, Any]           # image, tag, env, resources, restarted_at
    files: dict[str, str]
    effects: list                      # revision-bound Effect objects
    meta: dict[str, Any]               # sha, author, message, t, diff, noise
    revision: int
    created_t: float
    replicas: int = 0                  # desired pods (set by the Deployment controller)
    pods: list["Pod"] = field(default_factory=list)   # live pods

    @property
    def name(self) -> str:
        return f"{self.deployment}-{self.hash}"

    def ready_count(self) -> int:
        return len([p for p in self.pods if p.ready and not p.node_lost and not p.deleted])   # Pod.available

    def __deepcopy__(self, memo: dict) -> "ReplicaSet":
        return _deepcopy_fields(self, memo, ("template", "files", "effects", "meta", "pods"))


@dataclass(eq=False)
class Pod:
    slot: int
    name: str
    svc: int
    rs: ReplicaSet
    created_t: float
    node: int = -1
    phase: str = "Pending"
    cstate: str = "waiting"            # waiting | running | terminated
    reason: str = "ContainerCreating"  # waiting reason when cstate == waiting
    ready: bool = False                # readiness probe passes (lifecycle)
    node_lost: bool = False
    started_t: float = math.nan
    ready_t: float = math.nan
    restarts: int = 0
    last_reason: str = ""
    last_exit: int = 0
    last_started_t: float = math.nan
    last_finished_t: float = math.nan
    backoff_s: float = 0.0
    pull_backoff_s: float = 0.0
    next_t: float = math.inf
    action: str = ""
    gen: int = 0
    deleted: bool = False
    plan: CrashPlan | None = None
    deletion_t: float = math.nan
    lifecycle_seen: bool = False       # a bootstrap pod that has since stopped or restarted

    @property
    def available(self) -> bool:
        return self.ready and not self.node_lost and not self.deleted

    def __deepcopy__(self, memo: dict) -> "Pod":
        return _deepcopy_fields(self, memo, ("rs", "plan"))


@dataclass(eq=False)
class Deployment:
    name: str
    svc: int
    spec: ServiceSpec
    replicas: int
    current: ReplicaSet
    rss: list[ReplicaSet] = field(default_factory=list)
    generation: int = 1
    observed_generation: int = 1
    next_revision: int = 2
    progress_t: float = 0.0
    progress_failed: bool = False
    create_blocked: str = ""           # last FailedCreate message while blocked by the quota

    def live_pods(self) -> list[Pod]:
        return [p for rs in self.rss for p in rs.pods]

    def __deepcopy__(self, memo: dict) -> "Deployment":
        return _deepcopy_fields(self, memo, ("spec", "current", "rss"))


@dataclass(eq=False)
class NodeState:
    index: int
    name: str
    zone: str
    cpu_m: int
    mem_mi: int
    ready: bool = True
    cordoned: bool = False
    images: set = field(default_factory=set)
    down_since: float = math.nan

    def __deepcopy__(self, memo: dict) -> "NodeState":
        return _deepcopy_fields(self, memo, ("images",))


class Cluster:
    """State + controllers. The backend provides ``crash_plan(pod, t)`` (effects and config decide
    whether a container survives its start) and ``image_ok(image, tag)``. ``records=False``: a cluster
    nobody reads (the run loop's no-action reference run's): it keeps neither the k8s events nor the
    lifecycle records the log reads use; its dynamics are the same, moment for moment.

    >>> from apps import load_app
    >>> quiet = Cluster(load_app("online-boutique"), seed=1, records=False)
    >>> quiet.bootstrap(lambda pod, t: None)
    >>> quiet.delete_pods_of(quiet.deployments["frontend"], 0.0), quiet.events, quiet.lifecycle
    (1, [], [])
    """

    def __init__(self, app: AppSpec, seed: int, records: bool = True):
        self.app = app
        self.seed = int(seed)
        self.records = bool(records)
        self.ns = app.namespace
        self.svc_names = [s.name for s in app.services]
        self.svc_index = {n: i for i, n in enumerate(self.svc_names)}
        self.nodes = [NodeState(i, n.name, n.zone, n.cpu_m, n.mem_mi) for i, n in enumerate(app.topology.nodes)]
        self.node_index = {n.name: n.index for n in self.nodes}
        self.deployments: dict[str, Deployment] = {}
        self.pods: list[Pod] = []          # every pod ever, by slot
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._pod_counter = 0
        self._rs_counter = 0
        self.dirty = True                  # pod-derived arrays need a refresh
        self.changed_slots: set[int] = set()   # pods whose state changed since the metric writer looked
        self.touched: set[str] = set()         # Deployments the controller passed over since then
        self.layout_version = 0            # bumps when pods are created or deleted
        #: bumps whenever the pods counted on a node may change (`SimBackend._snapshot`'s per-node counts: non-deleted
        #: pods bound there whose phase is Running or Pending): a pod bound, deleted, or its phase to or from Unknown
        self.placement_version = 0
        self._active: tuple[int, list] = (-1, [])   # active_pods() of a layout version
        self._active_slots: tuple[int, np.ndarray] = (-1, np.zeros(0, dtype=np.intp))   # active_slots() of one
        self._quota_use: tuple[int, int, float] = (-1, 0, 0.0)   # _quota_used() of a layout version
        self._n_active = 0                 # pods in the ReplicaSets' pod lists (len(active_pods()))
        self._max_cpu_req = 0.0            # the largest CPU request (cores) of any pod ever created
        self._zones: tuple[list, np.ndarray] | None = None
        self.events: list[list] = []       # [first_t, last_t, count, type, reason, kind, name, message, component]
        self._event_index: dict[tuple, int] = {}
        self.lifecycle: list[tuple] = []   # (t, svc, pod, what, detail) for logs
        self.crash_plan: Callable[[Pod, float], CrashPlan | None] = lambda pod, t: None
        self.image_ok: Callable[[str, str], bool] = lambda image, tag: True
        self.on_change: Callable[[], None] = lambda: None
        #: ``() -> (the tape the twin records or None, the taped run it follows or None, its calls so far) or
        #: None``: set by a twin (`SimBackend._taped`), for `_placed` and `_draws`
        self.taped: Callable[[], tuple | None] | None = None
        self._retry: set[str] = set()
        self.rolling: set[str] = set()     # Deployments whose rollout is not complete
        self.quota_hard: dict[str, float] = {}
        # per-slot arrays
        cap = 64
        self.p_svc = np.zeros(cap, dtype=np.intp)
        self.p_node = np.zeros(cap, dtype=np.intp)
        self.p_active = np.zeros(cap, dtype=bool)
        self.p_running = np.zeros(cap, dtype=bool)
        self.p_ready = np.zeros(cap, dtype=bool)       # lifecycle readiness (probe passes)
        self.p_lost = np.zeros(cap, dtype=bool)
        self.p_started = np.zeros(cap)
        self.p_cpu_lim = np.zeros(cap)                 # cores (NaN: unset)
        self.p_mem_lim = np.zeros(cap)                 # MiB (NaN: unset)
        self.p_cpu_req = np.zeros(cap)
        self.p_mem_req = np.zeros(cap)
        self.p_restarts = np.zeros(cap)
        self.p_rs = np.zeros(cap, dtype=np.intp)
        self.p_bound = np.zeros(cap, dtype=bool)       # bound to a node (pod.node >= 0)
        self.rs_by_id: list[ReplicaSet] = []

    def __del__(self) -> None:
        # A ReplicaSet and its live pods refer to each other (`ReplicaSet.pods`, `Pod.rs`): the only reference cycles
        # in a cluster's state. The cluster owns both (a twin's `clone` copies them, nothing shares them), so as it
        # goes it empties the pod lists: its pods and ReplicaSets then go with it by reference counting, instead of
        # waiting for the cyclic garbage collector (with the twin's hooks weak, see `SimBackend._bind`, a dropped
        # twin leaves no cyclic garbage).
        for rs in getattr(self, "rs_by_id", ()):
            rs.pods = []

    # ------------------------------------------------------------------ bootstrap
    def new_rs(self, dep_name: str, template: dict, files: dict[str, str], effects: list, meta: dict,
               revision: int, t: float, template_hash_: str | None = None) -> ReplicaSet:
        """``template_hash_``: the template's `template_hash`, when the caller has it."""
        rs = ReplicaSet(self._rs_counter, dep_name, template_hash_ or template_hash(template), template, files,
                        list(effects), meta, revision, t)
        self._rs_counter += 1
        self.rs_by_id.append(rs)
        return rs

    def bootstrap(self, crash_plan: Callable[[Pod, float], CrashPlan | None], files_of=None, meta_of=None,
                  t0: float = -3600.0) -> None:
        """Create every Deployment at revision 1 with its pods Running and Ready since ``t0``."""
        self.crash_plan = crash_plan
        hashes = _base_hashes(self.app)
        for i, s in enumerate(self.app.services):
            tpl = base_template(s)
            files = files_of(s.name) if files_of else {}
            meta = meta_of(s.name) if meta_of else {}
            rs = self.new_rs(s.name, tpl, files, [], meta, 1, t0 - 60.0, hashes[i])
            dep = Deployment(s.name, i, s, s.replicas, rs, [rs], progress_t=t0)
            self.deployments[s.name] = dep
            rs.replicas = s.replicas
            for k in range(s.replicas):
                pod = self._create_pod(dep, rs, t0, quiet=True)
                node = self.node_index[s.node] if k == 0 else self._pick_node(pod)
                self._bind(pod, node if node is not None else self.node_index[s.node], t0, quiet=True)
                self.nodes[pod.node].images.add((tpl["image"], tpl["tag"]))
                pod.phase, pod.cstate, pod.reason, pod.ready = "Running", "running", "", True
                pod.started_t = pod.ready_t = t0
                self.placement_version += 1
                self._sync(pod)
        # quota: generous headroom over the initial footprint
        pods = self.active_pods()
        self.quota_hard = {
            "pods": float(max(20, 3 * len(pods))),
            "requests.cpu": round(3 * float(np.nansum(self.p_cpu_req[[p.slot for p in pods]])) + 1, 1),
            "requests.memory": float(3 * np.nansum(self.p_mem_req[[p.slot for p in pods]]) + 1024) * 2**20,
            "limits.cpu": round(3 * float(np.nansum(self.p_cpu_lim[[p.slot for p in pods]])) + 2, 1),
            "limits.memory": float(3 * np.nansum(self.p_mem_lim[[p.slot for p in pods]]) + 2048) * 2**20,
        }
        self.dirty = True

    # ------------------------------------------------------------------ events
    def event(self, t: float, etype: str, reason: str, kind: str, name: str, message: str,
              component: str = "kubelet") -> None:
        if not self.records:
            return
        key = (kind, name, reason, message)
        idx = self._event_index.get(key)
        if idx is not None and t - self.events[idx][1] < 3600:
            ev = self.events[idx]
            ev[1] = t
            ev[2] += 1
            return
        self._event_index[key] = len(self.events)
        self.events.append([t, t, 1, etype, reason, kind, name, message, component])

    # ------------------------------------------------------------------ pods
    def active_pods(self) -> list[Pod]:
        """Non-deleted pods, by Deployment, ReplicaSet, creation. ReplicaSets' pod lists change only
        when a pod is created or deleted (both bump ``layout_version``; a ReplicaSet joins its
        Deployment without pods), so the list is kept per layout version."""
        hit = self._active
        if hit[0] != self.layout_version:
            hit = self._active = (self.layout_version,
                                  [p for dep in self.deployments.values() for rs in dep.rss for p in rs.pods])
        return list(hit[1])

    def active_slots(self) -> np.ndarray:
        """The slots of `active_pods`, in that order (kept per layout version; read-only)."""
        hit = self._active_slots
        if hit[0] != self.layout_version:
            slots = np.array([p.slot for p in self.active_pods()], dtype=np.intp)
            slots.setflags(write=False)
            hit = self._active_slots = (self.layout_version, slots)
        return hit[1]

    def _grow(self) -> None:
        n = len(self.p_svc) * 2
        for attr in ("p_svc", "p_node", "p_active", "p_running", "p_ready", "p_lost", "p_started", "p_cpu_lim",
                     "p_mem_lim", "p_cpu_req", "p_mem_req", "p_restarts", "p_rs", "p_bound"):
            a = getattr(self, attr)
            b = np.zeros(n, dtype=a.dtype)
            b[: len(a)] = a
            setattr(self, attr, b)

    def _create_pod(self, dep: Deployment, rs: ReplicaSet, t: float, quiet: bool = False) -> Pod:
        self._pod_counter += 1
        name = f"{dep.name}-{rs.hash}-{suffix(self.seed, 'pod', self._pod_counter)}"
        slot = len(self.pods)
        if slot >= len(self.p_svc):
            self._grow()
        pod = Pod(slot, name, dep.svc, rs, t)
        self.pods.append(pod)
        rs.pods.append(pod)
        res = rs.template["resources"]
        self.p_svc[slot] = dep.svc
        self.p_active[slot] = True
        self.p_rs[slot] = rs.id
        self.p_cpu_lim[slot] = res["cpu_limit_m"] / 1000.0 if res.get("cpu_limit_m") else np.nan
        self.p_mem_lim[slot] = float(res["mem_limit_mi"]) if res.get("mem_limit_mi") else np.nan
        self.p_cpu_req[slot] = res["cpu_request_m"] / 1000.0 if res.get("cpu_request_m") else np.nan
        # an unset request defaults to the limit (as the API server does)
        req = res.get("mem_request_mi") or res.get("mem_limit_mi")
        self.p_mem_req[slot] = float(req) if req else np.nan
        if not res.get("cpu_request_m") and res.get("cpu_limit_m"):
            self.p_cpu_req[slot] = res["cpu_limit_m"] / 1000.0
        if self.p_cpu_req[slot] > self._max_cpu_req:   # (NaN: no request, compares False)
            self._max_cpu_req = float(self.p_cpu_req[slot])
        self._n_active += 1
        self.layout_version += 1
        self.dirty = True
        self.changed_slots.add(slot)
        if not quiet:
            if self.records:
                self.event(t, "Normal", "SuccessfulCreate", "ReplicaSet", rs.name, f"Created pod: {name}",
                           "replicaset-controller")
            self._schedule_now(pod, t)
        return pod

    def _sync(self, pod: Pod) -> None:
        s = pod.slot
        self.p_node[s] = max(pod.node, 0)
        self.p_bound[s] = pod.node >= 0
        self.p_running[s] = pod.cstate == "running"
        self.p_ready[s] = pod.ready
        self.p_lost[s] = pod.node_lost
        self.p_started[s] = pod.started_t if pod.cstate == "running" else np.nan
        self.p_restarts[s] = pod.restarts
        self.p_active[s] = not pod.deleted
        self.dirty = True
        self.changed_slots.add(s)

    def _at(self, pod: Pod, t: float, action: str) -> None:
        pod.gen += 1
        pod.next_t, pod.action = t, action
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, pod.slot, pod.gen))

    def _schedule_now(self, pod: Pod, t: float) -> None:
        node = self._placed(pod, t)
        if node is None:
            pod.reason = ""
            self.event(t, "Warning", "FailedScheduling", "Pod", pod.name,
                       f"0/{len(self.nodes)} nodes are available: "
                       f"{sum(1 for n in self.nodes if not n.ready or n.cordoned)} node(s) were unschedulable or not ready, "
                       "insufficient cpu or memory on the others.", "default-scheduler")
            self._at(pod, t + 30.0, "schedule")
            return
        self._bind(pod, node, t)

    def _bind(self, pod: Pod, node: int, t: float, quiet: bool = False) -> None:
        pod.node = node
        pod.reason = "ContainerCreating"
        self.placement_version += 1
        self._sync(pod)
        if quiet:
            return
        if self.records:
            self.event(t, "Normal", "Scheduled", "Pod", pod.name,
                       f"Successfully assigned {self.ns}/{pod.name} to {self.nodes[node].name}", "default-scheduler")
        self._at(pod, t + 0.5, "pull")

    def _placed(self, pod: Pod, t: float) -> int | None:
        """`_pick_node`'s choice for a pod scheduled at ``t``. A twin whose state-changing calls so far equal a
        taped run's (`SimBackend._note`: then it is in that run's state at every moment) finds the node that run
        chose for the same pod at the same moment; a taped run keeps its choices for such followers. (The key
        also holds the pod's ReplicaSet, the pods created so far and the layout version.)"""
        memo = self.taped() if self.taped is not None else None
        if memo is None:
            return self._pick_node(pod)
        keep, found, calls = memo
        key = (calls, t, pod.slot, pod.rs.id, len(self.pods), self.layout_version)
        if found is not None:
            node = found.picks.get(key, _NOT_PLACED)
            if node is not _NOT_PLACED:
                return node
        node = self._pick_node(pod)
        if keep is not None:
            keep.picks[key] = node
        return node

    def _draws(self, rng_key: tuple) -> "KeyedDraws | np.random.Generator":
        """A kubelet moment's generator (``child_rng(*rng_key)``), through the record of a taped run
        (`KeyedDraws`: a twin that records one keeps its draws there; one that follows a run of its seed is
        served them, whatever its calls: a generator's values depend on its seed and keys alone)."""
        memo = self.taped() if self.taped is not None else None
        if memo is None:
            return child_rng(*rng_key)
        keep, found, _ = memo
        return KeyedDraws(keep.draws if keep is not None else found.draws, keep is not None, *rng_key)

    def _pick_node(self, pod: Pod) -> int | None:
        """Feasible node (ready, schedulable, requests fit) with the best score: fewest pods of the
        same revision on the node, then the service's preferred node (its spec node, a soft
        affinity), then fewest same-revision pods in the zone, then the preferred zone, then the
        least requested CPU; ties by node order."""
        spec = self.app.services[pod.svc]
        res = pod.rs.template["resources"]
        need_cpu = (res.get("cpu_request_m") or res.get("cpu_limit_m") or 0) / 1000.0
        need_mem = float(res.get("mem_request_mi") or res.get("mem_limit_mi") or 0)
        n_all = len(self.pods)
        act = self.p_active[:n_all] & self.p_bound[:n_all]   # deleted pods are inactive; unbound ones do not count
        if pod.slot < n_all:
            act[pod.slot] = False      # the pod being placed does not count against itself
        nodes_of = self.p_node[:n_all]
        mine = act & (self.p_rs[:n_all] == pod.rs.id)
        zones = self._zones
        if zones is None:   # nodes and their zones are fixed: (zone names, zone index per node)
            names = sorted({n.zone for n in self.nodes})
            zones = self._zones = (names, np.array([names.index(n.zone) for n in self.nodes], dtype=np.intp))
        pref_zone = next((n.zone for n in self.nodes if n.name == spec.node), None)
        zone_names = zones[0]
        zone_of = zones[1][nodes_of]
        # the counted pods grouped by node, in slot order within a node (what a mask per node selects)
        slots = np.flatnonzero(act)
        by_node = nodes_of[slots]
        order = np.argsort(by_node, kind="stable")
        slots = slots[order]
        bounds = np.searchsorted(by_node[order], np.arange(len(self.nodes) + 1)).tolist()
        # requests with unset ones as 0 (what nansum sums), summed per node as nansum does (np.sum of
        # each node's contiguous run: the same elements in the same order)
        cpu_req = self.p_cpu_req[slots]
        cpu_req[np.isnan(cpu_req)] = 0.0
        mem_req = self.p_mem_req[slots]
        mem_req[np.isnan(mem_req)] = 0.0
        # same-revision pods per node and per zone (integer counts)
        same_node = np.bincount(nodes_of[mine], minlength=len(self.nodes)).tolist()
        same_zone = np.bincount(zone_of[mine], minlength=len(zone_names)).tolist()
        best = None
        for n in self.nodes:
            if not n.ready or n.cordoned:
                continue
            a, b = bounds[n.index], bounds[n.index + 1]
            used_cpu = float(cpu_req[a:b].sum())
            used_mem = float(mem_req[a:b].sum())
            if used_cpu + need_cpu > n.cpu_m / 1000.0 or used_mem + need_mem > n.mem_mi:
                continue
            same = same_node[n.index]
            zone_same = same_zone[zone_names.index(n.zone)]
            score = (same, 0 if n.name == spec.node else 1, zone_same, 0 if n.zone == pref_zone else 1,
                     used_cpu / (n.cpu_m / 1000.0), n.index)
            if best is None or score < best[0]:
                best = (score, n.index)
        return None if best is None else best[1]

    def _delete_pod(self, pod: Pod, t: float, reason: str = "Killing", message: str | None = None) -> None:
        if pod.deleted:
            return
        pod.deleted = True
        pod.deletion_t = t
        self.placement_version += 1
        pod.ready = False
        pod.gen += 1
        pod.next_t = math.inf
        if pod in pod.rs.pods:
            pod.rs.pods.remove(pod)
            self._n_active -= 1
        if pod.cstate == "running":
            if self.records:
                self.event(t, "Normal", reason, "Pod", pod.name, message or f"Stopping container {self.svc_names[pod.svc]}")
                self.lifecycle.append((t, pod.svc, pod.name, "stop", ""))
            pod.lifecycle_seen = True
        self._sync(pod)
        self.layout_version += 1

    # ------------------------------------------------------------------ kubelet lifecycle
    def _process(self, pod: Pod, t: float) -> None:
        action = pod.action
        pod.next_t, pod.action = math.inf, ""
        svc = self.svc_names[pod.svc]
        tpl = pod.rs.template
        rec = self.records   # (the image's text is for the event messages alone)
        image = f"{tpl['image']}:{tpl['tag']}" if rec else ""
        node = self.nodes[pod.node] if pod.node >= 0 else None
        if action == "schedule":
            self._schedule_now(pod, t)
        elif action == "evict":
            self.event(t, "Normal", "TaintManagerEviction", "Pod", pod.name, "Marking for deletion Pod " + f"{self.ns}/{pod.name}",
                       "taint-controller")
            self._delete_pod(pod, t, "Killing", f"Stopping container {svc}")
            self.mark(pod.rs.deployment)
        elif action == "pull":
            ok = self.image_ok(tpl["image"], tpl["tag"])
            if ok and (tpl["image"], tpl["tag"]) in node.images:
                self.event(t, "Normal", "Pulled", "Pod", pod.name,
                           f'Container image "{image}" already present on machine')
                self._at(pod, t + 0.3, "start")
            else:
                self.event(t, "Normal", "Pulling", "Pod", pod.name, f'Pulling image "{image}"')
                rng = self._draws(self._rng_key(pod, action, t))
                dur = float(rng.uniform(1.5, 6.0)) if ok else float(rng.uniform(0.5, 2.0))
                self._at(pod, t + dur, "pulled" if ok else "pullfail")
        elif action == "pulled":
            node.images.add((tpl["image"], tpl["tag"]))
            if rec:
                self.event(t, "Normal", "Pulled", "Pod", pod.name,
                           f'Successfully pulled image "{image}" in {t - pod.created_t:.3f}s')
            self._at(pod, t + 0.3, "start")
        elif action == "pullfail":
            pod.reason = "ErrImagePull"
            self.event(t, "Warning", "Failed", "Pod", pod.name,
                       f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and unpack image '
                       f'"{image}": failed to resolve reference "{image}": {image}: not found')
            self.event(t, "Warning", "Failed", "Pod", pod.name, "Error: ErrImagePull")
            pod.pull_backoff_s = BACKOFF_START_S if pod.pull_backoff_s == 0 else min(BACKOFF_MAX_S, pod.pull_backoff_s * 2)
            self._at(pod, t + 1.0, "pullbackoff")
        elif action == "pullbackoff":
            pod.reason = "ImagePullBackOff"
            self.event(t, "Normal", "BackOff", "Pod", pod.name, f'Back-off pulling image "{image}"')
            self.event(t, "Warning", "Failed", "Pod", pod.name, "Error: ImagePullBackOff")
            self._at(pod, t + pod.pull_backoff_s, "pull")
        elif action == "start":
            if pod.phase != "Running":   # (from Pending: counted as before; from Unknown: counted again)
                self.placement_version += 1
            pod.phase, pod.cstate, pod.reason = "Running", "running", ""
            pod.started_t = t
            pod.ready = False
            if rec:
                self.event(t, "Normal", "Created", "Pod", pod.name, f"Created container {svc}")
                self.event(t, "Normal", "Started", "Pod", pod.name, f"Started container {svc}")
                self.lifecycle.append((t, pod.svc, pod.name, "start", ""))
            plan = self.crash_plan(pod, t)
            pod.plan = plan
            rng = self._draws(self._rng_key(pod, action, t))
            if plan is not None:
                self._at(pod, t + plan.after_s * float(rng.uniform(0.8, 1.2)), "crash")
            else:
                self._at(pod, t + self.ready_delay(pod, rng), "ready")
        elif action == "ready":
            pod.ready = True
            pod.ready_t = t
            if self.records:
                self.lifecycle.append((t, pod.svc, pod.name, "ready", ""))
            self.mark(pod.rs.deployment)
        elif action == "crash":
            plan = pod.plan or CrashPlan("Error", 1, 0.0, "")
            self.terminate(pod, t, plan.reason, plan.exit_code, plan.log, liveness=plan.liveness)
        elif action == "restart":
            self._at(pod, t, "start")
        self._sync(pod)

    def _rng_key(self, pod: Pod, action: str, t: float) -> tuple:
        """The keys of a kubelet moment's generator (`_draws`: made only by the moments that draw, and served from a
        taped run's record where it drew them: building a generator costs more than the rest of the moment)."""
        return (self.seed, "kubelet", pod.name, pod.restarts, action, round(t, 3))

    def ready_delay(self, pod: Pod, rng: "KeyedDraws | np.random.Generator") -> float:
        spec = self.app.services[pod.svc]
        startup = spec.behaviour.startup_s * float(rng.uniform(0.85, 1.25))
        probe = spec.readiness_probe
        if probe is None:
            return startup
        first = probe.initial_delay_s
        if startup <= first:
            return first + float(rng.uniform(0.0, 1.0))
        k = math.ceil((startup - first) / probe.period_s)
        return first + k * probe.period_s + float(rng.uniform(0.0, 1.0))

    def terminate(self, pod: Pod, t: float, reason: str, exit_code: int, log: str, liveness: bool = False) -> None:
        """The container exits (crash, OOM kill, liveness kill); the kubelet restarts it after back-off."""
        if pod.deleted or pod.cstate != "running":
            return
        svc = self.svc_names[pod.svc]
        ran = t - pod.started_t
        pod.last_reason, pod.last_exit = reason, exit_code
        pod.last_started_t, pod.last_finished_t = pod.started_t, t
        pod.restarts += 1
        pod.ready = False
        pod.cstate, pod.reason = "waiting", "CrashLoopBackOff"
        pod.started_t = math.nan
        if reason == "OOMKilled":
            self.event(t, "Warning", "OOMKilling", "Node", self.nodes[pod.node].name,
                       f"Memory cgroup out of memory: Killed process (container {svc}) in pod {pod.name}", "kernel-monitor")
        if liveness:
            self.event(t, "Warning", "Unhealthy", "Pod", pod.name, "Liveness probe failed: connection refused")
            self.event(t, "Normal", "Killing", "Pod", pod.name, f"Container {svc} failed liveness probe, will be restarted")
        if self.records:
            self.lifecycle.append((t, pod.svc, pod.name, "exit", (reason, exit_code, log)))
        pod.lifecycle_seen = True
        pod.backoff_s = BACKOFF_START_S if (pod.backoff_s == 0 or ran >= BACKOFF_RESET_S) else min(BACKOFF_MAX_S, pod.backoff_s * 2)
        if self.records:
            self.event(t, "Warning", "BackOff", "Pod", pod.name, f"Back-off restarting failed container {svc} in pod {pod.name}")
        self._at(pod, t + pod.backoff_s, "restart")
        self._sync(pod)
        self.mark(pod.rs.deployment)

    def crash_now(self, pod: Pod, t: float, plan: CrashPlan) -> None:
        """Make a running container exit at ``t`` (a crash effect that starts while it runs)."""
        if pod.cstate == "running" and not pod.deleted:
            pod.plan = plan
            self._at(pod, t, "crash")

    # ------------------------------------------------------------------ controllers
    def mark(self, dep_name: str) -> None:
        self._retry.add(dep_name)

    def run_until(self, T: float) -> None:
        """Process every pod moment and controller reaction up to and including ``T``."""
        heap = self._heap
        while heap and heap[0][0] <= T:
            t, _, slot, gen = heapq.heappop(heap)
            pod = self.pods[slot]
            if pod.gen != gen or pod.deleted:
                continue
            self._process(pod, t)
            if self._retry:
                self.reconcile_marked(t)
        if self._retry:
            self.reconcile_marked(T)

    def reconcile_marked(self, t: float) -> None:
        names = sorted(self._retry)
        self._retry = set()
        for n in names:
            self.reconcile(self.deployments[n], t)

    def reconcile(self, dep: Deployment, t: float) -> None:
        """One pass of the Deployment controller (rolling update) and the ReplicaSet controller."""
        self.touched.add(dep.name)
        d = dep.replicas
        new = dep.current
        olds = [rs for rs in dep.rss if rs is not new and (rs.replicas > 0 or rs.pods)]
        surge, unavail = rolling_params(d)
        before_new = new.ready_count()
        if not olds:
            if new.replicas != d:
                self._scale_rs(dep, new, d, t)
        else:
            total = new.replicas + sum(rs.replicas for rs in olds)
            max_total = d + surge
            if total < max_total and new.replicas < d:
                self._scale_rs(dep, new, min(d, new.replicas + (max_total - total)), t)
            all_count = new.replicas + sum(rs.replicas for rs in olds)
            min_avail = d - unavail
            new_unavail = new.replicas - new.ready_count()
            max_down = all_count - min_avail - new_unavail
            if max_down > 0:
                for rs in sorted(olds, key=lambda r: r.created_t):
                    unhealthy = rs.replicas - rs.ready_count()
                    k = min(max_down, max(0, unhealthy))
                    if k > 0:
                        self._scale_rs(dep, rs, rs.replicas - k, t)
                        max_down -= k
                available = sum(rs.ready_count() for rs in dep.rss)
                down = available - min_avail
                for rs in sorted(olds, key=lambda r: r.created_t):
                    if down <= 0:
                        break
                    k = min(rs.replicas, down)
                    if k > 0:
                        self._scale_rs(dep, rs, rs.replicas - k, t)
                        down -= k
            # The ReplicaSet updates above requeue the Deployment at once (as the real controller's RS
            # informer does): room freed by scaling old ReplicaSets down goes to the new one in the same
            # moment, otherwise a new template whose old ReplicaSets were all unhealthy never scales up.
            total = new.replicas + sum(rs.replicas for rs in olds)
            if total < max_total and new.replicas < d:
                self._scale_rs(dep, new, min(d, new.replicas + (max_total - total)), t)
        for rs in dep.rss:
            if len(rs.pods) != rs.replicas:   # `_sync_rs` has nothing to do otherwise
                self._sync_rs(dep, rs, t)
        if new.ready_count() > before_new or (not olds and new.ready_count() >= d):
            dep.progress_t = t
        if self.rollout_complete(dep):
            dep.progress_failed = False
            self.rolling.discard(dep.name)
        else:
            self.rolling.add(dep.name)
        dep.observed_generation = dep.generation

    def rollout_complete(self, dep: Deployment) -> bool:
        new = dep.current
        return (new.replicas == dep.replicas and new.ready_count() == dep.replicas
                and all(len(rs.pods) == 0 for rs in dep.rss if rs is not new))

    def next_event_time(self) -> float:
        """Earliest pending pod moment or progress deadline (inf when the cluster is at rest)."""
        heap = self._heap
        while heap and (self.pods[heap[0][2]].gen != heap[0][3] or self.pods[heap[0][2]].deleted):
            heapq.heappop(heap)
        t = heap[0][0] if heap else math.inf
        for name in self.rolling:
            dep = self.deployments[name]
            if not dep.progress_failed:
                t = min(t, dep.progress_t + PROGRESS_DEADLINE_S + 1e-6)
        return t

    def check_progress(self, t: float) -> None:
        for name in sorted(self.rolling):
            dep = self.deployments[name]
            if dep.progress_failed or self.rollout_complete(dep):
                continue
            if t - dep.progress_t > PROGRESS_DEADLINE_S:
                dep.progress_failed = True
                self.touched.add(dep.name)
                self.event(t, "Warning", "ProgressDeadlineExceeded", "Deployment", dep.name,
                           f'ReplicaSet "{dep.current.name}" has timed out progressing.', "deployment-controller")

    def _scale_rs(self, dep: Deployment, rs: ReplicaSet, n: int, t: float) -> None:
        if n == rs.replicas:
            return
        if self.records:
            verb = "up" if n > rs.replicas else "down"
            self.event(t, "Normal", "ScalingReplicaSet", "Deployment", dep.name,
                       f"Scaled {verb} replica set {rs.name} from {rs.replicas} to {n}", "deployment-controller")
        rs.replicas = n

    def _quota_used(self) -> tuple[int, float]:
        """(active pods, their summed CPU requests) of this layout version (requests are fixed per slot)."""
        hit = self._quota_use
        if hit[0] != self.layout_version:
            slots = self.active_slots()
            used_cpu = 0.0
            if len(slots):   # np.nansum: NaN set to 0, then the sum
                req = self.p_cpu_req[slots]
                req[np.isnan(req)] = 0.0
                used_cpu = float(req.sum())
            hit = self._quota_use = (self.layout_version, len(slots), used_cpu)
        return hit[1], hit[2]

    def _quota_block(self, rs: ReplicaSet) -> str:
        res = rs.template["resources"]
        # far from both limits: nothing to sum (the summed requests are at most active pods x the largest
        # request; the margins cover the float sum's rounding many times over)
        if self._n_active + 1 <= self.quota_hard.get("pods", math.inf) and \
                (self._n_active * self._max_cpu_req * (1.0 + 1e-9) + (res.get("cpu_request_m") or 0) / 1000.0) \
                * (1.0 + 1e-9) <= self.quota_hard.get("requests.cpu", math.inf):
            return ""
        n_pods, used_cpu = self._quota_used()
        used_pods = n_pods + 1
        if used_pods > self.quota_hard.get("pods", math.inf):
            return (f'pods "{rs.name}-xxxxx" is forbidden: exceeded quota: {self.ns}-quota, requested: pods=1, '
                    f'used: pods={n_pods}, limited: pods={int(self.quota_hard["pods"])}')
        need = (res.get("cpu_request_m") or 0) / 1000.0
        if used_cpu + need > self.quota_hard.get("requests.cpu", math.inf):
            return (f'pods "{rs.name}-xxxxx" is forbidden: exceeded quota: {self.ns}-quota, requested: requests.cpu='
                    f'{res.get("cpu_request_m")}m, used: requests.cpu={int(used_cpu * 1000)}m, '
                    f'limited: requests.cpu={int(self.quota_hard["requests.cpu"] * 1000)}m')
        return ""

    def _sync_rs(self, dep: Deployment, rs: ReplicaSet, t: float) -> None:
        live = rs.pods
        if len(live) < rs.replicas:
            for _ in range(rs.replicas - len(live)):
                block = self._quota_block(rs)
                if block:
                    dep.create_blocked = block
                    self.event(t, "Warning", "FailedCreate", "ReplicaSet", rs.name, f"Error creating: {block}",
                               "replicaset-controller")
                    self._retry.add(dep.name)
                    return
                self._create_pod(dep, rs, t)
            dep.create_blocked = ""
        elif len(live) > rs.replicas:
            order = sorted(live, key=lambda p: (p.node < 0, p.available, -p.restarts, -p.created_t, p.name))
            for pod in order[: len(live) - rs.replicas]:
                self._delete_pod(pod, t)
                if self.records:
                    self.event(t, "Normal", "SuccessfulDelete", "ReplicaSet", rs.name, f"Deleted pod: {pod.name}",
                               "replicaset-controller")

    # ------------------------------------------------------------------ operations
    def set_template(self, dep: Deployment, rs: ReplicaSet, t: float) -> None:
        """Make ``rs`` the Deployment's current revision and start rolling to it."""
        if rs not in dep.rss:
            dep.rss.append(rs)
        rs.revision = dep.next_revision
        dep.next_revision += 1
        dep.current = rs
        dep.generation += 1
        dep.progress_t = t
        dep.progress_failed = False
        self.reconcile(dep, t)

    def find_rs(self, dep: Deployment, template: dict, template_hash_: str | None = None) -> ReplicaSet | None:
        h = template_hash_ or template_hash(template)
        for rs in dep.rss:
            if rs.hash == h:
                return rs
        return None

    def scale(self, dep: Deployment, n: int, t: float) -> None:
        dep.replicas = n
        dep.generation += 1
        self.reconcile(dep, t)

    def delete_pods_of(self, dep: Deployment, t: float) -> int:
        pods = dep.live_pods()
        for p in pods:
            self._delete_pod(p, t)
        self.reconcile(dep, t)
        return len(pods)

    def set_node_ready(self, node: int, ready: bool, t: float) -> None:
        n = self.nodes[node]
        if n.ready == ready:
            return
        n.ready = ready
        if not ready:
            n.down_since = t
            self.event(t, "Normal", "NodeNotReady", "Node", n.name, f"Node {n.name} status is now: NodeNotReady",
                       "node-controller")
            for p in self.active_pods():
                if p.node == node:
                    p.node_lost = True
                    p.phase = "Unknown" if p.phase == "Running" else p.phase
                    self.placement_version += 1
                    self.event(t, "Warning", "NodeNotReady", "Pod", p.name, "Node is not ready", "node-controller")
                    self._at(p, t + POD_EVICTION_TIMEOUT_S, "evict")
                    self._sync(p)
                    self.mark(p.rs.deployment)
        else:
            n.down_since = math.nan
            self.event(t, "Normal", "NodeReady", "Node", n.name, f"Node {n.name} status is now: NodeReady", "kubelet")
            for p in self.active_pods():
                if p.node == node and p.node_lost:
                    p.node_lost = False
                    if p.cstate == "running":
                        p.phase = "Running"
                        self.placement_version += 1
                        self._at(p, t + 1.0, "ready")
                    else:
                        self._at(p, t + 1.0, "restart" if p.cstate == "waiting" and p.reason == "CrashLoopBackOff" else "pull")
                    self._sync(p)
            for p in self.active_pods():   # pods waiting for a schedulable node
                if p.node < 0:
                    self._at(p, t, "schedule")
        self.dirty = True

    def cordon(self, node: int, on: bool, t: float) -> None:
        n = self.nodes[node]
        n.cordoned = on
        self.event(t, "Normal", "NodeNotSchedulable" if on else "NodeSchedulable", "Node", n.name,
                   f"Node {n.name} status is now: {'NodeNotSchedulable' if on else 'NodeSchedulable'}", "kubelet")
        if not on:
            for p in self.active_pods():
                if p.node < 0:
                    self._at(p, t, "schedule")

    def drain(self, node: int, t: float) -> int:
        self.cordon(node, True, t)
        victims = [p for p in self.active_pods() if p.node == node]
        for p in victims:
            self.event(t, "Normal", "Evicted", "Pod", p.name, "Evicted by drain", "kubectl")
            self._delete_pod(p, t)
            self.mark(p.rs.deployment)
        self.reconcile_marked(t)
        return len(victims)


def base_template(s: ServiceSpec) -> dict[str, Any]:
    r = s.resources
    return {"image": s.image, "tag": s.tag, "env": dict(sorted(s.env.items())),
            "resources": {"cpu_request_m": r.cpu_request_m, "cpu_limit_m": r.cpu_limit_m,
                          "mem_request_mi": r.mem_request_mi, "mem_limit_mi": r.mem_limit_mi},
            "restarted_at": None}


#: id(app) -> (app, the `template_hash` of each service's `base_template`), shared by all clusters of the app
_BASE_HASHES: dict[int, tuple[AppSpec, list[str]]] = {}


def _base_hashes(app: AppSpec) -> list[str]:
    """The `template_hash` of every service's `base_template`, in service order (a pure function of the app
    model, which no cluster mutates: made once per app; a handful of apps per process)."""
    hit = _BASE_HASHES.get(id(app))
    if hit is None or hit[0] is not app:
        if len(_BASE_HASHES) >= 16:   # (bounded: models made on the fly, in tests)
            _BASE_HASHES.clear()
        hit = _BASE_HASHES[id(app)] = (app, [template_hash(base_template(s)) for s in app.services])
    return hit[1]


def rolling_params(d: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) for 25 %/25 % as the Deployment controller rounds them."""
    surge = math.ceil(0.25 * d)
    unavail = math.floor(0.25 * d)
    if surge == 0 and unavail == 0:
        unavail = 1
    return surge, unavail

"""Compact per-tick history: what the lazy readers (logs, traces) synthesise from, and what the
health reads answer for a past tick (``service_health(s, at=t)``, ``backend.at(t)``).

Per tick: every call node's rate, latency, failure, unreachable and timeout shares (float32, for
logs and traces); per edge, path and service the numbers of the health reads (float64, so a read
for tick ``t`` equals the read made right after advancing to ``t``); ready endpoints, desired
replicas and restarts per service; and the *epoch* (the cluster state snapshot taken at the last
state refresh) each tick ran under: ready pods by revision, effects in force, pods per node. Arrays
grow by doubling; a 90-minute Online Boutique run keeps well under 1 MB.

>>> from apps import load_app
>>> from sremarathon_env.backends.sim.model import CompiledApp
>>> h = History(CompiledApp(load_app("online-boutique")))
>>> h.node.shape[0], h.edge.shape[0], h.path.shape[0], h.svc.shape[0]
(7, 6, 5, 12)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sremarathon_env.backends.sim.model import CompiledApp

FIELDS = ("node_rate", "node_lat", "node_fail", "node_unreach", "node_timeout", "node_sigma", "node_e_app")
EDGE_FIELDS = ("rate", "fail", "lat_src", "sigma", "own_fail", "own_lat")
PATH_FIELDS = ("req_rate", "fail", "p95", "degraded", "slow")
#: per service: calls into it (rate, failed, rate x latency, rate x sigma), utilisation, memory use of
#: the fullest running pod (share of its limit), consumer lag, ready endpoints, desired replicas, restarts;
#: then the calls failing at their own hop into it and rate x own latency (traffic.py, point 5)
SVC_FIELDS = ("rate", "fail", "lat_w", "sig_w", "rho", "mem_util", "lag", "ready", "desired", "restarts",
              "own_fail", "own_lat_w")


@dataclass(frozen=True)
class Epoch:
    """Cluster state between two refreshes, as the health reads of a past tick need it."""

    ready_svc: np.ndarray        # service of each ready pod
    ready_rev: np.ndarray        # revision of each ready pod's ReplicaSet
    active_effects: frozenset    # effect handles in force
    pods_on_node: dict           # node name -> non-deleted pods bound there, phase Running or Pending
    revisions: dict = field(default_factory=dict, compare=False)   # service index -> {revision: ready pods}

    def serving(self, svc: int) -> dict[int, int]:
        hit = self.revisions.get(svc)
        if hit is None:
            hit = {}
            for r in self.ready_rev[self.ready_svc == svc].tolist():
                hit[r] = hit.get(r, 0) + 1
            self.revisions[svc] = hit
        return dict(hit)


class History:
    def __init__(self, m: CompiledApp, capacity: int = 384):
        self.m = m
        self.n = 0
        self.cap = capacity
        self.node = np.zeros((len(FIELDS), capacity, m.N), dtype=np.float32)
        self.ready = np.zeros((capacity, m.S), dtype=np.float32)
        self.reason = np.zeros((capacity, m.E), dtype=np.int8)
        self.edge = np.zeros((len(EDGE_FIELDS), capacity, m.E))
        self.path = np.zeros((len(PATH_FIELDS), capacity, m.P))
        self.svc = np.zeros((len(SVC_FIELDS), capacity, m.S))
        self.epoch_of = np.full(capacity, -1, dtype=np.int32)
        self.epochs: list[Epoch] = []

    def __deepcopy__(self, memo: dict) -> "History":
        """A copy of the recorded ticks only (capacity past them is zeros, as growth would add), sharing
        the epochs (frozen; their serving cache is a pure function of their fields)."""
        new = History.__new__(History)
        memo[id(self)] = new
        new.m, new.n = self.m, self.n
        cap = min(self.cap, max(32, 2 * self.n))
        new.cap = cap
        for name in ("node", "edge", "path", "svc"):
            setattr(new, name, getattr(self, name)[:, :cap].copy())
        new.ready, new.reason, new.epoch_of = self.ready[:cap].copy(), self.reason[:cap].copy(), self.epoch_of[:cap].copy()
        new.epochs = list(self.epochs)
        return new

    def _grow(self, need: int) -> None:
        cap = max(need, self.cap * 2)

        def grow(a: np.ndarray, axis: int, fill=0) -> np.ndarray:
            shape = list(a.shape)
            shape[axis] = cap
            b = np.full(shape, fill, dtype=a.dtype)
            idx = [slice(None)] * a.ndim
            idx[axis] = slice(0, self.cap)
            b[tuple(idx)] = a
            return b

        self.node, self.edge, self.path, self.svc = (grow(a, 1) for a in (self.node, self.edge, self.path, self.svc))
        self.ready, self.reason = grow(self.ready, 0), grow(self.reason, 0)
        self.epoch_of = grow(self.epoch_of, 0, -1)
        self.cap = cap

    def record(self, k0: int, out, ready: np.ndarray, reason: np.ndarray, e_app: np.ndarray,
               svc_rows: np.ndarray | None = None, epoch: int | None = None) -> None:
        """Store a block of ticks ``k0 .. k0+K-1`` (outputs with a leading tick axis; ``svc_rows`` is
        (K, len(SVC_FIELDS), S)); their cluster state is ``epoch`` (default: the latest one)."""
        K = out.node_rate.shape[0]
        if k0 + K > self.cap:
            self._grow(k0 + K)
        nd = self.node[:, k0:k0 + K]
        nd[0] = out.node_rate
        nd[1] = out.node_lat
        nd[2] = out.node_fail
        nd[3] = out.node_unreach
        nd[4] = out.node_timeout
        nd[5] = out.node_sigma
        nd[6] = e_app
        self.ready[k0:k0 + K] = ready
        self.reason[k0:k0 + K] = reason
        ed = self.edge[:, k0:k0 + K]
        ed[0], ed[1], ed[2], ed[3] = out.edge_rate, out.edge_fail, out.edge_lat_src, out.edge_sigma
        ed[4], ed[5] = out.edge_own_fail, out.edge_own_lat
        pa = self.path[:, k0:k0 + K]
        pa[0], pa[1], pa[2], pa[3], pa[4] = (out.path_req_rate, out.path_fail, out.path_p95, out.path_degraded,
                                             out.path_slow)
        if svc_rows is not None:
            self.svc[:, k0:k0 + K] = svc_rows.transpose(1, 0, 2)
        self.epoch_of[k0:k0 + K] = len(self.epochs) - 1 if epoch is None else epoch
        self.n = max(self.n, k0 + K)

    def add_epoch(self, epoch: Epoch, from_tick: int | None = None) -> None:
        """A new cluster state, in force from the next recorded tick (or from ``from_tick`` on)."""
        self.epochs.append(epoch)
        if from_tick is not None:
            if from_tick >= self.cap:
                self._grow(from_tick + 1)
            self.epoch_of[from_tick] = len(self.epochs) - 1

    def field(self, name: str, tick: int) -> np.ndarray:
        return self.node[FIELDS.index(name), tick]

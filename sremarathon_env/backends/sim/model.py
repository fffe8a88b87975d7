"""The app compiled into arrays: services, edges and every call of every request path as a node.

Each request path is a tree of calls rooted at the entry service. All trees are flattened into one
node array (root nodes first). The tree structure is precompiled into matrices so that one tick of
traffic is a handful of numpy operations:

- ``A_lat[n, m]``: calls of node ``m`` made inside one call of node ``n`` (synchronous subtree,
  ``A_lat[n, n] = 1``): subtree latency is ``A_lat @ per_call_ms``.
- ``A_fail[n, m]``: the same, through ``fail`` edges only: ``log P(n succeeds) = A_fail @ log(1 - e)``.
- ``B_deg[p, m]``: calls of a ``degrade`` node ``m`` whose failure degrades path ``p``'s request.

>>> from apps import load_app
>>> m = CompiledApp(load_app("online-boutique"))
>>> m.S, m.P, m.svc_index["frontend"], m.edges[0]
(11, 6, 0, (-1, 0))
>>> bool(m.A_lat[m.root_nodes[0], m.root_nodes[0]] == 1.0)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apps.spec import AppSpec, Call

ON_ERROR = {"fail": 0, "degrade": 1, "ignore": 2}


@dataclass
class NodeInfo:
    path: int
    parent: int
    svc: int
    edge: int
    op: str
    count: float          # calls per parent call
    mult: float           # calls per load task (root: entry HTTP requests per task)
    on_error: int
    deadline_ms: float
    asynchronous: bool    # this call (or an ancestor call) is fire-and-forget
    depth: int


class CompiledApp:
    def __init__(self, app: AppSpec):
        self.app = app
        self.svc_names = [s.name for s in app.services]
        self.S = len(self.svc_names)
        self.svc_index = {n: i for i, n in enumerate(self.svc_names)}
        # edges: 0 = load generator -> entry; then the app's edges in declaration order
        self.entry = self.svc_index[app.entry_service]
        self.edges: list[tuple[int, int]] = [(-1, self.entry)]
        self.edge_specs = [None]
        for e in app.edges:
            self.edges.append((self.svc_index[e.caller], self.svc_index[e.callee]))
            self.edge_specs.append(e)
        self.E = len(self.edges)
        self.edge_index = {(self._name(c), self._name(d)): i for i, (c, d) in enumerate(self.edges)}
        self.edge_caller = np.array([c for c, _ in self.edges], dtype=np.intp)
        self.edge_callee = np.array([d for _, d in self.edges], dtype=np.intp)
        self.edge_async = np.array([bool(s.asynchronous) if s is not None else False for s in self.edge_specs])
        self.edge_protocol = ["http"] + [e.protocol for e in app.edges]
        # paths
        paths = app.load.paths
        self.P = len(paths)
        self.path_names = [p.name for p in paths]
        self.path_methods = [p.method for p in paths]
        weights = np.array([p.weight for p in paths], dtype=float)
        self.path_share = weights / weights.sum()
        self.path_rpt = np.array([p.requests_per_task for p in paths], dtype=float)
        # nodes
        nodes: list[NodeInfo] = []
        for pi, p in enumerate(paths):
            nodes.append(NodeInfo(pi, -1, self.entry, 0, p.name, p.requests_per_task, p.requests_per_task,
                                  0, np.inf, False, 0))
        self.root_nodes = np.arange(self.P, dtype=np.intp)

        def walk(parent: int, caller: int, calls: list[Call], depth: int, pi: int) -> None:
            for c in calls:
                callee = self.svc_index[c.to]
                ei = self.edge_index[(self.svc_names[caller], c.to)]
                spec = self.edge_specs[ei]
                on_err = c.on_error or spec.on_error
                par = nodes[parent]
                mult = c.count * (par.mult if parent >= self.P else par.mult / par.count)
                nodes.append(NodeInfo(pi, parent, callee, ei, c.op, c.count, mult, ON_ERROR[on_err],
                                      spec.deadline_ms if spec.deadline_ms else np.inf,
                                      bool(spec.asynchronous) or par.asynchronous, depth))
                walk(len(nodes) - 1, callee, c.calls, depth + 1, pi)

        for pi, p in enumerate(paths):
            walk(pi, self.entry, p.calls, 1, pi)
        self.nodes = nodes
        N = self.N = len(nodes)
        self.node_path = np.array([n.path for n in nodes], dtype=np.intp)
        self.node_parent = np.array([n.parent for n in nodes], dtype=np.intp)
        self.node_svc = np.array([n.svc for n in nodes], dtype=np.intp)
        self.node_edge = np.array([n.edge for n in nodes], dtype=np.intp)
        self.node_mult = np.array([n.mult for n in nodes], dtype=float)
        self.node_count = np.array([n.count for n in nodes], dtype=float)
        self.node_on_error = np.array([n.on_error for n in nodes], dtype=np.int8)
        self.node_deadline = np.array([n.deadline_ms for n in nodes], dtype=float)
        self.node_async = np.array([n.asynchronous for n in nodes], dtype=bool)
        self.node_depth = np.array([n.depth for n in nodes], dtype=np.intp)
        self.node_op = [n.op for n in nodes]
        self.node_is_root = np.zeros(N, dtype=bool)
        self.node_is_root[: self.P] = True
        self.children: list[list[int]] = [[] for _ in range(N)]
        for i, n in enumerate(nodes):
            if n.parent >= 0:
                self.children[n.parent].append(i)
        # matrices (row n = one call of n; root rows count one task)
        A_lat = np.zeros((N, N))
        A_fail = np.zeros((N, N))
        for n in range(N - 1, -1, -1):
            A_lat[n, n] = 1.0
            A_fail[n, n] = 1.0
            for c in self.children[n]:
                if nodes[c].asynchronous and not nodes[n].asynchronous:
                    continue  # fire-and-forget: neither latency nor errors flow back
                A_lat[n] += nodes[c].count * A_lat[c]
                if nodes[c].on_error == 0:
                    A_fail[n] += nodes[c].count * A_fail[c]
        B_deg = np.zeros((self.P, N))
        for m in range(N):
            par = nodes[m].parent
            if par >= 0 and nodes[m].on_error == 1 and not nodes[m].asynchronous:
                r = nodes[m].path
                B_deg[r, m] = A_fail[r, par] * nodes[m].count
        self.A_lat, self.A_fail, self.B_deg = A_lat, A_fail, B_deg
        self.deadline_nodes = np.flatnonzero(np.isfinite(self.node_deadline) & ~self.node_async)
        self.A_lat_dl = A_lat[:, self.deadline_nodes].copy()
        # per-service static parameters
        svcs = app.services
        self.service_ms = np.array([s.behaviour.service_ms for s in svcs])
        self.cpu_ms_per_call = np.array([s.behaviour.cpu_ms_per_call for s in svcs])
        self.mem_base_mi = np.array([s.behaviour.mem_base_mi for s in svcs])
        self.mem_per_rps_mi = np.array([s.behaviour.mem_per_rps_mi for s in svcs])
        self.intrinsic_error = np.array([s.behaviour.error_rate for s in svcs])
        # nodes used by traffic per edge (edges never reached by a path carry no traffic)
        self.edge_used = np.bincount(self.node_edge, minlength=self.E) > 0
        # topology
        self.node_names = [n.name for n in app.topology.nodes]
        self.zones = sorted({n.zone for n in app.topology.nodes})
        self.Z = len(self.zones)
        self.node_zone = np.array([self.zones.index(n.zone) for n in app.topology.nodes], dtype=np.intp)
        # async consumer edges (broker -> consumer or producer -> consumer): one lag series each
        self.async_edges = [i for i in range(1, self.E) if self.edge_async[i] and self.edge_used[i]]

    def _name(self, i: int) -> str:
        return "loadgenerator" if i < 0 else self.svc_names[i]

    def workload(self, i: int) -> str:
        return self._name(i)

    def calls_per_task(self) -> np.ndarray:
        """(P, S) matrix: calls each service receives per load task of each path."""
        M = np.zeros((self.P, self.S))
        np.add.at(M, (self.node_path, self.node_svc), self.node_mult)
        return M

"""Per-tick traffic: request rates, latency, errors and degradation over the compiled call trees.

All arrays, no per-request objects. One call of ``step`` costs a few dozen numpy operations:

1. node rates = task rate of its path x calls per task; service and edge rates by ``bincount``;
2. utilisation per service = CPU demand / (ready replicas x CPU limit) gives an M/M/1-style queueing
   factor (capped) for the service time, and past saturation a shed (timeout) error share;
3. per-call latency = own time + network (zone mix of the edge, netem delay); subtree latency summed
   up the tree level by level (what ``A_lat @ x`` says), with deadline edges truncating (a lognormal's expected overshoot is removed and the
   overshooting share becomes an error on that edge);
4. errors: unreachable (no endpoints, refused, no such host), application (effects, shed, failed
   ``fail`` children via ``A_fail``), timeouts; degradation of entry requests via ``B_deg``;
5. *own* part of each hop (what fault probes read, so that overlapping faults do not mask each other's
   repair): a call fails at its own hop when it cannot reach the callee, the callee answers with its
   own application error (effects, intrinsic) or the caller's deadline on this call expires; errors
   the callee only propagates from its downstream and the shedding of a saturated callee (a load
   condition, seen in its CPU utilisation) are not its own. Own latency is network + added latency +
   the callee's queued service time, without its downstream calls.

>>> from apps import load_app
>>> from sremarathon_env.backends.sim.model import CompiledApp
>>> m = CompiledApp(load_app("online-boutique"))
>>> tm = TrafficModel(m)
>>> inp = tm.healthy_inputs()
>>> out = tm.step(np.full((1, m.P), 0.3), inp)
>>> bool(out.path_fail.max() < 0.01), bool(5 < out.path_p95.max() < 2500)
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sremarathon_env.backends.sim.model import CompiledApp
from sremarathon_env.backends.sim.util import norm_cdf
from sremarathon_env.telemetry.catalogue import LATENCY_BUCKETS_MS

SLOW_MS = 2500.0
BASE_SIGMA = 0.45
Z95 = 1.6448536269514722
LOG_BUCKETS = np.log(np.array(LATENCY_BUCKETS_MS, dtype=float))
EPS = 1e-12


@dataclass
class TickInputs:
    """What the cluster and the effects say for this tick (arrays rebuilt only when they change)."""

    ready: np.ndarray          # (S,) ready endpoints per service
    capacity: np.ndarray       # (S,) CPU cores available to serve (ready pods x limit)
    burn: np.ndarray           # (S,) extra CPU demand in cores (cpu_burn effects, whole service)
    lat_add: np.ndarray        # (N,) ms added to each call (latency effects, knobs)
    e_app: np.ndarray          # (N,) application error ratio of each call (effects, wrong target)
    e_unreach: np.ndarray      # (N,) share of calls that cannot reach the callee (edge faults, addresses)
    net_ms: np.ndarray         # (N,) network latency of each call (zone mix + netem)
    no_endpoints: np.ndarray   # (S,) bool: Service selects nothing

    def __post_init__(self) -> None:
        self._x_fixed = None
        self._raw = None   # (`SimBackend._build_inputs`: the bytes it was made of, when it made it)
        self._row = None   # (`StackedInputs`: the prepared float fields as one row, once stacked)


@dataclass
class TickOutputs:
    node_rate: np.ndarray      # every field has a leading tick axis (K, ...)
    node_lat: np.ndarray       # mean latency of one call incl. subtree (source view)
    node_fail: np.ndarray      # share of calls that fail (as seen by the caller)
    node_unreach: np.ndarray   # share failing before reaching the callee
    node_timeout: np.ndarray   # share failing by caller deadline
    node_sigma: np.ndarray
    svc_rate: np.ndarray
    svc_rho: np.ndarray
    svc_demand: np.ndarray     # cores
    path_req_rate: np.ndarray  # entry HTTP requests/s per path
    path_fail: np.ndarray
    path_degraded: np.ndarray
    path_slow: np.ndarray
    path_mean: np.ndarray      # ms per entry request
    path_p50: np.ndarray
    path_p95: np.ndarray
    edge_rate: np.ndarray      # (E,) calls/s (source side)
    edge_reached: np.ndarray   # (E,) calls/s reaching the destination
    edge_fail: np.ndarray      # (E,) failed calls/s as the source sees them
    edge_unreach: np.ndarray
    edge_timeout: np.ndarray
    edge_app: np.ndarray       # app errors/s (destination answers 5xx)
    edge_lat_src: np.ndarray   # mean ms per call, source view
    edge_lat_dst: np.ndarray   # mean ms per call, destination view (no network)
    edge_sigma: np.ndarray
    # the hop's OWN part (see ``own`` in the module docstring): failed calls/s and mean ms per call
    edge_own_fail: np.ndarray  # (E,) calls/s failing at this hop (unreachable, callee app errors, deadline)
    edge_own_lat: np.ndarray   # (E,) mean ms per call without the callee's downstream calls


class _Groups:
    """Column sums by group without BLAS: ``sum(X)[:, g] = sum of X[:, j] for j in group g``. (Gathers along
    the last axis use ``take``: the values ``X[..., order]`` has, without the fancy-indexing machinery.)"""

    def __init__(self, group_of: np.ndarray, n_groups: int, weight: np.ndarray | None = None):
        order = np.argsort(group_of, kind="stable")
        g = group_of[order]
        self.order = order
        self.starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, dtype=np.intp)
        self.present = g[self.starts] if len(g) else np.zeros(0, dtype=np.intp)
        self.n = n_groups
        self.weight = None if weight is None else weight[order]
        self.full = len(self.present) == n_groups   # every group has members: no zero columns to fill

    def __call__(self, X: np.ndarray) -> np.ndarray:
        if self.full:
            cols = X.take(self.order, axis=-1)
            if self.weight is not None:
                cols = cols * self.weight
            return np.add.reduceat(cols, self.starts, axis=-1)
        out = np.zeros(X.shape[:-1] + (self.n,))
        if len(self.order):
            cols = X.take(self.order, axis=-1)
            if self.weight is not None:
                cols = cols * self.weight
            out[..., self.present] = np.add.reduceat(cols, self.starts, axis=-1)
        return out


def add_children(LL: np.ndarray, idx: np.ndarray, W: np.ndarray, starts: np.ndarray, parents: np.ndarray) -> None:
    """``LL[:, :, parents] += np.add.reduceat(LL[:, :, idx] * W, starts, axis=2)`` (distinct parents), the
    same floats: the children's weighted sums are added to the parents' values as ``r + LL[parents]``, the
    one IEEE addition ``LL[parents] + r`` is (commutative), gathered with ``take`` (cheaper than ``+=``
    through fancy indexing, which gathers, adds and scatters the parents)."""
    r = np.add.reduceat(np.multiply(LL.take(idx, axis=2), W), starts, axis=2)
    r += LL.take(parents, axis=2)
    LL[:, :, parents] = r


class TrafficModel:
    """Vectorised over ticks too: ``task_rate`` is (K, P) for K ticks with the same inputs.

    Subtree sums run level by level up the call trees (deepest calls first) with ``reduceat``, so
    a tick costs O(K x calls x depth) ufunc work and no BLAS (no thread pools on a shared core)."""

    def __init__(self, m: CompiledApp):
        self.m = m
        self._w_root = np.where(m.node_is_root, m.node_mult, 1.0)  # per-request normaliser of root rows
        self._cpu_s = m.cpu_ms_per_call * 1e-3
        self._log_slow = np.log(SLOW_MS)
        self._root_rpt = m.path_rpt
        self._service_ms_n = m.service_ms[m.node_svc]        # per call node: its service's numbers
        self._intrinsic_n = m.intrinsic_error[m.node_svc]
        self._svc = _Groups(m.node_svc, m.S)
        self._edge = _Groups(m.node_edge, m.E)
        # levels, deepest first: (nodes, deadline positions in nodes, lat-propagation, fail-propagation)
        par = m.node_parent
        sync_child = ~m.node_async | m.node_async[np.maximum(par, 0)]
        w_lat = np.where(sync_child, m.node_count, 0.0)
        w_fail = np.where(sync_child & (m.node_on_error == 0), m.node_count, 0.0)
        self._levels = []
        for d in range(int(m.node_depth.max()), 0, -1):
            nodes = np.flatnonzero(m.node_depth == d)
            dl = nodes[np.isfinite(m.node_deadline[nodes]) & ~m.node_async[nodes]]
            parents = par[nodes]
            g = _Groups(parents, m.N)
            # children gathered in parent order (one gather), summed per parent, added to the parents only
            idx = nodes[g.order]
            # latency and log-success are summed together: rows 0 and 1 of one (2, K, N) array
            W = np.stack([w_lat[idx], w_fail[idx]])[:, None, :]
            self._levels.append((idx, dl, np.log(m.node_deadline[dl]), m.node_deadline[dl], W, g.starts, g.present))
        # degradation: degrade-edge calls reached through fail edges from each path's root
        deg_nodes = np.flatnonzero(m.B_deg.sum(axis=0) > 0)
        self._deg_nodes = deg_nodes
        self._deg = _Groups(m.node_path[deg_nodes], m.P, m.B_deg[m.node_path[deg_nodes], deg_nodes])

    def healthy_inputs(self, ready: np.ndarray | None = None, cpu_limit_cores: np.ndarray | None = None) -> TickInputs:
        m = self.m
        ready = np.array([s.replicas for s in m.app.services], dtype=float) if ready is None else ready
        if cpu_limit_cores is None:
            cpu_limit_cores = np.array([(s.resources.cpu_limit_m or 1000) / 1000.0 for s in m.app.services])
        net = np.full(m.N, m.app.topology.intra_zone_latency_ms)
        net[m.node_is_root] = 0.0
        return TickInputs(ready, ready * cpu_limit_cores, np.zeros(m.S), np.zeros(m.N), np.zeros(m.N),
                          np.zeros(m.N), net, np.zeros(m.S, dtype=bool))

    def prepare(self, inp: TickInputs) -> None:
        """Precompute the tick-invariant parts of ``inp`` (call when the inputs change)."""
        m = self.m
        inp._row = None
        unreach = np.maximum(inp.e_unreach, ((inp.ready[m.node_svc] <= 0) | inp.no_endpoints[m.node_svc]).astype(float))
        inp._unreach = unreach
        u1 = unreach[None]          # the one-tick broadcast of `step`'s outputs, made once
        u1.setflags(write=False)   # (the method: no flags object made)
        inp._unreach_1 = u1
        inp._reach = 1.0 - unreach
        inp._x_fixed = ((inp.lat_add + inp.net_ms) * inp._reach + unreach) * self._w_root
        inp._x_q = self._service_ms_n * inp._reach * self._w_root
        has_cap = inp.capacity > 0
        inp._cap = np.where(has_cap, inp.capacity, EPS)
        inp._has_cap = has_cap
        e_app = np.minimum(inp.e_app + self._intrinsic_n, 1.0)
        inp._log_reach_app = np.log(np.maximum(inp._reach * (1.0 - e_app), EPS))

    def rates(self, task_rate: np.ndarray, edges: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(node_rate, svc_rate, edge_rate) of ``task_rate`` (K, P): the parts of `step` that do not
        depend on the inputs (the same floats as `step` gives for them); ``edges=False``: no edge rates
        (None)."""
        m = self.m
        node_rate = np.atleast_2d(task_rate).take(m.node_path, axis=1) * m.node_mult
        return node_rate, self._svc(node_rate), self._edge(node_rate[:, None, :])[:, 0] if edges else None

    def step(self, task_rate: np.ndarray, inp: TickInputs) -> TickOutputs:
        """K ticks of traffic. ``inp`` holds one tick's inputs, or (K, ...) arrays of prepared inputs,
        one row per tick (see `stack_inputs`): every number is elementwise along the tick axis."""
        m = self.m
        if inp._x_fixed is None:
            self.prepare(inp)
        if task_rate.ndim < 2:
            task_rate = np.atleast_2d(task_rate)
        K = task_rate.shape[0]
        node_rate = task_rate.take(m.node_path, axis=1) * m.node_mult
        svc_rate = self._svc(node_rate)
        demand = svc_rate * self._cpu_s + inp.burn
        rho = np.where(inp._has_cap, demand / inp._cap, np.inf)
        q = np.where(rho < 0.95, 1.0 / (1.0 - np.minimum(rho, 0.95)), 20.0 * np.minimum(rho, 50.0))
        rho1 = np.minimum(rho, 1.0)
        sigma = (BASE_SIGMA + 0.4 * rho1 * rho1).take(m.node_svc, axis=1)
        LL = np.empty((2, K, m.N))          # [0]: latency, [1]: log of the success share
        lat, logs_ = LL[0], LL[1]
        np.add(inp._x_fixed, q.take(m.node_svc, axis=1) * inp._x_q, out=lat)
        logs_[...] = inp._log_reach_app
        shed_any = rho > 1.0
        if shed_any.any():
            shed = np.where(shed_any, 1.0 - 1.0 / np.maximum(rho, 1.0), 0.0)
            logs_ += np.log(np.maximum(1.0 - shed.take(m.node_svc, axis=1), EPS))
        timeout = np.zeros((K, m.N))
        lat_own = lat.copy()
        reach = inp._reach
        for idx, dl, dl_k, dl_K, W, starts, parents in self._levels:
            if len(dl):
                mean = lat.take(dl, axis=1)
                s = sigma.take(dl, axis=1)
                mu = np.log(np.maximum(mean, EPS)) - 0.5 * s * s
                # both CDFs in one elementwise pass (the same floats as two calls)
                both = norm_cdf(np.concatenate([(mu - dl_k) / s, (mu + s * s - dl_k) / s], axis=1))
                nd = len(dl)
                p_over = both[:, :nd]
                overshoot = mean * both[:, nd:] - dl_K * p_over
                lat[:, dl] = mean - np.maximum(overshoot, 0.0)
                t_dl = p_over * reach.take(dl, axis=-1)   # (N,) inputs, or (K, N) per-tick inputs
                timeout[:, dl] = t_dl
                # logs_[:, dl] += log(...), as log(...) + logs_[:, dl] (the one commutative addition)
                lg = np.log(np.maximum(1.0 - t_dl, EPS))
                lg += logs_.take(dl, axis=1)
                logs_[:, dl] = lg
            add_children(LL, idx, W, starts, parents)
        fail = 1.0 - np.exp(logs_)
        own_fail = 1.0 - np.exp(inp._log_reach_app + np.log(np.maximum(1.0 - timeout, EPS)))
        P = m.P
        deg_ok = np.exp(self._deg(np.log(np.maximum(1.0 - fail.take(self._deg_nodes, axis=1), EPS))))
        path_fail = fail[:, :P]
        path_degraded = (1.0 - path_fail) * (1.0 - deg_ok)
        per_req = lat[:, :P] / self._root_rpt
        lat[:, :P] = per_req
        s_root = sigma[:, :P]
        med = per_req * np.exp(-0.5 * s_root * s_root)
        path_slow = 1.0 - norm_cdf((self._log_slow - np.log(np.maximum(med, EPS))) / s_root)
        path_p95 = med * np.exp(Z95 * s_root)
        # edges
        unreach = inp._unreach
        stacked = np.empty((K, 10, m.N))    # the 10 per-call quantities summed per edge, written in place
        stacked[:, 0] = node_rate
        u_calls = np.multiply(node_rate, unreach, out=stacked[:, 1])
        reached_n = np.subtract(node_rate, u_calls, out=stacked[:, 6])
        np.multiply(node_rate, timeout, out=stacked[:, 2])
        np.multiply(node_rate, fail, out=stacked[:, 3])
        np.multiply(node_rate, lat, out=stacked[:, 4])
        np.multiply(reached_n, np.maximum(lat - inp.net_ms, 0.05), out=stacked[:, 5])
        np.multiply(node_rate, sigma, out=stacked[:, 7])
        np.multiply(node_rate, own_fail, out=stacked[:, 8])
        np.multiply(node_rate, lat_own, out=stacked[:, 9])
        agg = self._edge(stacked)                                    # (K, 10, E)
        edge_rate, edge_unreach, edge_timeout, edge_fail = agg[:, 0], agg[:, 1], agg[:, 2], agg[:, 3]
        inv = 1.0 / np.maximum(edge_rate, EPS)
        edge_lat_src = agg[:, 4] * inv
        edge_lat_dst = agg[:, 5] / np.maximum(agg[:, 6], EPS)
        edge_sigma = np.where(edge_rate > 0, agg[:, 7] * inv, BASE_SIGMA)
        edge_app = np.maximum(edge_fail - edge_unreach - edge_timeout, 0.0)
        u_b = inp._unreach_1 if K == 1 and unreach.ndim == 1 else np.broadcast_to(unreach, (K, m.N))
        return TickOutputs(node_rate, lat, fail, u_b, timeout, sigma, svc_rate, rho,
                           demand, task_rate * self._root_rpt, path_fail, path_degraded, path_slow, per_req, med,
                           path_p95, edge_rate, edge_rate - edge_unreach, edge_fail, edge_unreach, edge_timeout,
                           edge_app, edge_lat_src, edge_lat_dst, edge_sigma, agg[:, 8], agg[:, 9] * inv)


class StackedInputs:
    """Prepared inputs of consecutive tick runs, one row per tick, for one `TrafficModel.step`: each field a
    C-contiguous (ticks, ...) array, each run's row repeated for its ticks (the values a concatenation of
    broadcasts gives). The float fields of a run travel as one row (`_float_row`): one stack and one repeat for
    all of them, then a contiguous copy of each field's columns.

    >>> import numpy as np
    >>> from sremarathon_env.backends.sim import SimBackend
    >>> inp = SimBackend("online-boutique", seed=1, metrics=False).inputs
    >>> st = StackedInputs([(inp, 2), (inp, 1)])
    >>> st._x_fixed.shape == (3,) + inp._x_fixed.shape and bool((st._x_fixed[2] == inp._x_fixed).all())
    True
    >>> st._has_cap.dtype, st._x_q.flags.c_contiguous
    (dtype('bool'), True)
    """

    FIELDS = ("burn", "_has_cap", "_cap", "_x_fixed", "_x_q", "_log_reach_app", "_reach", "_unreach", "net_ms")
    #: the float fields, in the order of a run's one row
    FLOATS = tuple(f for f in FIELDS if f != "_has_cap")

    def __init__(self, runs: list[tuple[TickInputs, int]]):
        counts = np.array([k for _, k in runs], dtype=np.intp)
        first = runs[0][0]
        rows = np.repeat(np.array([_float_row(inp) for inp, _ in runs]), counts, axis=0)
        a = 0
        for name in self.FLOATS:
            w = getattr(first, name).shape[0]
            setattr(self, name, rows[:, a:a + w].copy())
            a += w
        self._has_cap = np.repeat(np.array([inp._has_cap for inp, _ in runs]), counts, axis=0)


def _float_row(inp: TickInputs) -> np.ndarray:
    """The float fields of prepared inputs (`StackedInputs.FLOATS`, each 1-D) as one row, made once per inputs."""
    row = getattr(inp, "_row", None)
    if row is None:
        row = inp._row = np.concatenate([getattr(inp, f) for f in StackedInputs.FLOATS])
    return row


def stack_inputs(runs: list[tuple[TickInputs, int]]) -> StackedInputs:
    """``[(prepared inputs, ticks), ...]`` -> one row of inputs per tick."""
    return StackedInputs(runs)


def window(out: TickOutputs, a: int, b: int) -> TickOutputs:
    """The outputs of ticks ``a .. b-1`` of a batch."""
    return TickOutputs(*(getattr(out, f)[a:b] for f in out.__dataclass_fields__))


def concat(outs: list[TickOutputs], fields: frozenset[str] | None = None) -> TickOutputs:
    """The outputs of consecutive batches as one batch (every field joined along the tick axis; with ``fields``,
    those alone, the others None: for a reader of these fields only).

    >>> import numpy as np
    >>> a = TickOutputs(*(np.full((1, 2), 1.0) for _ in TickOutputs.__dataclass_fields__))
    >>> b = TickOutputs(*(np.full((2, 2), 2.0) for _ in TickOutputs.__dataclass_fields__))
    >>> concat([a, b]).edge_rate.tolist()
    [[1.0, 1.0], [2.0, 2.0], [2.0, 2.0]]
    >>> part = concat([a, b], frozenset({"edge_rate"}))
    >>> part.edge_rate.shape, part.edge_fail is None
    ((3, 2), True)
    """
    if fields is None:
        return TickOutputs(*(np.concatenate([getattr(o, f) for o in outs], axis=0) for f in outs[0].__dataclass_fields__))
    return TickOutputs(*(np.concatenate([getattr(o, f) for o in outs], axis=0) if f in fields else None
                         for f in outs[0].__dataclass_fields__))


def take(out: TickOutputs, k: int) -> TickOutputs:
    """The outputs of the first ``k`` ticks of a batch."""
    return TickOutputs(*(getattr(out, f)[:k] for f in out.__dataclass_fields__))


def last(out: TickOutputs) -> TickOutputs:
    """The last tick of a batch, without the tick axis."""
    return TickOutputs(*(getattr(out, f)[-1] for f in out.__dataclass_fields__))


def bucket_cdf(mean_ms: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """(len(mean), len(buckets)) lognormal CDF at each finite bucket bound, for a given mean."""
    mu = np.log(np.maximum(mean_ms, EPS)) - 0.5 * sigma * sigma
    return norm_cdf((LOG_BUCKETS[None, :] - mu[:, None]) / sigma[:, None])

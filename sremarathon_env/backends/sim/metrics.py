"""Writes the twin's state into the `MetricStore`, with exactly the families of the catalogue.

Two kinds of families:

- *state* families (kube-state-metrics objects, limits, restarts, endpoints, nodes, quota, ``up``)
  change only when the cluster changes. They are kept as runs of constant columns and written in
  blocks: a family's run up to a state refresh's tick just before the family changes there, every
  current run up to the last tick when the store is read (``flush``) - so a steady tick costs nothing
  for them. A series that disappears (a deleted pod) simply stops being written and
  reads as stale (NaN), like a dropped target in Prometheus.
- *flow* families (CPU and memory, mesh request counters and duration histograms, load-generator
  counters, consumer lag) are written every tick with one vectorised assignment each.

Flow families are written a block of ticks at a time (the twin batches ticks while the cluster is at
rest): cumulative sums along the tick axis, then one 2-D assignment per family into the store's
columns (the store grows first through ``set_n_ticks``). Row layouts are fixed at construction
(edges, paths) or per pod.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from sremarathon_env.backends.sim.cluster import rolling_params
from sremarathon_env.backends.sim.kernels import NO_BURN, kernels
from sremarathon_env.backends.sim.traffic import bucket_cdf, concat, window
from sremarathon_env.backends.sim.spanmetrics import SpanMetricsWriter
from sremarathon_env.backends.sim.util import seqsum
from sremarathon_env.telemetry.catalogue import CATALOGUE, LE_LABELS
from sremarathon_env.telemetry.store import Family, MetricStore

if TYPE_CHECKING:  # pragma: no cover
    from sremarathon_env.backends.sim.backend import SimBackend

MI = float(2**20)
#: ticks of traffic (or cAdvisor) writes a writer leaves pending at most: beyond, it does them at once (bounded
#: memory for a twin whose store nobody reads, e.g. a benchmark's)
PENDING_TICKS = 64
#: cAdvisor: the CPU a running container uses idle (cores), and the CFS period (s)
IDLE_CPU_CORES = 0.002
CFS_PERIOD_S = 0.1
#: (reporter, response_code, response_flags) columns of the request counter matrix
CODE_COLS = (("source", "200", "-"), ("source", "503", "UH"), ("source", "503", "UF"), ("source", "504", "UT"),
             ("source", "500", "-"), ("destination", "200", "-"), ("destination", "500", "-"))
_SRC_ONLY_PROTOCOLS = {"grpc", "http"}
#: the traffic outputs `MetricWriter.write_traffic` reads (`traffic_increments`, and `SpanMetricsWriter.write`'s):
#: pending writes joined for one write join these alone (`complete`)
TRAFFIC_FIELDS = frozenset({"edge_rate", "edge_unreach", "edge_app", "edge_reached", "edge_fail", "edge_timeout",
                            "edge_lat_src", "edge_lat_dst", "edge_sigma", "edge_own_lat", "path_req_rate", "path_fail",
                            "path_slow", "path_degraded"})


def family(store: MetricStore, name: str, suffix: str = "", extra: tuple[str, ...] = ()) -> Family:
    d = CATALOGUE[name]
    return store.family(name + suffix, d.labels + extra)


def mesh_layout(m) -> tuple[np.ndarray, np.ndarray]:
    """(mesh edges: the http/grpc edges that carry traffic, their (edge, reporter) count mask: the load
    generator has no sidecar, so its edge is counted by the destination only)."""
    me = np.array([e for e in range(m.E) if m.edge_used[e] and m.edge_protocol[e] in _SRC_ONLY_PROTOCOLS], dtype=np.intp)
    return me, np.array([[e != 0, True] for e in me], dtype=float).reshape(len(me), 2)


@dataclass
class TrafficIncrements:
    """Per tick (leading axis), what the traffic families' counters grow by: requests by code (edge,
    code column), histogram buckets (edge, reporter, le incl. +Inf), latency sums and counts (edge,
    reporter), load-generator requests (path, ok/failed), slow and degraded requests (path)."""

    req: np.ndarray
    bucket: np.ndarray
    lat_sum: np.ndarray
    count: np.ndarray
    lg: np.ndarray
    lg_slow: np.ndarray
    lg_deg: np.ndarray

    def window(self, a: int, b: int) -> "TrafficIncrements":
        return TrafficIncrements(self.req[a:b], self.bucket[a:b], self.lat_sum[a:b], self.count[a:b], self.lg[a:b],
                                 self.lg_slow[a:b], self.lg_deg[a:b])


def traffic_increments(me: np.ndarray, src_mask: np.ndarray, out, uh: np.ndarray, dt: float) -> TrafficIncrements:
    """The counter increments of traffic outputs ``out`` (K ticks), elementwise along ticks (so any window
    of a longer batch has the floats the window alone gives); ``uh``: the per-edge no-endpoints share (one
    row, or one per tick)."""
    K = out.edge_rate.shape[0]
    nm = len(me)
    # request counters by code
    rate = out.edge_rate.take(me, axis=1)
    unreach = out.edge_unreach.take(me, axis=1)
    uh_e = uh.take(me, axis=-1)
    app = out.edge_app.take(me, axis=1)
    reached = out.edge_reached.take(me, axis=1)
    inc = np.empty((K, nm, len(CODE_COLS)))   # the 7 code columns written in place (np.stack's floats)
    np.subtract(rate, out.edge_fail.take(me, axis=1), out=inc[..., 0])
    np.multiply(unreach, uh_e, out=inc[..., 1])
    np.multiply(unreach, 1.0 - uh_e, out=inc[..., 2])
    inc[..., 3] = out.edge_timeout.take(me, axis=1)
    inc[..., 4] = app
    np.subtract(reached, app, out=inc[..., 5])
    inc[..., 6] = app
    np.maximum(inc, 0.0, out=inc)
    inc *= dt
    # duration histograms (source view: every call incl. network; destination: calls that arrived)
    lat = np.empty((K, nm, 2))
    lat[..., 0] = out.edge_lat_src.take(me, axis=1)
    lat[..., 1] = out.edge_lat_dst.take(me, axis=1)
    sig = np.repeat(out.edge_sigma.take(me, axis=1), 2, axis=1).reshape(K, nm, 2)
    n = np.empty((K, nm, 2))
    n[..., 0] = rate
    n[..., 1] = reached
    n *= dt * src_mask
    cdf = bucket_cdf(lat.reshape(-1), sig.reshape(-1)).reshape(K, nm, 2, -1)
    h_inc = np.empty(cdf.shape[:3] + (cdf.shape[3] + 1,))
    np.multiply(cdf, n[..., None], out=h_inc[..., :-1])
    h_inc[..., -1] = n
    # load generator
    req = out.path_req_rate * dt
    failed = req * out.path_fail
    lg_inc = np.empty(req.shape + (2,))
    np.subtract(req, failed, out=lg_inc[..., 0])
    lg_inc[..., 1] = failed
    return TrafficIncrements(inc, h_inc, n * lat, n, lg_inc, req * out.path_slow * (1.0 - out.path_fail),
                             req * out.path_degraded)


class _OfTwin:
    """A writer's way back to its twin: a weak reference (the twin owns its writer; a strong reference back would
    make every twin a reference cycle, which only the cyclic garbage collector frees: a dropped twin is freed by
    reference counting instead). ``bind`` points it at another twin (`SimBackend.clone`'s copy)."""

    def bind(self, sim: "SimBackend") -> None:
        self._sim = weakref.ref(sim)

    @property
    def sim(self) -> "SimBackend":
        sim = self._sim()
        if sim is None:
            raise ReferenceError("this metric writer's twin is gone")
        return sim


def _complete(writer: "MetricWriter", sim: "SimBackend") -> None:
    """What a store keeps to complete a writer's pending writes (`MetricWriter._defer`): ``writer.complete()``, with
    the writer's twin held (the writes need it)."""
    writer.complete()


class MetricWriter(_OfTwin):
    def __init__(self, sim: "SimBackend"):
        self.bind(sim)
        st = sim.store
        m = sim.m
        ns = sim.app.namespace
        self.ns = ns
        self.store = st
        # ----- mesh edges: http/grpc edges that carry traffic
        self.mesh_edges, self.src_mask = mesh_layout(m)
        self.req = family(st, "istio_requests_total")
        self.req_cum = np.zeros((len(self.mesh_edges), len(CODE_COLS)))
        self.req_on = np.zeros_like(self.req_cum, dtype=bool)
        self.req_rows = np.zeros(0, dtype=np.intp)
        self.req_flat = np.zeros(0, dtype=np.intp)
        #: per (edge, code column), flat: its row in the request family once enabled, else -1
        self._flat_row = np.full(self.req_cum.size, -1, dtype=np.intp)
        # the load generator has no sidecar: its edge is reported by the destination only
        self.req_allowed = np.ones_like(self.req_on)
        self.req_allowed[self.mesh_edges == 0, :5] = False
        for i, e in enumerate(self.mesh_edges):
            self._enable(i, 5)
            if e != 0:
                self._enable(i, 0)
        self._rebuild_req()
        # histograms: rows (edge, reporter, le) created contiguously now
        self.h_bucket = family(st, "istio_request_duration_milliseconds", "_bucket", ("le",))
        self.h_sum = family(st, "istio_request_duration_milliseconds", "_sum")
        self.h_count = family(st, "istio_request_duration_milliseconds", "_count")
        self.reporters = ("source", "destination")
        n_lv = 2 * len(self.mesh_edges)   # (edge, reporter) label sets, made below: room for them at once
        self.h_bucket.reserve(len(self.h_bucket) + n_lv * len(LE_LABELS))
        self.h_sum.reserve(len(self.h_sum) + n_lv)
        self.h_count.reserve(len(self.h_count) + n_lv)
        for e in self.mesh_edges:
            for r in self.reporters:
                lv = (ns, r, m.workload(m.edges[e][0]), m.workload(m.edges[e][1]))
                self.h_sum.row(lv)
                self.h_count.row(lv)
                for le in LE_LABELS:
                    self.h_bucket.row(lv + (le,))
        K = len(self.mesh_edges)
        self.h_cum = np.zeros((K, 2, len(LE_LABELS)))
        self.h_sum_cum = np.zeros((K, 2))
        self.h_cnt_cum = np.zeros((K, 2))
        # load generator
        self.lg_req = family(st, "loadgenerator_requests_total")
        self.lg_slow = family(st, "loadgenerator_slow_requests_total")
        self.lg_deg = family(st, "loadgenerator_degraded_requests_total")
        for p, meth in zip(m.path_names, m.path_methods):
            self.lg_req.row((ns, p, meth, "ok"))
            self.lg_req.row((ns, p, meth, "failed"))
            self.lg_slow.row((ns, p, meth))
            self.lg_deg.row((ns, p, meth))
        self.lg_cum = np.zeros((m.P, 2))
        self.lg_slow_cum = np.zeros(m.P)
        self.lg_deg_cum = np.zeros(m.P)
        # consumer lag
        self.lag = family(st, "kafka_consumergroup_lag")
        for e in m.async_edges:
            spec = m.edge_specs[e]
            topic = spec.operations[0] if spec.operations else m.svc_names[m.edges[e][1]]
            self.lag.row((ns, m.svc_names[m.edges[e][1]], topic))
        # messaging span metrics (apps whose collector derives them)
        self.spans = SpanMetricsWriter(sim) if sim.app.span_metrics else None
        # cAdvisor flows (per pod slot)
        self.cpu = family(st, "container_cpu_usage_seconds_total")
        self.periods = family(st, "container_cpu_cfs_periods_total")
        self.throttled = family(st, "container_cpu_cfs_throttled_periods_total")
        self.mem = family(st, "container_memory_working_set_bytes")
        self.pod_rows = np.zeros(0, dtype=np.intp)   # row per slot in the cAdvisor families (same in all four)
        self.flow_slots = np.zeros(0, dtype=np.intp)
        self.flow_rows = np.zeros(0, dtype=np.intp)
        self._flow_layout = -1
        self._slot_row = np.zeros(0, dtype=np.intp)   # cAdvisor row per pod slot (-1: none yet)
        # state families: one constant run per family, re-derived for the objects that changed
        #: family name -> [family, the first tick of its current run not yet written, the tick up to which a
        #: refresh's new run starts behind ticks written already (0: none; `_close`)]: the run's values are the
        #: family's current values (`_cur`), which change only in `refresh_state`, each family's run written up to
        #: the refresh's tick just before its first change there (`_close`)
        self._runs: dict[str, list] = {}
        self._at = 0   # the tick of the state refresh in progress
        self._ks = None   # the compiled kernels (`kernels()`) during a state refresh, else None
        #: object -> (signature, {(family, row): value}, [(family, labels)], [row], [value], shape) (the three
        #: lists in the order the object's series come, None when a row repeats; shape: see `_update`)
        self._objects: dict[tuple, tuple] = {}
        #: family -> [current value per row (NaN: no live series), live mask per row, first live row, last live
        #: row + 1 (both None: to be found again; 0, 0: none)] (`_live_on`, `_live_off`)
        self._cur: dict[str, list] = {}
        self._fams: dict[str, Family] = {}
        self._prev_eff = np.zeros(0, dtype=bool)
        self._eff: list[bool] = []   # `refresh_state`: effective readiness per pod slot, as bools
        self._prev_no_ep = None
        self._node_sig: list | None = None   # the nodes' signatures at the last refresh
        self._quota_layout = -1
        #: Deployment name -> its position in the cluster's (fixed) Deployments, and service -> Deployment, once
        #: every Deployment has its series (`refresh_state` then visits only the changed ones)
        self._dep_rank: dict[str, int] | None = None
        self._svc_dep: dict[int, str] = {}
        #: writes left pending until the store is read (`queue_traffic`, `defer_flush`, done by `complete`): the
        #: traffic writes in order, [k0, K, dt, outputs, uh, bounds, increments, (taped chunk, a, j) or None],
        #: and the tick the state runs are to be flushed up to (0: none)
        self._pend_traffic: list[list] = []
        self._pend_upto = 0
        #: the cAdvisor counter blocks left pending, in order: [k0, K, dt, slots, their rows, per-slot constants,
        #: per-pod rates, burn or None, running, working sets, queue lag], and counter resets (an array of slots)
        self._pend_pods: list = []

    # ------------------------------------------------------------------ mesh counters layout
    def _enable(self, i: int, col: int) -> None:
        m = self.sim.m
        e = self.mesh_edges[i]
        rep, code, flags = CODE_COLS[col]
        caller, callee = m.edges[e]
        self._flat_row[i * len(CODE_COLS) + col] = self.req.row(
            (self.ns, rep, m.workload(caller), m.workload(callee), f"{m.svc_names[callee]}.{self.ns}.svc.cluster.local",
             code, flags))
        self.req_on[i, col] = True

    def _rebuild_req(self) -> None:
        """The enabled request series in (edge, code column) order: their flat positions and rows (what
        `_rebuild_req_slow` finds by label, kept as each series is enabled)."""
        flat = np.flatnonzero(self._flat_row >= 0)
        self.req_flat = flat
        self.req_rows = self._flat_row[flat]

    def _rebuild_req_slow(self) -> tuple[np.ndarray, np.ndarray]:
        """The definition of `_rebuild_req` (tests): every enabled series' row looked up by its labels."""
        m = self.sim.m
        flat, rows = [], []
        for i, e in enumerate(self.mesh_edges):
            caller, callee = m.edges[e]
            for col in range(len(CODE_COLS)):
                if self.req_on[i, col]:
                    rep, code, flags = CODE_COLS[col]
                    flat.append(i * len(CODE_COLS) + col)
                    rows.append(self.req.row((self.ns, rep, m.workload(caller), m.workload(callee),
                                              f"{m.svc_names[callee]}.{self.ns}.svc.cluster.local", code, flags)))
        return np.array(flat, dtype=np.intp), np.array(rows, dtype=np.intp)

    # ------------------------------------------------------------------ flows
    def flow_slots_now(self) -> np.ndarray:
        """Pod slots with cAdvisor series (scheduled, not deleted), in row order."""
        self._flow_rows()
        return self.flow_slots

    def write_traffic(self, k0: int, K: int, dt: float, out, uh: np.ndarray,
                      bounds: list[tuple[int, int]] | None = None, incs: "TrafficIncrements | None" = None) -> None:
        """Write the traffic families (mesh counters and histograms, load generator) for ticks ``k0 ..
        k0+K-1``: outputs with a leading tick axis; ``uh`` is the per-edge no-endpoints share (one row, or
        one per tick). ``bounds`` are the runs of ticks (offsets ``[a, b)``) the twin ran between cluster
        changes: a response-code series that first reaches half a request in a run is written from that
        run's first tick (the default: one run). ``incs``: these ticks' `traffic_increments`, when known."""
        if incs is None:
            incs = traffic_increments(self.mesh_edges, self.src_mask, out, uh, dt)
        cols = slice(k0, k0 + K)
        ks = kernels()
        late = []   # (first tick offset, columns) of series that start in a later run of this write
        runs = bounds or ((0, K),)
        if ks is not None:   # the running totals and the runs where counters reach half a request: one call
            first = np.empty(self.req_cum.size, dtype=np.intp)
            cum, hits = ks.req_cum(self.req_cum.reshape(-1), np.ascontiguousarray(incs.req).reshape(K, -1),
                                   np.array([b for _, b in runs], dtype=np.intp), self.req_on.reshape(-1),
                                   self.req_allowed.reshape(-1), first)
            self.req_cum = cum[-1].reshape(self.req_cum.shape)
            if hits:   # each run's new series in (edge, code column) order, as the loop below finds them
                for x, (a, _) in enumerate(runs):
                    flat = np.flatnonzero(first == x)
                    if len(flat):
                        for f in flat.tolist():
                            self._enable(*divmod(f, len(CODE_COLS)))
                        if a > 0:
                            late.append((a, flat))
                self._rebuild_req()
            if ks.take_rows(self.req._data, self.req_rows, self.req_flat, k0, cum) < 0:
                self.req._data[self.req_rows, cols] = cum.take(self.req_flat, axis=1).T
        else:
            cum = seqsum(self.req_cum, incs.req)
            self.req_cum = cum[-1]
            enabled = False
            for a, b in runs:
                new = (cum[b - 1] >= 0.5) & ~self.req_on & self.req_allowed
                if new.any():
                    for i, col in zip(*np.nonzero(new)):
                        self._enable(int(i), int(col))
                    enabled = True
                    if a > 0:
                        late.append((a, np.flatnonzero(new.reshape(-1))))
            if enabled:
                self._rebuild_req()
            self.req._data[self.req_rows, cols] = cum.reshape(K, -1).take(self.req_flat, axis=1).T
        for a, flat in late:   # not written before their run (new rows: NaN, as unwritten cells are)
            self.req._data[self._flat_row[flat], k0:k0 + a] = np.nan
        if ks is not None:   # the running totals and their cells in one compiled call per family (the same bits)
            self._cum_compiled(ks, k0, K, incs)
        else:
            self._cum_numpy(cols, K, incs)
        if self.spans is not None:
            self.spans.write(k0, K, dt, out)

    def _cum_compiled(self, ks, k0: int, K: int, incs: TrafficIncrements) -> None:
        """`_cum_numpy` by `kernels.cum_rows`."""
        c = np.ascontiguousarray
        f = ks.cum_rows
        self.h_cum = f(self.h_bucket._data, k0, self.h_cum.reshape(-1), c(incs.bucket).reshape(K, -1)).reshape(
            self.h_cum.shape)
        self.h_sum_cum = f(self.h_sum._data, k0, self.h_sum_cum.reshape(-1), c(incs.lat_sum).reshape(K, -1)).reshape(
            self.h_sum_cum.shape)
        self.h_cnt_cum = f(self.h_count._data, k0, self.h_cnt_cum.reshape(-1), c(incs.count).reshape(K, -1)).reshape(
            self.h_cnt_cum.shape)
        self.lg_cum = f(self.lg_req._data, k0, self.lg_cum.reshape(-1), c(incs.lg).reshape(K, -1)).reshape(
            self.lg_cum.shape)
        self.lg_slow_cum = f(self.lg_slow._data, k0, self.lg_slow_cum, c(incs.lg_slow))
        self.lg_deg_cum = f(self.lg_deg._data, k0, self.lg_deg_cum, c(incs.lg_deg))

    def _cum_numpy(self, cols: slice, K: int, incs: TrafficIncrements) -> None:
        """The histogram and load-generator counters of `write_traffic`: running totals (`seqsum`) written into the
        families' first rows (the series' order of the totals' flat layout)."""
        h = seqsum(self.h_cum, incs.bucket)
        self.h_cum = h[-1]
        hs = seqsum(self.h_sum_cum, incs.lat_sum)
        self.h_sum_cum = hs[-1]
        hc = seqsum(self.h_cnt_cum, incs.count)
        self.h_cnt_cum = hc[-1]
        self.h_bucket._data[: self.h_cum.size, cols] = h.reshape(K, -1).T
        self.h_sum._data[: self.h_sum_cum.size, cols] = hs.reshape(K, -1).T
        self.h_count._data[: self.h_cnt_cum.size, cols] = hc.reshape(K, -1).T
        lg = seqsum(self.lg_cum, incs.lg)
        self.lg_cum = lg[-1]
        sl = seqsum(self.lg_slow_cum, incs.lg_slow)
        self.lg_slow_cum = sl[-1]
        dg = seqsum(self.lg_deg_cum, incs.lg_deg)
        self.lg_deg_cum = dg[-1]
        self.lg_req._data[: self.lg_cum.size, cols] = lg.reshape(K, -1).T
        self.lg_slow._data[: len(self.lg_slow_cum), cols] = sl.T
        self.lg_deg._data[: len(self.lg_deg_cum), cols] = dg.T

    def queue_traffic(self, k0: int, K: int, dt: float, out, uh: np.ndarray, bounds: list[tuple[int, int]],
                      incs: "TrafficIncrements | None" = None, src: tuple | None = None) -> None:
        """`write_traffic`, left pending until the store is read (`MetricStore.defer`; `complete` writes in
        order). ``src``: (taped chunk, a, j) when ``out`` and ``incs`` are the window ``a .. j-1`` of a taped
        chunk's outputs and increments (`_Tape.take`): a write that continues the previous pending window of
        the same chunk joins it (one write of the joined window, its runs' bounds kept: the same samples, as
        every number is elementwise along ticks and the running totals add one tick at a time). At most
        `PENDING_TICKS` ticks wait: beyond, everything pending is done at once."""
        pend = self._pend_traffic
        if src is not None and pend:
            last = pend[-1]
            ls = last[7]
            if ls is not None and ls[0] is src[0] and ls[2] == src[1] and last[2] == dt:
                K0 = last[1]
                last[1] = K0 + K
                last[5] = last[5] + [(a + K0, b + K0) for a, b in bounds]
                last[3] = last[6] = None   # the joined window's, taken from the chunk at `complete`
                last[7] = (ls[0], ls[1], src[2])
                return
        pend.append([k0, K, dt, out, uh, list(bounds), incs, src])
        self._defer()
        if k0 + K - pend[0][0] > PENDING_TICKS:
            self.store.complete()

    def _defer(self) -> None:
        """Leave this writer's writes pending with the store until it is read (`MetricStore.defer`). What the store
        keeps for them holds the writer and its twin (`_complete`): a reference cycle (the twin owns the store) that
        lasts only while writes are pending (a store read ends it), so a store kept past its twin still completes
        them, and a dropped twin with none pending is freed by reference counting."""
        self.store.defer(partial(_complete, self, self.sim))

    def defer_flush(self, upto: int) -> None:
        """`flush` up to ``upto``, left pending until the store is read (`complete`)."""
        if upto > self._pend_upto:
            self._pend_upto = upto
        self._defer()

    def complete(self) -> None:
        """Do the writes left pending (`queue_traffic`, `queue_pods`, `defer_flush`), in order. Consecutive traffic writes of
        stepped (not taped) outputs are joined into one: their outputs and no-endpoint shares joined along the
        tick axis, their runs' bounds kept (the same samples: see `queue_traffic`)."""
        pend, self._pend_traffic = self._pend_traffic, []
        i = 0
        while i < len(pend):
            k0, K, dt, out, uh, bounds, incs, src = pend[i]
            j = i + 1
            if src is None:
                while j < len(pend) and pend[j][7] is None and pend[j][2] == dt and pend[j][0] == k0 + K:
                    K += pend[j][1]
                    j += 1
            if j > i + 1:
                group = pend[i:j]
                out = concat([g[3] for g in group], TRAFFIC_FIELDS)
                uh = np.concatenate([np.broadcast_to(g[4], (g[1], g[4].shape[-1])) for g in group], axis=0)
                bounds, a = [], 0
                for g in group:
                    bounds += [(x + a, y + a) for x, y in g[5]]
                    a += g[1]
            elif out is None:   # joined windows of one taped chunk: the window of the whole span
                chunk, a, b = src
                out, incs = window(chunk[1], a, b), chunk[6].window(a, b)
            self.write_traffic(k0, K, dt, out, uh, bounds, incs)
            i = j
        if self._pend_pods:
            self._complete_pods()
        if self._pend_upto:
            upto, self._pend_upto = self._pend_upto, 0
            self.flush(upto)

    def queue_pods(self, k0: int, K: int, dt: float, sl: np.ndarray, lay: tuple, per_pod_rate: np.ndarray,
                   burn: np.ndarray | None, running: np.ndarray, mem: np.ndarray, lag: np.ndarray) -> None:
        """The cAdvisor counters (and the consumer lag) of ticks ``k0 .. k0+K-1`` of the flow slots ``sl``
        (`flow_slots_now`; ``lay``: their `SimBackend._layout_arrays`), left pending until the store is read:
        per tick and slot the per-pod request rate, the working set (MiB), the slots' CPU burn (or None: none)
        and whether each container runs. `complete` computes and writes them in order (`_pods_block`); at most
        `PENDING_TICKS` ticks wait."""
        self._pend_pods.append([k0, K, dt, sl, self.flow_rows, lay, per_pod_rate, burn, running, mem, lag])
        self._defer()
        first = next(p for p in self._pend_pods if isinstance(p, list))
        if k0 + K - first[0] > PENDING_TICKS:
            self.store.complete()

    def reset_counters(self, slots: np.ndarray) -> None:
        """(Re)started containers count from zero: their cAdvisor counters restart, after the pending blocks."""
        if self._pend_pods:
            self._pend_pods.append(slots)
            self._defer()
        else:
            self._reset(slots)

    def _reset(self, slots: np.ndarray) -> None:
        sim = self.sim
        sim.cpu_cum[slots] = 0.0
        sim.periods_cum[slots] = 0.0
        sim.throttled_cum[slots] = 0.0

    def _complete_pods(self) -> None:
        """The pending cAdvisor blocks and resets, in order; consecutive blocks of the same slots (no reset
        between) computed and written as one (elementwise along ticks: the same floats, see `_pods_block`)."""
        pend, self._pend_pods = self._pend_pods, []
        ks = kernels()
        if ks is not None:   # block by block (the definition), each in one compiled call: nothing to join
            for item in pend:
                if isinstance(item, list):
                    self._pods_compiled(ks, *item)
                else:
                    self._reset(item)
            return
        i = 0
        while i < len(pend):
            item = pend[i]
            if not isinstance(item, list):
                self._reset(item)
                i += 1
                continue
            k0, K, dt, sl, rows, lay, ppr, burn, running, mem, lag = item
            j = i + 1
            while j < len(pend) and isinstance(pend[j], list) and pend[j][3] is sl and pend[j][5] is lay \
                    and pend[j][2] == dt and pend[j][0] == k0 + K:
                K += pend[j][1]
                j += 1
            if j > i + 1:
                group = pend[i:j]
                n = len(sl)
                ppr = np.concatenate([g[6] for g in group], axis=0)
                mem = np.concatenate([g[9] for g in group], axis=0)
                lag = np.concatenate([g[10] for g in group], axis=0)
                running = np.concatenate([np.broadcast_to(g[8], (g[1], n)) for g in group], axis=0)
                if any(g[7] is not None for g in group):   # a zero burn adds nothing (the terms are > 0)
                    burn = np.concatenate([np.broadcast_to(g[7] if g[7] is not None else np.zeros(n), (g[1], n))
                                           for g in group], axis=0)
            self._pods_block(k0, K, dt, sl, rows, lay, ppr, burn, running, mem, lag)
            i = j

    def _pods_block(self, k0: int, K: int, dt: float, sl: np.ndarray, rows: np.ndarray, lay: tuple,
                    per_pod_rate: np.ndarray, burn: np.ndarray | None, running: np.ndarray, mem: np.ndarray,
                    lag: np.ndarray) -> None:
        """cAdvisor counters of ticks ``k0 .. k0+K-1``: CPU use (idle + per call, plus burn; capped at the limit),
        CFS periods and throttled periods, as running totals per container (`seqsum`), written with the working
        sets; ``running``: per slot, or per tick and slot."""
        sim = self.sim
        x = IDLE_CPU_CORES + per_pod_rate * lay[4] * 1e-3
        if burn is not None:   # adding a zero burn changes no float (x > 0)
            x = x + burn
        demand = running * x
        has_lim, lim_f = lay[6], lay[7]
        usage = np.where(has_lim, np.minimum(demand, lim_f), demand)
        util = demand / lim_f
        thr_frac = np.minimum(np.maximum((util - 0.6) / 0.6, 0.0), 1.0) * has_lim
        periods = running * (dt / CFS_PERIOD_S)
        cpu = seqsum(sim.cpu_cum[sl], usage * dt)
        per = seqsum(sim.periods_cum[sl], periods if periods.ndim == 2 else
                     periods[None] if K == 1 else np.broadcast_to(periods, (K, len(sl))))
        thr = seqsum(sim.throttled_cum[sl], periods * thr_frac)
        sim.cpu_cum[sl], sim.periods_cum[sl], sim.throttled_cum[sl] = cpu[-1], per[-1], thr[-1]
        sim.pod_util[sl] = util[-1]
        self.write_pods(k0, K, rows, cpu, per, thr, mem, running, lag)

    def _pods_compiled(self, ks, k0: int, K: int, dt: float, sl: np.ndarray, rows: np.ndarray, lay: tuple,
                       per_pod_rate: np.ndarray, burn: np.ndarray | None, running: np.ndarray, mem: np.ndarray,
                       lag: np.ndarray) -> None:
        """`_pods_block` by the compiled kernel (`kernels.pods_block`: the same bits): the counters, their cells
        in the four cAdvisor families and the per-slot totals in one call; the consumer lag as `write_pods` writes it."""
        sim = self.sim
        n = len(sl)
        if not n:   # (no pod: the consumer lag alone)
            self._pods_block(k0, K, dt, sl, rows, lay, per_pod_rate, burn, running, mem, lag)
            return
        c = np.ascontiguousarray
        done = ks.pods_block(k0, dt, dt / CFS_PERIOD_S, IDLE_CPU_CORES, MI, c(sl), c(rows), c(lay[4]), c(lay[6]),
                             c(lay[7]), c(per_pod_rate), NO_BURN if burn is None else c(burn).reshape(-1, n),
                             c(running).reshape(-1, n), c(mem), sim.cpu_cum, sim.periods_cum, sim.throttled_cum,
                             sim.pod_util, self.cpu._data, self.periods._data, self.throttled._data, self.mem._data)
        if done < 0:   # (a cell outside the arrays: numpy's indexing raises)
            self._pods_block(k0, K, dt, sl, rows, lay, per_pod_rate, burn, running, mem, lag)
        elif lag.shape[1]:
            self.lag._data[: lag.shape[1], k0:k0 + K] = lag.T

    def write_pods(self, k0: int, K: int, r: np.ndarray, cpu: np.ndarray, periods: np.ndarray,
                   throttled: np.ndarray, mem: np.ndarray, running: np.ndarray, lag: np.ndarray) -> None:
        """Write the per-pod cAdvisor families (rows ``r``: the flow slots') and the consumer lag for ticks
        ``k0 .. k0+K-1`` (arrays with a leading tick axis; ``running`` per slot, or per tick and slot)."""
        cols = slice(k0, k0 + K)
        if lag.shape[1]:
            self.lag._data[: lag.shape[1], cols] = lag.T
        # cAdvisor: containers that are not running have no series at that scrape
        if len(r):
            gone = ~running
            self.cpu._data[r, cols] = np.where(gone, np.nan, cpu).T
            self.periods._data[r, cols] = np.where(gone, np.nan, periods).T
            self.throttled._data[r, cols] = np.where(gone, np.nan, throttled).T
            self.mem._data[r, cols] = np.where(gone, np.nan, mem * MI).T

    def _flow_rows(self) -> None:
        c = self.sim.cluster
        if self._flow_layout == c.layout_version:
            return
        self._flow_layout = c.layout_version
        n = len(c.pods)
        slots = np.flatnonzero(c.p_active[:n] & c.p_bound[:n])   # scheduled, not deleted, in slot order
        # a pod's cAdvisor rows are fixed once it is bound (its node never changes): made on first sight
        if len(self._slot_row) < n:
            grown = np.full(max(64, 2 * n), -1, dtype=np.intp)
            grown[: len(self._slot_row)] = self._slot_row
            self._slot_row = grown
        rows = self._slot_row[slots]
        for j in np.flatnonzero(rows < 0).tolist():
            p = c.pods[int(slots[j])]
            lv = (self.ns, p.name, c.svc_names[p.svc], c.nodes[p.node].name)
            for fam in (self.cpu, self.periods, self.throttled, self.mem):
                row = fam.row(lv)
            self._slot_row[p.slot] = rows[j] = row
        self.flow_slots = slots
        self.flow_rows = rows

    # ------------------------------------------------------------------ state families
    def refresh_state(self, tick: int) -> None:
        """The cluster changed at ``tick``: re-derive the series of the objects (pods, Deployments,
        nodes, the quota) whose state changed; the families they touch close their run at ``tick``
        and start a new one, the others keep running."""
        self._ks = kernels()   # (for the runs it closes, `_close`; held only during the call)
        try:
            self._refresh_state(tick)
        finally:
            self._ks = None

    def _refresh_state(self, tick: int) -> None:
        sim = self.sim
        c = sim.cluster
        ready_eff = sim.pod_ready_eff
        #: the families whose values changed at this refresh (each one's run closed before its first change)
        dirty: set[str] = set()
        self._at = tick
        n = len(c.pods)
        # candidate pods: those the cluster touched, and those whose effective readiness flipped
        eff = ready_eff[:n]
        #: the pods' effective readiness as Python bools, for the series below (one conversion, no numpy
        #: scalar per pod)
        self._eff = eff_l = eff.tolist()
        prev = self._prev_eff
        flipped = np.flatnonzero(eff[: len(prev)] != prev[: n]).tolist() if len(prev) else []
        cand = sorted(c.changed_slots.union(flipped, range(len(prev), n)))
        c.changed_slots = set()
        self._prev_eff = eff.copy()
        dirty_svc: set[int] = set()
        for slot in cand:
            p = c.pods[slot]
            if p.deleted:
                if self._drop(("pod", slot), dirty):
                    dirty_svc.add(p.svc)
                continue
            sig = (p.node, p.phase, p.ready, eff_l[slot], p.node_lost, p.cstate, p.reason, p.restarts,
                   p.last_reason, sim.pod_ooms.get(slot, 0))
            if self._update(("pod", slot), sig, lambda p=p: (self._pod_keys(p), self._pod_values(p)), dirty,
                            self._pod_shape(p), lambda p=p: self._pod_values(p)):
                dirty_svc.add(p.svc)
        no_ep = sim.res.no_endpoints
        # a Deployment's fields change only in the controller's passes (the cluster notes them in
        # `touched`); its pods' changes are in dirty_svc, its Service's endpoints in no_ep
        touched = c.touched
        c.touched = set()
        no_ep_b = no_ep.tobytes()
        all_deps = self._prev_no_ep != no_ep_b
        self._prev_no_ep = no_ep_b
        deps = c.deployments
        if all_deps or self._dep_rank is None:
            todo = deps.values()
        else:   # (every Deployment has its series: the ones the loop below would not skip, in its order)
            names = touched.union([self._svc_dep[s] for s in dirty_svc])
            todo = [deps[n] for n in sorted(names, key=self._dep_rank.__getitem__)]
        for dep in todo:
            key = ("dep", dep.name)
            old = self._objects.get(key)
            if old is not None and not all_deps and dep.svc not in dirty_svc and dep.name not in touched:
                continue
            head = (dep.replicas, dep.generation, dep.observed_generation, dep.progress_failed, bool(no_ep[dep.svc]),
                    dep.current.id, tuple((rs.id, rs.replicas, len(rs.pods)) for rs in dep.rss))
            if old is not None and dep.svc not in dirty_svc and old[0][0] == head:
                continue
            # its values (one pass over its live pods) and the head are all its series depend on (the head holds its
            # ReplicaSets, which fix its series' labels): equal to the last ones, nothing of it changed
            vals = self._dep_values(dep)
            self._update(key, (head, vals), lambda dep=dep, vals=vals: (self._dep_keys(dep), vals), dirty,
                         self._dep_shape(dep), lambda vals=vals: vals)
        if self._dep_rank is None:   # the Deployments (a fixed set) all have their series now
            self._dep_rank = {name: i for i, name in enumerate(deps)}
            self._svc_dep = {dep.svc: dep.name for dep in deps.values()}
        node_sig = [(nd.ready, nd.cordoned) for nd in c.nodes]
        if node_sig != self._node_sig:   # (a node's series change only with these: else each update is a no-op)
            self._node_sig = node_sig
            for nd in c.nodes:
                self._update(("node", nd.index), (nd.ready, nd.cordoned),
                             lambda nd=nd: self._split(self._node_series(nd)), dirty)
        # the quota's use changes only when pods are created or deleted
        if ("quota",) not in self._objects or (cand and c.layout_version != self._quota_layout):
            self._quota_layout = c.layout_version
            used = sim.quota_used()
            self._update(("quota",), tuple(sorted(used.items())), lambda: self._split(self._quota_series(used)), dirty,
                         self._QUOTA_SHAPE, lambda: self._quota_values(used))

    def _drop(self, key, dirty: set) -> bool:
        old = self._objects.pop(key, None)
        if old is None:
            return False
        self._clear(old[1], dirty)
        return True

    def _clear(self, series, dirty: set) -> None:
        """Take the (family, row) ``series`` out of their families' current values (an object dropped, or series
        an object no longer has): not live, NaN, their families dirty."""
        cur = self._cur
        for (name, row) in series:
            if name not in dirty:
                self._close(name, dirty)
            vl = cur[name]
            vl[0][row] = np.nan
            vl[1][row] = False
            _live_off(vl, row)

    def _update(self, key, sig, series, dirty: set, shape=None, values=None) -> bool:
        """Re-derive an object's series when its signature changed; True when it did. ``series()``: the
        object's series as two lists in order, (family, label values) and values. Only the families whose
        entries (row, value) of this object changed become dirty. When the object has the same series
        (family and labels, in order) as last time - most changes only flip values - the rows are the kept
        ones and only the values are compared. ``shape`` (optional, with ``values``: the values alone, in
        series order): what the series' families and labels depend on; an unchanged shape means the same
        series, whose values alone are derived."""
        old = self._objects.get(key)
        if old is not None and old[0] == sig:
            return False
        keys = None
        if old is not None and old[2] is not None:
            if shape is not None and old[5] == shape:
                same, vals = True, values()
            else:
                keys, vals = series()
                same = keys == old[2]
            if same:
                keys, entries, rows, prev_vals = old[2], old[1], old[3], old[4]
                cur = self._cur
                for j, value in enumerate(vals):
                    if prev_vals[j] != value:
                        name, row = keys[j][0], rows[j]
                        entries[(name, row)] = value
                        if name not in dirty:
                            self._close(name, dirty)
                        vl = cur[name]
                        vl[0][row] = value
                        vl[1][row] = True
                        lo = vl[2]   # (`_live_on`, inline)
                        if lo is not None and not lo <= row < vl[3]:
                            vl[2], vl[3] = (row, row + 1) if vl[3] == lo else (min(lo, row), max(vl[3], row + 1))
                self._objects[key] = (sig, entries, keys, rows, vals, shape)
                return True
        if keys is None:
            keys, vals = series()
        # the series it had, by (family, labels): their rows and values (a new or re-appearing series is looked up
        # or made in its family); an object whose rows repeat kept its entries alone: compared by (family, row)
        pos = before = None
        if old is not None:
            if old[2] is not None:
                pos = dict(zip(old[2], range(len(old[2]))))
                old_rows, old_vals = old[3], old[4]
            else:
                before = old[1].copy()
        entries = {}
        rows = []
        fams = self._fams
        cur = self._cur
        for k, value in zip(keys, vals):
            j = pos.pop(k, None) if pos is not None else None
            if j is not None:   # a series it had: its row, written when its value changed
                name = k[0]
                row = old_rows[j]
                rows.append(row)
                entries[(name, row)] = value
                if old_vals[j] == value:
                    continue
                vl = cur[name]
            else:
                name, lv = k
                fam = fams.get(name)
                if fam is None:
                    fam = fams[name] = self.store.family(name, self._labels(name))
                row = fam._index.get(lv)
                if row is None:
                    row = fam.row(lv)
                rows.append(row)
                entries[(name, row)] = value
                if before is not None:
                    prev = before.pop((name, row), None)
                    if prev is not None and prev == value:
                        continue
                vl = cur.get(name)
                if vl is None or row >= len(vl[0]):
                    vl = self._grow_cur(name, row)
            if name not in dirty:
                self._close(name, dirty)
            vl[0][row] = value
            vl[1][row] = True
            lo = vl[2]   # (`_live_on`, inline)
            if lo is not None and not lo <= row < vl[3]:
                vl[2], vl[3] = (row, row + 1) if vl[3] == lo else (min(lo, row), max(vl[3], row + 1))
        # series the object no longer has
        gone = [(k[0], old_rows[j]) for k, j in pos.items()] if pos else before
        if gone:
            self._clear(gone, dirty)
        # (series, rows, values) in order for the next update's fast path; none when a row repeats
        if len(entries) == len(keys):
            self._objects[key] = (sig, entries, keys, rows, vals, shape)
        else:
            self._objects[key] = (sig, entries, None, None, None, None)
        return True

    @staticmethod
    def _split(series) -> tuple[list, list]:
        """(family, label values) and values of the (family, label values, value) triples of ``series``."""
        keys, vals = [], []
        for name, lv, value in series:
            keys.append((name, lv))
            vals.append(value)
        return keys, vals

    def _grow_cur(self, name: str, row: int) -> list:
        """The current values of family ``name`` (`_cur`), grown to hold ``row``."""
        vl = self._cur.get(name)
        n = max(64, 2 * (row + 1))
        vals = np.full(n, np.nan)
        live = np.zeros(n, dtype=bool)
        if vl is None:
            vl = self._cur[name] = [vals, live, 0, 0]
        else:
            vals[: len(vl[0])] = vl[0]
            live[: len(vl[1])] = vl[1]
            vl[0], vl[1] = vals, live
        return vl

    @staticmethod
    def _labels(name: str) -> tuple[str, ...]:
        return CATALOGUE[name].labels

    def _close(self, name: str, dirty: set) -> None:
        """Family ``name`` is about to change at the refresh in progress (tick ``_at``): its current run is written up
        to that tick (`_write_run`) and a new run starts there; the family is dirty."""
        dirty.add(name)
        run = self._runs.get(name)
        if run is None:
            self._runs[name] = [self._fams[name], self._at, 0]
        elif self._at > run[1]:
            self._write_run(name, run, self._at, self._ks)
        else:   # (written past the tick already: the new run's values are written from the tick on, NaN included)
            run[2] = max(run[2], run[1])
            run[1] = self._at

    def _write_run(self, name: str, run: list, upto: int, ks=None) -> None:
        """Write family ``name``'s current run, its current values, for ticks ``[start, upto)`` (as one block of
        rows: the rows of its first to last live series, those without a live series NaN, as the store's unwritten
        cells are: a slice write instead of a scatter; ``ks``: the compiled kernels, or None); the run goes on from
        ``upto``."""
        vl = self._cur[name]
        if vl[2] is None:   # the first and last live row, found again (`_live_off`)
            on = np.flatnonzero(vl[1])
            vl[2], vl[3] = (int(on[0]), int(on[-1]) + 1) if len(on) else (0, 0)
        r0, r1 = vl[2], vl[3]
        if r1 > r0:
            data = run[0]._data
            # compiled: the live rows alone - a row without a live series has NaN (never written) at every tick a
            # run has not written yet, except behind a refresh that started a run there (`_close`: the whole range)
            if ks is None or (ks.fill_rows(data, r0, r1, run[1], upto, vl[0]) if run[2] > run[1] else
                              ks.fill_live(data, r0, r1, run[1], upto, vl[0], vl[1])) < 0:
                data[r0:r1, run[1]:upto] = vl[0][r0:r1, None]
        run[1] = upto

    def flush(self, upto: int) -> None:
        """Write every state run's constant values for ticks ``[start, upto)`` (the runs `refresh_state` closed were
        written there, `_close`)."""
        if upto <= 0:
            return
        if upto > self.store._cols:
            self.store.set_n_ticks(upto)
        ks = kernels()
        for name, run in self._runs.items():
            if upto > run[1]:
                self._write_run(name, run, upto, ks)

    #: kube_pod_status_phase's phases and kube_pod_status_ready's conditions, in series order
    PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
    #: (template key, family, resource, unit, scale) of the container resource series, in series order
    RESOURCES = (("cpu_request_m", "kube_pod_container_resource_requests", "cpu", "core", 1e-3),
                 ("mem_request_mi", "kube_pod_container_resource_requests", "memory", "byte", MI),
                 ("cpu_limit_m", "kube_pod_container_resource_limits", "cpu", "core", 1e-3),
                 ("mem_limit_mi", "kube_pod_container_resource_limits", "memory", "byte", MI))

    @staticmethod
    def _pod_shape(p) -> tuple:
        """What a pod's series (families and labels, in order) depend on besides what a pod never changes
        (name, service, ReplicaSet and its template): its node, its waiting reason (when waiting), the
        reason of its last termination. Equal shapes: the same `_pod_keys`."""
        return p.node, p.reason if p.cstate == "waiting" and p.reason else "", p.last_reason

    def _pod_keys(self, p) -> list[tuple[str, tuple]]:
        """A pod's series as (family, label values), in order (`_pod_values` gives their values)."""
        sim = self.sim
        c = sim.cluster
        ns = self.ns
        name = p.name
        svc = c.svc_names[p.svc]
        node = c.nodes[p.node].name if p.node >= 0 else ""
        rs = p.rs.name
        out = [("kube_pod_info", (ns, name, node, "ReplicaSet", rs, sim.node_ip(p.node) if p.node >= 0 else "")),
               ("kube_pod_owner", (ns, name, "ReplicaSet", rs)),
               ("kube_pod_labels", (ns, name, svc))]
        out += [("kube_pod_status_phase", (ns, name, ph)) for ph in self.PHASES]
        out += [("kube_pod_status_ready", (ns, name, cond)) for cond in ("true", "false", "unknown")]
        out += [("kube_pod_container_status_ready", (ns, name, svc)),
                ("kube_pod_container_status_running", (ns, name, svc)),
                ("kube_pod_container_status_waiting", (ns, name, svc))]
        if p.cstate == "waiting" and p.reason:
            out.append(("kube_pod_container_status_waiting_reason", (ns, name, svc, p.reason)))
        out.append(("kube_pod_container_status_restarts_total", (ns, name, svc)))
        if p.last_reason:
            out.append(("kube_pod_container_status_last_terminated_reason", (ns, name, svc, p.last_reason)))
        if p.node >= 0:
            res = p.rs.template["resources"]
            out += [(fam_name, (ns, name, svc, node, resource, unit))
                    for key, fam_name, resource, unit, _ in self.RESOURCES if res.get(key)]
            out.append(("container_oom_events_total", (ns, name, svc, node)))
        out.append(("up", ("kubernetes-pods", ns, name, svc)))
        return out

    def _pod_values(self, p) -> list[float]:
        """The values of a pod's series, in `_pod_keys` order."""
        ph = p.phase
        rdy = self._eff[p.slot]
        unknown = p.node_lost
        waiting = p.cstate == "waiting"
        out = [1.0, 1.0, 1.0, float(ph == "Pending"), float(ph == "Running"), float(ph == "Succeeded"),
               float(ph == "Failed"), float(ph == "Unknown"),
               float(rdy and not unknown), float(not rdy and not unknown), float(unknown),
               float(rdy), float(p.cstate == "running"), float(waiting)]
        if waiting and p.reason:
            out.append(1.0)
        out.append(float(p.restarts))
        if p.last_reason:
            out.append(1.0)
        if p.node >= 0:
            res = p.rs.template["resources"]
            out += [res[key] * scale for key, _, _, _, scale in self.RESOURCES if res.get(key)]
            out.append(float(self.sim.pod_ooms.get(p.slot, 0)))
        out.append(float(p.cstate == "running" and not p.node_lost))
        return out

    def _pod_series(self, p) -> list[tuple[str, tuple, float]]:
        """A pod's series: (family, label values, value), in order."""
        return [(k[0], k[1], v) for k, v in zip(self._pod_keys(p), self._pod_values(p))]

    @staticmethod
    def _dep_shape(dep) -> tuple:
        """What a Deployment's series depend on besides its name: its ReplicaSets (`_dep_keys`)."""
        return tuple(rs.id for rs in dep.rss)

    def _dep_keys(self, dep) -> list[tuple[str, tuple]]:
        """A Deployment's series as (family, label values), in order (`_dep_values` gives their values)."""
        ns = self.ns
        d = dep.name
        nd = (ns, d)
        out = [("kube_deployment_spec_replicas", nd), ("kube_deployment_status_replicas", nd),
               ("kube_deployment_status_replicas_available", nd), ("kube_deployment_status_replicas_unavailable", nd),
               ("kube_deployment_status_replicas_updated", nd)]
        out += [("kube_deployment_status_condition", (ns, d, cond, s))
                for cond in ("Available", "Progressing") for s in ("true", "false", "unknown")]
        out += [("kube_deployment_metadata_generation", nd), ("kube_deployment_status_observed_generation", nd)]
        out += [("kube_replicaset_status_ready_replicas", (ns, rs.name)) for rs in dep.rss]
        out += [("kube_endpoint_address_available", nd), ("kube_endpoint_address_not_ready", nd)]
        return out

    def _dep_values(self, dep) -> list[float]:
        """The values of a Deployment's series, in `_dep_keys` order (one pass over its live pods)."""
        eff = self._eff
        per_rs = []
        n_live = avail = n_ready = n_not = 0
        for rs in dep.rss:
            k = 0
            for p in rs.pods:
                n_live += 1
                r = eff[p.slot]
                if r:
                    k += 1
                # `endpoints_of(dep.svc)`'s two lists, counted: pods with an address
                if p.node < 0 or p.cstate == "waiting" and p.reason in _NO_ADDRESS:
                    continue
                if r:
                    n_ready += 1
                else:
                    n_not += 1
            per_rs.append(float(k))
            avail += k
        if self.sim.res.no_endpoints[dep.svc]:
            n_ready = n_not = 0
        d = dep.replicas
        out = [float(d), float(n_live), float(avail), float(max(0, d - avail) if n_live or d else 0),
               float(len(dep.current.pods))]
        # the statuses of `SimBackend.deployment_conditions` (its messages are not exported here): Available, then
        # Progressing, each as (true, false, unknown)
        _, unavail = rolling_params(d)
        out += _TRUE if avail >= d - unavail else _FALSE
        out += _FALSE if dep.progress_failed else _TRUE
        out += (float(dep.generation), float(dep.observed_generation))
        out += per_rs
        out += (float(n_ready), float(n_not))
        return out

    def _dep_series(self, dep) -> list[tuple[str, tuple, float]]:
        """A Deployment's series: (family, label values, value), in order."""
        return [(k[0], k[1], v) for k, v in zip(self._dep_keys(dep), self._dep_values(dep))]

    def _node_series(self, n):
        ready = "true" if n.ready else "unknown"
        for cond in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
            val = ready if cond == "Ready" else ("false" if n.ready else "unknown")
            for s in ("true", "false", "unknown"):
                yield "kube_node_status_condition", (n.name, cond, s), float(val == s)
        yield "kube_node_spec_unschedulable", (n.name,), float(n.cordoned)
        yield "kube_node_labels", (n.name, n.zone), 1.0
        yield "kube_node_status_allocatable", (n.name, "cpu", "core"), n.cpu_m / 1000.0
        yield "kube_node_status_allocatable", (n.name, "memory", "byte"), n.mem_mi * MI

    #: the quota's series depend on nothing that changes (the namespace and the quota's resources are fixed)
    _QUOTA_SHAPE = ("quota",)

    def _quota_values(self, used: dict[str, float]) -> list[float]:
        """The values of the quota's series, in `_quota_series` order."""
        out = []
        for res, hard in self.sim.cluster.quota_hard.items():
            out += (hard, used[res])
        return out

    def _quota_series(self, used: dict[str, float]):
        ns = self.ns
        for res, hard in self.sim.cluster.quota_hard.items():
            yield "kube_resourcequota", (ns, f"{ns}-quota", res, "hard"), hard
            yield "kube_resourcequota", (ns, f"{ns}-quota", res, "used"), used[res]


#: a condition's (true, false, unknown) series values for status "true" and "false"
_TRUE = (1.0, 0.0, 0.0)
_FALSE = (0.0, 1.0, 0.0)
#: waiting reasons of a container whose pod has no address yet (`SimBackend.endpoints_of` leaves it out)
_NO_ADDRESS = ("ContainerCreating", "ErrImagePull", "ImagePullBackOff")


def _live_on(vl: list, row: int) -> None:
    """Row ``row`` of a family's current values (`MetricWriter._cur`) has a live series now: its live range
    grows to hold it."""
    lo = vl[2]
    if lo is not None and not lo <= row < vl[3]:
        if vl[3] == lo:   # none live before
            vl[2], vl[3] = row, row + 1
        else:
            vl[2], vl[3] = min(lo, row), max(vl[3], row + 1)


def _live_off(vl: list, row: int) -> None:
    """Row ``row`` has no live series now: at an end of the live range, the range is found again when next
    needed (inside it, the first and last live rows stay)."""
    if vl[2] is not None and (row == vl[2] or row == vl[3] - 1):
        vl[2] = None


class SlotsOnly(_OfTwin):
    """The writer of a twin that exports no metrics (``SimBackend(..., metrics=False)``: the run loop's
    no-action reference run and fault validation read only entry evidence and health): it keeps the
    one thing the dynamics take from the writer, the pod slots that have cAdvisor series, in the same
    order, and writes nothing. (The twin queues traffic and cAdvisor counters only when it has metrics,
    so only the calls it makes on every twin are here.)"""

    def __init__(self, sim: "SimBackend"):
        self.bind(sim)
        self.flow_slots = np.zeros(0, dtype=np.intp)
        self._flow_layout = -1

    def flow_slots_now(self) -> np.ndarray:
        c = self.sim.cluster
        if self._flow_layout != c.layout_version:
            self._flow_layout = c.layout_version
            n = len(c.pods)
            self.flow_slots = np.flatnonzero(c.p_active[:n] & c.p_bound[:n])   # scheduled, not deleted
        return self.flow_slots

    def refresh_state(self, tick: int) -> None:
        self.sim.cluster.changed_slots = set()
        self.sim.cluster.touched = set()

    def flush(self, upto: int) -> None:
        pass

    def defer_flush(self, upto: int) -> None:
        pass

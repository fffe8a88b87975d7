"""`SimBackend`: the deterministic digital twin behind the `Backend` protocol.

>>> from sremarathon_env.backends.sim import SimBackend
>>> sim = SimBackend("online-boutique", seed=1)
>>> ev = sim.advance_to(120.0)
>>> len(ev), ev[-1].failed < 0.01 * ev[-1].total
(8, True)
>>> sim.service_health("frontend")["ready"]
1.0
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import math
import re
import weakref
from typing import Any

import numpy as np

from apps import load_app
from apps.spec import AppSpec
from faults.effects import Effect
from sremarathon_env.backends.arguments import env_key_error, merge_resources, patched, replicas_error
from sremarathon_env.backends.base import EntryEvidence, OpResult
from sremarathon_env.backends.sim import faulthook, render
from sremarathon_env.backends.sim.cluster import CrashPlan, Cluster, Deployment, Pod, ReplicaSet, rolling_params
from sremarathon_env.backends.sim.faulthook import EffectBook, config_faults, marker_holds
from sremarathon_env.backends.sim.history import SVC_FIELDS, Epoch, History
from sremarathon_env.backends.sim.kernels import kernels
from sremarathon_env.backends.sim.metrics import MetricWriter, SlotsOnly, traffic_increments
from sremarathon_env.backends.sim.model import CompiledApp
from sremarathon_env.backends.sim.traffic import StackedInputs, TickInputs, TrafficModel, _Groups, stack_inputs, window
from sremarathon_env.backends.sim.util import canonical, child_rng, template_hash
from sremarathon_env.telemetry.store import MetricStore

MAX_BATCH = 32
#: ticks per traffic step of deferred runs (whole runs; arrays stay cache-sized)
DEFER_CHUNK = 64
#: the app has run this long before t=0 (pods started then): counters start at their steady-state totals
WARM_S = 3600.0
_VERSION_TAG = re.compile(r"^v?\d+(\.\d+){1,2}([-+][0-9A-Za-z.]+)?$")
_COMPILED: dict[int, tuple[AppSpec, CompiledApp]] = {}


#: id(app) -> (app, {(what, service): initial source tree / commit history}), shared read-only by all twins
_SOURCES: dict[int, tuple[AppSpec, dict[tuple[str, str], Any]]] = {}


def _initial_sources(app: AppSpec, service: str, what: str) -> Any:
    """``what="tree"``: the service's initial source tree; ``"history"``: its commits before t=0."""
    hit = _SOURCES.get(id(app))
    if hit is None or hit[0] is not app:
        hit = (app, {})
        _SOURCES[id(app)] = hit
    got = hit[1].get((what, service))
    if got is None:
        from apps.sources import initial_history, initial_tree
        got = hit[1][(what, service)] = (initial_tree if what == "tree" else initial_history)(app, service)
    return got


#: app name -> the rows its twins' metric families made ready (`MetricStore`'s ``rows_hint``: a twin's families
#: allocate as many rows at once, instead of growing by copying as an earlier run of the app did); a few apps
_ROWS_HINT: dict[str, dict] = {}
MAX_ROWS_HINTS = 8


def _rows_hint(app_name: str) -> dict:
    hint = _ROWS_HINT.get(app_name)
    if hint is None:
        while len(_ROWS_HINT) >= MAX_ROWS_HINTS:
            _ROWS_HINT.pop(next(iter(_ROWS_HINT)))
        hint = _ROWS_HINT[app_name] = {}
    return hint


#: the traffic outputs of the latest deferred (reference) runs, per app, seed and load (a twin that follows
#: one keeps it as long as it does): a twin whose tick
#: has the very same task rates and traffic inputs as a taped tick takes its outputs (`_Tape`)
_TAPES: dict[tuple, "_Tape"] = {}
MAX_TAPES = 2


class _Tape:
    """Traffic outputs of a metric-less twin's deferred ticks (`begin_deferred` .. `end_deferred`), kept
    for other twins of the same app, seed, tick and load model (the run loop's scored twin follows the
    no-action reference run tick for tick until the agent acts). ``ticks``: tick -> chunk, a chunk is
    [first tick, outputs, task rates, traffic inputs per tick, dt, entry evidence (4, K), metric counter
    increments (made on the first take), per-edge no-endpoint share, the per-service sums of the edge
    columns the health history records (`SimBackend._into_cols`, made on the first take that records
    history), the entry evidence records (`EntryEvidence`, frozen: shared)]. A twin whose state-changing calls
    (`SimBackend._note`) equal the taped run's is in its state and takes its state refreshes' inputs and
    snapshots, and its runs' cluster-side numbers too (``refresh``, ``epochs``, ``runs``). Per tick one
    dict entry, no object (few objects for the garbage collector to walk)."""

    def __init__(self) -> None:
        self.ticks: dict[int, tuple] = {}
        #: tick -> (the twin's calls so far, pod-state key, slot capacity, the effects' resolution and traffic
        #: inputs built at that tick's state refresh: see `SimBackend._refresh`)
        self.refresh: dict[int, tuple] = {}
        #: tick -> (calls, pod-state key, the cluster snapshot taken at that tick's state refresh)
        self.epochs: dict[int, tuple] = {}
        #: tick -> run: (first tick, calls, flow slots, dt, per-pod rates, working sets, queue lag, state fields
        #: or None), the cluster-side numbers of a run of ticks (`SimBackend._run_block`)
        self.runs: dict[int, tuple] = {}
        #: (calls, time, pod slot, ReplicaSet, pods created, layout version) -> the node the scheduler chose
        #: (`Cluster._placed`)
        self.picks: dict[tuple, int | None] = {}
        #: calls up to and including a deploy -> (its commit sha, its template's hash) (`SimBackend.deploy`)
        self.deploys: dict[bytes, tuple[str, str]] = {}
        #: the kubelet moments' draws (`util.KeyedDraws`' book: its generators' recorded calls and values)
        self.draws: dict[tuple[int, str], tuple] = {}
        #: (taped flow slots, a follower's flow slots) last found equal (`take_run`)
        self._same_slots: tuple = (None, None)

    def add_run(self, run: tuple) -> None:
        for j in range(len(run[5])):
            self.runs[run[0] + j] = run

    def take_run(self, k0: int, K: int, calls: bytes, sl: np.ndarray, dt: float):
        """(per-pod rates, working sets, queue lag, state fields or None) of ticks ``k0 .. k0+K-1`` when a
        taped run covers them with the same calls, flow slots and dt, else None."""
        run = self.runs.get(k0)
        if run is None:
            return None
        r0, calls_r, sl_r, dt_r, ppr, mem, lag, state = run
        a = k0 - r0
        if calls_r != calls or dt_r != dt or a + K > len(mem):
            return None
        if sl_r is not sl:
            # flow slot arrays are never changed in place (a new one per layout): a pair found equal stays equal
            same = self._same_slots
            if same[0] is not sl_r or same[1] is not sl:
                if len(sl_r) != len(sl) or not np.array_equal(sl_r, sl):
                    return None
                self._same_slots = (sl_r, sl)
        return ppr[a:a + K], mem[a:a + K], lag[a:a + K], None if state is None else state[a:a + K]

    def add(self, k0: int, out, task_rate: np.ndarray, inputs: list[TickInputs], dt: float, evidence: np.ndarray,
            uh: np.ndarray) -> None:
        # the metric counter increments are made on the first take (a follower with metrics wants them;
        # a run loop's scored twin that acts at once never does)
        chunk = [k0, out, task_rate, inputs, dt, evidence, None, uh, None, None]
        for j in range(len(inputs)):
            self.ticks[k0 + j] = chunk

    def take(self, runs: list[dict], layout: tuple[np.ndarray, np.ndarray]):
        """(outputs, entry evidence (4, K), metric counter increments, the chunk, its ticks' offsets ``a, j``
        in it) of consecutive ``runs`` when every tick's task rates and inputs equal a taped tick's (within
        one chunk), else None. ``layout``: the taker's mesh layout (`mesh_layout`), for the increments."""
        first = runs[0]
        chunk = self.ticks.get(first["k0"])
        if chunk is None:
            return None
        c0, out, tr, inputs, dt, evidence, incs, uh = chunk[:8]
        if dt != first["dt"]:
            return None
        a = j = first["k0"] - c0
        for r in runs:
            K = r["K"]
            if j + K > len(inputs):
                return None
            inp = r["inputs"]
            kb = None
            for i in range(j, j + K):
                if inputs[i] is not inp:   # the same inputs object (taken from the tape), or equal inputs
                    if kb is None:
                        kb = _inputs_bytes(inp)
                    if _inputs_bytes(inputs[i]) != kb:
                        return None
            if tr[j:j + K].tobytes() != r["task_rate"].tobytes():
                return None
            j += K
        if incs is None:   # elementwise along ticks: any window of them is that window's own increments
            incs = chunk[6] = traffic_increments(*layout, out, uh, dt)
        return window(out, a, j), evidence[:, a:j], incs.window(a, j), chunk, a, j

    @staticmethod
    def records(chunk: list, a: int, j: int, make) -> list:
        """The entry evidence records of a chunk's ticks ``a .. j-1`` (``make(first tick, evidence)``: the
        records of the whole chunk, made once; each tick's record is that tick's alone)."""
        recs = chunk[9]
        if recs is None:
            recs = chunk[9] = make(chunk[0], chunk[5])
        return recs[a:j]

    @staticmethod
    def into(chunk: list, a: int, j: int, make) -> np.ndarray:
        """The per-service sums of the edge columns of a chunk's ticks ``a .. j-1`` (``make(outputs)``: those
        of the whole chunk, made once; elementwise along ticks, so a window's are the window's own)."""
        into = chunk[8]
        if into is None:
            into = chunk[8] = make(chunk[1])
        return into[a:j]


def _taped_end(tape: _Tape, k0: int) -> float:
    """The first tick after the taped chunk that holds tick ``k0`` (inf where none does)."""
    chunk = tape.ticks.get(k0)
    return math.inf if chunk is None else chunk[0] + len(chunk[3])


#: argument types `_fp_part` returns as they are (exactly these types: no subclass of str, list, tuple or dict)
_FP_PLAIN = frozenset({int, float, bool, type(None)})


def _fp_part(x: Any) -> Any:
    """A call argument in a compact form with the same information for `SimBackend._note`: models as their
    field values, long texts (source files) as their length and digest. (`_fp_part_plain`'s values, plain
    numbers and short texts taken first, sequences made from lists.)"""
    t = type(x)
    if t in _FP_PLAIN:
        return x
    if t is str:
        return x if len(x) <= 200 else ("#text", len(x), hashlib.blake2b(x.encode(), digest_size=16).digest())
    if t is tuple or t is list:
        return tuple([v if type(v) in _FP_PLAIN or type(v) is str and len(v) <= 200 else _fp_part(v) for v in x])
    if t is dict:
        return ("#dict",) + tuple([(k, v if type(v) in _FP_PLAIN or type(v) is str and len(v) <= 200 else _fp_part(v))
                                   for k, v in x.items()])
    return _fp_part_plain(x)


def _fp_part_plain(x: Any) -> Any:
    """The definition of `_fp_part`."""
    if isinstance(x, str):
        return x if len(x) <= 200 else ("#text", len(x), hashlib.blake2b(x.encode(), digest_size=16).digest())
    if isinstance(x, Effect):   # frozen; its fields are plain values in a fixed order
        return ("#effect", tuple(x.__dict__.values()))
    if isinstance(x, (list, tuple)):
        return tuple(_fp_part_plain(v) for v in x)
    if isinstance(x, dict):
        return ("#dict",) + tuple((k, _fp_part_plain(v)) for k, v in x.items())
    return x


def _inputs_bytes(inp: TickInputs) -> bytes:
    """Everything `TrafficModel.step` reads of prepared inputs, as bytes (kept on the inputs)."""
    kb = getattr(inp, "_bytes", None)
    if kb is None:
        kb = inp._bytes = b"".join(np.ascontiguousarray(getattr(inp, f)).tobytes() for f in StackedInputs.FIELDS)
    return kb


def _raw_inputs_key(*arrays: np.ndarray) -> bytes:
    """The bytes of a twin's traffic inputs as `SimBackend._build_inputs` makes them (fixed shapes and dtypes per
    app: equal bytes, bit-equal arrays)."""
    return b"".join([a.tobytes() for a in arrays])


def _weak_method(owner: Any, name: str):
    """``owner``'s method ``name`` as a function that does not keep ``owner`` alive. For the parts of a twin that call
    back into it (its cluster's hooks): the twin owns them, so its bound methods there would make every twin a
    reference cycle, freed only by the cyclic garbage collector; this way a dropped twin is freed by reference
    counting (`SimBackend._bind`).

    >>> class A:
    ...     def f(self, x): return x + 1
    >>> a = A(); g = _weak_method(a, "f"); g(1)
    2
    >>> del a; g(1)
    Traceback (most recent call last):
    ReferenceError: the twin of this hook (f) is gone
    """
    ref, func = weakref.ref(owner), getattr(type(owner), name)

    def call(*args):
        obj = ref()
        if obj is None:
            raise ReferenceError(f"the twin of this hook ({name}) is gone")
        return func(obj, *args)
    return call


def compiled(app: AppSpec) -> CompiledApp:
    hit = _COMPILED.get(id(app))
    if hit is None or hit[0] is not app:
        hit = (app, CompiledApp(app))
        _COMPILED[id(app)] = hit
    return hit[1]


#: `SimBackend.services_health`'s fields that are a service history row over the request rate: (row, whether the
#: p95 factor multiplies it), as `service_health` computes them per service
_PER_REQUEST = {"error_ratio": (1, False), "p95_ms": (2, True), "own_error_ratio": (10, False), "own_p95_ms": (11, True)}


class SimBackend:
    """The twin. ``noise_load=False`` gives a constant load (no diurnal swing, no jitter).
    ``metrics=False`` exports no metrics (the store stays empty); everything else - dynamics, entry
    evidence, health reads, logs, deploys - is the same, bit for bit. ``horizon_s`` (optional): how far
    the run is known to go (a marathon's horizon): the metric store allocates the tick columns for it at
    once (`MetricStore`'s ``cols``) instead of growing along time mid-run; nothing else depends on it.
    ``records=False``: a twin nobody reads but for its entry evidence (the run loop's no-action reference
    run): it keeps none of the records only the event and log reads serve (the cluster's k8s events and
    lifecycle records, the log-signature timeline; `events` and `logs` refuse); its dynamics, evidence
    and tape are the same, bit for bit."""

    def __init__(self, app: AppSpec | str, seed: int, *, tick_s: float = 15.0, noise_load: bool = True,
                 metrics: bool = True, horizon_s: float | None = None, records: bool = True):
        self.app: AppSpec = load_app(app) if isinstance(app, str) else app
        self.app_name = self.app.name
        self.seed = int(seed)
        self.tick_s = float(tick_s)
        self.noise_load = bool(noise_load)
        self.m = compiled(self.app)
        self.tm = TrafficModel(self.m)
        self.book = EffectBook()
        self.registry: set[tuple[str, str]] = {(s.image, s.tag) for s in self.app.services}
        self.config_maps: dict[str, dict[str, str]] = {}
        if self.app.flags_config_map:
            self.config_maps[self.app.flags_config_map] = {f.name: f.default_variant for f in self.app.flags}
        for s in self.app.services:
            for k in s.knobs:
                if k.config_map:
                    self.config_maps.setdefault(k.config_map, {})[k.key] = k.default
        self._cfg_cache: dict[int, list] = {}
        #: per ReplicaSet id: known to carry no effect handles and no config faults (`faulthook._weights` skips it;
        #: False: unknown). Set by `_weights`; cleared where a ReplicaSet may gain either (`_unbore`)
        self._rs_boring = np.zeros(0, dtype=bool)
        self.records = bool(records)
        self.cluster = Cluster(self.app, self.seed, records=self.records)
        self.cluster.image_ok = _weak_method(self, "_image_ok")   # (weak: see `_bind`)
        self.cluster.bootstrap(_weak_method(self, "_crash_plan"), meta_of=self._initial_meta)
        cols = 0 if horizon_s is None or not metrics else int(math.floor(float(horizon_s) / self.tick_s + 1e-9)) + 1
        self.store = MetricStore(step_s=self.tick_s, capacity=int(5400 / self.tick_s) + 8, cols=cols,
                                 rows_hint=_rows_hint(self.app_name) if metrics else None)
        self.history = History(self.m)
        self._svc_in = _Groups(self.m.edge_callee, self.m.S)        # edge columns -> callee service
        self._lag_callee = [self.m.edges[e][1] for e in self.m.async_edges]
        self._lag_callee_a = np.array(self._lag_callee, dtype=np.intp)   # (the same, for `kernels.state_rows`)
        self._spec_zone = np.array([self.m.zones.index(self.app.zone_of(n)) for n in self.m.svc_names], dtype=np.intp)
        self._desired = np.zeros(self.m.S)
        self._restarts = np.zeros(self.m.S)
        self._mem_layout = (-1, None, None, None)
        self._inputs_key = None
        self._zone_net: dict[bytes, np.ndarray] = {}   # ready pods per (service, zone) -> network latency per edge
        self.pod_burn = self.pod_hog = self.pod_leak_rate = np.zeros(0)
        self._ready_eff = np.zeros(0, dtype=bool)
        self.pod_ooms: dict[int, int] = {}
        self.sig_timeline: list[list] = []        # [start, end, svc, text]
        self._sig_open: dict[tuple[int, str], list] = {}
        self._crash_handles: set[str] = set()
        self._crash_effects: tuple = (-1, [])     # (book version, its crash effects by handle: `_crash_list`)
        self._node_down_refs: dict[str, int] = {}
        self._oneshot: set[str] = set()
        self._in_pods: dict[str, set[int]] = {}   # until_restart effects: the pods they live in
        self._lag = np.zeros(len(self.m.async_edges))
        self._load_rng_block = -1
        self._load_noise = None
        phase_rng = child_rng(self.seed, "load", "phase")
        self._diurnal_phase = float(phase_rng.uniform(0, 2 * math.pi))
        mean_think = float(np.mean(self.app.load.think_time_s))
        self._base_task_rate = self.app.load.users / mean_think * self.m.path_share
        self.metrics = bool(metrics)
        self.writer = MetricWriter(self) if self.metrics else SlotsOnly(self)
        self._tick = 0
        self._now = 0.0
        self._last_at: tuple = (None, 0)   # the last time `_tick_at` resolved and its tick
        self._per_node: tuple = (-1, {})    # `_snapshot`'s pods per node, and the placement version they are of
        self._last_snapshot: tuple | None = None   # (serving pods' array, key, snapshot): `_refresh_snapshot`
        self._res_seen = None   # the resolution `_effects_seen` last ran with
        self._effects_dirty = True
        self._deferred: list[dict] | None = None   # tick runs whose traffic waits (`advance_to`, `end_deferred`)
        self._tape: _Tape | None = None            # where a `begin_deferred` span keeps its outputs
        self._lean = False                         # an evidence-only deferred span: no health history
        self._calls = b""                          # fingerprint of the state-changing calls so far (`_note`)
        self._follow: _Tape | None = None          # the taped run whose state this twin is in
        self._blk: tuple | None = None             # per-slot constants of the current flow slots
        self._has_burn = self._has_hog = self._has_leak = False
        self.cluster.taped = _weak_method(self, "_taped")
        self.cluster.run_until(0.0)
        self._refresh(0.0, 0)
        # tick 0 stands for the hour the app has already run: its counters carry that hour's totals
        self._run_block(0, 1, WARM_S)
        self.writer.flush(1)

    # ================================================================== clock
    @property
    def pod_ready_eff(self) -> np.ndarray:
        """Per pod slot: serving (ready, not lost, no not_ready effect) as of the last state refresh.
        Pods created since (the cluster may have grown its slot arrays) read as not ready, as they are."""
        a = self._ready_eff
        cap = len(self.cluster.p_svc)
        if len(a) < cap:
            b = np.zeros(cap, dtype=bool)
            b[: len(a)] = a
            self._ready_eff = a = b
        return a

    @pod_ready_eff.setter
    def pod_ready_eff(self, value: np.ndarray) -> None:
        self._ready_eff = value

    @property
    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> list[EntryEvidence]:
        target = int(math.floor(t / self.tick_s + 1e-9))
        c = self.cluster
        # the runs of ticks between cluster changes keep their traffic numbers for one traffic step at
        # the end of the call (`_settle`; inside a `begin_deferred` span, for `end_deferred`): nothing
        # reads them before, and every number is elementwise along ticks (the same floats)
        own = self._deferred is None
        if own:
            self._deferred = []
        n_run = 0
        try:
            while self._tick < target:
                k = self._tick + 1
                T = k * self.tick_s
                c.run_until(T)
                c.check_progress(T)
                if c.dirty or self._effects_dirty:
                    self._refresh(T, k)
                # every per-tick number is computed elementwise along the tick axis (running totals one
                # tick at a time, `seqsum`), so a tick's floats do not depend on where a block starts or
                # ends (tested): blocks run as long as the cluster is at rest, up to MAX_BATCH ticks. (One
                # exception in the metric store: a mesh response-code series that first reaches half a
                # request inside a block is written from the block's first tick, as it always was.)
                k1 = min(target, k + MAX_BATCH - 1)
                nxt = c.next_event_time()
                if nxt < math.inf:
                    k1 = max(k, min(k1, math.ceil(nxt / self.tick_s - 1e-9) - 1))
                n = self._run_block(k, k1 - k + 1, self.tick_s)
                n_run += n
                self._tick = k + n - 1
        finally:
            if own:
                runs, self._deferred = self._deferred, None
        out: list = self._settle(runs) if own else [None] * n_run
        self._now = max(self._now, float(t))
        # the state runs are written up to here when the store is next read (`MetricStore.defer`: one flush
        # for all the advances before a read)
        self.writer.defer_flush(self._tick + 1)
        return out

    def _task_rates(self, k0: int, K: int) -> np.ndarray:
        rate = self._base_task_rate * self.res.path_factor
        if not self.noise_load:
            return np.broadcast_to(rate, (K, self.m.P))
        # per 256-tick block of the load noise: the diurnal factor and the jitter factor of every tick,
        # computed once (elementwise, so the same floats as computing them per call)
        b0, b1 = k0 // 256, (k0 + K - 1) // 256
        if b0 == b1:
            diurnal, jit = self._load_factors(b0)
            i = k0 - 256 * b0
            return rate * diurnal[i:i + K, None] * jit[i:i + K]
        out = []
        for b in range(b0, b1 + 1):
            lo, hi = max(k0, 256 * b), min(k0 + K, 256 * (b + 1))
            diurnal, jit = self._load_factors(b)
            out.append(rate * diurnal[lo - 256 * b:hi - 256 * b, None] * jit[lo - 256 * b:hi - 256 * b])
        return np.concatenate(out, axis=0)

    def _load_factors(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(diurnal (256,), jitter (256, P)) load factors of the ticks of noise block ``b``."""
        if b != self._load_rng_block:
            rng = child_rng(self.seed, "load", "jitter", int(b))
            noise = rng.standard_normal((256, self.m.P))
            load = self.app.load
            t = np.arange(256 * b, 256 * (b + 1)) * self.tick_s
            diurnal = 1.0 + load.diurnal_amplitude * np.sin(2 * math.pi * t / 7200.0 + self._diurnal_phase)
            self._load_noise = (diurnal, np.exp(load.jitter * noise - 0.5 * load.jitter ** 2))
            self._load_rng_block = int(b)
        return self._load_noise

    # ================================================================== deferred traffic
    def begin_deferred(self, evidence_only: bool = False) -> None:
        """Until `end_deferred`, `advance_to` runs the cluster, the state refreshes, memory/OOM kills and
        queue lag tick by tick as always, but leaves each tick's traffic numbers (latency, failures, the
        health history's rates and the entry evidence) to be computed for all those ticks in one step by
        `end_deferred`; it returns one ``None`` per tick meanwhile. Every tick's numbers are the same floats
        (the traffic model is elementwise along ticks). Between the two calls, only interventions and reads
        of the live state may happen, no health reads of the deferred ticks (nor ``at(t)`` views, logs,
        traces), and no read of the metric store (its traffic counters of those ticks wait for `end_deferred`,
        then for the next read: `MetricStore.defer`).

        ``evidence_only=True`` (a run that reads nothing but the entry evidence, like the run loop's
        no-action reference run; twins without metrics only): the span keeps no health history (no per-tick
        state fields, no cluster snapshots), so health reads of its ticks (``at``, ``service_health(at=...)``,
        logs, traces) are undefined; the dynamics and the evidence are the same. A twin without metrics keeps
        its span's outputs on a tape for later twins of its app, seed and load (`_Tape`); one with metrics
        keeps none (it may follow such a tape)."""
        if self._deferred is not None:
            return
        if self.metrics:
            if evidence_only:
                raise ValueError("an evidence-only deferred span needs a twin without metrics")
            self._deferred = []
            return
        self._deferred = []
        self._lean = bool(evidence_only)
        # its outputs are kept for twins of the same app, seed and load (the latest few such runs)
        key = self._tape_key()
        _TAPES.pop(key, None)
        while len(_TAPES) >= MAX_TAPES:
            _TAPES.pop(next(iter(_TAPES)))
        self._tape = _TAPES[key] = _Tape()

    def end_deferred(self) -> list[EntryEvidence]:
        """Compute the traffic of the ticks run since `begin_deferred`; their entry evidence, in order."""
        runs, self._deferred = self._deferred, None
        try:
            return self._settle(runs)
        finally:
            self._tape = None
            if self._lean:   # the ticks after the span run under the current cluster state
                self._lean = False
                self._state_fields()
                self.history.add_epoch(self._snapshot())

    def _tape_key(self) -> tuple:
        return (self.app_name, id(self.m), self.seed, self.tick_s, self.noise_load)

    def _followed(self) -> "_Tape | None":
        """The taped run this twin follows (kept while it does), else the latest one of its kind."""
        return self._follow if self._follow is not None else _TAPES.get(self._tape_key())

    def _taped(self) -> tuple | None:
        """For the cluster (`Cluster._placed`, `Cluster._draws`): (the tape this twin records, or None; the taped
        run it follows, else the latest of its kind, or None; its calls so far); None when it has neither."""
        if self._tape is not None:
            return self._tape, None, self._calls
        tape = self._followed()
        return None if tape is None else (None, tape, self._calls)

    def _note(self, *call: Any, at: float | None = None) -> None:
        """Fold a state-changing call and the time it came at into ``_calls``. The twin is deterministic:
        twins of one app, seed, tick and load model that got the same calls at the same times are in the
        same state at every tick (however their advances were cut, with or without metrics). ``at``: the
        time of a change the twin makes itself inside `advance_to` (a state refresh's tick time; ``_now``
        there is where the call began, which depends on how advances are cut)."""
        t = self._now if at is None else at
        self._calls = hashlib.blake2b(self._calls + repr((_fp_part(call), t)).encode(), digest_size=16).digest()

    def _settle(self, runs: list[dict]) -> list[EntryEvidence]:
        """The traffic of waiting runs (consecutive ticks), about DEFER_CHUNK ticks per traffic step
        (whole runs; cache-sized arrays): their history, metric flows and entry evidence, in order. A twin that
        follows a taped run (in its state: it takes its outputs, `_Tape.take`, for the runs of one step within one
        taped chunk) ends a step where a taped chunk ends (`_taped_end`): runs that straddle two chunks would be
        stepped afresh. (One that no longer follows it steps as before: nothing to take.)"""
        evidence: list[EntryEvidence] = []
        tape = self._follow if self.metrics else None
        i = 0
        while i < len(runs):
            j, n = i, 0
            end = math.inf if tape is None else _taped_end(tape, runs[i]["k0"])
            while j < len(runs) and n < DEFER_CHUNK and runs[j]["dt"] == runs[i]["dt"] \
                    and (j == i or runs[j]["k0"] + runs[j]["K"] <= end):
                n += runs[j]["K"]
                j += 1
            evidence += self._deferred_step(runs[i:j])
            i = j
        return evidence

    def _deferred_step(self, runs: list[dict]) -> list[EntryEvidence]:
        first = runs[0]
        dt = first["dt"]
        hit = evidence = incs = None
        if self.metrics:   # the same ticks, task rates and inputs as a taped reference run's: the same outputs
            tape = self._followed()
            if tape is not None:
                hit = tape.take(runs, (self.writer.mesh_edges, self.writer.src_mask))
        if hit is not None:
            out, evidence, incs = hit[:3]
        else:
            tr = first["task_rate"] if len(runs) == 1 else np.concatenate([r["task_rate"] for r in runs], axis=0)
            # runs under the same inputs (a cluster change that left them as they were) step as one run:
            # one row of inputs for all their ticks, the floats a row per tick gives (elementwise)
            inp = first["inputs"]
            if any(r["inputs"] is not inp for r in runs):
                inp = stack_inputs([(r["inputs"], r["K"]) for r in runs])
            out = self.tm.step(tr, inp)
        uh = None
        if self.metrics or self._tape is not None:   # the no-endpoint share of each tick (one row if all share it)
            uh = first["uh"]
            if any(r["uh"] is not uh for r in runs):
                uh = np.repeat(np.stack([r["uh"] for r in runs]), [r["K"] for r in runs], axis=0)
        if hit is None and self._tape is not None:   # kept with what the metric counters' increments need
            evidence = self._evidence_arrays(out, dt)
            self._tape.add(first["k0"], out, tr, [r["inputs"] for r in runs for _ in range(r["K"])], dt, evidence, uh)
        if self.metrics:
            bounds, a = [], 0
            for r in runs:
                bounds.append((a, a + r["K"]))
                a += r["K"]
            # written when the store is next read (consecutive windows of one taped chunk as one write)
            self.writer.queue_traffic(first["k0"], a, dt, out, uh, bounds, incs, None if hit is None else hit[3:])
        if first["rows"] is None:   # an evidence-only span: no health history
            records = self._evidence_of(first["k0"], evidence if evidence is not None else self._evidence_arrays(out, dt))
            if hit is None and self._tape is not None:   # kept for the followers' takes
                self._tape.ticks[first["k0"]][9] = records
            return records
        if hit is not None:
            into = _Tape.into(*hit[3:], self._into_of)
        else:
            into = self._into_of(out)
        # the runs are consecutive ticks: the traffic fields are recorded for all of them at once, then
        # each run's own cluster state (ready endpoints, reasons, app errors, epoch) over its ticks
        rows = np.concatenate([r["rows"] for r in runs], axis=0) if len(runs) > 1 else runs[0]["rows"]
        rows[:, :4] = into[:, :4]
        rows[:, 4] = out.svc_rho
        rows[:, 10:12] = into[:, 4:]
        h = self.history
        h.record(first["k0"], out, first["ready"], first["reason"], first["inputs"].e_app, rows, epoch=first["epoch"])
        k1 = first["k0"] + first["K"]
        for r in runs[1:]:
            if r["k0"] != k1:   # pragma: no cover - advance_to runs the ticks in order
                raise RuntimeError(f"deferred runs not consecutive: tick {r['k0']} after {k1}")
            k0, k1 = k1, k1 + r["K"]
            h.ready[k0:k1] = r["ready"]
            h.reason[k0:k1] = r["reason"]
            h.node[6, k0:k1] = r["inputs"].e_app
            h.epoch_of[k0:k1] = r["epoch"]
        for r in runs:
            for fix in r["after"]:
                fix()
        if hit is not None:
            return _Tape.records(*hit[3:], self._evidence_of)
        return self._evidence_of(first["k0"], evidence if evidence is not None else self._evidence_arrays(out, dt))

    def _into_of(self, out) -> np.ndarray:
        """(K, 6, S): the per-edge columns of `_into_cols` summed into each callee service."""
        return self._svc_in(self._into_cols(out))

    @staticmethod
    def _into_cols(out) -> np.ndarray:
        """(K, 6, E) per edge: calls, failed, calls x latency, calls x sigma, own failures, calls x own
        latency (summed into the callee service; written in place, the floats np.stack would make)."""
        r = out.edge_rate
        x = np.empty((r.shape[0], 6, r.shape[1]))
        x[:, 0] = r
        x[:, 1] = out.edge_fail
        np.multiply(r, out.edge_lat_src, out=x[:, 2])
        np.multiply(r, out.edge_sigma, out=x[:, 3])
        x[:, 4] = out.edge_own_fail
        np.multiply(r, out.edge_own_lat, out=x[:, 5])
        return x

    @staticmethod
    def _evidence_arrays(out, dt: float) -> np.ndarray:
        """(4, K): entry requests, failed, slow and degraded ones per tick."""
        req = out.path_req_rate * dt
        ev = np.empty((4, req.shape[0]))
        ev[0] = req.sum(axis=1)
        ev[1] = (req * out.path_fail).sum(axis=1)
        ev[2] = (req * out.path_slow * (1.0 - out.path_fail)).sum(axis=1)
        ev[3] = (req * out.path_degraded).sum(axis=1)
        return ev

    def _evidence_of(self, k0: int, ev: np.ndarray) -> list[EntryEvidence]:
        return [EntryEvidence((k0 + k) * self.tick_s, total, fail, slow, deg)
                for k, (total, fail, slow, deg) in enumerate(zip(*ev.tolist()))]

    def _evidence(self, k0: int, out, dt: float) -> list[EntryEvidence]:
        return self._evidence_of(k0, self._evidence_arrays(out, dt))

    def _advance_lag(self, edge_rate: np.ndarray, Kc: int, dt: float) -> np.ndarray:
        """Consumer lag of each async edge after each of ``Kc`` ticks (the consumers drain up to 1.5x what is
        produced, less under ``consumer_slow``, nothing without a ready pod); advances ``_lag``."""
        m = self.m
        lag_block = np.zeros((Kc, len(self._lag)))
        for k in range(Kc if len(self._lag) else 0):
            for i, e in enumerate(m.async_edges):
                callee = m.edges[e][1]
                produced = edge_rate[k, e] * dt
                cap = produced * 1.5 / self.res.consumer_slow[callee] if self.ready_count[callee] > 0 else 0.0
                self._lag[i] = max(0.0, self._lag[i] + produced - min(cap, self._lag[i] + produced))
            lag_block[k] = self._lag
        return lag_block

    def _state_rows(self, rows: np.ndarray, mem: np.ndarray, running: np.ndarray, sl, lag_block: np.ndarray) -> None:
        """Fill a block's per-service state fields: memory utilisation, consumer lag, ready, desired, restarts."""
        ks = kernels()
        if ks is not None and running.ndim == 1:   # the same bits in one compiled call (`kernels.state_rows`)
            lay = self._layout_arrays(sl)
            ks.state_rows(rows, np.ascontiguousarray(mem), np.ascontiguousarray(running), lay[8], lay[1],
                          np.ascontiguousarray(lag_block), self._lag_callee_a, self.ready_count, self._desired,
                          self._restarts)
            return
        rows[:, 5] = self._mem_util(mem, running, sl)
        rows[:, 6] = 0.0
        for i, s_ in enumerate(self._lag_callee):
            rows[:, 6, s_] += lag_block[:, i]
        rows[:, 7] = self.ready_count
        rows[:, 8] = self._desired
        rows[:, 9] = self._restarts

    def _layout_arrays(self, sl: np.ndarray) -> tuple:
        """Per-slot constants of the pod slots ``sl`` (the writer's flow slots; a new array whenever
        pods are created or deleted): (sl, service, base MiB, MiB per call/s, CPU ms per call, memory
        limit, has a CPU limit, CPU limit or 1, memory limit or inf)."""
        hit = self._blk
        if hit is None or hit[0] is not sl:
            c = self.cluster
            m = self.m
            svc = c.p_svc[sl]
            lim = c.p_cpu_lim[sl]
            has_lim = ~np.isnan(lim)
            mem_lim = c.p_mem_lim[sl]
            hit = self._blk = (sl, svc, m.mem_base_mi[svc], m.mem_per_rps_mi[svc], m.cpu_ms_per_call[svc],
                               mem_lim, has_lim, np.where(has_lim, lim, 1.0),
                               np.where(np.isnan(mem_lim), np.inf, mem_lim))
        return hit

    def _mem_mi(self, k0: int, K: int, sl: np.ndarray, lay: tuple, per_pod_rate: np.ndarray) -> np.ndarray:
        """(K, len(sl)) working set of each pod if running: base + per call/s x rate + hog + leak (a zero
        hog or leak term is left out: adding +0.0 to the positive base changes no float)."""
        x = lay[2] + lay[3] * per_pod_rate
        if self._has_hog:
            x = x + self.pod_hog[sl]
        if self._has_leak:
            c = self.cluster
            T = (k0 + np.arange(K))[:, None] * self.tick_s
            x = x + self.pod_leak_rate[sl] * np.maximum(T - np.fmax(c.p_started[sl], self.pod_leak_since[sl]), 0.0) / 60.0
        return x

    def _oom_kill(self, over_last: np.ndarray, sl: np.ndarray, mem: np.ndarray, k_last: int) -> np.ndarray | None:
        """OOM-kill the pods of ``sl`` flagged in ``over_last`` at tick ``k_last`` (the controllers react at
        once, restarts are recounted) and return the services' memory use at that tick without them (None in
        an evidence-only span: no history)."""
        c = self.cluster
        Tk = k_last * self.tick_s
        for j in np.flatnonzero(over_last):
            pod = c.pods[int(sl[j])]
            self.pod_ooms[pod.slot] = self.pod_ooms.get(pod.slot, 0) + 1
            c.terminate(pod, Tk, "OOMKilled", 137, _oom_line(self.app.services[pod.svc].language, c.svc_names[pod.svc]))
        c.reconcile_marked(Tk)
        if self._lean:
            return None
        self._restarts = self._restart_counts()
        run_now = c.p_running[sl] & c.p_active[sl]
        return self._mem_util(mem[-1:], run_now, sl)[0]

    def _run_block(self, k0: int, K: int, dt: float) -> int:
        """Ticks ``k0 .. k0+K-1`` under unchanged cluster state (cut short by an OOM kill; returns the
        ticks run): the cluster-side numbers now (memory and OOM kills, CPU counters, queue lag, the
        state fields), the traffic numbers in a run that waits for `_settle` (at once outside
        `advance_to`: the warm tick)."""
        c = self.cluster
        m = self.m
        self.store.set_n_ticks(k0 + K)
        task_rate = self._task_rates(k0, K)
        sl = self.writer.flow_slots_now()
        lay = self._layout_arrays(sl)
        running = c.p_running[sl] & c.p_active[sl]
        # in a taped run's state (same calls: see `_note`), its numbers for these ticks are these ticks' numbers
        tape = self._followed() if self._tape is None else None
        shared = tape.take_run(k0, K, self._calls, sl, dt) if tape is not None else None
        if shared is not None:
            self._follow = tape
        if shared is not None:
            per_pod_rate, mem, lag_block, state = shared
            edge_rate = None
        else:
            # the floats `TrafficModel.step` gives them (edge rates only for the queue lag of async edges)
            _, svc_rate, edge_rate = self.tm.rates(task_rate, edges=len(self._lag) > 0)
            svc = lay[1]
            ready = self.pod_ready_eff[sl]
            per_pod_rate = np.where(ready, svc_rate.take(svc, axis=1) / np.maximum(self.ready_count[svc], 1.0), 0.0)
            mem = running * self._mem_mi(k0, K, sl, lay, per_pod_rate)
        over = running & (mem > lay[5])
        cut = K
        if over.any():
            cut = int(np.flatnonzero(over.any(axis=1))[0]) + 1
            if cut < K:
                task_rate, per_pod_rate, mem, over = task_rate[:cut], per_pod_rate[:cut], mem[:cut], over[:cut]
                if edge_rate is not None:
                    edge_rate = edge_rate[:cut]
        Kc = cut
        self.pod_mem[sl] = mem[-1]
        if shared is None:
            lag_block = self._advance_lag(edge_rate, Kc, dt)
        else:
            lag_block = lag_block[:Kc]
            if len(self._lag):
                self._lag[:] = lag_block[-1]
        if self.metrics:   # cAdvisor counters (only the metric writer reads them): written at the next store read
            self.writer.queue_pods(k0, Kc, dt, sl, lay, per_pod_rate, self.pod_burn[sl] if self._has_burn else None,
                                   running, mem, lag_block)
        h = self.history
        rows = None
        if not self._lean:
            rows = np.empty((Kc, len(SVC_FIELDS), m.S))
            if shared is not None and state is not None:
                rows[:, 5:10] = state[:Kc]
            else:
                self._state_rows(rows, mem, running, sl, lag_block)
            if k0 + Kc > h.cap:   # live reads index the current tick's row (their rates wait; state fields are live)
                h._grow(k0 + Kc)
        if self._tape is not None:
            self._tape.add_run((k0, self._calls, sl, dt, per_pod_rate, mem, lag_block,
                                None if rows is None else rows[:, 5:10]))
        run = {"k0": k0, "K": Kc, "dt": dt, "task_rate": task_rate, "inputs": self.inputs, "ready": self.ready_count,
               "reason": self.res.edge_reason, "uh": self.uh_edge, "rows": rows, "epoch": len(h.epochs) - 1,
               "after": []}
        if over[-1].any():
            # the killed containers no longer run at this tick's reads; restarts and placement changed
            k_last = k0 + Kc - 1
            mem_util = self._oom_kill(over[-1], sl, mem, k_last)
            restarts = self._restarts
            if rows is None:
                return self._queue(run)
            h.add_epoch(self._snapshot(), from_tick=k_last)
            n_epoch = len(h.epochs) - 1

            def fix(k_last=k_last, restarts=restarts, mem_util=mem_util, n_epoch=n_epoch) -> None:
                h.svc[SVC_FIELDS.index("restarts"), k_last] = restarts
                h.svc[SVC_FIELDS.index("mem_util"), k_last] = mem_util
                h.epoch_of[k_last] = n_epoch
            run["after"].append(fix)
        return self._queue(run)

    def _queue(self, run: dict) -> int:
        """A run waits for its traffic step (stepped at once outside `advance_to`: the warm tick)."""
        if self._deferred is not None:
            self._deferred.append(run)
        else:
            self._settle([run])
        return run["K"]

    # ================================================================== state refresh
    def _refresh(self, T: float, tick: int) -> None:
        c = self.cluster
        n = len(c.pods)
        cap = len(c.p_svc)
        fresh = range(0)   # slots the per-slot arrays have just grown to hold
        if cap != getattr(self, "_slot_cap", -1):   # the per-slot arrays follow the cluster's slot capacity
            fresh = range(len(getattr(self, "_cum_started", ())), cap)
            for name in ("cpu_cum", "periods_cum", "throttled_cum", "pod_mem", "pod_util", "_cum_started"):
                a = getattr(self, name, None)
                if a is None or len(a) < cap:
                    b = np.full(cap, np.nan) if name == "_cum_started" else np.zeros(cap)
                    if a is not None:
                        b[: len(a)] = a
                    setattr(self, name, b)
            self._slot_cap = cap
        # cAdvisor counters are per container: a (re)started container counts from zero (only the metric
        # writer reads them)
        if self.metrics:
            restarted = self._restarted(fresh)
            if len(restarted):   # (in order with the counter blocks the writer has pending)
                self.writer.reset_counters(restarted)
                self._cum_started[restarted] = c.p_started[restarted]
        # effects that live in containers end when every pod they were injected into is gone
        for h in sorted(self._in_pods):
            if all(c.pods[s].deleted for s in self._in_pods[h]):
                e = self.book.effects.get(h)
                if e is not None and e.kind == "node_down":   # its removal acts at ``_now`` (`remove_effect`)
                    self.remove_effect(h)
                else:   # a change of this tick's state alone: noted at the tick (the same for any cut of advances)
                    self._note("pods_gone", h, at=T)
                    self._remove_effect(h)
        # traffic inputs depend on which pods exist, run where, and are ready, and on the effects; a
        # pod moment that changes none of these (a pull, a crash-looping container) keeps them
        key = (n, c.p_active[:n].tobytes(), c.p_ready[:n].tobytes(), c.p_lost[:n].tobytes(),
               c.p_node[:n].tobytes(), c.p_rs[:n].tobytes())
        if self._effects_dirty or key != self._inputs_key or cap != len(self.pod_burn):
            self._inputs_key = key
            # a twin whose calls so far equal a taped (reference) run's has its state: take the inputs built there
            tape = self._followed() if self._tape is None else None
            hit = tape.refresh.get(tick) if tape is not None else None
            if hit is not None and hit[0] != self._calls:
                self._follow = hit = None   # another history: this twin no longer follows that run
            if hit is not None and hit[1] == key and hit[2] == cap:
                self._follow = tape
                (self.res, self.pod_burn, self.pod_hog, self.pod_leak_rate, self.pod_leak_since, self._has_burn,
                 self._has_hog, self._has_leak, self.pod_ready_eff, self.ready_count, self.uh_edge, self.inputs) = hit[3]
            else:
                self._build_inputs(T, n, cap)
                if self._tape is not None:
                    self._tape.refresh[tick] = (self._calls, key, cap, (
                        self.res, self.pod_burn, self.pod_hog, self.pod_leak_rate, self.pod_leak_since, self._has_burn,
                        self._has_hog, self._has_leak, self._ready_eff, self.ready_count, self.uh_edge, self.inputs))
        if self.res is not self._res_seen:   # (else `_effects_seen`'s inputs are as they were: nothing to do)
            self._effects_seen(T)
            self._res_seen = self.res
        c.dirty = False
        self._effects_dirty = False
        self.writer.refresh_state(tick)
        if self._lean:   # (the state fields are history only: made again when the span ends, `end_deferred`)
            return
        self._state_fields()
        # the same calls and pod state as a taped run at this tick: its snapshot (frozen) is this one
        tape = self._tape if self._tape is not None else self._followed()
        hit = tape.epochs.get(tick) if tape is not None else None
        if self._tape is None and hit is not None and hit[0] == self._calls and hit[1] == self._inputs_key:
            epoch = hit[2]
        else:
            epoch = self._refresh_snapshot()
            if self._tape is not None:
                self._tape.epochs[tick] = (self._calls, self._inputs_key, epoch)
        self.history.add_epoch(epoch)

    def _restarted(self, fresh: range) -> np.ndarray:
        """The slots whose container started since the counters last started (`_cum_started`; NaN: never), in slot
        order: `_restarted_plain`'s, looked for among the slots the cluster synced since the last refresh
        (``changed_slots``: `Cluster._sync` is where a start time changes) and those the per-slot arrays have just
        grown to hold (``fresh``) - every other slot's start time is as the last refresh left it, which was its
        counters' start or NaN - instead of comparing every slot."""
        started, cum = self.cluster.p_started, self._cum_started
        cand = self.cluster.changed_slots.union(fresh) if len(fresh) else self.cluster.changed_slots
        # (x == x: not NaN; NaN != x holds: a first start counts)
        return np.array(sorted(s for s in cand if started[s] == started[s] and started[s] != cum[s]), dtype=np.intp)

    def _restarted_plain(self) -> np.ndarray:
        """The definition of `_restarted`: every slot compared."""
        started = self.cluster.p_started
        return np.flatnonzero((started != self._cum_started) & ~np.isnan(started))

    def _effects_seen(self, T: float) -> None:
        """What a state refresh does when effects come into force or end: crash effects that became active make the
        running containers exit now, and the log-signature timeline follows the resolution's signatures. Both are
        functions of what the resolution is made of (the effects book, flags, the ReplicaSets' effects and pods):
        `_refresh` calls this only with a new resolution (the inputs are rebuilt - a new `res` - whenever any of
        those changed; a refresh that keeps the resolution would find no crash effect newly active and no signature
        begun or ended)."""
        c = self.cluster
        crash_now = {h for h, e in self._crash_list() if self._effect_on(h, e)}
        for h in sorted(crash_now - self._crash_handles):
            e = self.book.effects[h]
            for pod in self._affected_pods(h, e):
                c.crash_now(pod, T, CrashPlan(e.reason, e.exit_code, 0.0, e.log_signature or _crash_line(e)))
        self._crash_handles = crash_now
        self._update_signatures(T)

    def _refresh_snapshot(self) -> Epoch:
        """`_snapshot` at a state refresh: the previous refresh's snapshot (frozen) where nothing a snapshot is made
        of can have changed since, else a new one. Kept with what it is made of: the serving pods' array (its own
        object: every rebuild of the inputs makes a new one, and any change of effects, flags, revisions or one-shot
        effects rebuilds them), the pod-state key of this refresh (which pods exist and are active, ready, lost, on
        which node, of which ReplicaSet: `_refresh`), the placements' version and the effect book's version."""
        key = (self.cluster.placement_version, self.book.version, self._inputs_key)
        last = self._last_snapshot
        if last is not None and last[0] is self._ready_eff and last[1] == key:
            return last[2]
        epoch = self._snapshot()
        self._last_snapshot = (self._ready_eff, key, epoch)
        return epoch

    def _state_fields(self) -> None:
        """The live per-service state fields a block's history rows take: desired replicas, restarts."""
        desired = np.zeros(self.m.S)
        for dep in self.cluster.deployments.values():
            desired[dep.svc] = dep.replicas
        self._desired = desired
        self._restarts = self._restart_counts()

    def _build_inputs(self, T: float, n: int, cap: int) -> None:
        """Resolve the effects and build the traffic inputs of the current cluster state."""
        c = self.cluster
        m = self.m
        eff = c.p_active & c.p_ready & ~c.p_lost   # lifecycle readiness (the resolution weighs revisions by it)
        res = faulthook.resolve(self, T, eff[:n])
        self.res = res
        # per-slot effect terms (the all-zero arrays are kept while no effect sets any)
        if res.pod_burn or self._has_burn or len(self.pod_burn) != cap:
            self.pod_burn = np.zeros(cap)
            for s, v in res.pod_burn.items():
                self.pod_burn[s] = v
        if res.pod_hog or self._has_hog or len(self.pod_hog) != cap:
            self.pod_hog = np.zeros(cap)
            for s, v in res.pod_hog.items():
                self.pod_hog[s] = v
        if res.pod_leak or self._has_leak or len(self.pod_leak_rate) != cap:
            self.pod_leak_rate = np.zeros(cap)
            self.pod_leak_since = np.full(cap, np.inf)
            for s, (rate, since) in res.pod_leak.items():
                self.pod_leak_rate[s] = rate
                self.pod_leak_since[s] = since
        self._has_burn = bool(res.pod_burn)
        self._has_hog = bool(res.pod_hog)
        self._has_leak = bool(res.pod_leak)
        if res.pod_not_ready:
            nr = np.zeros(cap, dtype=bool)
            for s in res.pod_not_ready:
                nr[s] = True
            eff &= ~nr
        eff[n:] = False
        self.pod_ready_eff = eff
        ready_slots = np.flatnonzero(eff[:n])
        ready_svc = c.p_svc[ready_slots]
        self.ready_count = np.bincount(ready_svc, minlength=m.S).astype(float)
        lim = c.p_cpu_lim[ready_slots]
        capacity = np.bincount(ready_svc, np.where(np.isnan(lim), 1.0, lim), minlength=m.S)
        # (zero burn terms sum to the positive zeros np.zeros holds)
        burn = np.bincount(ready_svc, self.pod_burn[ready_slots], minlength=m.S) if self._has_burn else np.zeros(m.S)
        # zone mix of ready endpoints (a service without any falls back to its spec node's zone):
        # network latency per edge, a function of how many ready pods of each service run in each zone (cached by
        # those counts: the matrix below is made of them alone)
        ready_zone = m.node_zone[c.p_node[ready_slots]]
        zkey = np.bincount(ready_svc * m.Z + ready_zone, minlength=m.S * m.Z).tobytes()
        edge_net = self._zone_net.get(zkey)
        if edge_net is None:
            Zm = np.zeros((m.S, m.Z))
            np.add.at(Zm, (ready_svc, ready_zone), 1.0)
            empty = np.flatnonzero(Zm.sum(axis=1) == 0)
            if len(empty):
                Zm[empty, self._spec_zone[empty]] = 1.0
            Zm /= Zm.sum(axis=1, keepdims=True)
            topo = self.app.topology
            caller = m.edge_caller.copy()
            same = np.einsum("ez,ez->e", Zm[np.maximum(caller, 0)], Zm[m.edge_callee])
            edge_net = topo.intra_zone_latency_ms + (1.0 - same) * (topo.inter_zone_latency_ms - topo.intra_zone_latency_ms)
            edge_net[0] = 0.0
            if len(self._zone_net) >= 64:
                self._zone_net.clear()
            self._zone_net[zkey] = edge_net
        net = edge_net[m.node_edge] + res.net_add
        no_ep = res.no_endpoints | (self.ready_count <= 0)
        # which edges cannot reach their callee because it has no endpoints (for logs)
        reason = res.edge_reason.copy()
        reason[(reason == 0) & no_ep[m.edge_callee]] = faulthook.REASON_NO_ENDPOINTS
        res.edge_reason = reason
        # inputs bit for bit those of the current (prepared) inputs - a change that moved no ready pod and no
        # effect, e.g. a pod created, scheduled or started - are those inputs (and their no-endpoint shares): the
        # same floats downstream, and runs that share one inputs object step as one run (`_deferred_step`)
        raw = _raw_inputs_key(self.ready_count, capacity, burn, res.lat_add, res.e_app, res.e_unreach, net,
                              res.no_endpoints)
        prev = getattr(self, "inputs", None)
        if prev is not None and prev._raw == raw:
            self.ready_count = prev.ready
            return
        self.uh_edge = no_ep[m.edge_callee].astype(float)
        self.inputs = TickInputs(self.ready_count, capacity, burn, res.lat_add, res.e_app, res.e_unreach, net,
                                 res.no_endpoints)
        self.inputs._raw = raw
        self.tm.prepare(self.inputs)

    def _restart_counts(self) -> np.ndarray:
        c = self.cluster
        n = len(c.pods)
        act = c.p_active[:n]
        return np.bincount(c.p_svc[:n][act], c.p_restarts[:n][act], minlength=self.m.S).astype(float)

    def _mem_util(self, mem: np.ndarray, running: np.ndarray, sl: np.ndarray) -> np.ndarray:
        """(K, S): per service, the largest working set / memory limit over its running pods (0 when
        none runs or none has a limit). (`_mem_util_plain`'s floats: a pod that does not run, or runs
        without a limit (working set / inf), counts 0, which leaves the largest of the non-negative
        ratios as it is and makes a service without any ratio 0; no NaN to skip or replace.)"""
        ks = kernels()
        if ks is not None and running.ndim == 1:   # the same bits in one compiled call (`kernels.mem_util`)
            lay = self._layout_arrays(sl)
            return ks.mem_util(np.ascontiguousarray(mem), np.ascontiguousarray(running), lay[8], lay[1], self.m.S)
        c = self.cluster
        key = (c.layout_version, len(sl))
        if self._mem_layout[0] != key:
            svc = c.p_svc[sl]
            order = np.argsort(svc, kind="stable")
            g = svc[order]
            starts = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1]))) if len(g) else np.zeros(0, dtype=np.intp)
            self._mem_layout = (key, order, starts, g[starts] if len(g) else starts)
        _, order, starts, present = self._mem_layout
        out = np.zeros((mem.shape[0], self.m.S))
        if len(order):
            ratio = np.where(running, mem / self._layout_arrays(sl)[8], 0.0).take(order, axis=1)
            out[:, present] = np.maximum.reduceat(ratio, starts, axis=1)
        return out

    def _mem_util_plain(self, mem: np.ndarray, running: np.ndarray, sl: np.ndarray) -> np.ndarray:
        """The definition of `_mem_util` (tests): the NaN-skipping largest ratio of the running pods with a
        memory limit, per service, 0 where there is none."""
        c = self.cluster
        svc = c.p_svc[sl]
        ratio = np.where(running, mem / c.p_mem_lim[sl], np.nan)
        out = np.zeros((mem.shape[0], self.m.S))
        for s in range(self.m.S):
            cols = ratio[:, svc == s]
            if cols.shape[1]:
                red = np.fmax.reduce(cols, axis=1)
                out[:, s] = np.where(np.isnan(red), 0.0, red)
        return out

    def _snapshot(self) -> Epoch:
        """The cluster state the health reads of the coming ticks need (see `History`)."""
        c = self.cluster
        n = len(c.pods)
        ready = np.flatnonzero(self.pod_ready_eff[:n] & c.p_active[:n])
        rs_ids = c.p_rs[ready]
        by_id = c.rs_by_id
        rev = np.array([by_id[i].revision for i in rs_ids.tolist()], dtype=np.int64)
        # revision-bound effects carried by a revision with pods (every ReplicaSet is one of its Deployment's: the
        # flat list, most of them without effects, instead of the Deployments' lists), made when the first
        # revision-bound effect is met (most snapshots have none)
        carried = None
        active = []
        for h, e in self.book.effects.items():
            if h in self._oneshot:
                continue
            if e.bind == "revision":
                if carried is None:
                    carried = {h for rs in c.rs_by_id if rs.effects and rs.pods for h in rs.effects}
                if h in carried:
                    active.append(h)
            elif e.bind == "direct" or (e.bind == "flag" and self.flag_variant(e.flag) == e.variant):
                active.append(h)
        # pods per node: kept while the cluster's placements are as they were (`Cluster.placement_version`; the
        # epochs share the dict, which nothing changes)
        hit = self._per_node
        if hit[0] != c.placement_version:
            per_node: dict[str, int] = {}
            for p in c.active_pods():
                if p.node >= 0 and p.phase in ("Running", "Pending"):
                    name = c.nodes[p.node].name
                    per_node[name] = per_node.get(name, 0) + 1
            hit = self._per_node = (c.placement_version, per_node)
        return Epoch(c.p_svc[ready].copy(), rev, frozenset(active), hit[1])

    def _effect_on(self, h: str, e: Effect) -> bool:
        if e.bind == "direct":
            return True
        if e.bind == "flag":
            return self.flag_variant(e.flag) == e.variant
        return any(h in rs.effects and rs.pods for dep in self.cluster.deployments.values() for rs in dep.rss)

    def _affected_pods(self, h: str, e: Effect) -> list[Pod]:
        dep = self.cluster.deployments.get(e.service or "")
        if dep is None:
            return []
        if e.bind == "revision":
            return [p for rs in dep.rss if h in rs.effects for p in rs.pods]
        return dep.live_pods()

    def _update_signatures(self, T: float) -> None:
        if not self.records:   # (the timeline is for the log reads alone)
            return
        now = {(s, text) for s, lines in self.res.signatures.items() for text in lines}
        for key in sorted(set(self._sig_open) - now):
            self._sig_open.pop(key)[1] = T
        for key in sorted(now - set(self._sig_open)):
            rec = [T, math.inf, key[0], key[1]]
            self.sig_timeline.append(rec)
            self._sig_open[key] = rec

    # ================================================================== config, images, crash plans
    def _image_ok(self, image: str, tag: str) -> bool:
        return (image, tag) in self.registry or bool(_VERSION_TAG.match(tag))

    def config_faults_of(self, rs: ReplicaSet) -> list:
        hit = self._cfg_cache.get(rs.id)
        if hit is None:
            cm = {}
            for name, vals in sorted(self.config_maps.items()):
                cm.update(vals)
            hit = config_faults(self.app, rs.deployment, rs.template["env"], cm)
            self._cfg_cache[rs.id] = hit
        return hit

    def _crash_list(self) -> list:
        """(handle, effect) of the book's ``crash`` effects, by handle (kept per book version: every container start
        and state refresh looks for them, and most books hold none)."""
        hit = self._crash_effects
        if hit[0] != self.book.version:
            hit = self._crash_effects = (self.book.version, [(h, e) for h, e in sorted(self.book.effects.items())
                                                             if e.kind == "crash"])
        return hit[1]

    def _crash_plan(self, pod: Pod, t: float, effects: list | None = None) -> CrashPlan | None:
        """How a container of ``pod`` starting at ``t`` ends (None: it runs): a crashing config fault of its revision,
        else the first ``crash`` effect in force on it (by handle), else an OOM kill when its memory limit is below the
        service's base. ``effects``: the (handle, effect) pairs to look through, all of the book's by handle where
        not given (`_crash_plan_plain`, the definition); the twin passes only the crash ones (`_crash_list`)."""
        svc = self.app.services[pod.svc]
        for f in self.config_faults_of(pod.rs):
            if f.crash is not None:
                return f.crash
        for h, e in self._crash_list() if effects is None else effects:
            if e.kind != "crash" or e.service != svc.name:
                continue
            if (e.bind == "revision" and h in pod.rs.effects) or (e.bind != "revision" and self._effect_on(h, e)):
                return CrashPlan(e.reason, e.exit_code, 1.5, e.log_signature or _crash_line(e))
        lim = pod.rs.template["resources"].get("mem_limit_mi")
        if lim is not None and lim < svc.behaviour.mem_base_mi:
            return CrashPlan("OOMKilled", 137, max(0.5, svc.behaviour.startup_s * 0.5), _oom_line(svc.language, svc.name))
        return None

    def _crash_plan_plain(self, pod: Pod, t: float) -> CrashPlan | None:
        """The definition of `_crash_plan` (tests): every effect of the book looked at, by handle."""
        return self._crash_plan(pod, t, sorted(self.book.effects.items()))

    # ================================================================== fault hook
    def apply_effect(self, effect: Effect) -> str:
        self._note("apply_effect", effect)
        if effect.bind == "revision":
            raise ValueError("revision-bound effects are delivered with deploy(..., effects=[...])")
        self._check_targets(effect)
        h = self.book.add(effect, self._now)
        if getattr(effect, "until_restart", False) and effect.bind == "direct":
            target = effect.service or effect.caller
            dep = self.cluster.deployments.get(target or "")
            self._in_pods[h] = {p.slot for p in dep.live_pods()} if dep is not None else set()
        if effect.kind == "pod_kill":
            dep = self.cluster.deployments[effect.service]
            self.cluster.delete_pods_of(dep, self._now)
            self._oneshot.add(h)
        elif effect.kind == "node_down":
            self._node_down_refs[effect.node] = self._node_down_refs.get(effect.node, 0) + 1
            self.cluster.set_node_ready(self.cluster.node_index[effect.node], False, self._now)
        self._effects_dirty = True
        return h

    def _check_targets(self, e: Effect) -> None:
        if e.service is not None and e.service not in self.m.svc_index:
            raise ValueError(f"effect targets unknown service {e.service!r}")
        if e.caller is not None and (e.caller, e.callee) not in self.m.edge_index:
            raise ValueError(f"effect targets unknown edge {e.caller} -> {e.callee}")
        if e.node is not None and e.node not in self.cluster.node_index:
            raise ValueError(f"effect targets unknown node {e.node!r}")
        if e.bind == "flag" and self.flag_variant(e.flag) is None:
            raise ValueError(f"effect bound to unknown flag {e.flag!r}")

    def effect_active(self, handle: str, at: float | None = None) -> bool:
        """Whether an effect is still registered and in force (bindings permitting) right now, or at
        the tick at ``at``."""
        if at is not None:
            return handle in self.history.epochs[self.history.epoch_of[self._tick_at(at)]].active_effects
        e = self.book.effects.get(handle)
        if e is None:
            return False
        return self._effect_on(handle, e) and handle not in self._oneshot

    def clone(self) -> "SimBackend":
        """An independent copy of this twin (same state, same future). Shares what no twin mutates:
        the app model and its compiled form, the service specs, the traffic model, the rendered
        initial sources and history, and the current load-noise block."""
        self.store.complete()   # (the writes left pending refer to shared taped outputs)
        memo = {id(x): x for x in (self.app, self.m, self.tm, self._svc_in, self._base_task_rate, self._load_noise,
                                   *self.app.services)}
        memo[id(self._zone_net)] = {}   # a cache: the clone starts its own
        for tape in (self._tape, self._follow):   # taped runs are shared, read-only
            if tape is not None:
                memo[id(tape)] = tape
        for shared in _SOURCES.get(id(self.app), (None, {}))[1].values():
            memo[id(shared)] = shared
        for rs in self.cluster.rs_by_id:   # a revision's template, sources and metadata are never mutated
            for shared in (rs.template, rs.files, rs.meta):
                memo[id(shared)] = shared
        twin = copy.deepcopy(self, memo)
        twin._bind()
        return twin

    def _bind(self) -> None:
        """Point the parts of this twin that call back into it at it: its cluster's hooks (``image_ok``,
        ``crash_plan``, ``taped``) and its writer. They hold it weakly (`_weak_method`, `MetricWriter.bind`): the
        twin owns them, and strong references back would make it a reference cycle, which only the cyclic garbage
        collector frees (a dropped marathon's twin then stayed alive until a middle- or old-generation collection,
        ~10k objects per Online Boutique marathon). (`clone`: the copied hooks still point at the original.)"""
        c = self.cluster
        c.image_ok = _weak_method(self, "_image_ok")
        c.crash_plan = _weak_method(self, "_crash_plan")
        c.taped = _weak_method(self, "_taped")
        self.writer.bind(self)

    def remove_effect(self, handle: str) -> None:
        self._note("remove_effect", handle)
        self._remove_effect(handle)

    def _remove_effect(self, handle: str) -> None:
        self._in_pods.pop(handle, None)
        e = self.book.remove(handle)
        if e is None:
            return
        if e.kind == "node_down":
            k = self._node_down_refs.get(e.node, 1) - 1
            self._node_down_refs[e.node] = k
            if k <= 0:
                self.cluster.set_node_ready(self.cluster.node_index[e.node], True, self._now)
        for dep in self.cluster.deployments.values():
            for rs in dep.rss:
                if handle in rs.effects:
                    rs.effects.remove(handle)
        self._effects_dirty = True

    # ================================================================== deploys and interventions
    def _dep(self, service: str) -> Deployment | None:
        return self.cluster.deployments.get(service)

    def files_of(self, rs: ReplicaSet) -> dict[str, str]:
        """The source tree of a revision (read-only: the initial tree is shared between twins)."""
        if rs.files:
            return rs.files
        return _initial_sources(self.app, rs.deployment, "tree")

    def _initial_meta(self, service: str) -> dict[str, Any]:
        return {"lazy": True}

    def meta_of(self, rs: ReplicaSet) -> dict[str, Any]:
        if rs.meta.get("lazy"):
            hist = _initial_sources(self.app, rs.deployment, "history")
            last = hist[-1] if hist else {"sha": "0" * 40, "author": "unknown", "message": "initial", "t": -3600.0, "files": []}
            rs.meta = {"sha": last["sha"], "author": last["author"], "message": last["message"], "t": float(last["t"]),
                       "diff": "", "noise": False, "commits": hist, "kind": "build"}
        return rs.meta

    def _new_revision(self, dep: Deployment, template: dict, files: dict[str, str] | None, handles: list[str],
                      meta: dict[str, Any], h: str | None = None) -> tuple[ReplicaSet, bool]:
        """``h``: the template's `template_hash`, when the caller has it."""
        if h is None:
            h = template_hash(template)   # once for the lookup and the new ReplicaSet
        rs = self.cluster.find_rs(dep, template, h)
        if rs is not None and rs is dep.current:
            return rs, False
        if rs is None:
            rs = self.cluster.new_rs(dep.name, template, files or {}, handles, meta, 0, self._now, h)
        else:
            rs.effects = list(handles)
            rs.meta = meta
            self._unbore(rs)
        self.cluster.set_template(dep, rs, self._now)
        self._effects_dirty = True
        return rs, True

    def _unbore(self, rs: ReplicaSet) -> None:
        """``rs`` may carry effect handles now: no longer known to carry none (`_rs_boring`)."""
        if rs.id < len(self._rs_boring):
            self._rs_boring[rs.id] = False

    def _carry(self, dep: Deployment, files: dict[str, str], env: dict[str, str]) -> list[str]:
        out = []
        for h in dep.current.effects:
            e = self.book.effects.get(h)
            if e is not None and marker_holds(e.marker, files, env):
                out.append(h)
        return out

    def deploy(self, service: str, *, message: str, author: str, files: dict[str, str] | None = None,
               env: dict[str, str | None] | None = None, image_tag: str | None = None,
               effects: list[Effect] = (), noise: bool = False) -> OpResult:
        self._note("deploy", service, message, author, files, env, image_tag, list(effects), noise)
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        for e in effects:
            if e.bind != "revision":
                return OpResult(False, f"deploy effects must be revision-bound, got bind={e.bind!r}")
        cur = dep.current
        cur_files = self.files_of(cur)
        new_files = patched(cur_files, files)
        new_env = patched(cur.template["env"], env, text=True)
        # the commit's sha and the new template's hash: pure functions of this state and this call, found where
        # a taped run made the same calls (`_Tape.deploys`), kept there by the taped run itself
        kept = self._tape.deploys if self._tape is not None else None
        tape = self._followed() if kept is None else None
        hashes = tape.deploys.get(self._calls) if tape is not None else None
        if hashes is None:
            parent = self.meta_of(cur)["sha"]
            body = canonical([parent, author, message, self._now, new_files, new_env, image_tag])
            sha = hashlib.sha1(body.encode()).hexdigest()
        else:
            sha = hashes[0]
        tag = cur.template["tag"]
        if image_tag is not None:
            tag = image_tag
        elif new_files != cur_files:
            tag = f"{dep.spec.tag.split('-')[0]}-{sha[:7]}"
            self.registry.add((cur.template["image"], tag))
        template = dict(cur.template, tag=tag, env=dict(sorted(new_env.items())))
        if hashes is None:
            hashes = (sha, template_hash(template))
            if kept is not None:
                kept[self._calls] = hashes
        handles = self._carry(dep, new_files, new_env)
        new_handles = []
        for e in effects:
            self._check_targets(e)
            h = self.book.add(e, self._now)
            handles.append(h)
            new_handles.append(h)
        # the unified diff is rendered when the history is read (`_diff`), from the trees kept here
        meta = {"sha": sha, "author": author, "message": message, "t": self._now, "diff": None,
                "diff_of": (cur_files, new_files, cur.template, template), "noise": bool(noise),
                "kind": "build" if files else ("image" if image_tag else "config")}
        rs, changed = self._new_revision(dep, template, new_files if new_files != cur_files else (cur.files or None),
                                         handles, meta, hashes[1])
        if not changed:
            if new_handles:
                rs.effects.extend(new_handles)
                self._unbore(rs)
                self._effects_dirty = True
            return OpResult(True, f"deployment.apps/{service} unchanged", {"revision": rs.revision, "effect_handles": new_handles})
        if rs.files is None or rs.files == {}:
            rs.files = new_files if new_files != cur_files else dict(cur_files)
        return OpResult(True, f"deployment.apps/{service} revision {rs.revision} rolling out ({rs.name})",
                        {"revision": rs.revision, "replicaset": rs.name, "image": f"{template['image']}:{tag}",
                         "sha": sha, "effect_handles": new_handles})

    def rollback(self, service: str, revision: int | None = None) -> OpResult:
        self._note("rollback", service, revision)
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        cur = dep.current
        if revision is None:
            older = [rs for rs in dep.rss if rs.revision < cur.revision]
            if not older:
                return OpResult(False, f"no rollout history found for deployment {service!r}")
            target = max(older, key=lambda r: r.revision)
        else:
            try:
                revision = int(revision)
            except (TypeError, ValueError):
                return OpResult(False, f"revision must be an integer, got {revision!r}")
            found = [rs for rs in dep.rss if rs.revision == revision]
            if not found:
                return OpResult(False, f"unable to find specified revision {revision} in history")
            target = found[0]
        if target is cur:
            return OpResult(True, f"deployment.apps/{service} skipped rollback (current template already matches revision {cur.revision})",
                            {"revision": cur.revision})
        old_rev = target.revision
        self.cluster.set_template(dep, target, self._now)
        self._effects_dirty = True
        return OpResult(True, f"deployment.apps/{service} rolled back to revision {old_rev} (now revision {target.revision})",
                        {"revision": target.revision, "from_revision": old_rev, "replicaset": target.name})

    def scale(self, service: str, replicas: int) -> OpResult:
        self._note("scale", service, replicas)
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        if replicas_error(replicas):
            return OpResult(False, replicas_error(replicas))
        self.cluster.scale(dep, int(replicas), self._now)
        self._effects_dirty = True
        return OpResult(True, f"deployment.apps/{service} scaled to {replicas}", {"replicas": int(replicas)})

    def restart(self, service: str) -> OpResult:
        self._note("restart", service)
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        cur = dep.current
        template = dict(cur.template, restarted_at=self._now)
        meta = dict(self.meta_of(cur), message=f"kubectl rollout restart deployment/{service}", author="kubectl",
                    t=self._now, diff="", kind="restart")
        meta.pop("commits", None)
        meta.pop("diff_of", None)
        rs, _ = self._new_revision(dep, template, cur.files, list(cur.effects), meta)
        return OpResult(True, f"deployment.apps/{service} restarted", {"revision": rs.revision, "replicaset": rs.name})

    def set_config(self, target: str, key: str, value: str | None) -> OpResult:
        self._note("set_config", target, key, value)
        flags_cm = self.app.flags_config_map
        if flags_cm is not None and target in (flags_cm, "flagd"):
            flag = self._flag(key)
            if flag is None:
                return OpResult(False, f"unknown feature flag {key!r}; known: {', '.join(f.name for f in self.app.flags)}")
            if value is None or value not in flag.variants:
                return OpResult(False, f"unknown variant {value!r} for flag {flag.name!r}; variants: {', '.join(flag.variants)}")
            self.config_maps[flags_cm][flag.name] = value
            self._effects_dirty = True
            return OpResult(True, f"configmap/{flags_cm} {flag.name} defaultVariant={value}", {"flag": flag.name, "variant": value})
        if target in self.config_maps:
            if value is None:
                self.config_maps[target].pop(key, None)
            else:
                self.config_maps[target][key] = str(value)
            self._cfg_cache.clear()
            self._rs_boring[:] = False   # (config faults are found again)
            self._effects_dirty = True
            return OpResult(True, f"configmap/{target} {key} updated", {"key": key})
        dep = self._dep(target)
        if dep is None:
            return OpResult(False, f"unknown config target {target!r}: not a deployment or config map")
        if env_key_error(key):
            return OpResult(False, env_key_error(key))
        shown = f"{key}-" if value is None else f"{key}={value}"
        return self.deploy(target, message=f"kubectl set env deployment/{target} {shown}", author="kubectl",
                           env={key: value})

    def set_resources(self, service: str, *, cpu_request_m: int | None = None, cpu_limit_m: int | None = None,
                      mem_request_mi: int | None = None, mem_limit_mi: int | None = None) -> OpResult:
        self._note("set_resources", service, cpu_request_m, cpu_limit_m, mem_request_mi, mem_limit_mi)
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        cur = dep.current
        res, changes, error = merge_resources(cur.template["resources"], cpu_request_m=cpu_request_m,
                                              cpu_limit_m=cpu_limit_m, mem_request_mi=mem_request_mi,
                                              mem_limit_mi=mem_limit_mi)
        if error:
            return OpResult(False, error)
        template = dict(cur.template, resources=res)
        meta = dict(self.meta_of(cur), message=f"kubectl set resources deployment/{service} "
                    + ",".join(f"{k}={v}" for k, v in sorted(changes.items())), author="kubectl", t=self._now,
                    diff="", kind="resources")
        meta.pop("commits", None)
        meta.pop("diff_of", None)
        rs, _ = self._new_revision(dep, template, cur.files, self._carry(dep, self.files_of(cur), cur.template["env"]), meta)
        return OpResult(True, f"deployment.apps/{service} resource requirements updated", {"revision": rs.revision})

    def drain_node(self, node: str) -> OpResult:
        self._note("drain_node", node)
        idx = self.cluster.node_index.get(node)
        if idx is None:
            return OpResult(False, f'nodes "{node}" not found')
        n = self.cluster.drain(idx, self._now)
        self._effects_dirty = True
        return OpResult(True, f"node/{node} cordoned, {n} pod(s) evicted", {"evicted": n})

    def uncordon_node(self, node: str) -> OpResult:
        self._note("uncordon_node", node)
        idx = self.cluster.node_index.get(node)
        if idx is None:
            return OpResult(False, f'nodes "{node}" not found')
        self.cluster.cordon(idx, False, self._now)
        self._effects_dirty = True
        return OpResult(True, f"node/{node} uncordoned")

    # ================================================================== reads
    def k8s_get(self, kind: str, name: str | None = None) -> list[dict[str, Any]]:
        return render.get(self, kind, name)

    def events(self, since: float, until: float) -> list[dict[str, Any]]:
        self._records_kept("events")
        return render.events(self, since, until)

    def _records_kept(self, read: str) -> None:
        if not self.records:
            raise RuntimeError(f"{read}: this twin keeps no event or log records (records=False)")

    def logs(self, service: str, since: float, until: float, pattern: str | None = None, limit: int = 100) -> list[str]:
        self._records_kept("logs")
        from sremarathon_env.backends.sim.logs import logs
        return logs(self, service, since, until, pattern, limit)

    def traces(self, service: str | None, endpoint: str | None, since: float, until: float,
               errors_only: bool = False, limit: int = 20) -> list[dict[str, Any]]:
        from sremarathon_env.backends.sim.traces import traces
        return traces(self, service, endpoint, since, until, errors_only, limit)

    def deploy_history(self, service: str) -> list[dict[str, Any]]:
        dep = self._dep(service)
        if dep is None:
            return []
        out = []
        for rs in sorted(dep.rss, key=lambda r: r.revision):
            meta = self.meta_of(rs)
            tpl = rs.template
            out.append({"revision": rs.revision, "replicaset": rs.name, "image": f"{tpl['image']}:{tpl['tag']}",
                        "sha": meta.get("sha"), "author": meta.get("author"), "message": meta.get("message"),
                        "time": render.iso(meta.get("t", rs.created_t)), "t": meta.get("t", rs.created_t),
                        "change": meta.get("kind", "build"), "diff": _diff(meta),
                        "current": rs is dep.current, "ready": sum(1 for p in rs.pods if self.pod_ready_eff[p.slot])})
        return out

    def commit_log(self, service: str) -> list[dict[str, Any]]:
        """Source commits of a service: the history before the marathon and every build since."""
        dep = self._dep(service)
        if dep is None:
            return []
        first = self.meta_of(dep.rss[0])
        out = [dict(c) for c in first.get("commits", [])]
        seen = {c["sha"] for c in out}
        for rs in sorted(dep.rss, key=lambda r: r.created_t):
            meta = self.meta_of(rs)
            if meta.get("sha") not in seen and meta.get("kind") == "build":
                seen.add(meta["sha"])
                out.append({"sha": meta["sha"], "author": meta["author"], "message": meta["message"], "t": meta["t"]})
        return out

    def source_files(self, service: str) -> list[str]:
        dep = self._dep(service)
        return [] if dep is None else sorted(self.files_of(dep.current))

    def read_source(self, service: str, path: str) -> str | None:
        dep = self._dep(service)
        return None if dep is None else self.files_of(dep.current).get(path)

    # ================================================================== health
    def _tick_at(self, at: float | None) -> int:
        """The tick whose state a read ``at`` time ``at`` sees (the latest at or before it)."""
        if at is None:
            return self._tick
        last = self._last_at
        if at == last[0]:   # the same time as the last read (a tick's checks read it many times)
            return last[1]
        k = int(math.floor(float(at) / self.tick_s + 1e-9))
        if not 0 <= k <= self._tick:
            raise ValueError(f"no recorded tick at t={at!r} (the twin is at t={self._tick * self.tick_s:g})")
        self._last_at = (at, k)   # (a recorded tick stays recorded: the twin's tick only grows)
        return k

    def at(self, t: float) -> "TwinAt":
        """A read-only view answering the health reads for the tick at ``t`` (a past tick of the run),
        everything else from the live twin: what a probe evaluated right after advancing to ``t`` saw."""
        return TwinAt(self, t)

    def service_health(self, service: str, at: float | None = None) -> dict[str, float]:
        s = self.m.svc_index.get(service)
        if s is None:
            return {}
        k = self._tick_at(at)
        # (Python floats: the row's float64 values; the p95 factor only where the rate is positive, where it is read)
        rate, fail, lat_w, sig_w, rho, mem_util, lag, ready, desired, restarts, own_fail, own_lat_w = \
            self.history.svc[:, k, s].tolist()
        if rate > 0:
            sig = sig_w / rate
            p95 = math.exp(-0.5 * sig * sig + 1.6448536269514722 * sig)
            out = {"ready": ready, "desired": desired, "error_ratio": fail / rate, "p95_ms": lat_w / rate * p95,
                   "own_error_ratio": own_fail / rate, "own_p95_ms": own_lat_w / rate * p95,
                   "rate": rate, "cpu_util": rho if math.isfinite(rho) else 0.0, "mem_util": mem_util,
                   "restarts": restarts}
        else:
            out = {"ready": ready, "desired": desired, "error_ratio": 0.0, "p95_ms": 0.0, "own_error_ratio": 0.0,
                   "own_p95_ms": 0.0, "rate": rate, "cpu_util": rho if math.isfinite(rho) else 0.0,
                   "mem_util": mem_util, "restarts": restarts}
        if s in self._lag_callee:
            out["lag"] = lag
        if at is None:   # state the last tick does not show yet (interventions since)
            dep = self.cluster.deployments[service]
            live = dep.live_pods()
            slots = [p.slot for p in live if p.cstate == "running"]
            lim = self.cluster.p_mem_lim[slots] if slots else np.array([])
            out["ready"] = float(self.ready_count[s])
            out["desired"] = float(dep.replicas)
            out["mem_util"] = float(np.nanmax(self.pod_mem[slots] / lim)) if slots and not np.all(np.isnan(lim)) else 0.0
            out["restarts"] = float(sum(p.restarts for p in live))
        return out

    def services_health(self, services: list[str], fields: tuple[str, ...]) -> np.ndarray:
        """Live health of many services at once: ``out[i, j] == service_health(services[i]).get(fields[j], 0.0)``
        bit for bit (float64, shape ``(len(services), len(fields))``; unknown services and fields read 0.0).
        Column by column over all services: the same IEEE operations on the same numbers as the per-service
        read (elementwise numpy; the p95 factor's exponential by ``math.exp``, as there)."""
        out = np.zeros((len(services), len(fields)))
        if not len(services) or not len(fields):
            return out
        idx = self.m.svc_index
        rows, cols = [], []
        for i, name in enumerate(services):
            s = idx.get(name)
            if s is not None:
                rows.append(i)
                cols.append(s)
        if not rows:
            return out
        c = self.cluster
        S = self.m.S
        H = self.history.svc[:, self._tick, :]
        rate = H[0]
        pos = rate > 0     # (NaN: False, as ``rate > 0`` is for the per-service read)
        safe = np.where(pos, rate, 1.0)
        p95 = None
        if "p95_ms" in fields or "own_p95_ms" in fields:
            sig = H[3][pos] / rate[pos]
            p95 = np.zeros(S)
            p95[pos] = [math.exp(v) for v in (-0.5 * sig * sig + 1.6448536269514722 * sig).tolist()]
        every = np.zeros((len(fields), S))   # each field's value for every service
        for j, f in enumerate(fields):
            v = every[j]
            per_request = _PER_REQUEST.get(f)
            if per_request is not None:   # a service history sum over the rate (latencies: times the p95 factor)
                np.divide(H[per_request[0]], safe, out=v, where=pos)
                if per_request[1]:
                    v *= p95
            elif f == "cpu_util":
                rho = H[4]
                np.copyto(v, rho, where=np.isfinite(rho))
            elif f == "ready":
                v[:] = self.ready_count
            elif f == "rate":
                v[:] = rate
            elif f == "lag":
                lagged = sorted(set(self._lag_callee))
                v[lagged] = H[6][lagged]
            elif f == "desired":
                for s_ in set(cols):
                    v[s_] = float(c.deployments[self.m.svc_names[s_]].replicas)
            elif f == "restarts":
                # restarts summed over live pods (integer counts: exact in any order)
                v[:] = self._restart_counts()
            elif f == "mem_util":
                # the largest working set / limit over running pods (a max: exact in any order; NaN limits
                # left out, none -> 0.0)
                n = len(c.pods)
                run = np.flatnonzero(c.p_active[:n] & c.p_running[:n])
                top = np.full(S, np.nan)
                np.fmax.at(top, c.p_svc[run], self.pod_mem[run] / c.p_mem_lim[run])
                np.copyto(v, top, where=~np.isnan(top))
        if len(services) == S and rows == cols:   # every service, in model order
            return every.T.copy()
        out[rows] = every.T[cols]
        return out

    def path_health(self, path: str | None = None, at: float | None = None) -> dict[str, float]:
        m = self.m
        if path is None:
            idx = slice(None)
        elif path in m.path_names:
            idx = m.path_names.index(path)
        else:
            return {}
        k = self._tick_at(at)
        rows = self.history.path[:, k]
        if path is not None:
            r = float(rows[0, idx])
            return {"rate": r, "error_ratio": float(rows[1, idx]), "p95_ms": float(rows[2, idx]),
                    "degraded_ratio": float(rows[3, idx]), "slow_ratio": float(rows[4, idx])}
        r = rows[0]
        tot = float(r.sum())
        w = r / tot if tot > 0 else np.full(m.P, 1.0 / m.P)
        return {"rate": tot, "error_ratio": float((w * rows[1]).sum()), "p95_ms": float((w * rows[2]).sum()),
                "degraded_ratio": float((w * rows[3]).sum()), "slow_ratio": float((w * rows[4]).sum())}

    def edge_health(self, caller: str, callee: str, at: float | None = None) -> dict[str, float]:
        e = self.m.edge_index.get((caller, callee))
        if e is None:
            return {}
        rate, fail, lat, s, own_fail, own_lat = self.history.edge[:, self._tick_at(at), e].tolist()
        p95 = math.exp(-0.5 * s * s + 1.6448536269514722 * s)
        return {"rate": rate, "error_ratio": fail / rate if rate > 0 else 0.0,
                "p95_ms": lat * p95 if rate > 0 else 0.0,
                "own_error_ratio": own_fail / rate if rate > 0 else 0.0,
                "own_p95_ms": own_lat * p95 if rate > 0 else 0.0}

    def deployment_spec(self, service: str) -> dict[str, Any] | None:
        """The Deployment's current pod template and replicas, as plain values (None: unknown service)."""
        dep = self._dep(service)
        if dep is None:
            return None
        tpl = dep.current.template
        return {"image": f"{tpl['image']}:{tpl['tag']}", "repository": tpl["image"], "tag": tpl["tag"],
                "env": dict(tpl["env"]), "resources": dict(tpl["resources"]), "replicas": dep.replicas,
                "revision": dep.current.revision, "template_hash": dep.current.hash}

    def pods_on_node(self, node: str, at: float | None = None) -> int:
        """Pods (not deleted) bound to ``node`` whose phase is Running or Pending."""
        if at is not None:
            return self.history.epochs[self.history.epoch_of[self._tick_at(at)]].pods_on_node.get(node, 0)
        c = self.cluster
        return sum(1 for p in c.active_pods()
                   if p.node >= 0 and c.nodes[p.node].name == node and p.phase in ("Running", "Pending"))

    def services_on_nodes(self, nodes: list[str]) -> list[str]:
        """Services (app order) with a pod (not deleted, not Succeeded/Failed) bound to one of ``nodes``: what
        the rendered pods (``k8s_get("Pod")``) say, without rendering them (the policy scope of a drain)."""
        c = self.cluster
        idx = {c.node_index[n] for n in nodes if n in c.node_index}
        found = {p.svc for p in c.active_pods() if p.node in idx and p.phase not in ("Succeeded", "Failed")}
        return [s for i, s in enumerate(c.svc_names) if i in found]

    def env_of(self, service: str) -> dict[str, str]:
        dep = self._dep(service)
        return {} if dep is None else dict(dep.current.template["env"])

    def _flag(self, name: str):
        for f in self.app.flags:
            if name == f.name or name in f.aliases:
                return f
        return None

    def flag_variant(self, flag: str) -> str | None:
        f = self._flag(flag)
        if f is None or not self.app.flags_config_map:
            return None
        return self.config_maps[self.app.flags_config_map].get(f.name)

    def serving_revisions(self, service: str, at: float | None = None) -> dict[int, int]:
        dep = self._dep(service)
        if dep is None:
            return {}
        if at is not None:
            return self.history.epochs[self.history.epoch_of[self._tick_at(at)]].serving(dep.svc)
        out = {}
        for rs in dep.rss:
            k = sum(1 for p in rs.pods if self.pod_ready_eff[p.slot])
            if k:
                out[rs.revision] = k
        return out

    def state_digest(self) -> str:
        c = self.cluster
        deps = {}
        for dep in sorted(c.deployments.values(), key=lambda d: d.name):
            obs: dict[str, int] = {}
            for p in dep.live_pods():
                key = "|".join([p.rs.hash, p.phase, p.cstate, p.reason if p.cstate == "waiting" else "",
                                str(bool(self.pod_ready_eff[p.slot])), str(p.node_lost)])
                obs[key] = obs.get(key, 0) + 1
            deps[dep.name] = {"replicas": dep.replicas, "template": dep.current.hash,
                              "effects": sorted(self.book.effects[h].model_dump_json() for h in dep.current.effects
                                                if h in self.book.effects),
                              "progress_failed": dep.progress_failed, "pods": dict(sorted(obs.items()))}
        state = {"deployments": deps,
                 "nodes": [[n.name, n.ready, n.cordoned] for n in c.nodes],
                 "config_maps": {k: dict(sorted(v.items())) for k, v in sorted(self.config_maps.items())},
                 "effects": sorted(e.model_dump_json() for h, e in self.book.effects.items()
                                   if e.bind != "revision" and h not in self._oneshot)}
        return hashlib.sha256(canonical(state).encode()).hexdigest()

    # ================================================================== helpers for renderers
    def node_ip(self, node: int) -> str:
        ips = self.m.__dict__.get("_node_ips")
        if ips is None:   # per compiled app (nodes and zones are fixed; read-only)
            ips = self.m.__dict__["_node_ips"] = [f"10.0.{1 + int(z)}.{10 + i}" for i, z in enumerate(self.m.node_zone)]
        return ips[node]

    def pod_ip(self, pod: Pod) -> str:
        return f"10.244.{max(pod.node, 0)}.{2 + pod.slot % 250}"

    def endpoints_of(self, svc: int) -> tuple[list[Pod], list[Pod]]:
        dep = self.cluster.deployments[self.m.svc_names[svc]]
        if self.res.no_endpoints[svc]:
            return [], []
        ready, not_ready = [], []
        for p in dep.live_pods():
            if p.node < 0 or p.cstate == "waiting" and p.reason in ("ContainerCreating", "ErrImagePull", "ImagePullBackOff"):
                continue
            (ready if self.pod_ready_eff[p.slot] else not_ready).append(p)
        return ready, not_ready

    def deployment_conditions(self, dep: Deployment, avail: int | None = None) -> dict[str, tuple[str, str, str]]:
        """``avail``: the Deployment's live pods that serve, when the caller has counted them."""
        if avail is None:
            avail = sum(1 for p in dep.live_pods() if self.pod_ready_eff[p.slot])
        _, unavail = rolling_params(dep.replicas)
        available = avail >= dep.replicas - unavail
        a = ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.") if available else \
            ("False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
        if dep.progress_failed:
            p = ("False", "ProgressDeadlineExceeded", f'ReplicaSet "{dep.current.name}" has timed out progressing.')
        elif self.cluster.rollout_complete(dep):
            p = ("True", "NewReplicaSetAvailable", f'ReplicaSet "{dep.current.name}" has successfully progressed.')
        else:
            p = ("True", "ReplicaSetUpdated", f'ReplicaSet "{dep.current.name}" is progressing.')
        return {"Available": a, "Progressing": p}

    def quota_used(self) -> dict[str, float]:
        c = self.cluster
        slots = c.active_slots()
        # the four per-slot columns at once: each row's NaN-free sum is the one ``np.nansum`` of that column gives
        # (a contiguous row reduces as the 1-D array does)
        x = np.array((c.p_cpu_req, c.p_mem_req, c.p_cpu_lim, c.p_mem_lim)).take(slots, axis=1)
        x[np.isnan(x)] = 0.0
        cpu_req, mem_req, cpu_lim, mem_lim = x.sum(axis=1).tolist()
        return {"pods": float(len(slots)), "requests.cpu": cpu_req, "requests.memory": mem_req * 2**20,
                "limits.cpu": cpu_lim, "limits.memory": mem_lim * 2**20}


def _diff(meta: dict[str, Any]) -> str:
    """A revision's unified diff, rendered on first read (a pure function of the kept trees)."""
    d = meta.get("diff")
    if d is None:
        src = meta.get("diff_of")
        d = _unified(*src) if src is not None else ""
        meta["diff"] = d
    return d


def _unified(old_files: dict[str, str], new_files: dict[str, str], old_tpl: dict, new_tpl: dict) -> str:
    parts = []
    for path in sorted(set(old_files) | set(new_files)):
        a, b = old_files.get(path), new_files.get(path)
        if a == b:
            continue
        parts.extend(difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                          fromfile=f"a/{path}" if a is not None else "/dev/null",
                                          tofile=f"b/{path}" if b is not None else "/dev/null"))
    env_a, env_b = old_tpl["env"], new_tpl["env"]
    env_lines = []
    for k in sorted(set(env_a) | set(env_b)):
        if env_a.get(k) != env_b.get(k):
            if k in env_a:
                env_lines.append(f"-  {k}: {env_a[k]}\n")
            if k in env_b:
                env_lines.append(f"+  {k}: {env_b[k]}\n")
    if env_lines:
        parts.extend(["--- a/deployment.yaml (env)\n", "+++ b/deployment.yaml (env)\n", *env_lines])
    if old_tpl["tag"] != new_tpl["tag"]:
        parts.extend(["--- a/deployment.yaml (image)\n", "+++ b/deployment.yaml (image)\n",
                      f"-  image: {old_tpl['image']}:{old_tpl['tag']}\n", f"+  image: {new_tpl['image']}:{new_tpl['tag']}\n"])
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


def _oom_line(language: str, service: str) -> str:
    if language in ("java", "kotlin"):
        return 'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space'
    if language == "go":
        return "fatal error: runtime: out of memory"
    if language in ("nodejs", "typescript"):
        return "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"
    if language == "python":
        return "MemoryError"
    if language == "csharp":
        return "Unhandled exception. System.OutOfMemoryException: Insufficient memory to continue the execution of the program."
    return f"{service}: out of memory"


def _crash_line(e: Effect) -> str:
    return f"process exited with code {e.exit_code} ({e.reason})"


class TwinAt:
    """`SimBackend.at(t)`: the health reads (`service_health`, `path_health`, `edge_health`,
    `serving_revisions`, `effect_active`, `pods_on_node`) for the tick at ``t``; every other attribute
    is the live twin's (configuration, sources and deploy history cannot change between two ticks of
    one advance)."""

    __slots__ = ("_sim", "t")

    def __init__(self, sim: SimBackend, t: float):
        sim._tick_at(t)   # validates
        self._sim = sim
        self.t = float(t)

    def service_health(self, service: str) -> dict[str, float]:
        return self._sim.service_health(service, at=self.t)

    def path_health(self, path: str | None = None) -> dict[str, float]:
        return self._sim.path_health(path, at=self.t)

    def edge_health(self, caller: str, callee: str) -> dict[str, float]:
        return self._sim.edge_health(caller, callee, at=self.t)

    def serving_revisions(self, service: str) -> dict[int, int]:
        return self._sim.serving_revisions(service, at=self.t)

    def effect_active(self, handle: str) -> bool:
        return self._sim.effect_active(handle, at=self.t)

    def pods_on_node(self, node: str) -> int:
        return self._sim.pods_on_node(node, at=self.t)

    def __getattr__(self, name: str):
        return getattr(self._sim, name)

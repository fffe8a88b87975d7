"""A compiled evaluation plan for a whole rule pack: label work once per series set, numpy per call.

The generic evaluator (``engine.py``) walks each rule's tree on every call and redoes cheap but
numerous Python steps per node. The alert engine instead compiles the pack into a plan of nodes
whose label-dependent parts (selected rows, group index arrays, matching pairs, output label sets)
are computed once for the current *series-set signature* (the row counts of every family the pack
reads; families only grow by appending rows). While the signature holds, a call is pure numpy on
``(series x times)`` matrices:

* equal sub-expressions of all rules are one node, evaluated once per call;
* range functions over plain selectors with the same function, range and offset are evaluated in
  one batch over the stacked rows of all their selectors (these functions are row-independent);
* rules whose result has no series for this store (selectors that match nothing) cost nothing;
* an aggregation of a ``label_replace`` (the pack's pod chains) is one node that groups the replacement's input
  rows through the replacement (``PackPlan._agg_label_replace``), with no node or label list in between;
* anything without a fast path (rare operators, duplicate label sets, many-to-many groups) is
  evaluated by the generic evaluator with its children's values seeded, so results and errors
  are exactly the generic evaluator's.

>>> import numpy as np
>>> from sremarathon_env.telemetry.store import MetricStore
>>> from sremarathon_env.alerts import PromQLEngine, load_rule_pack
>>> store = MetricStore(step_s=15.0)
>>> fam = store.family("kube_node_status_condition", ("node", "condition", "status"))
>>> rows = fam.rows([("n1", "Ready", "true")])
>>> for k in range(8):
...     store.write(fam, rows, k, np.array([0.0]))
>>> plan = PackPlan(PromQLEngine(store), load_rule_pack().rules)
>>> out = plan.evaluate(np.arange(8, dtype=np.int64) * 15000)
>>> names = [r.name for r in load_rule_pack().rules]
>>> out[names.index("NodeNotReady")].p.tolist()
[[True, True, True, True, True, True, True, True]]
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from itertools import chain, compress, repeat
from operator import is_, is_not, itemgetter, ne, not_, or_

import numpy as np

from . import syntax as S
from .engine import PromQLEngine, _bucket_quantile, _Ctx, match_rows
from .limits import QueryError
from .rangefuncs import RANGE_FUNCS
from .compiled import kernels
from .tape import CODES, KernelSpec, Tape, window_kernel
from .values import (_NONE, Scal, Vec, Win, drop_names, edited_from, grown_from, has_dup, memo, memo_get,
                     note_grown, per_label_set)
from .vectorops import ARITH_FUNCS, CMP_FUNCS, _pairs, _sig_index, _sigs, group_key, groups_of, number_keys

#: range functions evaluated in batches (row-independent, no scalar parameter)
_BATCHED = {"rate", "increase", "delta", "irate", "idelta", "changes", "resets", "sum_over_time", "avg_over_time",
            "min_over_time", "max_over_time", "count_over_time", "last_over_time", "present_over_time",
            "stddev_over_time", "stdvar_over_time"}


#: aggregations of a label_replace are made as one node (``PackPlan._agg_label_replace``; False: an ``_Agg`` over a
#: ``_Pass``, the definition)
FUSE_LABEL_REPLACE = True
_FUSED = "fused"   # (the cache key's mark of a fused aggregation)
_DST_HELD = object()   # (the group "key" of an input label set holding the destination label: not fused)


def _distinct(node: _Node) -> bool:
    """Whether the node's label sets are distinct by construction (the others may hold duplicates, which the
    generic evaluator's label_replace merges: not fused). A selection over one family: its rows have distinct
    label values; a range node: one family, or checked (``_make``); an aggregation's groups; a vector match's and
    a label_replace's results: checked; a filter: its operand's."""
    while True:
        cls = node.__class__
        if cls is _Sel:
            return len(node.flat) == 1
        if cls is _VecScalar:
            if node.labels is not node.vec.labels:
                return True   # (names dropped: checked, ``_make``)
            node = node.vec
        elif cls is _SetAndUnless:
            node = node.lhs
        else:
            return cls in (_Range, _Agg, _VecVec, _Pass)


#: a kept rule's record (root, its nodes by key, its kernel range nodes): its root, its kernel range nodes
_ROOT_OF, _KERNEL_OF = itemgetter(0), itemgetter(2)


def _lid(node) -> int:
    """A child as a cache key: a vector by the identity of its label list (what its parent's label work depends
    on), anything else by its own identity, negated (an int: no tuple to keep per key)."""
    if node.kind == "v" and node.labels:
        return id(node.labels)
    return ~id(node)


def _lr_projection(without: bool, grouping: tuple, src: str, dst: str):
    """The function giving a label set's projection for ``PackPlan._lr_keys``: its pairs whose names the group key
    (``vectorops.group_key(without, grouping)``) reads, and its ``src`` and ``dst`` pairs, in order.

    Exact: ``label_replace`` sets or drops ``dst`` from ``src``'s value and passes every other pair on, and the key
    reads only its names; so a label set and its projection have equal keys once replaced, and hold ``dst`` alike
    (tests/alerts/test_plan_fused.py holds the keys through projections equal to those of the whole label sets).

    >>> _lr_projection(False, ("namespace", "service"), "pod", "service")(
    ...     (("__name__", "m"), ("container", "c"), ("namespace", "n"), ("pod", "p-1")))
    (('namespace', 'n'), ('pod', 'p-1'))
    >>> _lr_projection(True, ("pod",), "pod", "s2")((("__name__", "m"), ("pod", "p-1"), ("zone", "z")))
    (('pod', 'p-1'), ('zone', 'z'))
    """
    if without:
        skip = set(grouping) | {"__name__"}
        skip.difference_update((src, dst))

        def proj(lb):
            return tuple(x for x in lb if x[0] not in skip)
    else:
        need = set(grouping) | {src, dst}

        def proj(lb):
            return tuple(x for x in lb if x[0] in need)
    return proj


class _Mismatch(Exception):
    """A generic node's labels differ from the plan's (never expected): evaluate the rule generically."""


def _has_dup(labels: list) -> bool:
    return has_dup(labels)


class _Env:
    """One call: evaluation times, the store's tick count, and a generic context for fallbacks."""

    __slots__ = ("times", "T", "n_ticks", "ctx")

    def __init__(self, times: np.ndarray, n_ticks: int, ctx: _Ctx):
        self.times = times
        self.T = len(times)
        self.n_ticks = n_ticks
        self.ctx = ctx


class _Node:
    kind = "v"
    labels: list = []
    _lw = None   # (the node's last lowering, ``program._Lowerer.visit``)

    def __init__(self) -> None:
        self._stamp = None
        self._out = None

    def value(self, E: _Env):
        if self._stamp is not E:
            self._out = self.compute(E)
            self._stamp = E
        return self._out

    def compute(self, E: _Env):  # pragma: no cover - abstract
        raise NotImplementedError


class _Empty(_Node):
    labels: list = []

    def compute(self, E):
        return np.zeros((0, E.T)), np.zeros((0, E.T), bool)


class _Const(_Node):
    kind = "s"

    def __init__(self, val: float):
        super().__init__()
        self.val = val

    def compute(self, E):
        return np.full(E.T, self.val)


class _Grid:
    """A plan's time grid and lookback: what its nodes read of it (they keep this, not the plan)."""

    __slots__ = ("t0_ms", "step_ms", "lookback_ms")

    def __init__(self, t0_ms: int, step_ms: int, lookback_ms: int):
        self.t0_ms, self.step_ms, self.lookback_ms = t0_ms, step_ms, lookback_ms


def _instant_cols(g: _Grid, E: _Env, at_ms, offset_ms: int):
    """(ref times, clipped tick columns, lookback-and-not-before mask, the columns as a slice where they are
    consecutive else None, whether the mask is all True), shared by instant selectors."""
    key = ("inst", at_ms, offset_ms)
    cache = E.ctx.cache
    hit = cache.get(key)
    if hit is not None:
        return hit
    if at_ms is None and E.T <= INSTANT_PY_MAX and type(offset_ms) is int and type(g.t0_ms) is int \
            and type(g.step_ms) is int and type(g.lookback_ms) is int and E.times.dtype == np.int64:
        out = _instant_cols_py(g, E, offset_ms)
    else:
        out = _instant_cols_np(g, E, at_ms, offset_ms)
    cache[key] = out
    return out


#: evaluation times up to which `_instant_cols` works on Python ints (a call's few ticks: numpy's per-call overhead
#: is most of its cost there); beyond, numpy
INSTANT_PY_MAX = 32


def _instant_cols_np(g: _Grid, E: _Env, at_ms, offset_ms: int):
    """`_instant_cols` by numpy (the definition)."""
    ref = E.times if at_ms is None else np.full(E.T, at_ms, dtype=np.int64)
    ref = ref - offset_ms
    idx = (ref - g.t0_ms) // g.step_ms
    j = np.minimum(np.maximum(idx, 0), E.n_ticks - 1)   # (np.clip's definition, without its Python wrapper)
    tj = g.t0_ms + j * g.step_ms
    ok = ((ref - tj) <= g.lookback_ms) & (idx >= 0)
    # consecutive columns (the alert engine's case): gathers take a slice
    js = None
    if E.T:
        j0 = int(j[0])
        if j.tolist() == list(range(j0, j0 + E.T)):
            js = slice(j0, j0 + E.T)
    return ref, j, ok, js, bool(np.logical_and.reduce(ok))


def _instant_cols_py(g: _Grid, E: _Env, offset_ms: int):
    """`_instant_cols_np` without ``@`` (``at_ms`` None) where the grid and the offset are ints and the times int64
    (`PackPlan.evaluate`'s): the same integer operations on Python ints, one time after the other (floor division as
    numpy's on int64), the results made arrays of numpy's dtypes.

    >>> from sremarathon_env.alerts.engine import _Ctx
    >>> times = np.arange(40, 48, dtype=np.int64) * 15_000
    >>> E = _Env(times, 45, _Ctx(times, 15_000))
    >>> g = _Grid(0, 15_000, 300_000)
    >>> py, ref = _instant_cols_py(g, E, 30_000), _instant_cols_np(g, E, None, 30_000)
    >>> all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(py[:3], ref[:3])), py[3:] == ref[3:]
    (True, True)
    """
    t0, st, lb, last = g.t0_ms, g.step_ms, g.lookback_ms, E.n_ticks - 1
    ref = E.times - offset_ms
    jl, okl = [], []
    for r in ref.tolist():
        i = (r - t0) // st
        j = i if i > 0 else 0
        if j > last:
            j = last
        jl.append(j)
        okl.append(r - (t0 + j * st) <= lb and i >= 0)
    js = None
    if jl:
        j0 = jl[0]
        if jl == list(range(j0, j0 + len(jl))):
            js = slice(j0, j0 + len(jl))
    return ref, np.array(jl, dtype=np.int64), np.array(okl, dtype=bool), js, False not in okl


def _flatten(parts) -> tuple[list, np.ndarray | None]:
    if parts and parts[0][0] == "perm":
        _, order, inner = parts[0]
        return list(inner), order
    return list(parts), None


def _gather(flat, perm, n_ticks: int, cols) -> np.ndarray:
    """Rows of the store at tick columns ``cols`` (an index array, or a slice of columns below n_ticks)."""
    if isinstance(cols, slice):
        # one fancy index (rows) and a slice: the same values, a cheaper gather
        if len(flat) == 1:
            fam, rows = flat[0]
            out = fam._data[rows, cols]
        else:
            out = np.concatenate([fam._data[rows, cols] for fam, rows in flat])
        return out if perm is None else out[perm]
    if len(flat) == 1:
        fam, rows = flat[0]
        out = fam.values(n_ticks)[rows[:, None], cols[None, :]]
    else:
        out = np.concatenate([fam.values(n_ticks)[rows[:, None], cols[None, :]] for fam, rows in flat])
    return out if perm is None else out[perm]


class _Sel(_Node):
    def __init__(self, plan: "PackPlan", sel: S.Sel, parts, labels):
        super().__init__()
        # (the plan's grid, not the plan: no node refers back to its plan, so a dropped plan is freed by
        # reference counting, without the cyclic collector)
        self.grid, self.sel = plan.grid, sel
        self.flat, self.perm = _flatten(parts)
        self.labels = labels

    def compute(self, E):
        ref, j, ok, js, ok_all = _instant_cols(self.grid, E, self.sel.at_ms, self.sel.offset_ms)
        vals = _gather(self.flat, self.perm, E.n_ticks, j if js is None else js)
        # a sample is present where it is not NaN (and its time within the lookback)
        return vals, (vals == vals) if ok_all else (vals == vals) & ok[None, :]


_MINMAX = ("max_over_time", "min_over_time")


def _minmax_windows(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, is_max: bool) -> tuple:
    """``max_over_time`` / ``min_over_time`` (``rangefuncs``) of the rows ``v`` (a sample is present where it is not
    NaN) over the inclusive column windows ``lo .. hi`` (per evaluation time), without its loop over window
    positions: the function keeps the first present sample and replaces it by a strictly greater (smaller) one,
    so its result is the window's extreme (``fmax`` / ``fmin`` ignore the absent NaN), and where that is a zero,
    the window's first zero (``fmax`` may return either of two zeros; the function keeps the first). Where a
    window has no sample, the value is the block's first column, as the function leaves it."""
    n, G = v.shape
    T = len(lo)
    lo = np.minimum(np.maximum(lo, 0), G)
    hi = np.minimum(np.maximum(hi, -1), G - 1)
    L = int((hi - lo + 1).max()) if T and G else 0
    if L <= 0:
        return np.zeros((n, T)), np.zeros((n, T), bool)
    idx = lo[None, :] + np.arange(L)[:, None]   # (L, T)
    valid = idx <= hi[None, :]
    W = v[:, np.minimum(idx, G - 1)]   # (n, L, T)
    if not valid.all():
        W = np.where(valid[None, :, :], W, np.nan)
    ok = ~np.isnan(W).all(axis=1)
    m = (np.fmax if is_max else np.fmin).reduce(W, axis=1)
    zero = m == 0
    if zero.any():
        first = np.argmax(W == 0, axis=1)   # (n, T): the first zero of each window (where the extreme is one)
        m = np.where(zero, np.take_along_axis(W, first[:, None, :], axis=1)[:, 0, :], m)
    if not ok.all():
        m = np.where(ok, m, v[:, :1])
    return m, ok


class _RangeGroup:
    """All batched calls of one range function with equal range, offset and @."""

    def __init__(self, plan: "PackPlan", name: str, range_ms: int, offset_ms: int, at_ms):
        self.grid, self.name, self.range_ms, self.offset_ms, self.at_ms = plan.grid, name, range_ms, offset_ms, at_ms
        self.members: list[tuple[list, np.ndarray | None]] = []
        self.n = 0
        self._stamp = None
        self._out = None

    def add(self, parts, n: int) -> int:
        self.members.append(_flatten(parts))
        start = self.n
        self.n += n
        return start

    def value(self, E: _Env):
        if self._stamp is E:
            return self._out
        p = self.grid
        ref = E.times if self.at_ms is None else np.full(E.T, self.at_ms, dtype=np.int64)
        ref = ref - self.offset_ms
        st = p.step_ms
        lo_abs = -((-(ref - self.range_ms - p.t0_ms)) // st)
        hi_abs = np.minimum((ref - p.t0_ms) // st, E.n_ticks - 1)
        lo_abs = np.maximum(lo_abs, 0)
        c0 = int(lo_abs.min())
        c1 = int(hi_abs.max())
        if c1 < c0:
            cols = np.zeros(0, dtype=np.intp)
            v = np.zeros((self.n, 0))
        else:
            cols = np.arange(c0, c1 + 1)
            blocks = [_gather(flat, perm, E.n_ticks, slice(c0, c1 + 1)) for flat, perm in self.members]
            v = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        if self.name in _MINMAX:
            rv, rp = _minmax_windows(v, lo_abs - c0, hi_abs - c0, self.name == "max_over_time")
        else:
            w = Win([], v, ~np.isnan(v), p.t0_ms + cols.astype(np.int64) * st, lo_abs - c0, hi_abs - c0,
                    self.range_ms, self.offset_ms)
            rv, rp = RANGE_FUNCS[self.name](w, E.times, None)
        self._out = (np.asarray(rv, dtype=np.float64), rp)
        self._stamp = E
        return self._out


class _KernelGroup:
    """All kernel-evaluated range calls of the plan (one window per row), over the plan's ``Tape``."""

    def __init__(self, plan: "PackPlan", nodes: list):
        self.tape, self.grid = plan.tape, plan.grid
        self.n = 0
        for rn in nodes:
            rn.group, rn.a = self, self.n
            self.n += len(rn.slots)
            rn.b = self.n
        if nodes:
            # (per node: its rows' slots and its window; the spec's per-row fields are found per node)
            self.spec = KernelSpec.of_parts([rn.slots for rn in nodes], [rn.window for rn in nodes])
        self._stamp = None
        self._out = None

    def value(self, E: _Env, out: tuple | None = None):
        """(values, presence) of every kernel row at the call ``E``, once per call; ``out``: buffers to write them
        into (``window_kernel``'s; the program's arena, `program.Arena.kernel_out`)."""
        if self._stamp is E:
            return self._out
        tape, g = self.tape, self.grid
        # columns after the last evaluation time are never read: the tape stops there
        tape.sync(int((int(E.times.max()) - g.t0_ms) // g.step_ms) + 1)
        self._out = window_kernel(tape, self.spec, E.times, g.t0_ms, g.step_ms, out)
        self._stamp = E
        return self._out


class _Range(_Node):
    kernel = False

    def __init__(self, group, start: int, n: int, labels):
        super().__init__()
        self.group, self.a, self.b = group, start, start + n
        self.labels = labels

    def compute(self, E):
        v, p = self.group.value(E)
        return v[self.a : self.b], p[self.a : self.b]


class _Pass(_Node):
    """Same values, other labels (label_replace without duplicate results)."""

    def __init__(self, child: _Node, labels):
        super().__init__()
        self.child, self.labels = child, labels

    def rebind(self, child):
        self.child = child

    def value(self, E: _Env):
        return self.child.value(E)   # the child's very values (it keeps them for the call)

    compute = value


class _Agg(_Node):
    """sum / count / group / max / min by group. A sum and a count are ``ufunc.at`` over the group cell of each input
    element, which applies the rows in input order: Prometheus's row-after-row sum, bit for bit (it starts from
    -0.0: ``-0.0 + x`` is ``x`` exactly; of two NaN operands numpy's loops may return either, as they do by shape in
    any of its reductions: no result shows a NaN's payload). A max or min reduces the rows in group order
    (``reduceat``, as the generic evaluator; the layouts cached by group index); a sum, count or group needs no
    layout (the presence of its groups is a count of present members per cell)."""

    def __init__(self, op: str, child: _Node, keys, gid: np.ndarray):
        super().__init__()
        self.op, self.child, self.labels = op, child, keys
        G = self.G = len(keys)
        n = len(gid)
        self.gid = gid
        self.one_group = G == 1
        self.singletons = G == n
        self.perm = self.order = self.starts = self._flat = None
        if self.singletons and n > 1:
            # a permutation: group g is row perm[g] (None where the rows are in group order already)
            perm = np.empty(n, dtype=np.intp)
            perm[gid] = np.arange(n)
            self.perm = None if bool((gid[1:] > gid[:-1]).all()) else perm
        elif not self.one_group and op in ("max", "min"):
            # fmax / fmin by reduceat over the rows in group order (ufunc.at would differ in the sign of a zero:
            # numpy's loops disagree on fmax(0.0, -0.0), and this keeps the generic evaluator's)
            self.order, self.starts = self._cached_layout()

    def _cached_layout(self) -> tuple:
        """``_layout`` of this node's group index, through the cache by group index."""
        ck = (self.G, self.gid.tobytes())
        hit = _AGG_LAYOUT.get(ck)
        if hit is None:
            if len(_AGG_LAYOUT) > AGG_LAYOUT_MAX:
                _AGG_LAYOUT.clear()
            hit = _AGG_LAYOUT[ck] = self._layout(self.G, self.gid)
        return hit

    def rebind(self, child):
        self.child = child

    @staticmethod
    def _layout(G: int, gid: np.ndarray) -> tuple:
        """(the stable order of the rows by group, None where they are in group order already; group starts)."""
        sizes = np.bincount(gid, minlength=G)
        starts = np.zeros(G, dtype=np.intp)
        np.cumsum(sizes[:-1], out=starts[1:])
        # the stable sort by group is the identity exactly when the group index never decreases
        order = None if bool((gid[1:] >= gid[:-1]).all()) else np.argsort(gid, kind="stable")
        return order, starts

    def compute(self, E):
        v, p = self.child.value(E)
        op = self.op
        if self.singletons:
            if op == "sum":
                W = np.where(p, v, 0.0)
            elif op == "count":
                W = p.astype(np.float64)
            elif op == "group":
                W = np.ones((len(self.labels), E.T))
            else:
                W = np.where(p, v, np.nan)
            if self.perm is not None:
                return W[self.perm], p[self.perm]
            return W, p
        if self.one_group:
            anyp = np.logical_or.reduce(p, axis=0, keepdims=True)   # (p.any without its Python wrapper)
            if op == "sum":
                return np.add.accumulate(np.where(p, v, 0.0), axis=0)[-1:], anyp
            if op == "count":
                return np.add.reduce(p, axis=0, keepdims=True, dtype=np.float64), anyp   # (p.sum)
            if op == "group":
                return np.ones((1, E.T)), anyp
            W = np.where(p, v, np.nan)
            return (np.fmax if op == "max" else np.fmin).reduceat(W, _START0, axis=0), anyp
        if op == "max" or op == "min":
            # a group is present where any of its rows is (logical or: exact in any order)
            anyp = np.logical_or.reduceat(p if self.order is None else p[self.order], self.starts, axis=0)
        else:
            # the flat (group, time) cell of each (row, time) element, row-major (kept per node and call length)
            T = E.T
            fl = self._flat
            if fl is None or fl[0] != T:
                fl = self._flat = (T, (self.gid[:, None] * T + np.arange(T)).ravel())
            # present members per cell: bincount adds the weights 1.0 / 0.0 in input order from 0.0, exact
            # integers, as add.at of p.astype(float) over the rows from zeros gives
            cnt = np.bincount(fl[1], weights=p.ravel(), minlength=self.G * T).reshape(self.G, T)
            anyp = cnt > 0
            if op == "count":
                return cnt, anyp
            if op == "sum":
                # ``add.at`` over the flat cells (numpy's fast 1-D path): each cell takes its rows in input
                # order, as ``add.at`` over the rows does
                out = np.full(self.G * T, -0.0)
                np.add.at(out, fl[1], np.where(p, v, 0.0).ravel())
                return out.reshape(self.G, T), anyp
            return np.ones((self.G, T)), anyp
        W = np.where(p, v, np.nan)
        if self.order is not None:
            W = W[self.order]
        return (np.fmax if op == "max" else np.fmin).reduceat(W, self.starts, axis=0), anyp


#: group layouts of max / min aggregations, by (number of groups, group index of each input row)
_AGG_LAYOUT: dict[tuple, tuple] = {}
AGG_LAYOUT_MAX = 2000  #: layouts kept before the cache starts again
_START0 = np.zeros(1, dtype=np.intp)   # reduceat over all rows: one segment


def _const_operand(sc: _Node):
    """A constant operand as a 0-d float64 array (the same double: the same result against the float64 values,
    without the ufunc's conversion of a Python float at every call), else None."""
    return np.asarray(sc.val, dtype=np.float64) if isinstance(sc, _Const) else None


class _VecScalar(_Node):
    def __init__(self, op: str, vec: _Node, sc: _Node, scalar_left: bool, return_bool: bool, labels):
        super().__init__()
        self.op, self.vec, self.sc, self.left, self.rb = op, vec, sc, scalar_left, return_bool
        self.labels = labels
        self.const = _const_operand(sc)
        self.arith = ARITH_FUNCS.get(op)   # (else a comparison)
        self.cmp = CMP_FUNCS.get(op)

    def rebind(self, a, b):
        self.vec, self.sc = a, b
        self.const = _const_operand(b)

    def compute(self, E):
        v, p = self.vec.value(E)
        s = self.const
        if s is None:
            s = self.sc.value(E)[None, :]
        lv, rv = (s, v) if self.left else (v, s)
        if self.arith is not None:  # floating-point warnings are off for the whole call (PackPlan.evaluate)
            r = self.arith(lv, rv)
            if r.shape != v.shape:
                r = np.broadcast_to(r, v.shape)
            return r.astype(np.float64, copy=False), p
        c = self.cmp(lv, rv)
        if self.rb:
            return c.astype(np.float64), p
        return v, p & c


def _is_identity(idx: np.ndarray, n: int) -> bool:
    """Whether ``idx`` takes all ``n`` rows in order."""
    return len(idx) == n and bool((idx == np.arange(n)).all())


class _VecVec(_Node):
    def __init__(self, op, lhs, rhs, swap, mi, oi, labels, return_bool):
        super().__init__()
        self.op, self.lhs, self.rhs, self.swap, self.rb = op, lhs, rhs, swap, return_bool
        many, one = (rhs, lhs) if swap else (lhs, rhs)
        # the rows each side takes, None where that is every row in order (no gather: the usual one-to-one match);
        # the many side's rows ascend (``_pairs`` takes them in order): all of them is every row in order
        self.mi = None if len(mi) == len(many.labels) else mi
        self.oi = None if _is_identity(oi, len(one.labels)) else oi
        self.labels = labels

    def rebind(self, lhs, rhs):
        self.lhs, self.rhs = lhs, rhs

    def compute(self, E):
        lv, lp = self.lhs.value(E)
        rv, rp = self.rhs.value(E)
        (mv, mp), (ov, op_) = ((rv, rp), (lv, lp)) if self.swap else ((lv, lp), (rv, rp))
        if self.oi is not None:
            ov, op_ = ov[self.oi], op_[self.oi]
        if self.mi is not None:
            mv, mp = mv[self.mi], mp[self.mi]
        vl, vr = (ov, mv) if self.swap else (mv, ov)
        p = mp & op_
        op = self.op
        # vectorops._elem without its errstate: warnings are off for the whole call (PackPlan.evaluate)
        if op in ARITH_FUNCS:
            val = ARITH_FUNCS[op](vl, vr)
        else:
            c = CMP_FUNCS[op](vl, vr)
            if self.rb:
                val = c.astype(np.float64)
            else:
                val = vl
                p &= c
        return np.asarray(val, dtype=np.float64), p


class _SetAndUnless(_Node):
    def __init__(self, op, lhs, rhs, r_order, r_starts, lmap):
        super().__init__()
        self.op, self.lhs, self.rhs = op, lhs, rhs
        self.r_order, self.r_starts, self.lmap = r_order, r_starts, lmap
        self.labels = lhs.labels
        # (the right rows already grouped in order: no gather)
        self.r_ident = r_order is not None and _is_identity(r_order, len(r_order))

    def rebind(self, lhs, rhs):
        self.lhs, self.rhs = lhs, rhs

    def compute(self, E):
        lv, lp = self.lhs.value(E)
        if self.r_starts is None:
            return lv, (np.zeros_like(lp) if self.op == "and" else lp)
        _, rp = self.rhs.value(E)
        # per right signature, whether any of its rows is present; an extra False row for left rows without a match
        union = np.zeros((len(self.r_starts) + 1, E.T), bool)
        np.logical_or.reduceat(rp if self.r_ident else rp[self.r_order], self.r_starts, axis=0, out=union[:-1])
        mask = union[self.lmap]
        # (and: present on both sides; unless: present on the left only, lp > mask for booleans)
        return lv, (np.logical_and(lp, mask, out=mask) if self.op == "and" else np.greater(lp, mask, out=mask))


class _HQBatch:
    """Bucket groups of a ``histogram_quantile`` with the same distinct upper bounds (columns are independent):
    the rows ``R`` (groups x buckets), the output rows ``gs``, and what a constant quantile needs of the bounds."""

    __slots__ = ("ubs", "gs", "R", "m", "start", "inf_top", "low0", "_offs", "qs")

    def __init__(self, ubs: np.ndarray, gs: np.ndarray, R: np.ndarray):
        self.ubs, self.gs, self.R = ubs, gs, R
        self.m = m = len(ubs)
        # the lower bound of bucket b (0.0 below the first): what ``_bucket_quantile`` takes for ``start``
        self.start = np.concatenate([[0.0], ubs[:-1]]) if m else ubs
        self.inf_top = bool(m) and ubs[-1] == np.inf
        self.low0 = bool(m) and bool(ubs[0] <= 0)
        self._offs: tuple = (-1, None)
        #: constant quantiles in [0, 1] of the nodes over these groups (by ``float.hex``: -0.0 is not 0.0), computed
        #: together once per call (``quantiles``)
        self.qs: dict[str, float] = {}

    def prepare(self, v: np.ndarray, p: np.ndarray) -> tuple:
        """What every quantile over these groups shares in a call: (counts (g, m, T), presence, any present, all
        present, the cumulative counts as ``_bucket_quantile`` makes them (None where no quantile is defined),
        the observations (the last cumulative count), whether every present group has all its buckets)."""
        C = v[self.R]   # (g, m, T)
        P = p[self.R]
        ap = np.logical_or.reduce(P, axis=1)
        full = np.logical_and.reduce(P, axis=1) & ap
        all_full = bool(full.all())
        if not self.inf_top or self.m < 2:
            return C, P, ap, full, None, None, all_full
        acc = np.fmax.accumulate(C, axis=1)
        Cc = np.where(np.isnan(C), C, acc)
        return C, P, ap, full, Cc, Cc[:, -1, :], all_full

    def quantile(self, q: float, Cc, obs, shape) -> np.ndarray:
        """``_bucket_quantile`` of each (group, time) column for the constant quantile ``q``: the same operations
        on each element (bucket-wise along axis 1 instead of axis 0 of a transposed copy). Where the bucket is
        the first, its previous count is 0.0, and ``x - 0.0`` is ``x`` bit for bit: no select is needed."""
        if q < 0:
            return np.full(shape, -np.inf)
        if q > 1:
            return np.full(shape, np.inf)
        if Cc is None:
            return np.full(shape, np.nan)
        return self._quantile(q * obs, Cc, obs)

    def quantiles(self, Cc, obs) -> dict:
        """``quantile`` of every registered constant quantile (``qs``, each in [0, 1]; ``Cc`` not None), by
        ``float.hex`` of the quantile: one pass over a (quantiles, groups, times) stack, the same operations on
        each element as one ``quantile`` call per quantile."""
        keys = list(self.qs)
        if len(keys) == 1:
            return {keys[0]: self._quantile(self.qs[keys[0]] * obs, Cc, obs)}
        qa = np.array(list(self.qs.values()))
        val = self._quantile(qa[:, None, None] * obs, Cc, obs)
        return dict(zip(keys, val))

    def _quantile(self, rank, Cc, obs) -> np.ndarray:
        """The quantile of each (group, time) column at ``rank`` ((g, T), or (k, g, T) for k quantiles at once)."""
        g, m, T = Cc.shape
        lead = rank.shape[:-2]
        # the first bucket whose cumulative count reaches the rank, else the last
        ge = np.empty(lead + (g, m, T), bool)
        np.greater_equal(Cc[..., :-1, :], rank[..., None, :], out=ge[..., :-1, :])
        ge[..., -1, :] = True
        b = np.argmax(ge, axis=-2)   # (..., g, T)
        n, offs = self._offs
        if n != g * T or offs.shape != (g, T):
            # flat index of bucket 0 of each (group, time) column of a (g, m, T) array
            offs = np.arange(g)[:, None] * (m * T) + np.arange(T)[None, :]
            self._offs = (g * T, offs)
        at = b * T + offs
        flat = Cc.reshape(-1)
        cnt = flat[at]
        prevc = np.where(b > 0, flat[at - T], 0.0)   # (at - T, where b is 0, is another in-range element)
        cnt = cnt - prevc
        rk = rank - prevc
        start = self.start[b]
        val = start + (self.ubs[b] - start) * (rk / cnt)
        if self.low0:
            val = np.where(b == 0, self.ubs[0], val)
        val = np.where(b == m - 1, self.ubs[m - 2], val)
        return np.where(obs == 0, np.nan, val)


#: constant quantiles computed together per bucket batch, at most (any further one is computed on its own)
HQ_QUANTILES_MAX = 8


def _hq_batches(layout) -> tuple[list, list]:
    """(``_HQBatch`` per distinct upper-bound set, groups with repeated upper bounds) of a layout."""
    batches: dict[tuple, list[int]] = {}
    slow: list[int] = []
    for g, (_, ubs, _) in enumerate(layout):
        if len(set(ubs.tolist())) == len(ubs):
            batches.setdefault(tuple(ubs.tolist()), []).append(g)
        else:
            slow.append(g)
    return ([_HQBatch(np.array(k), np.array(gs, dtype=np.intp), np.vstack([layout[g][2] for g in gs]))
             for k, gs in batches.items()], slow)


class _HistQuantile(_Node):
    def rebind(self, q, child):
        self.q, self.child = q, child

    def __init__(self, q: _Node, child: _Node, layout):
        super().__init__()
        self.q, self.child = q, child
        self.labels = [key for key, _, _ in layout]
        self.layout = layout
        # (shared by the quantiles over one child: their per-call preparation is done once, ``prepare``)
        self.batches, self.slow = memo(("hqbatches",), (layout,), lambda: _hq_batches(layout))
        qc = q.val if isinstance(q, _Const) else None
        if qc is not None and 0 <= qc <= 1:
            for bt in self.batches:
                if len(bt.qs) < HQ_QUANTILES_MAX:
                    bt.qs.setdefault(qc.hex(), qc)
        self.one = (len(self.batches) == 1 and not self.slow
                    and self.batches[0].gs.tolist() == list(range(len(self.labels))))

    def compute(self, E):
        T = E.T
        q = self.q.value(E)
        v, p = self.child.value(E)
        G = len(self.labels)
        one = self.one
        if not one:
            res = np.full((G, T), np.nan)
            anyp = np.zeros((G, T), bool)
        qc = self.q.val if isinstance(self.q, _Const) else None
        cache = E.ctx.cache
        for bt in self.batches:
            ck = ("hq", id(bt), id(v))
            hit = cache.get(ck)
            if hit is None or hit[0] is not bt or hit[1] is not v:
                hit = cache[ck] = (bt, v, bt.prepare(v, p), [None])
            C, P, ap, full, Cc, obs, all_full = hit[2]
            g, m = bt.R.shape
            if qc is not None:
                if Cc is not None and qc.hex() in bt.qs:
                    # (all constant quantiles over these groups at once, kept for the call)
                    qv = hit[3][0]
                    if qv is None or qc.hex() not in qv:
                        qv = hit[3][0] = bt.quantiles(Cc, obs)
                    val = qv[qc.hex()]
                else:
                    val = bt.quantile(qc, Cc, obs, (g, T))
            else:
                Cm = C.transpose(1, 0, 2).reshape(m, g * T)
                val = _bucket_quantile(np.concatenate([q] * g), bt.ubs, Cm).reshape(g, T)   # q repeated per group
            if all_full:
                out = val
            else:
                out = np.where(full, val, np.nan)
                for gi, t in np.argwhere(ap & ~full):
                    sel = P[gi, :, t]
                    out[gi, t] = _bucket_quantile(q[t : t + 1], bt.ubs[sel], C[gi][sel][:, t : t + 1], coalesce=True)[0]
            if one:   # (the only batch, all groups in order: its arrays are the result)
                return out, ap
            res[bt.gs] = out
            anyp[bt.gs] = ap
        for g in self.slow:
            _, ubs, rows = self.layout[g]
            C, P = v[rows], p[rows]
            ap = P.any(axis=0)
            for t in np.flatnonzero(ap):
                sel = P[:, t]
                res[g, t] = _bucket_quantile(q[t : t + 1], ubs[sel], C[sel][:, t : t + 1], coalesce=True)[0]
            anyp[g] = ap
        return res, anyp


class _Generic(_Node):
    """The generic evaluator on this node, its (plan) children's values seeded into the context."""

    def __init__(self, plan: "PackPlan", node: S.Node, children: list[tuple[S.Node, _Node]], labels, kind: str):
        super().__init__()
        self.promql, self.node, self.children, self.labels, self.kind = plan.promql, node, children, labels, kind

    def compute(self, E):
        ctx = E.ctx
        for cnode, child in self.children:
            val = child.value(E)
            ctx.cache[cnode.key] = Scal(val) if child.kind == "s" else Vec(child.labels, val[0], val[1])
        out = self.promql._eval_uncached(self.node, ctx)
        if isinstance(out, Scal):
            return out.v
        if out.labels is not self.labels and out.labels != self.labels:
            raise _Mismatch(self.node.key)
        return out.v, out.p


class PackPlan:
    """Compiled plan of a rule list over one ``PromQLEngine``'s store; rebuilt when a series set grows."""

    def __init__(self, promql: PromQLEngine, rules):
        self.promql = promql
        self.store = promql.store
        self.rules = list(rules)
        self.step_ms, self.t0_ms = promql.step_ms, promql.t0_ms
        self.lookback_ms = promql.limits.lookback_ms
        self.grid = _Grid(self.t0_ms, self.step_ms, self.lookback_ms)   # what nodes read of the plan
        self._all_families, self._names, self._rule_names, needs, self._rule_sels = _rules_info(self.rules)
        # per rule, the (parts, labels) objects of its selectors at its last walk where a walk with the same
        # selections makes the same nodes (``_rule_sels``: its tree reads the store through plan selections only),
        # else None; a rule reading a changed name whose selections are all these objects is kept (``_build_rules``)
        self._rule_seen: list[tuple | None] = [None] * len(self.rules)
        self._direct = False  # a node of this plan's builds evaluates a selector by the generic evaluator
        # rule indices per metric name read, and the rules never kept (a selector without a name)
        self._rules_of_name: dict[str, list[int]] = {}
        for i, names in enumerate(self._rule_names):
            for n in names:
                if n is not None:
                    self._rules_of_name.setdefault(n, []).append(i)
        self._unkeepable = [i for i, names in enumerate(self._rule_names) if None in names]
        self._sig: tuple | None = None
        self._roots: list[_Node | None] = []
        self._cache: dict[tuple, _Node] = {}  # nodes of the last build, by (key, identities of inputs)
        self._lr_rows: dict[tuple, dict] = {}  # label_replace results per input label set
        self._lr_tags: dict[str, tuple] = {}  # per label_replace node key: ("label_replace", dst, repl, src, regex)
        self._fused_keys: dict[str, list] = {}  # per fused aggregation's key, ``_agg_label_replace``
        self.tape = Tape(self.store)  # running per-series summaries for the window kernel
        self._records: list[tuple | None] = [None] * len(self.rules)  # (root, visited nodes, kernel nodes)
        # (at the last build: the families read (``_read_families``), their row counts, each one's name, the name by
        # family identity; the left-out records keep their version then, ``_Excluded.built``): ``_changed_names``
        self._built: tuple | None = None
        self._fam_read: tuple | None = None  # _read_families
        self._visits: tuple[list, list] = ([], [])
        self.builds = 0
        self.build_cpu_s = 0.0  # CPU seconds spent in rebuilds (a diagnostic for the bench; never in results)
        self.kept = 0  # rules whose nodes a rebuild kept
        self.kept_same = 0  # of them, rules reading a changed name whose selections were the same (a diagnostic)
        # fused aggregations of a label_replace made, and of them those whose group keys were edited from the last
        # build's (``_agg_label_replace``; a diagnostic)
        self.fused_made = self.fused_edited = 0
        # rows left out of every selector because they cannot have a sample in any window the plan reads
        # (families read through @ or a subquery, and name-less selectors, never leave any row out)
        self._needs = needs
        self._excl: dict[int, _Excluded] = {}
        self._excl_t_ms = None  # the earliest evaluation time the exclusions were decided for
        self._excl_cols = 0  # columns the excluded rows are known to be empty up to
        self._excl_dirty = False
        self._excl_fams: tuple | None = None  # (families in the store, [(family, entry, read-back)]) for pruning
        self._live_cache: dict[str, tuple] = {}
        self._sels: dict[tuple, _Selection] = {}  # per (metric name, matchers): live rows kept up to date
        self._sel_keys: dict[str, tuple] = {}  # selector key -> ((metric name, matchers), the matchers to check)
        self._tokens: dict[int, tuple] = {}  # per family: (family, rows, content token or None)
        self._last_labels: dict[str, list] = {}  # per node key, the label list of its last build
        self._sel_now: dict[str, tuple] | None = None  # _selection's results in the running build (None: no build)
        self.excluded = 0  # rows left out at the last build
        self._prog: tuple | None = None  # (roots, kernel group, program.Program or None) of the build lowered last
        self._arena = None   # program.Arena: the programs' value and presence buffers, taken again at every call
        self.lower_cpu_s = 0.0  # CPU seconds spent lowering builds into programs (a diagnostic, like build_cpu_s)
        self.program_calls = 0  # calls the program evaluated (a diagnostic; the others ran the numpy nodes)

    # ------------------------------------------------------------------ signature and build
    def _read_families(self) -> tuple:
        """(the store's family count, [(name, its families)] of the names the plan reads, every such family in
        that order, their identities), made again only when the store gained a family (a store only ever adds
        families, ``MetricStore.family``; their row counts are read afresh at each call)."""
        store = self.store
        n = len(store._order)
        hit = self._fam_read
        if hit is not None and hit[0] == n:
            return hit
        names = store.names() if self._all_families else self._names
        per_name = [(nm, store.families(nm)) for nm in names]
        fams = [f for _, fs in per_name for f in fs]
        hit = self._fam_read = (n, per_name, fams, tuple(map(id, fams)))
        return hit

    def signature(self) -> tuple:
        """The series-set signature: the families the plan reads (by identity) and their row counts. The
        identities are one tuple object while the store's families stay, so the comparison per call is the
        row counts'."""
        _, _, fams, ids = self._read_families()
        return ids, tuple(map(len, fams))

    def _name_sigs(self) -> dict[str, tuple]:
        """Per name read: its families' (identity, row count, left-out rows' version) (the definition of a changed
        name, ``_changed_names``)."""
        _, per_name, _, _ = self._read_families()
        ex = self._excl
        return {n: tuple((id(f), len(f), ex[id(f)].version if id(f) in ex else 0) for f in fs)
                for n, fs in per_name}

    def _changed_names(self) -> set:
        """The names whose ``_name_sigs`` entry differs from the last build's (every name read at the first build,
        or where the store gained a family since). While the families stand, that is the names of the families whose
        row count differs from the last build's (compared in C) or whose left-out rows' version moved (one pass over
        the plan's left-out records): no per-name signature is made."""
        hit = self._read_families()
        lens = list(map(len, hit[2]))
        last = self._built
        ex = self._excl
        if last is None or last[0] is not hit:
            sigs = self._name_sigs()
            prev = {} if last is None else self._sigs_built(last)
            changed = {n for n, sg in sigs.items() if prev.get(n) != sg}
            # (per family, in the order read: its name; per family identity, its name)
            names_of = [n for n, fs in hit[1] for _ in fs]
            self._built = (hit, lens, names_of, {id(f): n for n, f in zip(names_of, hit[2])})
            for ent in ex.values():
                ent.built = ent.version
            return changed
        names_of, name_of_id = last[2], last[3]
        changed = set(map(names_of.__getitem__, compress(range(len(lens)), map(ne, lens, last[1]))))
        for ent in ex.values():
            if ent.built != ent.version:
                ent.built = ent.version
                n = name_of_id.get(id(ent.fam))
                if n is not None:
                    changed.add(n)
        self._built = (hit, lens, names_of, name_of_id)
        return changed

    def _sigs_built(self, last: tuple) -> dict[str, tuple]:
        """``_name_sigs`` as it was at the build that recorded ``last`` (its families, their row counts then, the
        left-out rows' versions then)."""
        hit, lens = last[0], last[1]
        ex = self._excl
        out = {}
        k = 0
        for n, fs in hit[1]:
            sig = []
            for f in fs:
                e = ex.get(id(f))
                sig.append((id(f), lens[k], e.built if e is not None else 0))
                k += 1
            out[n] = tuple(sig)
        return out

    # ------------------------------------------------------------------ rows that cannot contribute
    def _check_excluded(self, t_min: int) -> None:
        """Keep the exclusions valid for a call from ``t_min``: an excluded row that got a sample in a new
        column comes back (rebuild), and a call earlier than the exclusions were decided for drops them all."""
        if not self._excl:
            return
        if t_min < self._excl_t_ms:
            for ent in self._excl.values():
                ent.set(np.zeros(0, dtype=np.intp), removed=ent.rows)
            self._excl_t_ms = None
            self._excl_dirty = True
            return
        n = self.store.n_ticks
        if n <= self._excl_cols:
            return
        c0 = self._excl_cols
        nb = kernels()
        for ent in self._excl.values():
            if len(ent.rows):
                data = ent.fam._data
                if nb is not None and _all_nan_compiled(nb, data, ent.rows, c0, n):
                    continue   # (the usual case, the compiled check: no left-out row got a sample)
                empty = np.isnan(data[ent.rows, c0:n])
                if empty.all():
                    continue   # (the usual case: no left-out row got a sample)
                back = ~empty.all(axis=1)
                ent.set(ent.rows[~back], removed=ent.rows[back])
                self._excl_dirty = True
        self._excl_cols = n

    def _decide_excluded(self, t_min: int) -> None:
        """At a rebuild: rows of each family with no sample in any column a call from ``t_min`` on reads
        (columns at or after ``t_min`` less the family's longest window, and the last column) leave the
        plan's selectors. Rows only ever leave in batches (at least ``PRUNE_MIN`` new ones) so that
        selectors over a family keep growing incrementally between prunes."""
        store = self.store
        n = store.n_ticks
        if not self._needs or n == 0:
            return
        if self._excl_t_ms is None or t_min > self._excl_t_ms:
            self._excl_t_ms = t_min
        t_min = self._excl_t_ms
        if self._excl_fams is None or self._excl_fams[0] != len(store._order):
            # (family, its entry, its longest read-back) of every family the selectors may leave rows of; families
            # are only ever added to a store
            lst = []
            for name, need in self._needs.items():
                if need is None:
                    continue
                for fam in store.families(name):
                    ent = self._excl.get(id(fam))
                    if ent is None or ent.fam is not fam:
                        ent = self._excl[id(fam)] = _Excluded(fam)
                    lst.append((fam, ent, need))
            self._excl_fams = (len(store._order), lst)
        nb = kernels()
        for fam, ent, need in self._excl_fams[1]:
            rows = len(fam._label_values)
            if rows == ent.rows_seen:
                continue  # only a family that gained rows (its selectors change anyway) loses some
            ent.rows_seen = rows
            n_out = len(ent.rows)
            least = max(PRUNE_MIN, (rows - n_out) * PRUNE_SHARE)
            c0 = min(max((t_min - need - self.t0_ms) // self.step_ms - 1, 0), n - 1)
            idx = _prunable(nb, fam._data, rows, ent, c0, n, least)
            # leave rows out in batches: each change makes the family's selectors new lists
            if idx is not None and len(idx) and len(idx) >= least:
                # (idx holds no left-out row: the union is the sorted concatenation)
                ent.set(np.sort(np.concatenate((ent.rows, idx))) if n_out else idx, added=idx)
        self._excl_cols = n

    def _live(self, key: str, parts, labels):
        """A selector's (parts, labels) without its excluded rows (the same objects where none is excluded);
        cached per selector, and recorded as grown where the selector's rows grew and no exclusion changed."""
        ex = self._excl
        if not ex or not labels:
            return parts, labels
        flat, perm = _flatten(parts)
        ents = [ex.get(id(f)) for f, _ in flat]
        if not any(e is not None and e.fam is f and len(e.rows) for e, (f, _) in zip(ents, flat)):
            return parts, labels
        vers = tuple(e.version if e is not None and e.fam is f else -1 for e, (f, _) in zip(ents, flat))
        hit = self._live_cache.get(key)
        if hit is not None and hit[0] is labels and hit[1] == vers:
            return hit[2], hit[3]
        xs = []
        for fam, rows in flat:
            ent = ex.get(id(fam))
            if ent is None or ent.fam is not fam or not len(ent.rows):
                xs.append(np.zeros(len(rows), bool))
            else:
                m = ent.mask
                xs.append(m[np.minimum(rows, len(m) - 1)] & (rows < len(m)))
        xc = xs[0] if len(xs) == 1 else np.concatenate(xs)
        if not xc.any():
            out = (parts, labels)
        else:
            keep_flat = ~xc
            keep = keep_flat if perm is None else keep_flat[perm]
            kl = keep.tolist()
            new_labels = [lb for lb, k in zip(labels, kl) if k]
            new_flat = [(fam, rows[~x]) for (fam, rows), x in zip(flat, xs)]
            new_flat = [(fam, rows) for fam, rows in new_flat if len(rows)]
            if perm is None:
                new_parts: list = new_flat
            else:
                rank = np.cumsum(keep_flat) - 1
                new_perm = rank[perm[keep]]
                if not len(new_perm) or bool((new_perm == np.arange(len(new_perm))).all()):
                    new_parts = new_flat
                else:
                    new_parts = [("perm", new_perm.astype(np.intp), new_flat)]
            if hit is not None and hit[1] == vers and hit[3] is not hit[0]:
                g = grown_from(labels)
                if g is not None and g[0] is hit[0]:
                    # rows inserted into the selector are new rows (never excluded): the same insertions
                    rank_l = np.cumsum(keep) - 1
                    note_grown(new_labels, hit[3], rank_l[np.asarray(g[1], dtype=np.intp)].tolist())
            out = (new_parts, new_labels)
        self._live_cache[key] = (labels, vers, out[0], out[1])
        return out

    def _selection(self, sel: S.Sel):
        """``_select_now``, once per selector key within a build (the store and the left-out rows stand still
        during a build); outside builds each call selects afresh."""
        now = self._sel_now
        if now is None:
            return self._select_now(sel)
        hit = now.get(sel.key)
        if hit is None:
            hit = now[sel.key] = self._select_now(sel)
        return hit

    def _select_now(self, sel: S.Sel):
        """A selector's (parts, labels) without its excluded rows: what ``_live`` gives for the generic
        evaluator's selection, kept per (name, matchers) and brought up to date at each build.

        The generic order is a stable sort by sort key of the matching rows taken family by family, row by
        row, so the selection is the live matching rows sorted by (sort key, family index, row). New rows
        (and rows taken back from the left-out ones) are inserted at their place (``bisect``); rows newly
        left out are dropped from the list, which is recorded as made from the previous one (``note_grown``:
        later label work redoes the new rows only). A change of the families redoes the selection; a label set
        without a sort key (a name or value holding ``\\x00`` or ``\\x01``), or a selector without a metric
        name, takes the generic path."""
        if sel.name is None:
            return self._live(sel.key, *self.promql._select(sel, self._dummy))
        ent = self._sel_keys.get(sel.key)
        if ent is None:
            # (its matchers less a ``__name__="<its name>"`` one: every row of the name's families passes that)
            ent = self._sel_keys[sel.key] = (
                (sel.name, tuple((m.name, m.op, m.value) for m in sel.matchers)),
                tuple(m for m in sel.matchers if not (m.name == "__name__" and m.op == "=" and m.value == sel.name)))
        mkey, matchers = ent
        st = self._sels.get(mkey)
        fams = self.store._families.get(sel.name, ())   # (read only)
        ex = self._excl
        ids = tuple(map(id, fams))
        if st is None or st.ids != ids:   # (st keeps its families alive: equal ids are the same families)
            st = self._sels[mkey] = _Selection(fams, ids)
        if st.fallback:
            return self._live(sel.key, *self.promql._select(sel, self._dummy))
        # the rows left out of each family now, as (rows, mask) (None: none)
        excl = []
        for f in fams:
            e = ex.get(id(f))
            excl.append((e.rows, e.mask) if e is not None and e.fam is f and len(e.rows) else None)
        if st.items is not None and list(map(len, fams)) == st.done and all(map(_same_excl, excl, st.excl)):
            return st.parts, st.labels   # no new row, the same left-out rows: the same selection
        tokens = None
        if st.items is None and fams and not any(st.done) and excl.count(None) == len(excl):
            # a first selection over families whose content an earlier store had: that store's selection
            tokens = tuple(map(self._fam_token, fams))
            if None in tokens:
                tokens = None
            elif _take_shared(st, (mkey, tokens), fams):
                return st.parts, st.labels
        new = []
        for fi, fam in enumerate(fams):
            n = len(fam)
            if n == st.done[fi]:
                continue
            info, pos, rent = self.promql._row_info_lazy(fam, n)
            if not st.own[fi]:   # (a kept first selection's lists: copied before they are extended)
                st.rows[fi], st.lbs[fi], st.keys[fi] = list(st.rows[fi]), list(st.lbs[fi]), list(st.keys[fi])
                st.own[fi] = True
            rows, lbs, keys = st.rows[fi], st.lbs[fi], st.keys[fi]
            a = len(rows)
            match_rows(info, pos, matchers, st.done[fi], n, rows, lbs, keys, fam.name, rent)
            st.done[fi] = n
            if None in keys[a:]:
                st.fallback = True
                return self._live(sel.key, *self.promql._select(sel, self._dummy))
            if a < len(rows):
                x = excl[fi]
                cut = set(x[0][x[0] >= rows[a]].tolist()) if x is not None and x[0][-1] >= rows[a] else ()
                new.extend([(keys[j], fi, rows[j], lbs[j]) for j in range(a, len(rows)) if rows[j] not in cut])
        if st.items is None:
            # the first selection: every matching row is new (the live ones are in ``new``), sorted
            new.sort()
            st.excl = excl
            st.set([it[:3] for it in new], [it[3] for it in new], fams)
            if tokens is not None:
                _share(st, (mkey, tokens), fams)
            return st.parts, st.labels
        old_items, old_labels = st.items, st.labels
        keep = None   # which items of the previous selection stay (None: all)
        if any(x is not y and (x is None or y is None or x[0] is not y[0]) for x, y in zip(excl, st.excl)):
            # left-out rows changed: drop the newly left-out rows, take the rows taken back as new ones
            steps = _excl_steps(ex, fams, excl, st.excl) if EXCL_STEPS else None
            drop = None
            for fi, (x, y) in enumerate(zip(excl, st.excl)):
                if x is y or (x is not None and y is not None and x[0] is y[0]):
                    continue
                if steps is not None:
                    # one change since this selection's: the items now left out are those of the rows added to the
                    # left-out ones (no item is of a row left out before), the rows taken back those removed
                    added, back = steps[fi]
                    if len(added) and len(old_items):
                        out = set(added.tolist())
                        if len(fams) == 1:
                            d = [it[2] in out for it in old_items]
                        else:
                            d = [it[2] in out and it[1] == fi for it in old_items]
                        drop = d if drop is None else list(map(or_, drop, d))
                else:
                    if x is not None and len(old_items):
                        d = _in_mask(x[1], st.r_arr)
                        if y is not None:
                            d &= ~_in_mask(y[1], st.r_arr)
                        if len(fams) > 1:
                            d &= st.f_arr == fi
                        drop = d if drop is None else drop | d
                    if y is None:
                        continue
                    back = y[0] if x is None else y[0][~_in_mask(x[1], y[0])]
                if len(back):
                    rows, keys, lbs = st.rows[fi], st.keys[fi], st.lbs[fi]
                    lim = st.done_sel[fi]
                    for r in back.tolist():
                        j = bisect_left(rows, r, 0, lim)
                        if j < lim and rows[j] == r:
                            new.append((keys[j], fi, r, lbs[j]))
            st.excl = excl
            if steps is not None:
                if drop is not None and True in drop:
                    keep = list(map(not_, drop))
                    old_items = list(compress(old_items, keep))
                    old_labels = list(compress(old_labels, keep))
            elif drop is not None and drop.any():
                keep = (~drop).tolist()
                old_items = list(compress(old_items, keep))
                old_labels = list(compress(old_labels, keep))
        st.done_sel = [len(r) for r in st.rows]
        if not new:
            if keep is not None:
                prev_labels = st.labels
                st.set(old_items, old_labels, fams)
                note_grown(old_labels, prev_labels, [], keep)
            return st.parts, st.labels
        new.sort()
        # each new item after the equal and smaller old ones (``bisect_right``) and after the new ones before it: the
        # j-th new item (in order) lands at its old-list position plus j
        items, labels, at = list(old_items), list(old_labels), []
        for j, (k, fi, r, lb) in enumerate(new):
            it = (k, fi, r)
            p = bisect_right(old_items, it) + j
            items.insert(p, it)
            labels.insert(p, lb)
            at.append(p)
        prev_labels = st.labels
        st.set(items, labels, fams)
        # later label work (group keys, signatures, name drops...) redoes only the new rows
        note_grown(labels, prev_labels, at, keep)
        return st.parts, st.labels

    def _fam_token(self, fam):
        """A token of the family's content (name, label names, every row's label values, in order) where an
        earlier family with that name and those label names had exactly this content when last compared, else
        None (the content is remembered for the next one). Once per family and row count per plan."""
        n = len(fam)
        hit = self._tokens.get(id(fam))
        if hit is not None and hit[0] is fam and hit[1] == n:
            return hit[2]
        shape = (fam.name, tuple(fam.label_names))
        lvs = fam._label_values
        rec = _FAM_CONTENT.get(shape)
        if rec is not None and len(rec[0]) == n == len(lvs) and rec[0] == lvs:
            tok = rec[1]
        else:
            if len(_FAM_CONTENT) >= FAM_CONTENT_MAX:
                _FAM_CONTENT.clear()
            _FAM_CONTENT[shape] = (list(lvs[:n]), object())
            tok = None
        self._tokens[id(fam)] = (fam, n, tok)
        return tok

    def _build(self, t_min: int = 0) -> None:
        try:
            with np.errstate(all="ignore"):
                self._build_rules(t_min)
        finally:
            self._sel_now = None

    def _build_rules(self, t_min: int = 0) -> None:
        """Rebuild the rules that read a family whose series set changed; keep the others' nodes.

        A kept rule's nodes are registered again (for sharing with rebuilt rules), and the window
        kernel is reassembled from the kernel range nodes of all rules.
        """
        self.builds += 1
        self._decide_excluded(t_min)
        self.excluded = sum(len(e.rows) for e in self._excl.values())
        changed = self._changed_names()
        if self._all_families:   # (names are only ever added to a store: those read now include the last build's)
            changed = {n for n, _ in self._read_families()[1]}
        records = self._records
        # the rules reading a changed name (or a name-less selector) are rebuilt
        rebuilt = set(self._unkeepable)
        by_name = self._rules_of_name
        for n in changed:
            rules = by_name.get(n)
            if rules is not None:
                rebuilt.update(rules)
        self._dummy = _Ctx(np.zeros(1, dtype=np.int64), self.promql.default_step_ms)
        self._sel_now = {}   # _selection's results in this build
        seen = self._rule_seen
        now_seen: dict[int, tuple] = {}
        if SAME_SELECTIONS and not self._direct:
            # a rule whose selectors select the very objects of its last walk makes the same nodes: kept
            for i in [i for i in rebuilt if seen[i] is not None and records[i] is not None]:
                now = now_seen[i] = self._selections_of(i)
                if all(map(is_, now, seen[i])):
                    rebuilt.discard(i)
                    self.kept_same += 1
        n_rules = len(records)
        kept = list(map(is_not, records, repeat(None)))   # (a rule with a record, not rebuilt)
        for i in rebuilt:
            kept[i] = False
        # the nodes of the kept rules, registered first (an earlier rule's node wins): a rebuilt rule takes any
        # of them for an equal sub-expression (valid: it reads no changed family), wherever its rule stands
        nodes: dict[str, _Node | None] = {}
        for rec in compress(reversed(records), reversed(kept)):
            nodes.update(rec[1])
        self._nodes = nodes
        self._groups: dict[tuple, _RangeGroup] = {}
        self._kernel_nodes: dict[int, _Range] = {}
        self._slot_cache: dict[int, tuple] = {}
        self._old, self._cache = self._cache, {}
        roots: list[_Node | None] = []
        self.kept += kept.count(True)
        rules = self.rules
        a = 0   # (the first rule not yet taken)
        for i in compress(range(n_rules), map(not_, kept)):
            if a < i:
                # the kept rules before it: their roots, their kernel range nodes (in rule order)
                run = records[a:i]
                roots.extend(map(_ROOT_OF, run))
                kn = self._kernel_nodes
                for d in filter(None, map(_KERNEL_OF, run)):
                    kn.update(d)
            a = i + 1
            r = rules[i]
            sels = _empty_when_unselected(r.node) if EMPTY_SHORTCUT else None
            if sels is not None and not any(self._selection(sel)[1] for sel in sels):
                # each of its selectors selects nothing: the walk would give an _Empty root (_empty_when_unselected)
                root = _Empty()
                self._records[i] = (root, {}, {})
                if self._rule_sels[i] is not None:
                    now = now_seen.get(i)
                    seen[i] = now if now is not None else self._selections_of(i)
                else:
                    seen[i] = None
                roots.append(root)
                continue
            self._visits = ([], [])   # (keys, nodes) of the rule's visits
            outer_kernel, self._kernel_nodes = self._kernel_nodes, {}
            self._reusable = True
            try:
                root = self._node(r.node)   # floating-point warnings are off for the whole build (_build)
            except (QueryError, _Mismatch):
                root = None
                self._reusable = False
            root = root if root is None or root.kind == "v" else None
            mine = self._kernel_nodes
            self._kernel_nodes = outer_kernel
            self._kernel_nodes.update(mine)
            # (root, the rule's nodes by key, its kernel range nodes)
            self._records[i] = (root, dict(zip(*self._visits)), mine) if self._reusable else None
            if self._reusable and self._rule_sels[i] is not None:
                now = now_seen.get(i)
                seen[i] = now if now is not None else self._selections_of(i)
            else:
                seen[i] = None
            roots.append(root)
        if a < n_rules:
            run = records[a:]
            roots.extend(map(_ROOT_OF, run))
            kn = self._kernel_nodes
            for d in filter(None, map(_KERNEL_OF, run)):
                kn.update(d)
        self._roots = roots
        self._old = {}
        self._visits = ([], [])
        self._kernel = _KernelGroup(self, list(self._kernel_nodes.values()))

    def _selections_of(self, i: int) -> tuple:
        """The parts and labels of rule ``i``'s selectors in this build, flat (compared by identity)."""
        out: list = []
        now = self._sel_now
        for sel in self._rule_sels[i]:
            hit = now.get(sel.key)   # (_selection, inline: a build's selections)
            out.extend(hit if hit is not None else self._selection(sel))
        return tuple(out)

    def _reuse(self, ck: tuple, factory, children: tuple | None = None) -> _Node:
        """The previous build's node for the same inputs, else a new one.

        Without ``children`` the inputs are the same objects. With them, ``ck`` names each child by its
        label list (``_lid``): a node's label work depends only on its children's label lists, so the
        previous node is kept and pointed at this build's children (``rebind``)."""
        hit = self._old.get(ck)
        if hit is None:
            hit = factory()
        elif children is not None:
            hit.rebind(*children)
        self._cache[ck] = hit
        return hit

    def _intern(self, key: str, labels: list) -> list:
        """The label list this node key had at the previous build where equal (so that label work keyed by
        list identity above it, and its parents' nodes, are kept), else ``labels``."""
        prev = self._last_labels.get(key)
        if prev is not None and prev is not labels and len(prev) == len(labels) and prev == labels:
            return prev
        self._last_labels[key] = labels
        return labels

    def _node(self, node: S.Node) -> _Node:
        key = node.key
        hit = self._nodes.get(key)
        if hit is None:
            # (a range node made here registered itself: a kernel node in _kernel_nodes, another one made its rule
            # not reusable)
            hit = self._nodes[key] = self._make(node)
        elif hit.__class__ is _Range:   # (a node of an earlier rule: registered for this rule too)
            if hit.kernel:
                self._kernel_nodes[id(hit)] = hit
            else:
                self._reusable = False
        vk, vn = self._visits
        vk.append(key)
        vn.append(hit)
        return hit

    def _make(self, node: S.Node) -> _Node:  # noqa: C901 - one branch per fast path
        t = type(node)   # (the syntax classes have no subclasses: ``type(x) is C`` is ``isinstance(x, C)``)
        if t is S.Num:
            return self._reuse((node.key,), lambda: _Const(node.val))
        if t is S.Sel:
            parts, labels = self._selection(node)
            if not labels:
                return _Empty()
            ck = (node.key, id(labels))
            hit = self._old.get(ck)   # (_reuse, inline)
            if hit is None:
                hit = _Sel(self, node, parts, labels)
            self._cache[ck] = hit
            return hit
        if t is S.Call and node.name in _BATCHED and type(node.args[0]) is S.MatSel and len(node.args) == 1:
            ms = node.args[0]
            sel = ms.sel
            parts, labels = self._selection(sel)
            if not labels:
                return _Empty()
            out_labels = labels if node.name == "last_over_time" else drop_names(labels)
            # the series of one family have distinct label sets, and they share their name: no duplicates
            if (len(parts) != 1 or parts[0][0] == "perm") and _has_dup(out_labels):
                self._direct = True   # (the generic evaluator selects this range vector itself)
                return self._generic(node, [])
            if node.name in CODES and sel.at_ms is None:
                ck = (node.key, id(labels))
                rn = self._old.get(ck)   # (_reuse, inline)
                if rn is None:
                    rn = _Range(None, 0, len(labels), out_labels)
                    rn.slots = self._slots(parts, labels)
                    rn.window = (ms.range_ms, sel.offset_ms, CODES[node.name])
                    rn.kernel = True
                self._cache[ck] = rn
                self._kernel_nodes[id(rn)] = rn
            else:
                gk = (node.name, ms.range_ms, sel.offset_ms, sel.at_ms)
                grp = self._groups.get(gk)
                if grp is None:
                    grp = self._groups[gk] = _RangeGroup(self, node.name, ms.range_ms, sel.offset_ms, sel.at_ms)
                start = grp.add(parts, len(labels))
                rn = self._reuse((node.key, id(labels)), lambda: _Range(grp, start, len(labels), out_labels))
                rn.group, rn.a, rn.b = grp, start, start + len(labels)
                self._reusable = False
            rn.sel_labels = labels  # keeps the identity in the cache key alive
            return rn
        if t is S.Call and node.name == "label_replace":
            child = self._node(node.args[0])
            if not child.labels:
                return _Empty() if child.kind == "v" else self._generic(node, [(node.args[0], child)])
            tag = self._lr_tags.get(node.key)
            if tag is None:
                tag = self._lr_tags[node.key] = ("label_replace",) + tuple(a.val for a in node.args[1:])
            _, dst, repl, src, rx = tag
            out = memo_get(tag, (child.labels,))
            if out is _NONE:
                out = memo(tag, (child.labels,), lambda: self._label_replace(tag, child.labels, dst, repl, src, rx))
            if _has_dup(out):
                return self._generic(node, [(node.args[0], child)])
            out = self._intern(node.key, out)
            return self._reuse((node.key, _lid(child), id(out)), lambda: _Pass(child, out), (child,))
        if t is S.Call and node.name == "histogram_quantile" and type(node.args[0]) is S.Num:
            q = self._node(node.args[0])
            child = self._node(node.args[1])
            layout = memo(("hq",), (child.labels,), lambda: self.promql._hq_layout(child.labels))
            if not layout:
                return _Empty()
            return self._reuse((node.key, id(q), _lid(child)), lambda: _HistQuantile(q, child, layout), (q, child))
        if t is S.Agg and node.op in ("sum", "count", "group", "max", "min"):
            e = node.expr
            if FUSE_LABEL_REPLACE and type(e) is S.Call and e.name == "label_replace":
                hit = self._agg_label_replace(node, e)
                if hit is not None:
                    return hit
            child = self._node(node.expr)
            labels = child.labels
            if not labels:
                return _Empty()
            ck = (node.key, id(labels) if child.kind == "v" else ~id(child))   # (_lid, inline)
            hit = self._old.get(ck)   # (_reuse, inline: the most frequent node)
            if hit is not None:
                hit.rebind(child)
            else:
                keys, gid = groups_of(labels, node.without, node.grouping)
                hit = _Agg(node.op, child, self._intern(node.key, keys), gid)
            self._cache[ck] = hit
            return hit
        if t is S.Bin:
            lhs, rhs = self._node(node.lhs), self._node(node.rhs)
            kinds = (lhs.kind, rhs.kind)
            if kinds == ("v", "s") or kinds == ("s", "v"):
                left = kinds[0] == "s"
                vec, sc = (rhs, lhs) if left else (lhs, rhs)
                if not vec.labels:
                    return _Empty()
                ck = (node.key, _lid(lhs), _lid(rhs))
                if node.op in CMP_FUNCS and not node.return_bool:
                    hit = self._old.get(ck)   # (_reuse, inline)
                    if hit is None:
                        hit = _VecScalar(node.op, vec, sc, left, False, vec.labels)
                    else:
                        hit.rebind(vec, sc)
                    self._cache[ck] = hit
                    return hit
                hit = self._old.get(ck)
                if hit is not None:
                    # (made from the very label lists: the same labels and no duplicates, else no node under ck)
                    hit.rebind(vec, sc)
                    self._cache[ck] = hit
                    return hit
                labels = drop_names(vec.labels)
                if _has_dup(labels):
                    return self._generic(node, [(node.lhs, lhs), (node.rhs, rhs)])
                return self._reuse(ck, lambda: _VecScalar(node.op, vec, sc, left, node.return_bool, labels), (vec, sc))
            if kinds == ("v", "v") and node.op in ("and", "unless"):
                if not lhs.labels:
                    return _Empty()
                return self._reuse((node.key, _lid(lhs), _lid(rhs)), lambda: self._set_op(node, lhs, rhs), (lhs, rhs))
            if kinds == ("v", "v") and node.op not in S.SETOPS:
                ck = (node.key, _lid(lhs), _lid(rhs))
                fast = self._old.get(ck)
                if fast is None:
                    fast = self._vec_vec(node, lhs, rhs)
                elif not isinstance(fast, _Empty):
                    fast.rebind(lhs, rhs)
                if fast is not None:
                    self._cache[ck] = fast
                    return fast
            return self._generic(node, [(node.lhs, lhs), (node.rhs, rhs)])
        children: list[tuple[S.Node, _Node]] = []
        if isinstance(node, S.Agg):
            children.append((node.expr, self._node(node.expr)))
            if node.param is not None:
                children.append((node.param, self._node(node.param)))
        elif isinstance(node, S.Neg):
            children.append((node.expr, self._node(node.expr)))
        elif isinstance(node, S.Call):
            for a in node.args:
                if not isinstance(a, (S.MatSel, S.Subq, S.Str)):
                    children.append((a, self._node(a)))
        return self._generic(node, children)

    def _agg_label_replace(self, node: S.Agg, lr: S.Call) -> _Node | None:
        """``op by|without (...) (label_replace(x, ...))`` as one ``_Agg`` over ``x``'s rows (no ``_Pass`` node, no
        label list of the replaced label sets): each row's group is the group key of its label set replaced, kept
        per (replacement, grouping) and input label set. None where the unfused nodes decide (``x`` not a vector,
        or an input label set holding the destination label: only then can two replaced label sets be equal, which
        the generic evaluator rejects).

        Exact: ``label_replace`` changes a label set's destination label only, so label sets without it stay
        distinct (no duplicate check is needed), and the ``_Agg`` is the one made over the ``_Pass``: the same group
        keys (the same key function of the same replaced label sets, numbered by first appearance) and rows."""
        x = self._node(lr.args[0])
        if x.kind != "v":
            return None
        labels = x.labels
        if not labels:
            return _Empty()   # (the unfused label_replace is empty, and so is its aggregation)
        ck = (node.key, id(labels), _FUSED)
        hit = self._old.get(ck)
        if hit is not None:
            hit.rebind(x)
            self._cache[ck] = hit
            return hit
        if not _distinct(x):
            return None
        # (per fused node: its label_replace's arguments, the tag of its per-label-set keys, its last build's rows
        # and their group keys)
        last = self._fused_keys.get(node.key)
        if last is None:
            tag = ("label_replace",) + tuple(a.val for a in lr.args[1:])
            last = self._fused_keys[node.key] = [tag, ("lr-group", node.without, node.grouping) + tag, None, None]
        tag = last[0]
        keys = per_label_set(last[1])
        # each row's group key: where the rows were made from the rows of this node's last build (``note_grown``),
        # that build's keys edited alike (only the inserted label sets looked up and checked), else every row's
        g = edited_from(labels) if last[2] is not None else None
        if g is not None and g[0] is last[2]:
            _, pos, keep = g
            ks = list(last[3]) if keep is None else list(compress(last[3], keep))
            got = self._lr_keys(keys, [labels[p] for p in pos], tag, node)
            if _DST_HELD in got:
                return None
            for p, k in zip(pos, got):
                ks.insert(p, k)
            self.fused_edited += 1
        else:
            ks = self._lr_keys(keys, labels, tag, node)
            if _DST_HELD in ks:
                return None
        last[2], last[3] = labels, ks
        groups, gid = number_keys(ks)   # (as `vectorops._groups_uncached` numbers them)
        hit = self._cache[ck] = _Agg(node.op, x, self._intern(node.key, groups), gid)
        self.fused_made += 1
        return hit

    def _lr_keys(self, keys: dict, labels: list, tag: tuple, node: S.Agg) -> list:
        """The group key of each label set replaced (``_agg_label_replace``), through the per-label-set ``keys``; a
        label set not in ``keys`` (a new pod's row) is looked up by its projection (``_lr_projection``: the same
        pod's rows in other families and of other label values share it), and only a new projection is replaced."""
        ks = list(map(keys.get, labels))
        if None in ks:
            _, dst, repl, src, rx = tag
            proj = _lr_projection(node.without, node.grouping, src, dst)
            by_proj = per_label_set(("lr-proj", node.without, node.grouping) + tag)
            miss = [lb for lb, k in zip(labels, ks) if k is None]
            projs = list(map(proj, miss))
            new = list(dict.fromkeys(pj for pj in projs if pj not in by_proj))
            if new:
                key = group_key(node.without, node.grouping)
                for pj, out in zip(new, self.promql._label_replace(new, dst, repl, src, rx)):
                    by_proj[pj] = _DST_HELD if dst in dict(pj) else key(out)
            keys.update(zip(miss, map(by_proj.__getitem__, projs)))
            ks = list(map(keys.__getitem__, labels))
        return ks

    def _slots(self, parts, labels) -> np.ndarray:
        """The tape slots of a selection's series, in its order (once per build for range calls sharing it)."""
        hit = self._slot_cache.get(id(labels))
        if hit is not None and hit[0] is labels:
            return hit[1]
        flat, perm = _flatten(parts)
        slots = self.tape.slots_of(flat)
        if perm is not None:
            slots = slots[perm]
        self._slot_cache[id(labels)] = (labels, slots)
        return slots

    def _label_replace(self, tag, labels, dst, repl, src, rx) -> list:
        """``label_replace`` on each label set, cached per label set across builds (for a list grown
        from one already done: only the new label sets, the result recorded as grown likewise)."""
        rows = self._lr_rows.setdefault((dst, repl, src, rx), {})

        def lookup(sets: list) -> list:   # cached results, computing only the misses
            got = list(map(rows.get, sets))
            if None in got:
                missing = [lb for lb, o in zip(sets, got) if o is None]
                for lb, o in zip(missing, self.promql._label_replace(missing, dst, repl, src, rx)):
                    rows[lb] = o
                got = [rows[lb] for lb in sets]
            return got

        g = edited_from(labels)
        if g is not None:
            old, pos, keep = g
            prev = memo_get(tag, (old,))
            if prev is not _NONE and len(prev) == len(old):
                out = list(prev) if keep is None else list(compress(prev, keep))
                for p, o in zip(pos, lookup([labels[p] for p in pos])):
                    out.insert(p, o)
                note_grown(out, prev, pos, keep)
                return out
        return lookup(labels)

    def _generic(self, node: S.Node, children: list[tuple[S.Node, _Node]]) -> _Node:
        ctx = self._dummy
        ctx.cache = {}
        for cnode, child in children:
            if child.kind == "s":
                ctx.cache[cnode.key] = Scal(np.full(1, np.nan))
            else:
                n = len(child.labels)
                ctx.cache[cnode.key] = Vec(child.labels, np.full((n, 1), np.nan), np.zeros((n, 1), bool))
        out = self.promql._eval_uncached(node, ctx)
        ctx.cache = {}
        if isinstance(out, Scal):
            return _Generic(self, node, children, [], "s")
        if not out.labels:
            return _Empty()
        return _Generic(self, node, children, self._intern(node.key, out.labels), "v")

    def _set_op(self, node: S.Bin, lhs: _Node, rhs: _Node) -> _Node:
        on, names = node.on, node.match_labels
        lsigs = _sigs(lhs.labels, on, names)
        if not rhs.labels:
            return _SetAndUnless(node.op, lhs, rhs, None, None, None)
        rsig = _sig_index(Vec(rhs.labels, None, None), on, names)  # type: ignore[arg-type]
        G = len(rsig)
        gi = dict(zip(rsig, range(G)))
        groups = rsig.values()
        sizes = np.fromiter(map(len, groups), dtype=np.intp, count=G)
        # the right rows signature by signature, and where each signature's rows start
        r_order = np.fromiter(chain.from_iterable(groups), dtype=np.intp, count=int(sizes.sum()))
        r_starts = np.zeros(G, dtype=np.intp)
        np.cumsum(sizes[:-1], out=r_starts[1:])
        lmap = np.fromiter(map(gi.get, lsigs, repeat(G)), dtype=np.intp, count=len(lsigs))
        return _SetAndUnless(node.op, lhs, rhs, r_order, r_starts, lmap)

    def _vec_vec(self, node: S.Bin, lhs: _Node, rhs: _Node) -> _Node | None:
        card, on, names = node.card, node.on, node.match_labels
        swap = card == "one-to-many"
        many, one = (rhs, lhs) if swap else (lhs, rhs)
        one_vec = Vec(one.labels, None, None)  # type: ignore[arg-type]
        one_idx = _sig_index(one_vec, on, names)
        if len(one_idx) != len(one.labels):  # a signature with more than one row
            return None
        # (one row per signature: group k of ``one_idx`` is row k, the rows taken for the pairs are pairs_o)
        drop = node.op in ARITH_FUNCS or node.return_bool
        pairs_m, pairs_o, labels = memo(("vv", drop, card, on, names, node.include), (many.labels, one.labels),
                                        lambda: _pairs(many.labels, one.labels, one_idx, drop, card, on, names, node.include))
        if not pairs_m:
            return _Empty()
        if _has_dup(labels):   # (also covers one-to-one's check for groups with more than one row)
            return None
        return _VecVec(node.op, lhs, rhs, swap, np.asarray(pairs_m, dtype=np.intp), np.asarray(pairs_o, dtype=np.intp),
                       self._intern(node.key, labels), node.return_bool)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, times: np.ndarray) -> list:
        """One ``Vec`` (or the ``QueryError`` the generic evaluator raises) per rule, at ``times`` (ms)."""
        times = np.asarray(times, dtype=np.int64)
        T = len(times)
        t_min = int(times.min()) if T else 0
        self._check_excluded(t_min)
        sig = self.signature()
        if sig != self._sig or self._excl_dirty:
            c0 = time.process_time()
            self._build(t_min)
            self.build_cpu_s += time.process_time() - c0
            self._sig = sig
            self._excl_dirty = False
        ctx = self.promql.new_context(times, self.promql.default_step_ms)
        E = _Env(times, self.store.n_ticks, ctx)
        with np.errstate(all="ignore"):
            return self._evaluate_roots(E, times)

    def _program_values(self, E: _Env):
        """Every rule's root values by the compiled program of this build (``program.py``), or None: the numpy
        nodes evaluate the call (``PROGRAM`` off, the compiled kernels off, no evaluation time, one of the build's
        first ``LOWER_AFTER`` calls, a node type the program does not take, or the program stopped: see
        ``Program.run``). Lowered once per build (the record holds this build's root list: a rebuild makes a new
        one)."""
        if not PROGRAM or not E.T:
            return None
        nb = kernels()
        if nb is None:
            return None
        rec = self._prog
        if rec is None or rec[0] is not self._roots or rec[1] is not self._kernel:
            if LOWER_AFTER:
                # (a build's first calls: the numpy nodes)
                rec = self._prog = (self._roots, self._kernel, LOWER_AFTER)
            else:
                rec = self._lower_now()
        elif type(rec[2]) is int:
            rec = self._prog = (rec[0], rec[1], rec[2] - 1) if rec[2] > 1 else self._lower_now()
        prog = rec[2]
        if type(prog) is int:
            return None
        if prog is None:
            return None
        arena = self._arena
        if arena is None:
            from .program import Arena
            arena = self._arena = Arena()
        vals = prog.run(E, nb, arena)
        if vals is not None:
            self.program_calls += 1
        else:
            # (stopped: the numpy nodes may return views of the arena that stamped children hold)
            arena.drop()
        return vals

    def _lower_now(self) -> tuple:
        c0 = time.process_time()
        rec = self._prog = (self._roots, self._kernel, _lower(self))
        self.lower_cpu_s += time.process_time() - c0
        return rec

    def _evaluate_roots(self, E: _Env, times: np.ndarray) -> list:
        vals = self._program_values(E)
        if vals is not None:
            return self._program_roots(E, times, vals)
        out: list = []
        empty = None
        for rule, root in zip(self.rules, self._roots):
            if root is not None:
                if not root.labels:
                    if empty is None:
                        empty = Vec.empty(E.T)
                    out.append(empty)
                    continue
                try:
                    v, p = root.value(E)
                    out.append(Vec(root.labels, v, p))
                    continue
                except Exception:  # noqa: BLE001 - the generic evaluator gives the exact result or error
                    pass
            try:
                out.append(self.promql.evaluate(rule.node, times, ctx=E.ctx))
            except QueryError as err:
                out.append(err)
        return out

    def _program_roots(self, E: _Env, times: np.ndarray, vals: list) -> list:
        """`_evaluate_roots` of a call the program gave (``vals``: per rule its root's (values, presence)): a
        ``Vec`` of those per rule with a labelled root, one shared empty ``Vec`` for the rules whose root has no
        labels, the generic evaluator's result (or error) for a rule without a root."""
        out: list = []
        add = out.append
        empty = None
        for rule, root, val in zip(self.rules, self._roots, vals):
            if root is not None:
                labels = root.labels
                if labels:
                    add(Vec(labels, val[0], val[1]))
                else:
                    if empty is None:
                        empty = Vec.empty(E.T)
                    add(empty)
                continue
            try:
                add(self.promql.evaluate(rule.node, times, ctx=E.ctx))
            except QueryError as err:
                add(err)
        return out


#: whether calls are evaluated by the compiled program of each build (``program.py``) where the compiled kernels
#: are on (False: always the numpy nodes; the tests compare both)
PROGRAM = True
#: calls of a build evaluated by the numpy nodes before it is lowered into a program (0: lowered at its first call;
#: an OB env marathon rebuilds at most calls, and a lowering (~0.3-0.7 ms, most of it the rebuilt rules' new nodes)
#: is earned back by its first call since the program takes histogram_quantile too)
LOWER_AFTER = 0


def _lower(plan: PackPlan):
    from .program import lower   # (program.py reads this module's node types)
    return lower(plan)


#: what a plan reads of its rules (any name-less selector, sorted metric names, the names each rule reads, how far
#: back each name is read), by the identities of the rules' expression trees (held by the entry): every episode's
#: plan has the frozen pack's rules
_RULES_INFO: dict[tuple, tuple] = {}
RULES_INFO_MAX = 16  #: rule lists kept before the cache starts again


def _rules_info(rules: list) -> tuple:
    """(any name-less selector, sorted metric names, names read per rule, ``_family_needs`` or {} where a
    selector has no name); the same objects for the same expression trees (read only)."""
    key = tuple(id(r.node) for r in rules)
    hit = _RULES_INFO.get(key)
    if hit is not None and all(a is r.node for a, r in zip(hit[0], rules)):
        return hit[1]
    names: set[str] = set()
    all_families = False
    for r in rules:
        for sel in _selectors(r.node):
            if sel.name is None:
                all_families = True
            else:
                names.add(sel.name)
    rule_names = [frozenset(s.name for s in _selectors(r.node)) for r in rules]
    # per rule, its distinct selectors where every one is selected by the plan (``_plan_selected``), else None
    rule_sels = [tuple({s.key: s for s in _selectors(r.node)}.values()) if _plan_selected(r.node) else None
                 for r in rules]
    info = (all_families, sorted(names), rule_names, {} if all_families else _family_needs(rules), rule_sels)
    if len(_RULES_INFO) >= RULES_INFO_MAX:
        _RULES_INFO.clear()
    _RULES_INFO[key] = (tuple(r.node for r in rules), info)
    return info


#: rules reading a changed name whose selectors all select the objects of the rule's last walk are kept without a
#: walk (False: always walk them; the tests compare both)
SAME_SELECTIONS = True
#: rules whose plan is an _Empty root while every selector of theirs selects nothing skip the walk then (False:
#: always walk; the tests compare both)
EMPTY_SHORTCUT = True
#: ``_empty_when_unselected`` per expression tree, by identity (the entry holds the tree)
_EMPTY_SELS: dict[int, tuple] = {}
EMPTY_SELS_MAX = 4096  #: trees kept before the cache starts again


def _empty_when_unselected(node: S.Node) -> tuple | None:
    """The selectors of an expression whose plan node is an ``_Empty`` whenever each of them selects no series
    (``_strict``), else None; cached per tree (a pack's rules are frozen trees)."""
    hit = _EMPTY_SELS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    out = tuple(_selectors(node)) if _strict(node) else None
    if len(_EMPTY_SELS) >= EMPTY_SELS_MAX:
        _EMPTY_SELS.clear()
    _EMPTY_SELS[id(node)] = (node, out)
    return out


def _strict(node: S.Node) -> bool:
    """Whether ``PackPlan._make`` gives an ``_Empty`` node for ``node`` when every selector in it selects no series
    (and then raises nothing), by its branches: a selector, a batched range call of one, label_replace and
    histogram_quantile (a number as the quantile) of such an expression, sum / count / group / max / min of one, and
    a binary operator with a number on one side or such expressions on both sides other than ``or`` (an empty left
    side of and / unless, an empty vector against a scalar, an empty side of a vector match: each an _Empty)."""
    if isinstance(node, S.Sel):
        return True
    if isinstance(node, S.Call):
        a = node.args
        if node.name in _BATCHED and len(a) == 1 and isinstance(a[0], S.MatSel):
            return True
        if node.name == "label_replace":
            return _strict(a[0])
        if node.name == "histogram_quantile" and len(a) == 2 and isinstance(a[0], S.Num):
            return _strict(a[1])
        return False
    if isinstance(node, S.Agg):
        return node.op in ("sum", "count", "group", "max", "min") and _strict(node.expr)
    if isinstance(node, S.Bin):
        lhs, rhs = node.lhs, node.rhs
        if isinstance(lhs, S.Num):
            return _strict(rhs)
        if isinstance(rhs, S.Num):
            return _strict(lhs)
        return node.op != "or" and _strict(lhs) and _strict(rhs)
    return False


def _plan_selected(node: S.Node) -> bool:
    """Whether every selector of an expression is read through the plan's selection (``_selection``: a plain
    selector, the range vector of a batched range call), never by the generic evaluator itself (a range vector or
    subquery argument of another call), and each selector has a metric name: then the plan nodes of the expression
    are a pure function of those selections (``PackPlan._direct`` covers the one dynamic exception, a batched call
    whose result has duplicate label sets)."""
    if isinstance(node, S.Sel):
        return node.name is not None
    if isinstance(node, (S.Num, S.Str)):
        return True
    if isinstance(node, S.Call):
        a = node.args
        if node.name in _BATCHED and len(a) == 1 and isinstance(a[0], S.MatSel):
            return a[0].sel.name is not None
        return all(_plan_selected(x) for x in a)
    if isinstance(node, S.Agg):
        return _plan_selected(node.expr) and (node.param is None or _plan_selected(node.param))
    if isinstance(node, S.Bin):
        return _plan_selected(node.lhs) and _plan_selected(node.rhs)
    if isinstance(node, S.Neg):
        return _plan_selected(node.expr)
    return False   # (a range vector or subquery the generic evaluator reads)


def _selectors(node: S.Node):
    if isinstance(node, S.Sel):
        yield node
        return
    for f in ("expr", "lhs", "rhs", "param", "sel"):
        c = getattr(node, f, None)
        if isinstance(c, S.Node):
            yield from _selectors(c)
    for a in getattr(node, "args", ()) or ():
        yield from _selectors(a)


#: a rebuild leaves newly empty rows of a family out once there are at least PRUNE_MIN of them and at
#: least PRUNE_SHARE of the rows still in
PRUNE_MIN = 1
PRUNE_SHARE = 0.25


def _same_excl(x, y) -> bool:
    """Whether two records of a family's left-out rows ((rows, mask) or None) are the same."""
    return x is y or (x is not None and y is not None and x[0] is y[0])


def _in_mask(mask: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` is set in ``mask`` (rows past its end are not)."""
    if not len(mask):
        return np.zeros(len(rows), bool)
    return mask[np.minimum(rows, len(mask) - 1)] & (rows < len(mask))


def _excl_steps(ex: dict, fams: list, now: list, then: list) -> list | None:
    """Per family of a selection, (rows added to its left-out rows, rows removed from them) where each family whose
    left-out rows differ from those the selection was made with (``then``, as ``now``: (rows, mask) or None) changed
    exactly once since (``_Excluded.step`` made from those very rows, or from none); None where one changed more often
    (``_select_now`` then compares the masks)."""
    out = []
    for f, x, y in zip(fams, now, then):
        if x is y or (x is not None and y is not None and x[0] is y[0]):
            out.append(None)
            continue
        e = ex.get(id(f))
        st = e.step if e is not None and e.fam is f else None
        if st is None or (st[0] is not y[0] if y is not None else len(st[0])):
            return None
        out.append((st[1], st[2]))
    return out


#: take a selection's left-out changes from the records' last change where it is its only one (``_excl_steps``)
EXCL_STEPS = True


_FAM_OF_ITEM, _ROW_OF_ITEM = itemgetter(1), itemgetter(2)   # of a selection item (sort key, family index, row)


class _Selection:
    """One selector's matching rows per family (extended as families gain rows) and its live selection: the
    sorted (sort key, family index, row) items, their label sets, the parts that gather their rows, and the
    left-out rows of each family it was made for."""

    __slots__ = ("ids", "fams", "done", "done_sel", "rows", "lbs", "keys", "own", "excl", "fallback", "items",
                 "labels", "parts", "f_arr", "r_arr")

    def __init__(self, fams: list, ids: tuple):
        self.ids, self.fams = ids, list(fams)
        self.done = [0] * len(fams)          # rows of each family matched so far
        self.done_sel = [0] * len(fams)      # matching rows of each family the selection has seen
        self.rows: list[list[int]] = [[] for _ in fams]
        self.lbs: list[list] = [[] for _ in fams]
        self.keys: list[list] = [[] for _ in fams]
        # per family, whether its rows / lbs / keys lists are this selection's own (extended in place) or a kept
        # first selection's (``_take_shared``: copied before the first extension)
        self.own = [True] * len(fams)
        self.excl: list = [None] * len(fams)
        self.fallback = False
        self.items: list[tuple] | None = None
        self.labels: list = []
        self.parts: list = []

    def set(self, items: list, labels: list, fams: list) -> None:
        """The selection ``items`` (sorted) with ``labels``. Parts: one family's rows in the selection's order
        (a gather needs no permutation), or per family its rows in row order and the permutation from the
        selection's order into them."""
        self.items, self.labels = items, labels
        self.done_sel = [len(r) for r in self.rows]
        if not items:
            self.parts = []
            self.f_arr = self.r_arr = np.zeros(0, dtype=np.intp)
            return
        n = len(items)
        r = self.r_arr = np.fromiter(map(_ROW_OF_ITEM, items), dtype=np.intp, count=n)
        if len(fams) == 1:
            self.f_arr = np.zeros(n, dtype=np.intp)
            self.parts = [(fams[0], r)]
            return
        f = self.f_arr = np.fromiter(map(_FAM_OF_ITEM, items), dtype=np.intp, count=n)
        stride = int(r.max()) + 1
        comb = f * stride + r
        ident = len(comb) < 2 or bool((comb[1:] > comb[:-1]).all())
        srt = comb if ident else np.sort(comb)
        fs = srt // stride
        bounds = np.searchsorted(fs, np.arange(len(fams) + 1))
        flat = [(fams[fi], srt[bounds[fi]:bounds[fi + 1]] - fi * stride) for fi in range(len(fams))
                if bounds[fi + 1] > bounds[fi]]
        self.parts = flat if ident else [("perm", np.searchsorted(srt, comb), flat)]


#: per family shape (name, label names): (the label values of its rows when last compared, a token of them)
_FAM_CONTENT: dict[tuple, tuple[list, object]] = {}
FAM_CONTENT_MAX = 4000  #: shapes remembered before the record starts again
#: first selections by (metric name and matchers, content tokens of its families): a selection is a pure function
#: of the matchers and the families' content, so a new store's plan takes it instead of matching and sorting its
#: rows again, and keeps the very label list, on which label work further up is memoised by identity
#: (``values.memo``); family objects are replaced by their index (entries keep no store alive)
_SHARED_SEL: dict[tuple, tuple] = {}
#: selections, and selected series in all, kept before the cache starts again (entries of a family whose content
#: changed are never found again; a TT / OB / AS episode keeps ~30 selections of ~1800 / 420 / 600 series)
SHARED_SEL_MAX = 400
SHARED_SEL_ITEMS_MAX = 20_000
_SHARED_ITEMS = [0]   # series in the kept selections


def _share(st: "_Selection", key: tuple, fams: list) -> None:
    """Keep a first selection (copies of its per-family lists: a plan's own lists are extended in place)."""
    if len(st.items) > SHARED_SEL_ITEMS_MAX:
        return
    if len(_SHARED_SEL) >= SHARED_SEL_MAX or _SHARED_ITEMS[0] + len(st.items) > SHARED_SEL_ITEMS_MAX:
        _SHARED_SEL.clear()
        _SHARED_ITEMS[0] = 0
    _SHARED_ITEMS[0] += len(st.items)
    at = {id(f): i for i, f in enumerate(fams)}
    parts = st.parts
    if parts and parts[0][0] == "perm":
        tmpl = ("perm", parts[0][1], [(at[id(f)], r) for f, r in parts[0][2]])
    else:
        tmpl = (None, None, [(at[id(f)], r) for f, r in parts])
    _SHARED_SEL[key] = (list(st.done), [list(x) for x in st.rows], [list(x) for x in st.lbs],
                        [list(x) for x in st.keys], st.items, st.labels, st.f_arr, st.r_arr, tmpl)


def _take_shared(st: "_Selection", key: tuple, fams: list) -> bool:
    """Set a fresh ``_Selection`` to the kept first selection for ``key`` (False where there is none)."""
    hit = _SHARED_SEL.get(key)
    if hit is None:
        return False
    done, rows, lbs, keys, items, labels, f_arr, r_arr, (perm_tag, perm, flat) = hit
    st.done = list(done)
    # the kept per-family lists themselves (never changed: a family's lists are copied before their first extension)
    st.rows, st.lbs, st.keys = list(rows), list(lbs), list(keys)
    st.own = [False] * len(fams)
    st.excl = [None] * len(fams)
    st.items, st.labels, st.f_arr, st.r_arr = items, labels, f_arr, r_arr
    st.done_sel = [len(r) for r in st.rows]
    flat = [(fams[i], r) for i, r in flat]
    st.parts = [(perm_tag, perm, flat)] if perm_tag is not None else flat
    return True


def _all_nan_compiled(nb, data: np.ndarray, rows: np.ndarray, c0: int, c1: int) -> bool:
    """``np.isnan(data[rows, c0:c1]).all()`` by the compiled kernel (``compiled.all_nan``: no gather, stops at the
    first sample) where it decides: True only where it found every cell NaN; False (the caller's numpy check
    decides) for another answer, or arrays of other types or layouts than the kernel's (C-contiguous float64 store
    rows, contiguous row indices), for which it would compile another specialisation."""
    return (data.dtype == np.float64 and data.ndim == 2 and data.flags.c_contiguous and rows.dtype == np.intp
            and rows.ndim == 1 and rows.flags.c_contiguous and nb.all_nan(data, rows, c0, c1) == 1)


def _prunable(nb, data: np.ndarray, rows: int, ent: "_Excluded", c0: int, n: int, least) -> np.ndarray | None:
    """``_decide_excluded``'s candidates of a family (its store rows ``data[:rows]``, its left-out rows ``ent``): the
    rows not left out with no sample in columns ``c0 .. n - 1`` (ascending), or None where too few rows lack a sample
    in the last column for ``least`` of them to be such rows (first counted with the left-out rows, which have no
    sample in it: one with a sample in a new column was taken back by ``_check_excluded``, then without them).

    The numpy code is the definition; with the compiled kernels (``compiled.prunable``), one pass over the rows
    without gathers gives the same counts and rows (a float64 C-contiguous store array and a bool mask)."""
    n_out = len(ent.rows)
    if nb is not None and data.dtype == np.float64 and data.ndim == 2 and data.flags.c_contiguous \
            and ent.mask.dtype == np.bool_ and 0 <= c0 < n <= data.shape[1] and rows <= data.shape[0]:
        out = np.empty(rows, dtype=np.intp)
        nan_all, live, k = nb.prunable(data, rows, ent.mask, c0, n, out)
        if nan_all - n_out < least or live < least:
            return None
        return out[:k].copy()
    nan = np.isnan(data[:rows, n - 1])
    if np.count_nonzero(nan) - n_out < least:
        return None
    if n_out:
        nan[ent.rows] = False
    idx = nan.nonzero()[0]
    if len(idx) < least:
        return None
    return idx[np.isnan(data[idx, c0:n]).all(axis=1)]


_NO_ROWS = np.zeros(0, dtype=np.intp)


class _Excluded:
    """The rows of one family left out of the plan's selectors (sorted), as indices and as a mask."""

    __slots__ = ("fam", "rows", "mask", "version", "rows_seen", "built", "step")

    def __init__(self, fam):
        self.fam = fam
        self.rows = np.zeros(0, dtype=np.intp)
        self.mask = np.zeros(0, bool)
        self.version = 0
        self.rows_seen = -1
        self.built = 0   # the version at the plan's last build (``PackPlan._changed_names``)
        # the last change: (the rows before it, the rows it added, the rows it removed), None where not told
        self.step: tuple | None = None

    def set(self, rows: np.ndarray, added: np.ndarray | None = None, removed: np.ndarray | None = None) -> None:
        """Leave ``rows`` (sorted) out: the rows left out before with ``added`` (rows not among them) and without
        ``removed`` (rows among them), where the caller tells them (``_excl_steps`` reads the change)."""
        if len(rows) == len(self.rows) and np.array_equal(rows, self.rows):
            return
        none = _NO_ROWS
        self.step = None if added is None and removed is None else (
            self.rows, none if added is None else added, none if removed is None else removed)
        self.rows = np.asarray(rows, dtype=np.intp)
        self.mask = np.zeros(int(self.rows.max()) + 1 if len(self.rows) else 0, bool)
        self.mask[self.rows] = True
        self.version += 1


def _family_needs(rules) -> dict[str, int | None]:
    """Per metric name, how far before an evaluation time the plan's selectors read its samples (the
    range plus offset of a range vector, the offset of an instant one, whose sample is the one at the
    evaluation tick: the store's staleness); None where a row may never be left out (@, subqueries)."""
    out: dict[str, int | None] = {}

    def note(sel: S.Sel, need: int | None) -> None:
        if sel.at_ms is not None:
            need = None
        if need is None or (sel.name in out and out[sel.name] is None):
            out[sel.name] = None
        else:
            out[sel.name] = max(out.get(sel.name, need), need)

    def walk(node: S.Node, sub: bool) -> None:
        if isinstance(node, S.Sel):
            note(node, None if sub else node.offset_ms)
            return
        if isinstance(node, S.MatSel):
            note(node.sel, None if sub else node.range_ms + node.sel.offset_ms)
            return
        if isinstance(node, S.Subq):
            sub = True
        for f in ("expr", "lhs", "rhs", "param"):
            c = getattr(node, f, None)
            if isinstance(c, S.Node):
                walk(c, sub)
        for a in getattr(node, "args", ()) or ():
            walk(a, sub)

    for r in rules:
        walk(r.node, False)
    return out

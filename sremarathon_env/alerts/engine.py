"""PromQL evaluation over the twin's ``MetricStore``, vectorised across evaluation times.

Expressions are parsed by ``promql-parser`` (see ``syntax.py``) and evaluated for a whole array of
timestamps at once: instant and range queries are the same computation with one or many times.
Results are shaped like the ``data`` member of Prometheus's HTTP API, so the twin and a live
Prometheus answer the agent's ``query_metrics`` calls identically.

Semantics follow Prometheus 2.x: a 5-minute lookback for instant selectors, staleness (a series
missing from a scrape is stale at once), range windows closed at both ends, rate/increase
extrapolation, vector matching, and bit-identical float arithmetic (checked against ``promtool``).

>>> import numpy as np
>>> from sremarathon_env.telemetry.store import MetricStore
>>> store = MetricStore(step_s=15.0)
>>> fam = store.family("requests_total", ("service",))
>>> rows = fam.rows([("cart",), ("frontend",)])
>>> for k in range(41):
...     store.write(fam, rows, k, np.array([1.0, 2.0]) * k * 15)
>>> eng = PromQLEngine(store)
>>> eng.instant('sum(rate(requests_total[5m]))', 600)["result"][0]["value"]
[600, '3']
>>> eng.instant('rate(nope[5m', 600)
Traceback (most recent call last):
...
sremarathon_env.alerts.limits.QueryError: parse error: unexpected end of input inside brackets
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from itertools import repeat
from operator import itemgetter
from collections import OrderedDict

import numpy as np

from ..telemetry.store import MetricStore
from . import syntax as S
from .limits import Limits, QueryError
from .rangefuncs import RANGE_FUNCS
from . import values as _values
from .values import (Labels, Scal, StrVal, Vec, Win, dedupe, drop_names, fmt_time, fmt_value, get, intern_pairs, memo,
                     note_grown)
from .vectorops import aggregate, scalar_scalar, set_op, vector_scalar, vector_vector

_MATH = {
    "abs": np.abs,
    "ceil": np.ceil,
    "floor": np.floor,
    "exp": np.exp,
    "ln": np.log,
    "log2": lambda x: _go_log2(x),
    "log10": lambda x: np.log(x) * 0.4342944819032518,  # Go: math.log10(x) = Log(x) * (1/Ln10)
    "sqrt": np.sqrt,
    "sgn": np.sign,
}


def _go_log2(x: np.ndarray) -> np.ndarray:
    """Go's math.Log2: exact for powers of two, else Log(frac) * (1/Ln2) + exp."""
    frac, exp = np.frexp(x)
    out = np.log(frac) * 1.4426950408889634 + exp
    return np.where(frac == 0.5, exp - 1.0, out)


def _template_tokens(template: str) -> list[tuple[str, str | None]]:
    """A replacement template as Go regexp's Expand reads it: (literal text, None) and ("", group name) items
    ($1, ${1}, $name, ${name}, $$; a "$" that starts none of them is literal). Parsed once per template."""
    tokens = _TEMPLATES.get(template)
    if tokens is not None:
        return tokens
    tokens = []
    lit: list[str] = []
    i = 0
    n = len(template)
    while i < n:
        c = template[i]
        if c != "$" or i + 1 >= n:
            lit.append(c)
            i += 1
            continue
        nxt = template[i + 1]
        if nxt == "$":
            lit.append("$")
            i += 2
            continue
        if nxt == "{":
            j = template.find("}", i + 2)
            name = template[i + 2 : j] if j > 0 else ""
            if j < 0 or not name or not re.fullmatch(r"[A-Za-z0-9_]+", name):
                lit.append(c)
                i += 1
                continue
            i = j + 1
        else:
            mm = re.match(r"[A-Za-z0-9_]+", template[i + 1 :])
            if not mm:
                lit.append(c)
                i += 1
                continue
            name = mm.group(0)
            i += 1 + len(name)
        if lit:
            tokens.append(("".join(lit), None))
            lit = []
        tokens.append(("", name))
    if lit:
        tokens.append(("".join(lit), None))
    if len(_TEMPLATES) >= 256:
        _TEMPLATES.clear()
    _TEMPLATES[template] = tokens
    return tokens


_TEMPLATES: dict[str, list] = {}


def _go_expand(template: str, m: re.Match) -> str:
    """Go regexp's Expand: $1, ${1}, $name, ${name}, $$; unknown groups expand to ''."""
    out = []
    for text, name in _template_tokens(template):
        if name is None:
            out.append(text)
            continue
        try:
            g = m.group(int(name)) if name.isdigit() else m.group(name)
        except error_types():
            g = None
        out.append(g or "")
    return "".join(out)


#: label_replace expansions per (regex, replacement): source value -> the replacement's expansion, or None where the
#: regex does not match the value (a pure function of the three)
_LR_VALUES: dict[tuple, dict] = {}
LR_VALUES_MAX = 20_000  #: values kept per (regex, replacement) before its record starts again
_NO_VALUE = object()


def error_types():
    return (IndexError, KeyError, re.error)


def _sort_key(lb: tuple) -> str | None:
    """A string that sorts as the label set (a tuple of (name, value) pairs) does, or None.

    A name ends with ``\x01`` and a value with ``\x00``, both below every character of a name or value,
    so string order is the tuple's order; None when a name or value holds either character."""
    text = "".join(n + "\x01" + v + "\x00" for n, v in lb)
    n = len(lb)
    return text if text.count("\x01") == n and text.count("\x00") == n else None


#: row items of ``PromQLEngine._row_info`` by family shape (name, label names), then label values, in two
#: generations: an item is looked up in the current generation, then in the previous one (and moved back); the
#: current one turns over after ``ROW_ITEM_GENERATION`` new entries, so items no store used during a whole
#: generation (pods of finished episodes) are dropped, and at most twice that many are kept
_ROW_ITEMS: dict[tuple, dict] = {}
_ROW_ITEMS_OLD: dict[tuple, dict] = {}
_ROW_ITEMS_COUNT = [0]
#: entries per generation (a Train Ticket store has ~5300 series; about 1600 of them differ per episode)
ROW_ITEM_GENERATION = 8000


def _row_items(shape: tuple) -> tuple[dict, dict | None]:
    """(current, previous) generation's items of one family shape."""
    d = _ROW_ITEMS.get(shape)
    if d is None:
        d = _ROW_ITEMS[shape] = {}
    return d, _ROW_ITEMS_OLD.get(shape)


def _row_items_add() -> bool:
    """Count one new entry of the current generation; True where the generations turned over first (the caller
    then takes its dicts again)."""
    global _ROW_ITEMS, _ROW_ITEMS_OLD
    if _ROW_ITEMS_COUNT[0] >= ROW_ITEM_GENERATION:
        _ROW_ITEMS_OLD, _ROW_ITEMS = _ROW_ITEMS, {}
        _ROW_ITEMS_COUNT[0] = 1
        return True
    _ROW_ITEMS_COUNT[0] += 1
    return False


def _row_items_make(ent: tuple, rs: list) -> None:
    """Make the items of the rows ``rs`` (ascending) of a family's row record (``PromQLEngine._row_ent``) where
    ``_row_info_lazy`` listed them without one: the very items ``_row_info``'s loop makes, through the same cache and
    count, in the same order (one call per batch of rows: the record, the cache and the pair table are read once)."""
    fam, info, pos, snames, pick, tmpl, shape, holes, by_name = ent
    lvs = fam._label_values
    name = (fam.name,)
    L = len(snames)
    new_d, old_d = _row_items(shape)
    sd = _values.pairs_table().setdefault
    intern_values = _values.intern_values
    cnt, gen_max = _ROW_ITEMS_COUNT, ROW_ITEM_GENERATION
    for r in rs:
        lv = lvs[r]
        if type(lv) is not tuple:
            lv = tuple(lv)
        it = new_d.get(lv)
        if it is None:
            it = old_d.get(lv) if old_d is not None else None
            if it is None:
                pv = pick(name + lv)
                if "" in pv:
                    ps = [(a, b) for a, b in zip(snames, pv) if b != ""]
                    lb = tuple(map(sd, ps, ps))
                    it = (lv, lb, _sort_key(lb))
                else:
                    lb = intern_values(snames, by_name, pv, sd)
                    text = tmpl % pv
                    it = (lv, lb, text if text.count("\x01") == L and text.count("\x00") == L else None)
            if cnt[0] >= gen_max:   # (_row_items_add, as ``_row_info``'s loop)
                _row_items_add()
                new_d, old_d = _row_items(shape)
            else:
                cnt[0] += 1
            new_d[lv] = it
        info[r] = it
    holes[0] -= len(rs)


class _Ctx:
    def __init__(self, times: np.ndarray, default_step_ms: int):
        self.times = times
        self.default_step_ms = default_step_ms
        self.cache: dict[str, object] = {}
        self.series = 0
        self.sub_steps = 0


class PromQLEngine:
    """Evaluate PromQL over a ``MetricStore``. Times are in seconds (floats), as in the HTTP API."""

    def __init__(self, store: MetricStore, limits: Limits | None = None, default_step_s: float = 60.0):
        self.store = store
        self.limits = limits or Limits()
        self.default_step_ms = int(round(default_step_s * 1000))
        self._compiled: OrderedDict[str, S.Node] = OrderedDict()
        self._sel_cache: dict[tuple, tuple] = {}  # per (matchers, family): rows done, matching rows, label sets, sort keys
        self._sel_result: dict[tuple, tuple] = {}
        self._rows_of: dict[int, tuple] = {}  # per family: its row record (``_row_ent``)
        self.step_ms = int(round(store.step_s * 1000))
        self.t0_ms = int(round(store.t0_s * 1000))

    # ------------------------------------------------------------------ public API
    def compile(self, expr: str) -> S.Node:
        if not isinstance(expr, str):
            raise QueryError("bad_data", "query must be a string")
        if len(expr) > self.limits.max_query_length:
            raise QueryError("bad_data", f"query longer than {self.limits.max_query_length} characters")
        node = self._compiled.get(expr)
        if node is None:
            node = S.compile_expr(expr)
            self._compiled[expr] = node
            if len(self._compiled) > 1024:
                self._compiled.popitem(last=False)
        return node

    def instant(self, expr: str, t: float) -> dict:
        """Instant query at ``t`` seconds: ``{"resultType": ..., "result": ...}``."""
        node = self.compile(expr)
        t_ms = self._ms(t)
        times = np.array([t_ms], dtype=np.int64)
        val = self._run(node, times, allow_matrix=True)
        ts = fmt_time(t_ms)
        if isinstance(val, Scal):
            return {"resultType": "scalar", "result": [ts, fmt_value(float(val.v[0]))]}
        if isinstance(val, StrVal):
            return {"resultType": "string", "result": [ts, val.s]}
        if isinstance(val, Win):
            return self._format_window(val)
        result = []
        for i in self._sorted_rows(val.labels):
            if val.p[i, 0]:
                result.append({"metric": dict(val.labels[i]), "value": [ts, fmt_value(float(val.v[i, 0]))]})
        self._check_points(len(result))
        return {"resultType": "vector", "result": result}

    def range(self, expr: str, start: float, end: float, step: float) -> dict:
        """Range query over ``[start, end]`` every ``step`` seconds: a matrix."""
        node = self.compile(expr)
        s_ms, e_ms, st_ms = self._ms(start), self._ms(end), self._ms(step)
        if st_ms <= 0:
            raise QueryError("bad_data", "zero or negative query resolution step widths are not accepted")
        if e_ms < s_ms:
            raise QueryError("bad_data", "end timestamp must not be before start time")
        n = (e_ms - s_ms) // st_ms + 1
        if n > self.limits.max_steps:
            raise QueryError("bad_data", f"exceeded maximum resolution of {self.limits.max_steps} points per timeseries. Try decreasing the query resolution (?step=XX)")
        kind = S.kind_of(node)
        if kind not in ("v", "s"):
            names = {"m": "range vector", "str": "string"}
            raise QueryError("bad_data", f"invalid expression type \"{names[kind]}\" for range query, must be Scalar or instant Vector")
        times = s_ms + st_ms * np.arange(n, dtype=np.int64)
        val = self._run(node, times, default_step_ms=st_ms)
        tl = [fmt_time(int(t)) for t in times]
        if isinstance(val, Scal):
            vec = Vec([()], val.v[None, :], np.ones((1, n), bool))
        else:
            vec = val
        result = []
        pts = 0
        for i in self._sorted_rows(vec.labels):
            cols = np.flatnonzero(vec.p[i])
            if len(cols) == 0:
                continue
            pts += len(cols)
            self._check_points(pts)
            row = vec.v[i]
            result.append({"metric": dict(vec.labels[i]), "values": [[tl[c], fmt_value(float(row[c]))] for c in cols]})
        return {"resultType": "matrix", "result": result}

    def query(self, expr: str, t: float | None = None, start: float | None = None, end: float | None = None,
              step: float | None = None) -> dict:
        """Never raises: the full HTTP-API body, ``{"status": "success", "data": ...}`` or an error body."""
        try:
            if start is not None or end is not None:
                if start is None or end is None or step is None:
                    raise QueryError("bad_data", "a range query needs start, end and step")
                data = self.range(expr, float(start), float(end), float(step))
            else:
                data = self.instant(expr, float(t if t is not None else self.store.times()[-1] if self.store.n_ticks else 0.0))
            return {"status": "success", "data": data}
        except QueryError as err:
            return err.to_dict()
        except (TypeError, ValueError) as err:
            return QueryError("bad_data", str(err)).to_dict()

    def evaluate(self, node: S.Node, times_ms: np.ndarray, default_step_ms: int | None = None, ctx: _Ctx | None = None):
        """Evaluate a compiled node at many times (ms); returns Vec/Scal. Used by the alert engine."""
        return self._run(node, np.asarray(times_ms, dtype=np.int64), default_step_ms=default_step_ms, ctx=ctx)

    def new_context(self, times_ms: np.ndarray, default_step_ms: int | None = None) -> _Ctx:
        """A context whose cache shares equal sub-expressions between several evaluations."""
        return _Ctx(np.asarray(times_ms, dtype=np.int64), default_step_ms or self.default_step_ms)

    # ------------------------------------------------------------------ internals
    def _ms(self, t) -> int:
        try:
            f = float(t)
        except (TypeError, ValueError):
            raise QueryError("bad_data", f"cannot parse {t!r} to a valid timestamp") from None
        if not math.isfinite(f):
            raise QueryError("bad_data", f"cannot parse {t!r} to a valid timestamp")
        return int(round(f * 1000))

    def _check_points(self, n: int) -> None:
        if n > self.limits.max_points:
            raise QueryError("too_expensive", f"query returns more than {self.limits.max_points} points")

    @staticmethod
    def _sorted_rows(labels: list[Labels]) -> list[int]:
        return sorted(range(len(labels)), key=lambda i: labels[i])

    def _format_window(self, w: Win) -> dict:
        result = []
        for i in self._sorted_rows(w.labels):
            lo, hi = max(int(w.lo[0]), 0), min(int(w.hi[0]), w.v.shape[1] - 1)
            vals = [[fmt_time(int(w.gt[j])), fmt_value(float(w.v[i, j]))] for j in range(lo, hi + 1) if w.p[i, j]]
            if vals:
                result.append({"metric": dict(w.labels[i]), "values": vals})
        return {"resultType": "matrix", "result": result}

    def _run(self, node, times, allow_matrix=False, default_step_ms=None, ctx=None):
        ctx = ctx or _Ctx(times, default_step_ms or self.default_step_ms)
        try:
            with np.errstate(all="ignore"):
                if isinstance(node, (S.MatSel, S.Subq)):
                    if not allow_matrix:
                        raise QueryError("bad_data", "a range vector cannot be evaluated here")
                    return self._window(node, ctx)
                return self._eval(node, ctx)
        except QueryError:
            raise
        except RecursionError:
            raise QueryError("bad_data", "query is nested too deeply") from None
        except MemoryError:
            raise QueryError("too_expensive", "query needs too much memory") from None
        except Exception as err:  # an engine bug must still reach the caller as a structured error
            raise QueryError("execution", f"{type(err).__name__}: {err}") from None

    def _eval(self, node, ctx: _Ctx):
        hit = ctx.cache.get(node.key)
        if hit is not None:
            return hit
        out = self._eval_uncached(node, ctx)
        ctx.cache[node.key] = out
        return out

    def _eval_uncached(self, node, ctx: _Ctx):  # noqa: C901
        T = len(ctx.times)
        if isinstance(node, S.Num):
            return Scal(np.full(T, node.val))
        if isinstance(node, S.Str):
            return StrVal(node.val)
        if isinstance(node, S.Sel):
            return self._instant_selector(node, ctx)
        if isinstance(node, S.Neg):
            inner = self._eval(node.expr, ctx)
            if isinstance(inner, Scal):
                return Scal(-inner.v)
            return dedupe(Vec(drop_names(inner.labels), -inner.v, inner.p))
        if isinstance(node, S.Agg):
            vec = self._eval(node.expr, ctx)
            param = self._eval(node.param, ctx) if node.param is not None else None
            if node.op in ("topk", "bottomk", "quantile") and not isinstance(param, Scal):
                raise QueryError("bad_data", f"{node.op}: expected a scalar parameter")
            return aggregate(node.op, vec, param, node.without, node.grouping)
        if isinstance(node, S.Bin):
            lhs = self._eval(node.lhs, ctx)
            rhs = self._eval(node.rhs, ctx)
            if isinstance(lhs, Scal) and isinstance(rhs, Scal):
                return scalar_scalar(node.op, lhs, rhs)
            if isinstance(lhs, Scal):
                return vector_scalar(node.op, rhs, lhs, True, node.return_bool)
            if isinstance(rhs, Scal):
                return vector_scalar(node.op, lhs, rhs, False, node.return_bool)
            if node.op in S.SETOPS:
                return set_op(node.op, lhs, rhs, node.on, node.match_labels)
            return vector_vector(node.op, lhs, rhs, node.card, node.on, node.match_labels, node.include, node.return_bool)
        if isinstance(node, S.Call):
            return self._call(node, ctx)
        if isinstance(node, (S.MatSel, S.Subq)):
            raise QueryError("bad_data", "a range vector is not allowed here")
        raise QueryError("bad_data", f"unsupported expression {node.key}")

    # ---------------------------------------------------------------- selectors
    def _select(self, sel: S.Sel, ctx: _Ctx):
        """[(family, rows)] and the labels of the selected series, in store order.

        Work is per new row: each row's label set and sort key are made once per family (shared by
        all selectors), and a one-family result that grew inserts its new rows into the previous
        sorted order instead of sorting again.
        """
        store = self.store
        fams = store.families(sel.name) if sel.name is not None else [f for n in store.names() for f in store.families(n)]
        key = tuple((m.name, m.op, m.value) for m in sel.matchers)
        shape = (key, tuple(id(f) for f in fams), tuple(len(f) for f in fams))
        hit = self._sel_result.get(shape[0])
        if hit is not None and hit[0] == shape:
            parts, labels = hit[1], hit[2]
            ctx.series += len(labels)
            if ctx.series > self.limits.max_series:
                raise QueryError("too_expensive", f"query touches more than {self.limits.max_series} series")
            return parts, labels
        prev = hit if hit is not None and hit[0][1] == shape[1] else None
        grew = False
        per_fam = []
        for fam in fams:
            ck = (key, id(fam))
            ent = self._sel_cache.get(ck)
            if ent is None:
                ent = (0, [], [], [])  # rows done, then matching rows, their label sets, their sort keys
            n = len(fam)
            if ent[0] < n:
                info, pos = self._row_info(fam, n)
                fr, fl, fk = [], [], []
                match_rows(info, pos, sel.matchers, ent[0], n, fr, fl, fk, fam.name)
                if fr:
                    # the lists are this cache's own (results copy them): extended in place
                    ent[1].extend(fr)
                    ent[2].extend(fl)
                    ent[3].extend(fk)
                    ent = (n, ent[1], ent[2], ent[3])
                    grew = True
                else:
                    ent = (n, ent[1], ent[2], ent[3])
                self._sel_cache[ck] = ent
            per_fam.append((fam, ent))
        aux = None
        if prev is not None and not grew:
            # the families grew by series the selector does not match: the same result objects
            parts, labels, aux = prev[1], prev[2], prev[3]
        elif prev is not None and prev[3] is not None and len(per_fam) == 1 and None not in per_fam[0][1][3][prev[3][0]:]:
            parts, labels, aux = self._select_grow(per_fam[0], prev[3], prev[2])
        else:
            parts = []
            labels: list[Labels] = []
            for fam, (_, rows, lbs, _) in per_fam:
                if rows:
                    parts.append((fam, np.asarray(rows, dtype=np.intp)))
                    labels.extend(lbs)
            keys = [k for _, ent in per_fam for k in ent[3]]
            order = None
            if len(parts) > 1 or any(len(r) > 1 for _, r in parts):
                if None in keys:
                    order = sorted(range(len(labels)), key=labels.__getitem__)
                else:
                    order = sorted(range(len(labels)), key=keys.__getitem__)
                if order != list(range(len(labels))):
                    # Prometheus hands series to functions and aggregations sorted by labels
                    labels = [labels[i] for i in order]
                    parts = [("perm", np.asarray(order, dtype=np.intp), parts)]
            if len(per_fam) == 1 and None not in keys:
                fam, ent = per_fam[0]
                order = list(range(len(keys))) if order is None else order
                aux = (len(keys), order, [keys[i] for i in order], np.asarray(ent[1], dtype=np.intp), None)
        self._sel_result[shape[0]] = (shape, parts, labels, aux)
        ctx.series += len(labels)
        if ctx.series > self.limits.max_series:
            raise QueryError("too_expensive", f"query touches more than {self.limits.max_series} series")
        return parts, labels

    def _row_ent(self, fam) -> tuple:
        """The family's row record: (family, items per row so far, position of each label name in the label values,
        sorted names with ``__name__``, their pick from the values, the sort key's template, the items' cache shape,
        [rows listed without an item yet], the sorted names' value -> pair dicts (``values.value_pairs``))."""
        ent = self._rows_of.get(id(fam))
        if ent is None or ent[0] is not fam:
            names = ("__name__",) + tuple(fam.label_names)
            order = sorted(range(len(names)), key=names.__getitem__)
            snames = tuple(names[i] for i in order)
            pick = (lambda va: (va[0],)) if len(order) == 1 else itemgetter(*order)
            pos = {nm: i for i, nm in enumerate(fam.label_names)}
            # the sort key's template: name, \x01, value, \x00 for each pair (names escaped for %)
            tmpl = "".join(nm.replace("%", "%%") + "\x01%s\x00" for nm in snames)
            ent = self._rows_of[id(fam)] = (fam, [], pos, snames, pick, tmpl, (fam.name, names), [0],
                                            _values.value_pairs(snames))
        return ent

    def _row_info_lazy(self, fam, n: int) -> tuple[list, dict, tuple]:
        """``_row_info`` without making the items: (the family's item list, listing rows up to ``n``, None for a row
        whose item is not made yet; the label positions; the row record for `match_rows`, which makes the items of
        the rows it keeps, ``_row_items_make``). A selector keeps ~70 % of a new pod's rows: the others never cost an
        item (label set, sort key)."""
        ent = self._rows_of.get(id(fam))
        if ent is None or ent[0] is not fam:
            ent = self._row_ent(fam)
        info = ent[1]
        k = n - len(info)
        if k > 0:
            info.extend(repeat(None, k))
            ent[7][0] += k
        return info, ent[2], ent

    def _row_info(self, fam, n: int) -> tuple[list, dict]:
        """((label values, label set, sort key) of each row of a family, made once per row; the position of
        each label name in the label values). The family name is not in the item (`match_rows` takes it once
        per family): an item holds the row's values tuple it is keyed by, and leaves two new tracked tuples per
        new row (label set, item) instead of three for the garbage collector's young collections.

        The label set is the sorted (name, value) pairs without empty values: names are the family's,
        sorted once, and each row's values are put in that order with one ``itemgetter`` call. A row's item
        is a pure function of (family name, label names, label values): items are shared through a bounded
        module-level cache (``_ROW_ITEMS``), so the rows a new episode's store has in common with an earlier
        one (nodes, deployments, services, edges: ~70 % of Train Ticket's) cost a lookup. Rows listed without
        an item (``_row_info_lazy``) get theirs here."""
        ent = self._rows_of.get(id(fam))
        if ent is None or ent[0] is not fam:
            ent = self._row_ent(fam)
        info, pos, holes = ent[1], ent[2], ent[7]
        if holes[0]:
            _row_items_make(ent, [r for r in range(min(n, len(info))) if info[r] is None])
        if len(info) < n:
            a = len(info)
            info.extend(repeat(None, n - a))
            holes[0] += n - a
            _row_items_make(ent, range(a, n))
        return info, pos

    @staticmethod
    def _select_grow(fam_ent, aux, prev_labels):
        """A one-family result with new matching rows: each new row inserted into the sorted order.

        Inserting rows in row order after every equal key gives what the stable full sort gives."""
        fam, (_, rows, lbs, keys) = fam_ent
        m, order, skeys, arr, _ = aux
        order, skeys = list(order), list(skeys)
        for i in range(m, len(keys)):
            k = keys[i]
            pos = bisect_right(skeys, k)
            skeys.insert(pos, k)
            order.insert(pos, i)
        arr = np.concatenate([arr, np.asarray(rows[m:], dtype=np.intp)])
        parts: list = [(fam, arr)]
        if order == list(range(len(order))):
            labels = list(lbs)
            pos = list(range(m, len(keys)))
        else:
            labels = list(map(lbs.__getitem__, order))
            perm = np.asarray(order, dtype=np.intp)
            parts = [("perm", perm, parts)]
            pos = np.flatnonzero(perm >= m).tolist()
        # later label work (group keys, signatures, name drops...) redoes only the new rows
        note_grown(labels, prev_labels, pos)
        return parts, labels, (len(keys), order, skeys, arr, None)

    def _gather(self, parts, cols: np.ndarray) -> np.ndarray:
        n_ticks = self.store.n_ticks
        if parts and parts[0][0] == "perm":
            _, order, inner = parts[0]
            return self._gather(inner, cols)[order]
        blocks = [fam.values(n_ticks)[rows[:, None], cols[None, :]] for fam, rows in parts]
        if not blocks:
            return np.zeros((0, len(cols)))
        return np.vstack(blocks) if len(blocks) > 1 else blocks[0]

    def _ref_times(self, sel_at: int | None, offset_ms: int, ctx: _Ctx) -> np.ndarray:
        base = ctx.times if sel_at is None else np.full(len(ctx.times), sel_at, dtype=np.int64)
        return base - offset_ms

    def _instant_selector(self, sel: S.Sel, ctx: _Ctx) -> Vec:
        T = len(ctx.times)
        parts, labels = self._select(sel, ctx)
        n_ticks = self.store.n_ticks
        if not labels or n_ticks == 0:
            return Vec.empty(T)
        ref = self._ref_times(sel.at_ms, sel.offset_ms, ctx)
        idx = (ref - self.t0_ms) // self.step_ms
        before = idx < 0
        j = np.clip(idx, 0, n_ticks - 1)
        lb = self.limits.lookback_ms
        if self.limits.stale_on_gap:
            vals = self._gather(parts, j)
            tj = self.t0_ms + j * self.step_ms
            p = ~np.isnan(vals) & ((ref - tj) <= lb)[None, :] & ~before[None, :]
            return Vec(labels, vals, p)
        look = lb // self.step_ms + 1
        c0 = max(int(j.min()) - look, 0)
        c1 = int(j.max())
        cols = np.arange(c0, c1 + 1)
        block = self._gather(parts, cols)
        pres = ~np.isnan(block)
        pv = np.maximum.accumulate(np.where(pres, np.arange(len(cols)), -1), axis=1)
        last = pv[:, j - c0]
        ok = last >= 0
        src = np.maximum(last, 0)
        vals = np.take_along_axis(block, src, axis=1)
        tj = self.t0_ms + (c0 + src) * self.step_ms
        p = ok & ((ref[None, :] - tj) <= lb) & ~before[None, :]
        return Vec(labels, vals, p)

    def _window(self, node, ctx: _Ctx) -> Win:
        hit = ctx.cache.get(node.key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        w = self._matrix_selector(node, ctx) if isinstance(node, S.MatSel) else self._subquery(node, ctx)
        ctx.cache[node.key] = w
        return w

    def _matrix_selector(self, node: S.MatSel, ctx: _Ctx) -> Win:
        sel = node.sel
        parts, labels = self._select(sel, ctx)
        n_ticks = self.store.n_ticks
        ref = self._ref_times(sel.at_ms, sel.offset_ms, ctx)
        st = self.step_ms
        lo_abs = -((-(ref - node.range_ms - self.t0_ms)) // st)  # ceil
        hi_abs = np.minimum((ref - self.t0_ms) // st, n_ticks - 1)
        lo_abs = np.maximum(lo_abs, 0)
        c0 = int(lo_abs.min()) if len(lo_abs) else 0
        c1 = int(hi_abs.max()) if len(hi_abs) else -1
        if c1 < c0 or not labels:
            G = 0
            cols = np.zeros(0, dtype=np.intp)
        else:
            cols = np.arange(c0, c1 + 1)
            G = len(cols)
        v = self._gather(parts, cols) if G else np.zeros((len(labels), 0))
        return Win(labels, v, ~np.isnan(v), self.t0_ms + cols.astype(np.int64) * st,
                   lo_abs - c0, hi_abs - c0, node.range_ms, sel.offset_ms)

    def _subquery(self, node: S.Subq, ctx: _Ctx) -> Win:
        step = node.step_ms or ctx.default_step_ms
        ref = self._ref_times(node.at_ms, node.offset_ms, ctx)
        start = int(ref.min()) - node.range_ms
        start = step * (start // step) + (step if start % step else 0)
        end = int(ref.max())
        n = (end - start) // step + 1 if end >= start else 0
        ctx.sub_steps += n
        if ctx.sub_steps > self.limits.max_subquery_steps:
            raise QueryError("too_expensive", f"subqueries need more than {self.limits.max_subquery_steps} inner steps")
        inner_t = start + step * np.arange(max(n, 0), dtype=np.int64)
        sub = _Ctx(inner_t, ctx.default_step_ms)
        sub.series, sub.sub_steps = ctx.series, ctx.sub_steps
        val = self._eval(node.expr, sub) if n > 0 else Vec.empty(0)
        ctx.series, ctx.sub_steps = sub.series, sub.sub_steps
        if isinstance(val, Scal):
            raise QueryError("bad_data", "subquery is only allowed on instant vector")
        lo = -((-(ref - node.range_ms - start)) // step)
        hi = (ref - start) // step
        return Win(val.labels, val.v, val.p, inner_t, lo, hi, node.range_ms, node.offset_ms)

    # ---------------------------------------------------------------- functions
    def _call(self, node: S.Call, ctx: _Ctx):  # noqa: C901
        name, args = node.name, node.args
        T = len(ctx.times)
        if name == "time":
            return Scal(ctx.times.astype(np.float64) / 1000)
        if name == "vector":
            s = self._eval(args[0], ctx)
            return Vec([()], s.v[None, :].copy(), np.ones((1, T), bool))
        if name in RANGE_FUNCS:
            margs = [a for a in args if isinstance(a, (S.MatSel, S.Subq))]
            w = self._window(margs[0], ctx)
            q = None
            sargs = [a for a in args if not isinstance(a, (S.MatSel, S.Subq))]
            if sargs:
                q = self._eval(sargs[0], ctx).v
            v, p = RANGE_FUNCS[name](w, ctx.times, q)
            keep_name = name == "last_over_time"  # Prometheus 2.x keeps the name only here
            labels = w.labels if keep_name else drop_names(w.labels)
            return dedupe(Vec(labels, np.asarray(v, dtype=np.float64), p))
        if name == "absent_over_time":
            w = self._window(args[0], ctx)
            cnt = RANGE_FUNCS["count_over_time"](w, ctx.times, None)[1]
            none = ~cnt.any(axis=0) if len(w.labels) else np.ones(T, bool)
            lb = self._absent_labels(args[0].sel if isinstance(args[0], S.MatSel) else None)
            return Vec([lb], np.ones((1, T)), none[None, :])
        if name == "absent":
            vec = self._eval(args[0], ctx)
            none = ~vec.p.any(axis=0) if vec.labels else np.ones(T, bool)
            lb = self._absent_labels(args[0] if isinstance(args[0], S.Sel) else None)
            return Vec([lb], np.ones((1, T)), none[None, :])
        if name == "scalar":
            vec = self._eval(args[0], ctx)
            if not vec.labels:
                return Scal(np.full(T, np.nan))
            cnt = vec.p.sum(axis=0)
            first = np.argmax(vec.p, axis=0)
            vals = vec.v[first, np.arange(T)]
            return Scal(np.where(cnt == 1, vals, np.nan))
        if name == "histogram_quantile":
            q = self._eval(args[0], ctx).v
            return self._histogram_quantile(q, self._eval(args[1], ctx))
        vec = self._eval(args[0], ctx)
        labels = drop_names(vec.labels)
        if name in _MATH:
            return dedupe(Vec(labels, _MATH[name](vec.v), vec.p))
        if name == "round":
            to = self._eval(args[1], ctx).v if len(args) > 1 else np.ones(T)
            inv = 1.0 / to
            return dedupe(Vec(labels, np.floor(vec.v * inv[None, :] + 0.5) / inv[None, :], vec.p))
        if name == "clamp":
            lo = self._eval(args[1], ctx).v[None, :]
            hi = self._eval(args[2], ctx).v[None, :]
            p = vec.p & ~(hi < lo)
            return dedupe(Vec(labels, np.maximum(lo, np.minimum(hi, vec.v)), p))
        if name == "clamp_min":
            return dedupe(Vec(labels, np.maximum(vec.v, self._eval(args[1], ctx).v[None, :]), vec.p))
        if name == "clamp_max":
            return dedupe(Vec(labels, np.minimum(vec.v, self._eval(args[1], ctx).v[None, :]), vec.p))
        if name == "label_replace":
            dst, repl, src, rx = (a.val for a in args[1:])
            out = memo(("label_replace", dst, repl, src, rx), (vec.labels,), lambda: self._label_replace(vec.labels, dst, repl, src, rx))
            return dedupe(Vec(out, vec.v, vec.p))
        raise QueryError("bad_data", f"function {name!r} is not supported")

    @staticmethod
    def _label_replace(labels, dst, repl, src, rx):
        """``label_replace`` of each label set. The regex's expansion depends only on the source label's value: it
        is kept per (regex, replacement) and value (``_LR_VALUES``), so a value seen before (the same pod in
        another family, a label set of an earlier list) costs a lookup."""
        vals = _LR_VALUES.get((rx, repl))
        if vals is None:
            if len(_LR_VALUES) >= 64:
                _LR_VALUES.clear()
            vals = _LR_VALUES[(rx, repl)] = {}
        pat = None
        out = []
        for lb in labels:
            d = dict(lb)          # (a label set's names are distinct: ``get``'s value is the dict's)
            sv = d.get(src, "")
            val = vals.get(sv, _NO_VALUE)
            if val is _NO_VALUE:
                if pat is None:
                    pat = re.compile(rx, re.DOTALL)
                m = pat.fullmatch(sv)
                val = None if m is None else _go_expand(repl, m)
                if len(vals) >= LR_VALUES_MAX:
                    vals.clear()
                vals[sv] = val
            if val is None:   # (no match: the label set as it is)
                out.append(lb)
                continue
            if val:
                d[dst] = val
            else:
                d.pop(dst, None)
            out.append(intern_pairs(sorted(d.items())))
        return out

    @staticmethod
    def _absent_labels(sel: S.Sel | None) -> Labels:
        if sel is None:
            return ()
        eq: dict[str, str] = {}
        dup: set[str] = set()
        for m in sel.matchers:
            if m.op == "=" and m.name != "__name__":
                if m.name in eq:
                    dup.add(m.name)
                eq[m.name] = m.value
        return tuple(sorted((k, v) for k, v in eq.items() if k not in dup and v != ""))

    @staticmethod
    def _hq_layout(labels: list[Labels]) -> list[tuple[Labels, np.ndarray, np.ndarray]]:
        """Bucket groups of histogram_quantile: (labels without le, sorted upper bounds, rows)."""
        groups: dict[Labels, list[tuple[float, int]]] = {}
        for i, lb in enumerate(labels):
            try:
                ub = float(get(lb, "le"))
            except ValueError:
                continue
            key = tuple(x for x in lb if x[0] not in ("__name__", "le"))
            groups.setdefault(key, []).append((ub, i))
        out = []
        for key, members in groups.items():
            members.sort(key=lambda x: x[0])
            out.append((key, np.array([u for u, _ in members]), np.array([r for _, r in members], dtype=np.intp)))
        return out

    def _histogram_quantile(self, q: np.ndarray, vec: Vec) -> Vec:
        T = len(q)
        layout = memo(("hq",), (vec.labels,), lambda: self._hq_layout(vec.labels))
        out_l, out_v, out_p = [], [], []
        for key, ubs, rows in layout:
            C = vec.v[rows]
            P = vec.p[rows]
            anyp = P.any(axis=0)
            res = np.full(T, np.nan)
            uniq = len(set(ubs.tolist())) == len(ubs)
            full = P.all(axis=0) & anyp
            if uniq:
                res = np.where(full, _bucket_quantile(q, ubs, C), res)
            for t in np.flatnonzero(anyp & ~(full & uniq)):
                sel = P[:, t]
                res[t] = _bucket_quantile(q[t : t + 1], ubs[sel], C[sel][:, t : t + 1], coalesce=True)[0]
            out_l.append(key)
            out_v.append(res)
            out_p.append(anyp)
        if not out_l:
            return Vec.empty(T)
        return Vec(out_l, np.vstack(out_v), np.vstack(out_p))


_LB_OF, _KEY_OF = itemgetter(1), itemgetter(2)   # of a row item


def match_rows(info: list, pos: dict, matchers, lo: int, hi: int, rows: list, lbs: list, keys: list,
               name: str, ent: tuple | None = None) -> None:
    """Append to ``rows``, ``lbs`` and ``keys`` the rows ``lo .. hi-1`` of the family ``name``
    (`PromQLEngine._row_info`: ``info[r]`` = (label values, label set, sort key), ``pos`` = label name ->
    position in the values) whose name and values pass every matcher; a label a row lacks reads as "".
    A ``__name__`` matcher has one value for all the family's rows: it is decided once. With the family's row
    record ``ent`` (``PromQLEngine._row_info_lazy``), the rows' values are read from the family and the kept rows
    without an item get their items made (``_row_items_make``, once for all of them)."""
    mi = []
    for m in matchers:
        if m.name == "__name__":
            if not (name == m.value if m.op == "=" else m.matches(name)):
                return
        else:
            mi.append((m, m.op == "=", pos.get(m.name, -1)))
    if ent is not None:
        lvs = ent[0]._label_values
        kept = []
        for r in range(lo, hi):
            va = lvs[r]
            for m, eq, i in mi:
                v = va[i] if i >= 0 else ""
                if not (v == m.value if eq else m.matches(v)):
                    break
            else:
                kept.append(r)
        if kept:
            its = list(map(info.__getitem__, kept))
            if None in its:
                _row_items_make(ent, [r for r, it in zip(kept, its) if it is None])
                its = list(map(info.__getitem__, kept))
            rows.extend(kept)
            lbs.extend(map(_LB_OF, its))
            keys.extend(map(_KEY_OF, its))
        return
    for r in range(lo, hi):
        va, lb, k = info[r]
        for m, eq, i in mi:
            v = va[i] if i >= 0 else ""
            if not (v == m.value if eq else m.matches(v)):
                break
        else:
            rows.append(r)
            lbs.append(lb)
            keys.append(k)


def _bucket_quantile(q: np.ndarray, ubs: np.ndarray, C: np.ndarray, coalesce: bool = False) -> np.ndarray:
    """Prometheus's bucketQuantile for one bucket set, across times. ubs sorted, C (m, T)."""
    if coalesce and len(ubs) > 1:
        keep_ub, keep_c = [ubs[0]], [C[0].copy()]
        for u, c in zip(ubs[1:], C[1:]):
            if u == keep_ub[-1]:
                keep_c[-1] = keep_c[-1] + c
            else:
                keep_ub.append(u)
                keep_c.append(c.copy())
        ubs, C = np.array(keep_ub), np.vstack(keep_c)
    m, T = C.shape
    res = np.full(T, np.nan)
    if m == 0 or not ubs[-1] == np.inf:
        return np.where(q < 0, -np.inf, np.where(q > 1, np.inf, res))
    acc = np.fmax.accumulate(C, axis=0)
    C = np.where(np.isnan(C), C, acc)
    if m < 2:
        return np.where(q < 0, -np.inf, np.where(q > 1, np.inf, res))
    obs = C[-1]
    rank = q * obs
    ge = C[:-1] >= rank[None, :]
    b = np.where(ge.any(axis=0), np.argmax(ge, axis=0), m - 1)
    cols = np.arange(T)
    end = ubs[b]
    cnt = C[b, cols]
    start = np.where(b > 0, ubs[np.maximum(b - 1, 0)], 0.0)
    prevc = np.where(b > 0, C[np.maximum(b - 1, 0), cols], 0.0)
    cnt = np.where(b > 0, cnt - prevc, cnt)
    rk = np.where(b > 0, rank - prevc, rank)
    val = start + (end - start) * (rk / cnt)
    val = np.where((b == 0) & (ubs[0] <= 0), ubs[0], val)
    val = np.where(b == m - 1, ubs[m - 2], val)
    val = np.where(obs == 0, np.nan, val)
    return np.where(q < 0, -np.inf, np.where(q > 1, np.inf, val))

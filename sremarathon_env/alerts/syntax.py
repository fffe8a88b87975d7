"""Compile ``promql_parser``'s syntax tree into small immutable nodes the evaluator walks.

Parsing happens once per expression (rules are compiled when the pack loads). Each node has a
canonical ``key`` (its PromQL text), used to share results of equal sub-expressions between rules.

>>> node = compile_expr('sum by (service) (rate(x{a=~"b.*"}[5m]))')
>>> node.op, node.grouping, node.expr.name
('sum', ('service',), 'rate')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

import promql_parser as pp

from .limits import QueryError

AGGREGATIONS = {"sum", "avg", "min", "max", "count", "topk", "bottomk", "quantile", "stddev", "stdvar", "group"}
ARITH = {"+", "-", "*", "/", "%", "^", "atan2"}
COMPARISON = {"==", "!=", ">", "<", ">=", "<="}
SETOPS = {"and", "or", "unless"}

#: function name -> argument kinds ("v" instant vector, "m" range vector, "s" scalar, "str" string);
#: a trailing "?" marks an optional argument.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    **{f: ("m",) for f in ("rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets",
                           "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
                           "count_over_time", "stddev_over_time", "stdvar_over_time",
                           "last_over_time", "present_over_time", "absent_over_time")},
    "quantile_over_time": ("s", "m"),
    "predict_linear": ("m", "s"),
    "histogram_quantile": ("s", "v"),
    **{f: ("v",) for f in ("abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "absent",
                           "scalar", "timestamp")},
    "round": ("v", "s?"),
    "clamp": ("v", "s", "s"),
    "clamp_min": ("v", "s"),
    "clamp_max": ("v", "s"),
    "label_replace": ("v", "str", "str", "str", "str"),
    "vector": ("s",),
    "time": (),
}

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _ms(d: timedelta | None) -> int:
    if d is None:
        return 0
    return (d.days * 86400 + d.seconds) * 1000 + d.microseconds // 1000


@dataclass(frozen=True)
class Node:
    key: str = field(compare=False)


@dataclass(frozen=True)
class Num(Node):
    val: float


@dataclass(frozen=True)
class Str(Node):
    val: str


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str  # "=", "!=", "=~", "!~"
    value: str
    regex: re.Pattern | None

    def matches(self, v: str) -> bool:
        if self.op == "=":
            return v == self.value
        if self.op == "!=":
            return v != self.value
        hit = self.regex.fullmatch(v) is not None  # type: ignore[union-attr]
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True)
class Sel(Node):
    name: str | None
    matchers: tuple[Matcher, ...]
    offset_ms: int
    at_ms: int | None


@dataclass(frozen=True)
class MatSel(Node):
    sel: Sel
    range_ms: int


@dataclass(frozen=True)
class Subq(Node):
    expr: Node
    range_ms: int
    step_ms: int  # 0 = the default evaluation interval
    offset_ms: int
    at_ms: int | None


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Agg(Node):
    op: str
    expr: Node
    param: Node | None
    without: bool
    grouping: tuple[str, ...]


@dataclass(frozen=True)
class Bin(Node):
    op: str
    lhs: Node
    rhs: Node
    return_bool: bool
    card: str  # one-to-one, many-to-one, one-to-many, many-to-many
    on: bool | None  # None: no on/ignoring clause
    match_labels: tuple[str, ...]
    include: tuple[str, ...]


@dataclass(frozen=True)
class Neg(Node):
    expr: Node


def kind_of(node: Node) -> str:
    """Static result type: "v", "m", "s" or "str"."""
    if isinstance(node, Num):
        return "s"
    if isinstance(node, Str):
        return "str"
    if isinstance(node, Sel):
        return "v"
    if isinstance(node, (MatSel, Subq)):
        return "m"
    if isinstance(node, Neg):
        return kind_of(node.expr)
    if isinstance(node, Call):
        return "s" if node.name in ("scalar", "time") else "v"
    if isinstance(node, Agg):
        return "v"
    if isinstance(node, Bin):
        return "s" if kind_of(node.lhs) == "s" and kind_of(node.rhs) == "s" else "v"
    raise QueryError("bad_data", f"unsupported expression {node.key}")


_MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_CARD = {"OneToOne": "one-to-one", "ManyToOne": "many-to-one", "OneToMany": "one-to-many", "ManyToMany": "many-to-many"}


def _at(at) -> int | None:
    if at is None:
        return None
    if getattr(at, "at", None) is None:
        raise QueryError("bad_data", "@ start() / @ end() are not supported")
    d = at.at
    return int(round(d.timestamp() * 1000))


def _convert(e) -> Node:  # noqa: C901 - one branch per node type
    key = str(e) if not isinstance(e, pp.ParenExpr) else ""
    if isinstance(e, pp.ParenExpr):
        return _convert(e.expr)
    if isinstance(e, pp.NumberLiteral):
        return Num(key, float(e.val))
    if isinstance(e, pp.StringLiteral):
        return Str(key, e.val)
    if isinstance(e, pp.VectorSelector):
        ms = e.matchers
        if ms.or_matchers:
            raise QueryError("bad_data", "'or' inside a selector is not supported")
        matchers = []
        if e.name is not None:
            matchers.append(Matcher("__name__", "=", e.name, None))
        for m in ms.matchers:
            op = _MATCH_OPS[str(m.op).split(".")[-1]]
            rx = None
            if op in ("=~", "!~"):
                try:
                    rx = re.compile(m.value, re.DOTALL)
                except re.error as err:
                    raise QueryError("bad_data", f"invalid regular expression {m.value!r}: {err}") from None
            matchers.append(Matcher(m.name, op, m.value, rx))
        name = e.name
        if name is None:
            eq = [m.value for m in matchers if m.name == "__name__" and m.op == "="]
            name = eq[0] if eq else None
        return Sel(key, name, tuple(matchers), _ms(e.offset), _at(e.at))
    if isinstance(e, pp.MatrixSelector):
        vs = _convert(e.vector_selector)
        assert isinstance(vs, Sel)
        return MatSel(key, vs, _ms(e.range))
    if isinstance(e, pp.SubqueryExpr):
        return Subq(key, _convert(e.expr), _ms(e.range), _ms(e.step), _ms(e.offset), _at(e.at))
    if isinstance(e, pp.UnaryExpr):
        inner = _convert(e.expr)
        return Neg(key, inner)
    if isinstance(e, pp.Call):
        name = e.func.name
        if name not in FUNCTIONS:
            raise QueryError("bad_data", f"function {name!r} is not supported by this engine")
        args = tuple(_convert(a) for a in e.args)
        spec = FUNCTIONS[name]
        need = sum(1 for s in spec if not s.endswith("?"))
        if not (need <= len(args) <= len(spec)):
            raise QueryError("bad_data", f"{name}: expected {need} argument(s), got {len(args)}")
        for a, want in zip(args, spec):
            got = kind_of(a)
            if got != want.rstrip("?"):
                names = {"v": "instant vector", "m": "range vector", "s": "scalar", "str": "string"}
                raise QueryError("bad_data", f"{name}: expected type {names[want.rstrip('?')]} in call, got {names[got]}")
        if name == "label_replace":
            dst = args[1].val  # type: ignore[attr-defined]
            if not _LABEL_NAME.match(dst):
                raise QueryError("bad_data", f"invalid destination label name in label_replace(): {dst}")
            try:
                re.compile(args[4].val)  # type: ignore[attr-defined]
            except re.error as err:
                raise QueryError("bad_data", f"invalid regular expression in label_replace(): {err}") from None
        return Call(key, name, args)
    if isinstance(e, pp.AggregateExpr):
        op = str(e.op)
        if op not in AGGREGATIONS:
            raise QueryError("bad_data", f"aggregation {op!r} is not supported by this engine")
        inner = _convert(e.expr)
        if kind_of(inner) != "v":
            raise QueryError("bad_data", f"{op}: expected an instant vector")
        param = _convert(e.param) if e.param is not None else None
        mod = e.modifier
        without = mod is not None and str(mod.type).endswith("Without")
        grouping = tuple(mod.labels) if mod is not None else ()
        return Agg(key, op, inner, param, without, grouping)
    if isinstance(e, pp.BinaryExpr):
        op = str(e.op)
        lhs, rhs = _convert(e.lhs), _convert(e.rhs)
        mod = e.modifier
        rb = bool(mod.return_bool) if mod is not None else False
        card = _CARD[str(mod.card).split(".")[-1]] if mod is not None else ("many-to-many" if op in SETOPS else "one-to-one")
        on = None
        match_labels: tuple[str, ...] = ()
        include: tuple[str, ...] = ()
        if mod is not None:
            if mod.matching is not None:
                on = str(mod.matching.type).endswith("Include")
                match_labels = tuple(mod.matching.labels)
            include = tuple(mod.group_labels or ())
        for side in (lhs, rhs):
            if kind_of(side) not in ("v", "s"):
                raise QueryError("bad_data", "binary expression must contain only scalar and instant vector types")
        if op in COMPARISON and kind_of(lhs) == "s" and kind_of(rhs) == "s" and not rb:
            raise QueryError("bad_data", "comparisons between scalars must use BOOL modifier")
        if op in SETOPS and (kind_of(lhs) != "v" or kind_of(rhs) != "v"):
            raise QueryError("bad_data", f"set operator {op!r} not allowed in binary scalar expression")
        return Bin(key, op, lhs, rhs, rb, card, on, match_labels, include)
    raise QueryError("bad_data", f"unsupported expression: {e}")


def compile_expr(text: str) -> Node:
    """Parse PromQL with promql-parser and compile it; parse errors become QueryError(bad_data)."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("bad_data", "empty query")
    try:
        tree = pp.parse(text)
    except Exception as err:  # the parser raises ValueError with its own message
        raise QueryError("bad_data", f"parse error: {err}") from None
    return _convert(tree)

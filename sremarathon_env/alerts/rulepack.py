"""The frozen rule pack: Prometheus rule-file YAML parsed once into compiled rules.

>>> pack = load_rule_pack()
>>> pack.version, len(pack.rules) >= 44
('1.3.0', True)
>>> pack.rules[0].name
'KubePodCrashLooping'
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import yaml

from . import syntax as S
from .limits import QueryError

DEFAULT_PACK = Path(__file__).with_name("rules") / "pack.yaml"
_VERSION = re.compile(r"^# sremarathon-rule-pack-version: (\S+)", re.M)
_DUR = re.compile(r"^((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$")
_TEMPLATE_ACTION = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_LABEL_REF = re.compile(r"^\$labels\.([A-Za-z_][A-Za-z0-9_]*)$")


def parse_duration_ms(text: str) -> int:
    m = _DUR.match(str(text).strip())
    if not m or not any(m.groups()):
        raise ValueError(f"invalid duration {text!r}")
    h, mi, s, ms = (int(m.group(i) or 0) for i in (2, 4, 6, 8))
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


def go_float(v: float) -> str:
    """Go's fmt %v of a float64 (strconv 'g', shortest): what ``{{ $value }}`` renders.

    >>> [go_float(x) for x in (0.25, 100000.0, 1e6, 1234567.0, 0.0001, 0.00001, 3.0, -1.5e300, 5e-324)]
    ['0.25', '100000', '1e+06', '1.234567e+06', '0.0001', '1e-05', '3', '-1.5e+300', '5e-324']
    """
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    if type(v) is float:
        # the shortest round-trip digits ``repr`` writes, read by string operations (what ``Decimal(repr(v))``
        # holds, without its construction)
        r = float.__repr__(v)
        if "e" not in r:
            # ``repr`` writes the shortest digits in fixed notation for decimal exponents -4..15, Go for -4..5 (at
            # most six digits before the point): there the two texts are the same but for repr's ".0" of an integer
            point = r.find(".")
            if point - (r[0] == "-") <= 6:
                return r[:-2] if r.endswith(".0") else r
        neg = ""
        if r[0] == "-":
            neg, r = "-", r[1:]
        mant, _, e = r.partition("e")
        ip, _, fp = mant.partition(".")
        ds = ip + fp
        dp = len(ip) + (int(e) if e else 0)  # decimal point position relative to the digit string
    else:   # ints, float subclasses, ...: the digits of their repr as a Decimal
        sign, digits, exp = Decimal(repr(v)).as_tuple()
        ds = "".join(map(str, digits))
        dp = exp + len(ds)
        neg = "-" if sign else ""
    stripped = ds.lstrip("0")
    dp -= len(ds) - len(stripped)
    ds = stripped.rstrip("0") or "0"
    nd = len(ds)
    x = dp - 1
    if x < -4 or x >= 6:  # shortest formatting: Go uses precision 6 for this decision
        mant = ds[0] + ("." + ds[1:] if nd > 1 else "")
        return f"{neg}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{ds}"
    if dp >= nd:
        return f"{neg}{ds}{'0' * (dp - nd)}"
    return f"{neg}{ds[:dp]}.{ds[dp:]}"


@dataclass(frozen=True)
class Rule:
    name: str
    group: str
    expr: str
    node: S.Node
    for_ms: int
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    interval_ms: int

    def render_annotations(self, sample_labels: dict[str, str], value: float) -> dict[str, str]:
        """Each annotation template with ``{{ $value }}`` and ``{{ $labels.NAME }}`` expanded (an unknown label
        renders ``<no value>``, any other action is left as written)."""
        out = {}
        vs = None
        for k, tmpl in self.annotations:
            parts = template_parts(tmpl)
            buf = []
            for kind, x in parts:
                if kind == 0:
                    buf.append(x)
                elif kind == 1:
                    if vs is None:
                        vs = go_float_cached(value)
                    buf.append(vs)
                else:
                    buf.append(sample_labels.get(x, "<no value>"))
            out[k] = "".join(buf)
        return out


#: templates split at their actions, by template text: (0, literal) | (1, None): $value | (2, label name)
_PARTS: dict[str, tuple] = {}


def template_parts(tmpl: str) -> tuple:
    """``_template_parts(tmpl)``, cached by template text (a pack's templates: bounded by the packs loaded)."""
    parts = _PARTS.get(tmpl)
    if parts is None:
        parts = _PARTS[tmpl] = _template_parts(tmpl)
    return parts


def _template_parts(tmpl: str) -> tuple:
    """A template as the pieces ``_TEMPLATE_ACTION.sub`` would produce (the same matches, left to right)."""
    parts: list[tuple[int, str | None]] = []
    pos = 0
    for m in _TEMPLATE_ACTION.finditer(tmpl):
        parts.append((0, tmpl[pos : m.start()]))
        act = m.group(1)
        if act == "$value":
            parts.append((1, None))
        else:
            lm = _LABEL_REF.match(act)
            parts.append((2, lm.group(1)) if lm else (0, m.group(0)))
        pos = m.end()
    parts.append((0, tmpl[pos:]))
    return tuple(p for p in parts if p != (0, ""))


_GO_FLOAT: dict[float, str] = {}
GO_FLOAT_MAX = 10_000  #: values kept before the cache starts again


def go_float_cached(v: float) -> str:
    """``go_float`` through a cache of non-zero finite values (zero is left out: ``0.0 == -0.0`` as keys)."""
    s = _GO_FLOAT.get(v) if v else None
    if s is None:
        s = go_float(v)
        if v and v == v and not math.isinf(v):
            if len(_GO_FLOAT) > GO_FLOAT_MAX:
                _GO_FLOAT.clear()
            _GO_FLOAT[v] = s
    return s


@dataclass(frozen=True)
class RulePack:
    version: str
    digest: str  #: sha256 of the YAML text
    rules: tuple[Rule, ...]
    path: str
    text: str

    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    @property
    def interval_ms(self) -> int:
        return min((r.interval_ms for r in self.rules), default=15000)


def _check_template(tmpl: str, where: str) -> None:
    for m in _TEMPLATE_ACTION.finditer(tmpl):
        act = m.group(1)
        if act != "$value" and not _LABEL_REF.match(act):
            raise ValueError(f"{where}: unsupported template action {{{{ {act} }}}} (use $value or $labels.NAME)")


def load_rule_pack(path: str | Path | None = None, default_interval: str = "15s") -> RulePack:
    """Load and compile a Prometheus rule file (the frozen pack by default). Bad rules raise ValueError."""
    p = Path(path) if path is not None else DEFAULT_PACK
    text = p.read_text()
    m = _VERSION.search(text)
    version = m.group(1) if m else "unversioned"
    doc = yaml.safe_load(text) or {}
    rules = []
    seen_groups = set()
    for g in doc.get("groups", []):
        gname = g["name"]
        if gname in seen_groups:
            raise ValueError(f"duplicate group {gname!r}")
        seen_groups.add(gname)
        interval = parse_duration_ms(g.get("interval", default_interval))
        for r in g.get("rules", []):
            if "alert" not in r:
                raise ValueError(f"{gname}: only alerting rules are supported (got {sorted(r)})")
            where = f"{gname}/{r['alert']}"
            try:
                node = S.compile_expr(r["expr"])
            except QueryError as err:
                raise ValueError(f"{where}: {err.message}") from None
            if S.kind_of(node) != "v":
                raise ValueError(f"{where}: an alert expression must be an instant vector")
            ann = {str(k): str(v) for k, v in (r.get("annotations") or {}).items()}
            for k, v in ann.items():
                _check_template(v, where)
            labels = {str(k): str(v) for k, v in (r.get("labels") or {}).items()}
            for k, v in labels.items():
                if "{{" in v:
                    raise ValueError(f"{where}: templated rule labels are not supported")
            rules.append(Rule(r["alert"], gname, r["expr"], node, parse_duration_ms(r.get("for", "0s")),
                              tuple(sorted(labels.items())), tuple(sorted(ann.items())), interval))
    return RulePack(version, hashlib.sha256(text.encode()).hexdigest(), tuple(rules), str(p), text)

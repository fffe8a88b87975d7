"""Alert state over the rule pack, with Prometheus's semantics.

Every rule is evaluated at every group-interval tick up to the requested time; all ticks not yet
evaluated are computed in one vectorised pass per rule (equal sub-expressions shared between rules).
A label set is pending from the first tick its expression returns it, firing once it has been
active for the rule's ``for`` duration, and resolved when it disappears after firing (a pending
alert that disappears is dropped: transition ``inactive``). One alert per (rule, label set), with a
stable fingerprint.

>>> from sremarathon_env.telemetry.store import MetricStore
>>> import numpy as np
>>> store = MetricStore(step_s=15.0)
>>> fam = store.family("kube_node_status_condition", ("node", "condition", "status"))
>>> rows = fam.rows([("n1", "Ready", "true")])
>>> for k in range(20):
...     store.write(fam, rows, k, np.array([0.0 if 4 <= k < 12 else 1.0]))
>>> eng = AlertEngine(load_rule_pack(), store)
>>> [(t.t, t.state) for t in eng.evaluate_until(285.0) if t.alertname == "NodeNotReady"]
[(60.0, 'pending'), (120.0, 'firing'), (180.0, 'resolved')]
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from ..telemetry.store import MetricStore
from .engine import PromQLEngine
from .limits import Limits, QueryError
from .plan import PackPlan
from .rulepack import RulePack, go_float_cached, load_rule_pack, template_parts
from .values import Vec


def fingerprint(labels: dict[str, str]) -> str:
    """Stable hex digest of the sorted label set (alertname included)."""
    h = hashlib.sha256()
    for k in sorted(labels):
        h.update(k.encode())
        h.update(b"\xff")
        h.update(labels[k].encode())
        h.update(b"\xfe")
    return h.hexdigest()[:16]


#: the env's JSON form (``sremarathon_env.observation.dumps``): sorted keys, compact, ASCII, anything else as a string
_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
_DICT_KEYS = ("alertname", "labels", "annotations", "fingerprint", "state", "value", "active_at", "first_pending_at",
              "first_firing_at", "firing_since", "resolved_at", "episodes")


_frepr = float.__repr__


def _num(x: float | int | None) -> str:
    """A number as ``json`` writes it (``NaN``/``Infinity`` included), None as ``null`` (a finite float first: most
    calls).

    >>> [_num(x) for x in (1.5, -0.0, 1e300, 3, None, float("nan"), float("inf"), -float("inf"))]
    ['1.5', '-0.0', '1e+300', '3', 'null', 'NaN', 'Infinity', '-Infinity']
    """
    if type(x) is float and x - x == 0.0:
        return _frepr(x)
    if x is None:
        return "null"
    if isinstance(x, int):
        return int.__repr__(x)
    if x != x:
        return "NaN"
    if x == math.inf:
        return "Infinity"
    if x == -math.inf:
        return "-Infinity"
    return float.__repr__(x)


@dataclass(frozen=True)
class AlertTransition:
    t: float
    alertname: str
    labels: dict
    fingerprint: str
    state: str  # pending | firing | resolved | inactive (a pending alert that cleared)
    value: float

    def to_dict(self) -> dict:
        return {"t": self.t, "alertname": self.alertname, "labels": dict(sorted(self.labels.items())),
                "fingerprint": self.fingerprint, "state": self.state, "value": self.value}


_new_object = object.__new__


def _transition(t: float, alertname: str, labels: dict, fingerprint: str, state: str, value: float) -> AlertTransition:
    """``AlertTransition(t, alertname, labels, fingerprint, state, value)`` without the frozen dataclass's
    ``__init__`` (one ``object.__setattr__`` per field): the same fields in the instance dict.

    >>> _transition(1.0, "X", {"a": "1"}, "f", "firing", 2.5) == AlertTransition(1.0, "X", {"a": "1"}, "f", "firing", 2.5)
    True
    """
    tr = _new_object(AlertTransition)
    tr.__dict__.update(t=t, alertname=alertname, labels=labels, fingerprint=fingerprint, state=state, value=value)
    return tr


@dataclass
class _Alert:
    rule: int
    labels: dict
    fingerprint: str
    state: str
    active_at_ms: int
    value: float
    annotations: dict
    first_pending_ms: int
    first_firing_ms: int | None = None
    #: start of the latest firing interval (kept after it resolves)
    firing_ms: int | None = None
    resolved_ms: int | None = None
    episodes: int = 1
    sample_labels: dict = field(default_factory=dict)
    #: (rule, sample labels, value) of the latest evaluation: annotations are rendered when read
    ann_src: tuple | None = None
    #: bumped at every change of the alert (`AlertEngine.history_entries` readers cache by it)
    rev: int = 0
    #: `to_dict` of revision ``_d_rev`` (shared with internal readers, never handed out to callers)
    _d: dict | None = field(default=None, repr=False, compare=False)
    _d_rev: int = field(default=-1, repr=False, compare=False)
    #: the ``ann_src`` the current annotations were rendered from
    _ann_from: tuple | None = field(default=None, repr=False, compare=False)
    #: `json_text` of revision ``_j_rev``, and the texts of the parts that never change (name, fingerprint, first
    #: pending time, labels: with their neighbouring keys)
    _j: str | None = field(default=None, repr=False, compare=False)
    _j_rev: int = field(default=-1, repr=False, compare=False)
    _j_const: tuple | None = field(default=None, repr=False, compare=False)
    #: (state key, head, mid) of `_state_parts`; (rule, sample labels, `_ann_pieces`) of the annotation source
    _j_state: tuple | None = field(default=None, repr=False, compare=False)
    _j_ann: tuple | None = field(default=None, repr=False, compare=False)
    #: the dict `annotations_now` rendered last (``annotations`` is that render while it is this object)
    _ann_obj: dict | None = field(default=None, repr=False, compare=False)
    #: the engine's key of the alert, (rule index, fingerprint): the one tuple its change-log entries and its active
    #: entry hold (`AlertEngine._step_rule`; None for an alert made elsewhere)
    _key: tuple | None = field(default=None, repr=False, compare=False)

    def json_text(self) -> str:
        """``dumps(self.to_dict())`` (compact sorted ASCII JSON), cached until the alert changes. The parts that
        never change (name, labels, fingerprint) are encoded once, those that change only with the state (times,
        episodes) once per state; the annotations come from their source's encoded pieces (`_ann_pieces`: the
        template text with the labels filled in, escaped once, joined at the value's Go text) without rendering
        the dict, which stays pending for the dict readers."""
        if self._j_rev != self.rev:
            if self._j_const is None:
                # the constant texts between the state's values (`_state_parts`): after active_at, after episodes,
                # after first_firing_at
                name, fp = self.labels["alertname"], self.fingerprint
                self._j_const = (
                    ',"alertname":' + (_esc(name) if type(name) is str else _JSON.encode(name)) + ',"annotations":',
                    ',"fingerprint":' + (_esc(fp) if type(fp) is str else _JSON.encode(fp)) + ',"firing_since":',
                    ',"first_pending_at":' + _ms_text(self.first_pending_ms) + ',"labels":' + _labels_text(self.labels)
                    + ',"resolved_at":')
            skey = (self.state, self.active_at_ms, self.episodes, self.firing_ms, self.first_firing_ms,
                    self.resolved_ms)
            if self._j_state is None or self._j_state[0] != skey:
                self._j_state = (skey,) + self._state_parts()
            _, head, mid = self._j_state
            ann = None
            src = self.ann_src
            if src is None and self.annotations is self._ann_obj:
                src = self._ann_from   # rendered from it (not set from outside)
            if src is not None:
                ap = self._j_ann
                if ap is None or ap[0] is not src[0] or (ap[1] is not src[1] and ap[1] != src[1]):
                    ap = self._j_ann = (src[0], src[1], _ann_pieces_cached(src[0], src[1]))
                pieces = ap[2]
                if pieces is not None:
                    ann = pieces[0] if len(pieces) == 1 else go_float_cached(src[2]).join(pieces)
            if ann is None:
                ann = _encode_str_dict(self.annotations_now())
            self._j = "".join((head, ann, mid, _num(self.value), "}"))
            self._j_rev = self.rev
        return self._j

    def _state_parts(self) -> tuple[str, str]:
        """The text before the annotations and between them and the value (keys in sorted order,
        `_SORTED_KEYS`, each value as ``_JSON`` encodes it)."""
        after_active, after_episodes, after_first_firing = self._j_const
        state = self.state if self.state != "inactive" else "resolved"
        head = '{"active_at":' + _ms_text(self.active_at_ms) + after_active
        mid = "".join((
            ',"episodes":', _num(self.episodes), after_episodes,   # fingerprint, firing_since's key
            _ms_text(self.firing_ms),
            ',"first_firing_at":', _ms_text(self.first_firing_ms), after_first_firing,   # first_pending_at, labels
            _ms_text(self.resolved_ms),
            ',"state":', _STATE_TEXT.get(state) or _JSON.encode(state),
            ',"value":'))
        return head, mid

    def set_value(self, rule, v: float) -> bool:
        """The latest evaluation's value (annotations follow it); the revision moves only when the alert's
        dict would change: another value (``-0.0`` and ``0.0`` differ in JSON, NaN never equals) or another
        annotation source."""
        src = self.ann_src if self.ann_src is not None else self._ann_from
        if (v == self.value and (v != 0.0 or math.copysign(1.0, v) == math.copysign(1.0, self.value))
                and src is not None and src[0] is rule and src[1] is self.sample_labels):
            return False
        self.value = v
        self.ann_src = (rule, self.sample_labels, v)
        self.rev += 1
        return True

    def annotations_now(self) -> dict:
        if self.ann_src is not None:
            rule, sample, value = self.ann_src
            self.annotations = self._ann_obj = rule.render_annotations(sample, value)
            self._ann_from = self.ann_src
            self.ann_src = None
        return self.annotations

    def shared_dict(self) -> dict:
        """`to_dict`, cached until the alert changes (``rev``); callers must not mutate it."""
        if self._d_rev != self.rev:
            self._d = self.to_dict()
            self._d_rev = self.rev
        return self._d

    def to_dict(self) -> dict:
        return {
            "alertname": self.labels["alertname"],
            "labels": dict(sorted(self.labels.items())),
            "annotations": dict(sorted(self.annotations_now().items())),
            "fingerprint": self.fingerprint,
            "state": self.state if self.state != "inactive" else "resolved",
            "value": self.value,
            "active_at": self.active_at_ms / 1000,
            "first_pending_at": self.first_pending_ms / 1000,
            "first_firing_at": None if self.first_firing_ms is None else self.first_firing_ms / 1000,
            "firing_since": None if self.firing_ms is None else self.firing_ms / 1000,
            "resolved_at": None if self.resolved_ms is None else self.resolved_ms / 1000,
            "episodes": self.episodes,
        }


#: texts of `_ms_text` by their (exact) input; starts again past its bound
_MS_TEXT: dict[int, str] = {}
TEXT_CACHE_MAX = 10_000


def _ms_text(ms: int | None) -> str:
    """``_num(ms / 1000)`` (``null`` for None); cached for int milliseconds (evaluation ticks repeat)."""
    if ms is None:
        return "null"
    s = _MS_TEXT.get(ms) if type(ms) is int else None
    if s is None:
        s = _num(ms / 1000)
        if type(ms) is int:
            if len(_MS_TEXT) > TEXT_CACHE_MAX:
                _MS_TEXT.clear()
            _MS_TEXT[ms] = s
    return s


_SORTED_KEYS = tuple(sorted(_DICT_KEYS))
assert _SORTED_KEYS == ("active_at", "alertname", "annotations", "episodes", "fingerprint", "firing_since",
                        "first_firing_at", "first_pending_at", "labels", "resolved_at", "state", "value")  # json_text's order
_STATE_TEXT = {st: _JSON.encode(st) for st in ("pending", "firing", "resolved")}
_esc = json.encoder.encode_basestring_ascii  # what ``_JSON`` (ensure_ascii) writes for a string


def _ann_pieces(rule, sample: dict) -> tuple[str, ...] | None:
    """``_encode_str_dict(rule.render_annotations(sample, value))`` for every value, as pieces to join at the
    value's Go text (``go_float(value)``): one piece when no template shows ``$value``. The templates are
    expanded as `Rule.render_annotations` does (its cached parts; an unknown label gives ``<no value>``); the JSON
    escape works character by character and the value's text (digits, sign, ``.eE+-``, ``NaN``, ``Inf``) needs none,
    so escaping the pieces apart gives the escaped whole. None (the caller renders) for anything but str keys and
    label values.

    >>> rule = next(r for r in load_rule_pack().rules if any("$value" in t for _, t in r.annotations))
    >>> sample = {"service": "cart\u00e9", "pod": 'p"1'}
    >>> go_float_cached(12.5).join(_ann_pieces(rule, sample)) == _encode_str_dict(rule.render_annotations(sample, 12.5))
    True
    """
    texts: dict = {}
    for k, tmpl in rule.annotations:
        parts = template_parts(tmpl)
        segs, buf = [], []
        for kind, x in parts:
            if kind == 0:
                buf.append(x)
            elif kind == 1:
                segs.append("".join(buf))
                buf = []
            else:
                lv = sample.get(x, "<no value>")
                if type(lv) is not str:
                    return None
                buf.append(lv)
        segs.append("".join(buf))
        texts[k] = segs
    for k in texts:
        if type(k) is not str:
            return None
    pieces, cur = [], ["{"]
    for i, (k, segs) in enumerate(sorted(texts.items())):
        cur.append(("," if i else "") + _esc(k) + ':"')
        for j, seg in enumerate(segs):
            if j:
                pieces.append("".join(cur))
                cur = []
            cur.append(_esc(seg)[1:-1])
        cur.append('"')
    cur.append("}")
    pieces.append("".join(cur))
    return tuple(pieces)


#: `_encode_str_dict` of alert label sets and `_ann_pieces` of (rule, sample labels), by the items in their order
#: (equal items, equal text; the rule by identity, kept in the entry so that its id is not reused); the label sets
#: of one process's alerts recur across episodes. Each starts again past `TEXT_CACHE_MAX` entries.
_LABELS_TEXT: dict[tuple, str] = {}
_ANN_PIECES: dict[tuple, tuple] = {}


def _labels_text(labels: dict) -> str:
    """``_encode_str_dict(labels)``, cached by the items (the encoder for anything unhashable).

    >>> _labels_text({"b": "2", "a": "x"}) == _encode_str_dict({"b": "2", "a": "x"}) == '{"a":"x","b":"2"}'
    True
    """
    key = tuple(labels.items())
    try:
        text = _LABELS_TEXT.get(key)
    except TypeError:   # (an unhashable value: not a label set of str)
        return _encode_str_dict(labels)
    if text is None:
        text = _encode_str_dict(labels)
        if len(_LABELS_TEXT) >= TEXT_CACHE_MAX:
            _LABELS_TEXT.clear()
        _LABELS_TEXT[key] = text
    return text


def _ann_pieces_cached(rule, sample: dict) -> tuple[str, ...] | None:
    """``_ann_pieces(rule, sample)``, cached by (the rule's identity, the sample's items).

    >>> rule = load_rule_pack().rules[0]
    >>> _ann_pieces_cached(rule, {"pod": "p"}) == _ann_pieces(rule, {"pod": "p"})
    True
    """
    key = (id(rule), tuple(sample.items()))
    try:
        hit = _ANN_PIECES.get(key)
    except TypeError:   # (an unhashable value)
        return _ann_pieces(rule, sample)
    if hit is not None and hit[0] is rule:
        return hit[1]
    pieces = _ann_pieces(rule, sample)
    if len(_ANN_PIECES) >= TEXT_CACHE_MAX:
        _ANN_PIECES.clear()
    _ANN_PIECES[key] = (rule, pieces)
    return pieces


def _encode_str_dict(d: dict) -> str:
    """``_JSON.encode(d)`` for a dict of strings to strings (sorted keys, compact, ASCII), without the encoder's
    per-call set-up; anything else goes through the encoder."""
    items = sorted(d.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:
            return _JSON.encode(d)
    return "{" + ",".join([_esc(k) + ":" + _esc(v) for k, v in items]) + "}"


_count_nonzero = np.count_nonzero
_ORDER = itemgetter(0, 1, 2)   # (time, rule, sequence) of a transition in `AlertEngine.evaluate_until`'s list

#: (fingerprint, alert labels, sample labels) of a result row, by (rule name, rule labels, the row's label set),
#: shared by the engines of a process (each RL episode has a new engine that meets the same label sets); the dicts
#: are never changed (alerts and transitions take copies); starts again past its bound
_ROW_INFO: dict[tuple, tuple[str, dict, dict]] = {}
ROW_INFO_MAX = 16_384


class AlertEngine:
    """Evaluates a rule pack over a store; keeps alert state and the cumulative history."""

    #: alerts present at every new tick and not due to fire only take the last value (no tick loop);
    #: the tests turn it off on a reference engine to check that it changes nothing
    steady_fast_path = True

    def __init__(self, rule_pack: RulePack | None, store: MetricStore, limits: Limits | None = None):
        self.pack = rule_pack or load_rule_pack()
        self.store = store
        self.promql = PromQLEngine(store, limits or Limits(max_series=10**7, max_points=10**9),
                                   default_step_s=self.pack.interval_ms / 1000)
        self.interval_ms = self.pack.interval_ms
        self._next_tick = 0  # index of the next evaluation tick (time = k * interval)
        self._active: dict[tuple[int, str], _Alert] = {}
        self._history: dict[tuple[int, str], _Alert] = {}
        self._order: list[tuple[int, str]] = []
        self._sorted_keys: list[tuple[int, str]] = []
        #: key of every alert creation and change, in order (`changes_since` readers keep a position in it)
        self._changelog: list[tuple[int, str]] = []
        self._sort_tuples: list[tuple[int, int, str]] = []   # (first pending ms, rule, fp) of _sorted_keys
        self.errors: list[dict] = []
        # the compiled plan needs the default (generous) limits: with custom limits every rule goes
        # through the generic evaluator, which enforces them per query
        self._plan = PackPlan(self.promql, self.pack.rules) if limits is None else None
        self._n_active = [0] * len(self.pack.rules)
        self._active_fps: list[set[str]] = [set() for _ in self.pack.rules]  # fingerprints of each rule's active alerts
        #: per rule: (a copy of the label list last stepped, the `_ROW_INFO` entry of each of its rows once read)
        self._row_hits: list[tuple[list, list] | None] = [None] * len(self.pack.rules)
        #: per rule: what `_step_rule` found from its last presence matrix (see there), or None
        self._present: list[tuple | None] = [None] * len(self.pack.rules)

    def release(self) -> None:
        """The engine's owner is done with it (its marathon ended): the compiled plan's tape and program arena give
        their buffers to the next engines of this process (`Tape.release`, `program.Arena.release`). Nothing else
        changes; a later evaluation still gives the same results (the tape starts again from the first column)."""
        tape = getattr(self._plan, "tape", None)
        if tape is not None:
            tape.release()
        arena = getattr(self._plan, "_arena", None)
        if arena is not None:
            arena.release()

    @property
    def evaluated_until(self) -> float | None:
        return None if self._next_tick == 0 else (self._next_tick - 1) * self.interval_ms / 1000

    def evaluate_until(self, t: float) -> list[AlertTransition]:
        """Evaluate every rule at each not yet evaluated tick <= t; returns the transitions in time order."""
        last = int(np.floor(round(float(t) * 1000) / self.interval_ms))
        if last < self._next_tick:
            return []
        times = self.interval_ms * np.arange(self._next_tick, last + 1, dtype=np.int64)
        self._next_tick = last + 1
        out: list[tuple[int, int, int, AlertTransition]] = []
        if self._plan is not None and self.store.n_ticks > 0:
            results = self._plan.evaluate(times)
        else:
            ctx = self.promql.new_context(times, self.interval_ms)
            results = []
            for rule in self.pack.rules:
                try:
                    results.append(self.promql.evaluate(rule.node, times, ctx=ctx))
                except QueryError as err:
                    results.append(err)
        times_l = times.tolist()
        rules = self.pack.rules
        n_active = self._n_active
        step = self._step_rule
        for ri, vec in enumerate(results[:len(rules)]):
            if type(vec) is not Vec and isinstance(vec, QueryError):
                self.errors.append({"t": times[-1] / 1000, "alertname": rules[ri].name, "error": vec.message})
                vec = Vec.empty(len(times))
            # (nothing present and nothing active: no transition, no value to take; ``_count_nonzero``: ``p.any()``)
            if n_active[ri] or (vec.labels and _count_nonzero(vec.p)):
                step(ri, rules[ri], vec, times, out, times_l)
        if not out:
            return []
        out.sort(key=_ORDER)
        return [x[3] for x in out]

    def _step_rule(self, ri, rule, vec: Vec, times: np.ndarray, out: list, times_l: list | None = None) -> None:
        labels = vec.labels
        n = len(labels)
        # label sets of present rows -> (fingerprint, labels, sample): by (rule name, rule labels, label set) for the
        # process (`_ROW_INFO`), and per row while the rule's label list is the same (equal to the one the row
        # entries were taken for)
        rows = self._row_hits[ri]
        if rows is None or rows[0] != labels:
            rows = self._row_hits[ri] = (list(labels), [None] * n)
        if n:
            # the rows present at some tick, and their presence and values as Python lists (the same bools and
            # floats, read per tick): the whole arrays when every row is present, else the present rows' only. What
            # follows from the presence alone (present rows, their presence lists, row entries by fingerprint, the
            # fingerprints sorted) is kept per rule with the presence's bytes and the row entries' list, and taken
            # again for an equal presence over the same label list (steady alerts: most calls)
            p = vec.p
            pkey = p.tobytes()
            pc = self._present[ri]
            if pc is not None and pc[0] is rows and pc[1] == pkey and pc[2] == p.shape:
                present_rows, pres_l, rows_by_fp, phits, fps_present = pc[3:]
                v = vec.v
                vals_l = v.tolist() if len(present_rows) == n else [v[r].tolist() for r in present_rows]
            else:
                p_all = p.tolist()
                present_rows = [r for r, row in enumerate(p_all) if True in row]
                if len(present_rows) == n:
                    pres_l, vals_l = p_all, vec.v.tolist()
                elif present_rows:
                    pres_l = [p_all[r] for r in present_rows]
                    v = vec.v
                    vals_l = [v[r].tolist() for r in present_rows]   # (row by row: cheaper than an indexed copy)
                else:
                    pres_l = vals_l = []
                rows_by_fp = {}   # fingerprint -> index in present_rows (the last row with it)
                phits = []   # the `_ROW_INFO` entry (fingerprint, labels, sample) of each present row, in that order
                hits = rows[1]
                for j, r in enumerate(present_rows):
                    hit = hits[r]
                    if hit is None:
                        ck = (rule.name, rule.labels, labels[r])
                        hit = _ROW_INFO.get(ck)
                        if hit is None:
                            sample = dict(labels[r])
                            lb = {k: v for k, v in sample.items() if k != "__name__"}
                            lb.update(dict(rule.labels))
                            lb["alertname"] = rule.name
                            hit = (fingerprint(lb), lb, sample)
                            if len(_ROW_INFO) >= ROW_INFO_MAX:
                                _ROW_INFO.clear()
                            _ROW_INFO[ck] = hit
                        hits[r] = hit
                    rows_by_fp[hit[0]] = j
                    phits.append(hit)
                fps_present = sorted(rows_by_fp)
                self._present[ri] = (rows, pkey, p.shape, present_rows, pres_l, rows_by_fp, phits, fps_present)
        else:
            present_rows = pres_l = vals_l = phits = fps_present = []
            rows_by_fp = {}
        mine = self._active_fps[ri]
        # (every active alert's label set present: the present ones, else with the active ones too)
        fps = fps_present if not mine or rows_by_fp.keys() >= mine else sorted(mine.union(rows_by_fp))
        if not fps:
            return
        if times_l is None:
            times_l = times.tolist()
        last_ms = times_l[-1]
        for_ms = rule.for_ms
        steady = self.steady_fast_path
        active = self._active
        changelog = self._changelog
        seq = 0
        for fp in fps:
            j = rows_by_fp.get(fp)
            key = (ri, fp)
            a = active.get(key)   # (an active alert is never ``inactive``: it leaves ``_active`` then)
            if j is None:   # absent at every tick: an active alert resolves at the first
                if a is not None:
                    t_ms = times_l[0]
                    self._deactivate(a, key, ri, rule, fp, t_ms, out, seq)
                    seq += 1
                    changelog.append(a._key or key)
                continue
            pres = pres_l[j]
            vals = vals_l[j]
            if (steady and a is not None and False not in pres
                    and (a.state == "firing" or last_ms - a.active_at_ms < for_ms)):
                # present at every tick, no transition: only the value moves (to the last tick's)
                if a.set_value(rule, vals[-1]):
                    changelog.append(a._key or key)
                continue
            # tick by tick (``a``: the alert while active, None while not). The value of a present tick is taken
            # when it matters (`set_value` of the latest present tick before a transition and at the end: the
            # alert then holds what setting it at every tick gives; a value that went back to the one held does
            # not count as a change). The key goes into the change log once, after its ticks, if anything of it
            # changed (a reader takes the log's keys once each, between calls)
            changed = False
            due = -1   # the present tick whose value the active alert is still to take (-1: none)
            # (the alert's own key tuple where it has one: the change log and the active set hold that one, not
            # this call's)
            if a is not None and a._key is not None:
                key = a._key
            for k, t_ms in enumerate(times_l):
                if pres[k]:
                    if a is not None:
                        due = k
                    else:
                        v = vals[k]
                        _, lb, sample = phits[j]
                        h = self._history.get(key)
                        if h is None:
                            a = _Alert(ri, dict(lb), fp, "pending", t_ms, v, {}, t_ms, sample_labels=dict(sample),
                                       ann_src=(rule, dict(sample), v), _key=key)
                            self._history[key] = a
                            self._order.append(key)
                        else:
                            a = h
                            if h._key is not None:
                                key = h._key
                            a.state, a.active_at_ms, a.value = "pending", t_ms, v
                            a.ann_src = (rule, dict(sample), v)
                            a.episodes += 1
                            a.rev += 1
                        changed = True
                        active[key] = a
                        mine.add(fp)
                        self._n_active[ri] += 1
                        out.append((t_ms, ri, seq, _transition(t_ms / 1000, rule.name, dict(lb), fp, "pending", v)))
                        seq += 1
                    if a.state == "pending" and t_ms - a.active_at_ms >= for_ms:
                        if due >= 0:
                            a.set_value(rule, vals[due])
                            due = -1
                        a.state = "firing"
                        a.rev += 1
                        changed = True
                        a.firing_ms = t_ms
                        if a.first_firing_ms is None:
                            a.first_firing_ms = t_ms
                        out.append((t_ms, ri, seq, _transition(t_ms / 1000, rule.name, dict(a.labels), fp, "firing",
                                                               a.value)))
                        seq += 1
                elif a is not None:
                    if due >= 0:
                        a.set_value(rule, vals[due])
                        due = -1
                    self._deactivate(a, key, ri, rule, fp, t_ms, out, seq)
                    seq += 1
                    changed = True
                    a = None
            if due >= 0 and a.set_value(rule, vals[due]):
                changed = True
            if changed:
                changelog.append(key)

    def _deactivate(self, a: _Alert, key: tuple, ri: int, rule, fp: str, t_ms: int, out: list, seq: int) -> None:
        """``a`` (active) is absent at ``t_ms``: inactive (``resolved`` if it was firing), out of the active set;
        its transition goes to ``out`` with ``seq``."""
        was = a.state
        a.state = "inactive"
        a.rev += 1
        if was == "firing":
            a.resolved_ms = t_ms
        out.append((t_ms, ri, seq, _transition(t_ms / 1000, rule.name, dict(a.labels), fp,
                                               "resolved" if was == "firing" else "inactive", a.value)))
        del self._active[key]
        self._active_fps[ri].discard(fp)
        self._n_active[ri] -= 1

    def active(self) -> list[dict]:
        """Alerts now pending or firing, sorted by (alertname, fingerprint)."""
        out = []
        for a in self._active.values():
            d = a.shared_dict()
            out.append({**d, "labels": dict(d["labels"]), "annotations": dict(d["annotations"])})
        return sorted(out, key=lambda d: (d["alertname"], d["fingerprint"]))

    def firing(self) -> list[dict]:
        return [a for a in self.active() if a["state"] == "firing"]

    def _history_keys(self) -> list[tuple[int, str]]:
        """History keys by (first pending time, rule order, fingerprint); re-sorted only when alerts were added
        (first pending times never change)."""
        n = len(self._sorted_keys)
        if n != len(self._order):
            h = self._history
            for k in self._order[n:]:
                sk = (h[k].first_pending_ms, k[0], k[1])
                i = bisect.bisect_right(self._sort_tuples, sk)
                self._sort_tuples.insert(i, sk)
                self._sorted_keys.insert(i, k)
        return self._sorted_keys

    def history(self) -> list[dict]:
        """Every alert ever raised (pending at least once), by first pending time, rule order, fingerprint.
        Fresh dicts (the caller may change them); built from per-alert caches kept until an alert changes."""
        h = self._history
        out = []
        for k in self._history_keys():
            d = h[k].shared_dict()
            out.append({**d, "labels": dict(d["labels"]), "annotations": dict(d["annotations"])})
        return out

    def history_keys(self) -> list[tuple[int, str]]:
        """Keys of `history`'s alerts in its order. SHARED and updated in place: read-only by contract."""
        return self._history_keys()

    def changes_since(self, pos: int) -> tuple[int, list[tuple[tuple[int, str], dict]]]:
        """(new position, [(key, dict)] of every alert created or changed since position ``pos`` of the change
        log, each once, in first-change order); start at 0. The dicts are SHARED, read-only by contract.

        >>> from sremarathon_env.telemetry.store import MetricStore
        >>> eng = AlertEngine(load_rule_pack(), MetricStore(step_s=15.0))
        >>> eng.changes_since(0)
        (0, [])
        """
        log = self._changelog
        h = self._history
        return len(log), [(k, h[k].shared_dict()) for k in dict.fromkeys(log[pos:])]

    def changed_alerts_since(self, pos: int) -> tuple[int, list[tuple[tuple[int, str], "_Alert"]]]:
        """As `changes_since`, with the live alert objects instead of their dicts (nothing rendered; a reader
        takes ``labels``, ``fingerprint``, ``state``, ``active_at_ms`` or calls ``shared_dict()`` when it needs
        the dict). The objects are SHARED and change in place: read-only by contract."""
        log = self._changelog
        h = self._history
        return len(log), [(k, h[k]) for k in dict.fromkeys(log[pos:])]

    def changed_texts_since(self, pos: int, lazy: bool = False) -> tuple[int, list[tuple[tuple[int, str], str, str]]]:
        """As `changes_since`, with (key, state as in the dict, ``json_text``) instead of the dicts. ``lazy``: a
        resolved alert's text is left unbuilt, given as the alert's bound ``json_text`` (which gives that text for
        as long as the alert does not change: a reader that takes every change before it reads, such as the env's
        `observation.AlertRows`, may build it only when it shows it)."""
        log = self._changelog
        out = []
        h = self._history
        for k in dict.fromkeys(log[pos:]):
            a = h[k]
            st = a.state
            if st == "pending" or st == "firing":
                out.append((k, st, a.json_text()))
            else:
                out.append((k, st if st != "inactive" else "resolved", a.json_text if lazy else a.json_text()))
        return len(log), out

    def history_entries(self) -> list[tuple[tuple[int, str], int, dict]]:
        """(key, revision, dict) of every alert of `history`, in its order, for internal readers that cache
        per alert: the revision changes whenever the alert does; the dicts are SHARED, read-only by contract."""
        h = self._history
        return [(k, h[k].rev, h[k].shared_dict()) for k in self._history_keys()]

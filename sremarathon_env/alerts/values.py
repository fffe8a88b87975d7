"""Intermediate values of the evaluator, each covering many evaluation times at once.

An instant vector over ``T`` evaluation times is ``Vec``: one row per label set, a value matrix
``(n, T)`` and a presence mask (a sample may be present with the value NaN, as in Prometheus). A
range vector is ``Win``: samples on a regular grid plus, for each evaluation time, the inclusive grid
index range that its window covers.

>>> v = Vec([(("a", "1"),)], np.array([[1.0, 2.0]]), np.array([[True, False]]))
>>> fmt_value(0.1 + 0.2), fmt_value(float("inf")), fmt_value(1e21)
('0.30000000000000004', '+Inf', '1000000000000000000000')
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress

import numpy as np

from .limits import QueryError

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs, values non-empty


@dataclass
class Vec:
    labels: list[Labels]
    v: np.ndarray  # (n, T) float64
    p: np.ndarray  # (n, T) bool

    @staticmethod
    def empty(T: int) -> "Vec":
        return Vec([], np.zeros((0, T)), np.zeros((0, T), dtype=bool))

    def take(self, rows) -> "Vec":
        rows = np.asarray(rows, dtype=np.intp)
        return Vec([self.labels[i] for i in rows], self.v[rows], self.p[rows])


@dataclass
class Scal:
    v: np.ndarray  # (T,)


@dataclass
class StrVal:
    s: str


@dataclass
class Win:
    labels: list[Labels]
    v: np.ndarray  # (n, G) samples on the grid
    p: np.ndarray  # (n, G) presence
    gt: np.ndarray  # (G,) int64 sample times in ms
    lo: np.ndarray  # (T,) first grid index in the window (may be > hi: empty)
    hi: np.ndarray  # (T,) last grid index in the window
    range_ms: int
    offset_ms: int


#: memoised label work: the key of the one input list and its tag (``_key1``) or (tag, identities of the inputs)
#: -> result. ``_MEMO_HELD`` has the same keys and holds the input list (or the tuple of inputs) alive, so no
#: other object can have its identity while the entry exists: a key found means these very inputs. Entries are
#: long-lived: without an entry tuple and with integer keys, a new entry leaves no young object of its own
#: for the garbage collector to traverse.
_MEMO: dict = {}
_MEMO_HELD: dict = {}
#: the previous generation of ``_MEMO`` / ``_MEMO_HELD``: still answered (and moved back), dropped at the next turn
_MEMO_OLD: dict = {}
_MEMO_HELD_OLD: dict = {}
#: entries per generation (a no-op Online Boutique marathon adds about 3000; at most twice this many are kept)
MEMO_GENERATION = 4000

#: tag -> its number, for the integer keys of one-input entries (numbers are never reused or changed)
_TAG_NO: dict[tuple, int] = {}
#: tags that get a number (later tags keep tuple keys); a key is ``id(input) * TAGS_MAX + number``
TAGS_MAX = 4096


def _key1(tag: tuple, one: object) -> object:
    """The key of a memo entry with one input: an integer made of the input's identity and the tag's number.

    An integer key, unlike a (tag, identity) tuple, is not tracked by the garbage collector and does not keep
    the tag tuple alive (memo keys, entry tuples and their tags were ~7 % of the objects an Online Boutique
    marathon's young collections traversed). Two distinct (tag, input) pairs have distinct keys while the input
    lives (the entry holds it); tags past ``TAGS_MAX`` keep the (tag, identity) tuple, which never equals an
    integer.

    >>> a, b = [("x", "1")], [("x", "2")]
    >>> k = _key1(("doc-t1",), a)
    >>> k == _key1(("doc-t1",), a), k != _key1(("doc-t2",), a), k != _key1(("doc-t1",), b)
    (True, True, True)
    """
    n = _TAG_NO.get(tag)
    if n is None:
        if len(_TAG_NO) >= TAGS_MAX:
            return (tag, id(one))
        n = _TAG_NO[tag] = len(_TAG_NO)
    return id(one) * TAGS_MAX + n


def _memo_key(tag: tuple, inputs: tuple) -> object:
    """The key of a memo entry: ``_key1`` for one input (the usual case), (tag, identities) for several."""
    return _key1(tag, inputs[0]) if len(inputs) == 1 else (tag, tuple(map(id, inputs)))


def _memo_put(key: object, held: object, out: object) -> None:
    """Put an entry into the current generation, turning the generations over first where it is full (so that
    neither ever holds more than ``MEMO_GENERATION`` entries, whatever the nesting of memoised functions)."""
    global _MEMO, _MEMO_OLD, _MEMO_HELD, _MEMO_HELD_OLD
    if len(_MEMO) >= MEMO_GENERATION:
        _MEMO_OLD, _MEMO = _MEMO, {}
        _MEMO_HELD_OLD, _MEMO_HELD = _MEMO_HELD, {}
    _MEMO[key] = out
    _MEMO_HELD[key] = held


def _memo_lookup(key: object):
    """The result stored under ``key`` (moved to the current generation if found in the previous one), or
    ``_NONE``."""
    out = _MEMO.get(key, _NONE)
    if out is _NONE:
        out = _MEMO_OLD.get(key, _NONE)
        if out is not _NONE:
            _memo_put(key, _MEMO_HELD_OLD[key], out)
    return out


def memo(tag: tuple, inputs: tuple[list, ...], fn):
    """Cache a pure function of label lists by their identity (the lists are kept alive by the cache).

    Selectors return the same list object while their series do not change, so label work
    (grouping, matching signatures, label_replace) is done once per series set, not per evaluation.
    The cache has two generations of ``MEMO_GENERATION`` entries: an entry not used during a whole
    generation is dropped (label lists of finished episodes stop holding memory and stop costing the
    garbage collector), one in use stays.
    """
    # (_memo_key and _memo_lookup, inline: this runs for every node of every rebuild; most calls miss)
    if len(inputs) == 1:
        one = inputs[0]
        n = _TAG_NO.get(tag)
        key = id(one) * TAGS_MAX + n if n is not None else _key1(tag, one)
        held: object = one
    else:
        key = (tag, tuple(map(id, inputs)))
        held = inputs
    out = _MEMO.get(key, _NONE)
    if out is not _NONE:
        return out
    out = _MEMO_OLD.get(key, _NONE)
    if out is not _NONE:
        _memo_put(key, _MEMO_HELD_OLD[key], out)
        return out
    out = fn()
    _memo_put(key, held, out)
    return out


#: per-label-set results of pure label functions, by (function tag, label set); a label set recurs in
#: every series list it belongs to, so a list that grew by a few series costs only its new ones
_PER_LB: dict[tuple, dict] = {}


#: entries of one per-label-set cache before it starts again (label sets of pods of finished episodes go)
PER_LABEL_SET_MAX = 5000


def per_label_set(tag: tuple) -> dict:
    """The cache of one pure function of a single label set (emptied at ``PER_LABEL_SET_MAX`` entries)."""
    d = _PER_LB.get(tag)
    if d is None or len(d) > PER_LABEL_SET_MAX:
        d = _PER_LB[tag] = {}
    return d


_NONE = object()


def memo_get(tag: tuple, inputs: tuple[list, ...]):
    """The memoised result for these inputs, or ``_NONE``."""
    if len(inputs) == 1:   # (_key1, inline: the usual case)
        n = _TAG_NO.get(tag)
        key = id(inputs[0]) * TAGS_MAX + n if n is not None else _key1(tag, inputs[0])
    else:
        key = (tag, tuple(map(id, inputs)))
    out = _MEMO.get(key, _NONE)
    return out if out is not _NONE else _memo_lookup(key)


#: label lists made from an earlier list by removing and inserting items (a selector whose family gained
#: series, or lost rows left out): id -> (the list, the earlier list, ascending positions of the inserted
#: items in the list, which items of the earlier list were kept (None: all))
_GROWN: dict[int, tuple] = {}
#: records kept before they are all dropped (a record keeps two label lists alive; losing one only costs a
#: full redo of the label work of the next growth)
GROWN_MAX = 2000


def note_grown(new: list, old: list, pos: list[int], keep: list[bool] | None = None) -> None:
    """Record that ``new`` is ``old`` with items inserted at positions ``pos`` (ascending) of ``new``; with
    ``keep`` (one flag per item of ``old``), the items of ``old`` whose flag is False were removed first."""
    if len(_GROWN) > GROWN_MAX:
        _GROWN.clear()
    hit = _GROWN.get(id(old))
    if hit is not None and hit[0] is old:
        del _GROWN[id(old)]  # no chains of earlier lists kept alive
    _GROWN[id(new)] = (new, old, pos, keep)


def grown_from(labels: list) -> tuple[list, list[int]] | None:
    """(earlier list, inserted positions) where ``labels`` was recorded as grown from an earlier list (items
    inserted only)."""
    hit = _GROWN.get(id(labels))
    if hit is not None and hit[0] is labels and hit[3] is None:
        return hit[1], hit[2]
    return None


def edited_from(labels: list) -> tuple[list, list[int], list[bool] | None] | None:
    """(earlier list, inserted positions, kept items of the earlier list or None) where ``labels`` was recorded
    as made from an earlier list (see ``note_grown``)."""
    hit = _GROWN.get(id(labels))
    if hit is not None and hit[0] is labels:
        return hit[1], hit[2], hit[3]
    return None


def map_labels(memo_tag: tuple, tag: tuple, labels: list, fn) -> list:
    """``[fn(lb) for lb in labels]`` through the per-label-set cache ``tag``.

    Where ``labels`` was made from an earlier list whose result ``memo_tag`` holds (items removed and
    inserted), that result is edited alike and only the inserted items are looked up (no hashing of the
    unchanged label sets); the result is then recorded as made from the earlier result, so the next
    elementwise step can do the same.
    """
    cache = per_label_set(tag)
    g = edited_from(labels)
    if g is not None:
        old, pos, keep = g
        prev = memo_get(memo_tag, (old,))
        if prev is not _NONE and len(prev) == len(old):
            out = list(prev) if keep is None else list(compress(prev, keep))
            for p in pos:
                lb = labels[p]
                v = cache.get(lb)
                if v is None:
                    v = cache[lb] = fn(lb)
                out.insert(p, v)
            note_grown(out, prev, pos, keep)
            return out
    out = list(map(cache.get, labels))
    if None in out:
        for i, lb in enumerate(labels):
            if out[i] is None:
                out[i] = cache[lb] = fn(lb)
    return out


#: one object per distinct (name, value) pair of the label sets made from store rows and by label functions
#: (label_replace): equal label sets made again (the same pod in another family, a new row of a known service)
#: hold the kept pairs, and a new label set leaves only its new pairs alive (fewer tracked objects: rebuilds
#: trigger fewer collections). Label sets are compared by value: which equal pair object they hold never matters.
_PAIRS: dict[tuple, tuple] = {}
#: pairs kept before the record starts again
PAIRS_MAX = 20000
#: per label name, each value's kept pair of ``_PAIRS`` (its subset made by `intern_values`): a store row's label set
#: is looked up value by value (no pair tuple made and hashed; a value's hash is kept by the string), a pod's values
#: costing pairs in the first family that names them only. Emptied with ``_PAIRS`` (`pairs_table`), each name's dict
#: in place (row records keep them, ``engine.PromQLEngine._row_ent``)
_PAIRS_BY_NAME: dict[str, dict] = {}


def pairs_table() -> dict:
    """``_PAIRS``, started again (with ``_PAIRS_BY_NAME``'s dicts) where it holds more than ``PAIRS_MAX`` pairs."""
    if len(_PAIRS) > PAIRS_MAX:
        _PAIRS.clear()
        for d in _PAIRS_BY_NAME.values():
            d.clear()
    return _PAIRS


def value_pairs(names) -> list[dict]:
    """Per label name, its dict of `intern_values` (one object per name for the process's life)."""
    return [_PAIRS_BY_NAME.setdefault(nm, {}) for nm in names]


_GET_PAIR, _PUT_PAIR = dict.get, dict.__setitem__


def intern_values(names: tuple, by_name: list, values: tuple, sd) -> tuple:
    """``intern_pairs(list(zip(names, values)))`` (``by_name``: `value_pairs` of ``names``; ``sd``: the setdefault of
    `pairs_table`), looked up value by value; a label set holding a value not seen for its name yet takes the pairs
    of `intern_pairs` and records them.

    >>> names = ("job", "pod")
    >>> by = value_pairs(names)
    >>> a = intern_values(names, by, ("x", "p1"), pairs_table().setdefault)
    >>> b = intern_values(names, by, ("x", "p1"), pairs_table().setdefault)
    >>> a == (("job", "x"), ("pod", "p1")), a[0] is b[0] is intern_pairs([("job", "x")])[0]
    (True, True)
    """
    lb = tuple(map(_GET_PAIR, by_name, values))
    if None in lb:
        ps = list(zip(names, values))
        lb = tuple(map(sd, ps, ps))
        list(map(_PUT_PAIR, by_name, values, lb))
    return lb


def intern_pairs(pairs: list) -> tuple:
    """``tuple(pairs)`` with each pair replaced by the kept equal pair (``_PAIRS``).

    >>> a = intern_pairs([("job", "x"), ("pod", "p1")])
    >>> b = intern_pairs(list(zip(("job", "pod"), ("x", "p2"))))
    >>> a[0] is b[0], a == (("job", "x"), ("pod", "p1"))
    (True, True)
    """
    sd = pairs_table().setdefault
    return tuple(map(sd, pairs, pairs))


def has_dup(labels: list) -> bool:
    """Whether a label set occurs twice; a list made from one without duplicates checks only its new items."""
    def build():
        g = edited_from(labels)
        if g is not None:
            old, pos, keep = g
            seen = memo_get(("labelset",), (old,))
            if seen is not _NONE and seen is not None:
                seen = set(seen)
                if keep is not None:   # (the earlier list had no duplicates: a removed item leaves the set)
                    seen.difference_update(compress(old, [not k for k in keep]))
                for p in pos:
                    lb = labels[p]
                    if lb in seen:
                        memo(("labelset",), (labels,), lambda: None)
                        return True
                    seen.add(lb)
                memo(("labelset",), (labels,), lambda: seen)
                return False
        seen = set(labels)
        dup = len(seen) != len(labels)
        memo(("labelset",), (labels,), lambda: None if dup else seen)
        return dup
    return memo(("hasdup",), (labels,), build)


def drop_names(labels: list[Labels]) -> list[Labels]:
    return memo(("drop",), (labels,), lambda: map_labels(("drop",), ("drop",), labels, drop_name))


def drop_name(lb: Labels) -> Labels:
    if lb and lb[0][0] == "__name__":
        return lb[1:]
    return tuple(x for x in lb if x[0] != "__name__")


def to_labels(d: dict[str, str]) -> Labels:
    return tuple(sorted((k, v) for k, v in d.items() if v != ""))


def get(lb: Labels, name: str) -> str:
    for k, v in lb:
        if k == name:
            return v
    return ""


def dedupe(vec: Vec) -> Vec:
    """Merge rows with equal label sets; two of them present at the same time is an error."""
    if not memo(("hasdup",), (vec.labels,), lambda: len(set(vec.labels)) != len(vec.labels)):
        return vec
    order: dict[Labels, list[int]] = {}
    for i, lb in enumerate(vec.labels):
        order.setdefault(lb, []).append(i)
    labels, vs, ps = [], [], []
    for lb, rows in order.items():
        if len(rows) == 1:
            labels.append(lb)
            vs.append(vec.v[rows[0]])
            ps.append(vec.p[rows[0]])
            continue
        pcount = vec.p[rows].sum(axis=0)
        if (pcount > 1).any():
            raise QueryError("execution", "vector cannot contain metrics with the same labelset")
        sel = np.argmax(vec.p[rows], axis=0)
        idx = np.asarray(rows)[sel]
        cols = np.arange(vec.v.shape[1])
        labels.append(lb)
        vs.append(vec.v[idx, cols])
        ps.append(pcount > 0)
    T = vec.v.shape[1]
    if not labels:
        return Vec.empty(T)
    return Vec(labels, np.vstack(vs), np.vstack(ps))


def fmt_value(x: float) -> str:
    """Format a sample value as Prometheus's HTTP API does (Go's FormatFloat 'f', -1)."""
    if x != x:
        return "NaN"
    if x == float("inf"):
        return "+Inf"
    if x == float("-inf"):
        return "-Inf"
    return np.format_float_positional(x, unique=True, trim="-")


def fmt_time(t_ms: int) -> float | int:
    return t_ms / 1000 if t_ms % 1000 else t_ms // 1000


def metric_dict(lb: Labels) -> dict[str, str]:
    return dict(lb)

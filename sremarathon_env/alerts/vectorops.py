"""Binary operators (arithmetic, comparison, set) and aggregations over ``Vec`` values.

Vector matching follows Prometheus: a match signature from ``on``/``ignoring`` labels, one-to-one by
default, ``group_left``/``group_right`` for many-to-one, set operators many-to-many. Aggregations
fold members in input order, as Prometheus does, so float results agree bit for bit.

>>> import numpy as np
>>> from .values import Vec
>>> a = Vec([(("__name__", "x"), ("i", "1")), (("__name__", "x"), ("i", "2"))],
...         np.array([[1.0], [2.0]]), np.ones((2, 1), bool))
>>> s = aggregate("sum", a, None, False, (), )
>>> s.labels, s.v.tolist()
([()], [[3.0]])
"""

from __future__ import annotations

import numpy as np

from .limits import QueryError
from .values import (_NONE, Labels, Scal, Vec, dedupe, drop_names, edited_from, get, map_labels, memo, memo_get,
                     per_label_set, intern_pairs)

ARITH_FUNCS = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": np.fmod,
    "^": np.power,
    "atan2": np.arctan2,
}
CMP_FUNCS = {
    "==": np.equal,
    "!=": np.not_equal,
    ">": np.greater,
    "<": np.less,
    ">=": np.greater_equal,
    "<=": np.less_equal,
}


def signature(lb: Labels, on: bool | None, names: tuple[str, ...]) -> tuple:
    if on:
        return tuple(get(lb, n) for n in names)
    skip = set(names)
    return tuple(x for x in lb if x[0] != "__name__" and x[0] not in skip)


def _elem(op: str, lv, rv, return_bool: bool):
    """Returns (value, keep) for one operator applied elementwise."""
    with np.errstate(all="ignore"):
        if op in ARITH_FUNCS:
            return ARITH_FUNCS[op](lv, rv), None
        c = CMP_FUNCS[op](lv, rv)
        if return_bool:
            return c.astype(np.float64), None
        return lv, c


def scalar_scalar(op: str, l: Scal, r: Scal) -> Scal:
    val, _ = _elem(op, l.v, r.v, True)
    return Scal(np.asarray(val, dtype=np.float64))


def vector_scalar(op: str, vec: Vec, sc: Scal, scalar_left: bool, return_bool: bool) -> Vec:
    s = sc.v[None, :]
    lv, rv = (s, vec.v) if scalar_left else (vec.v, s)
    val, keep = _elem(op, lv, rv, return_bool)
    if keep is not None and scalar_left:
        val = vec.v  # the vector element's value is kept, even on the right
    val = np.broadcast_to(val, vec.v.shape).astype(np.float64, copy=False)
    p = vec.p if keep is None else vec.p & keep
    labels = vec.labels
    if op in ARITH_FUNCS or return_bool:
        labels = drop_names(labels)
        return dedupe(Vec(labels, val, p))
    return Vec(labels, val, p)


def _sigs(labels: list[Labels], on, names) -> list[tuple]:
    return memo(("sigs", on, names), (labels,),
                lambda: map_labels(("sigs", on, names), ("sig", on, names), labels, lambda lb: signature(lb, on, names)))


def _sig_index(vec: Vec, on, names) -> dict[tuple, list[int]]:
    def build():
        out: dict[tuple, list[int]] = {}
        for i, s in enumerate(_sigs(vec.labels, on, names)):
            out.setdefault(s, []).append(i)
        return out
    return memo(("sigidx", on, names), (vec.labels,), build)


def set_op(op: str, lhs: Vec, rhs: Vec, on, names) -> Vec:
    T = lhs.v.shape[1]
    rsig = _sig_index(rhs, on, names)
    runion = {s: rhs.p[rows].any(axis=0) for s, rows in rsig.items()}
    lsigs = _sigs(lhs.labels, on, names)
    none = np.zeros(T, bool)
    if op in ("and", "unless"):
        if not lhs.labels:
            return lhs
        mask = np.vstack([runion.get(s, none) for s in lsigs])
        p = lhs.p & mask if op == "and" else lhs.p & ~mask
        return Vec(lhs.labels, lhs.v, p)
    # or
    lsig_idx = _sig_index(lhs, on, names)
    lunion = {s: lhs.p[rows].any(axis=0) for s, rows in lsig_idx.items()}
    if not rhs.labels:
        return lhs
    rmask = np.vstack([lunion.get(s, none) for s in _sigs(rhs.labels, on, names)])
    out = Vec(lhs.labels + rhs.labels, np.vstack([lhs.v, rhs.v]), np.vstack([lhs.p, rhs.p & ~rmask]))
    return dedupe(out)


def _pairs(many_labels, one_labels, one_idx, drop, card, on, names, include):
    """Matching pairs (many row, one group) and output label sets: a pure function of the labels."""
    group_of = {sig: k for k, sig in enumerate(one_idx)}
    first_row = [rows[0] for rows in one_idx.values()]
    pairs_m, pairs_o, labels = [], [], []
    cache = per_label_set(("pair", drop, card, on, names, include))
    for i, sig in enumerate(_sigs(many_labels, on, names)):
        j = group_of.get(sig)
        if j is None:
            continue
        pairs_m.append(i)
        pairs_o.append(j)
        ck = (many_labels[i], one_labels[first_row[j]]) if include else many_labels[i]
        out = cache.get(ck)
        if out is not None:
            labels.append(out)
            continue
        d = dict(many_labels[i])
        if drop:
            d.pop("__name__", None)
        if card == "one-to-one":
            if on:
                d = {k: v for k, v in d.items() if k in names}
            else:
                for k in names:
                    d.pop(k, None)
        if include:
            olb = dict(one_labels[first_row[j]])
            for k in include:
                v = olb.get(k, "")
                if v:
                    d[k] = v
                else:
                    d.pop(k, None)
        out = cache[ck] = intern_pairs(sorted(d.items()))
        labels.append(out)
    return pairs_m, pairs_o, labels


def vector_vector(op: str, lhs: Vec, rhs: Vec, card: str, on, names, include, return_bool: bool) -> Vec:
    T = lhs.v.shape[1]
    swap = card == "one-to-many"
    many, one = (rhs, lhs) if swap else (lhs, rhs)
    # the "one" side: series sharing a signature must never be present at the same time
    one_idx = _sig_index(one, on, names)
    multi = memo(("multi", on, names), (one.labels,), lambda: [(k, s, rows) for k, (s, rows) in enumerate(one_idx.items()) if len(rows) > 1])
    firsts = memo(("firsts", on, names), (one.labels,), lambda: np.array([rows[0] for rows in one_idx.values()], dtype=np.intp))
    merged_v = one.v[firsts] if len(firsts) else np.zeros((0, T))
    merged_p = one.p[firsts] if len(firsts) else np.zeros((0, T), bool)
    if multi:
        merged_v = merged_v.copy()
        merged_p = merged_p.copy()
        cols = np.arange(T)
        for k, s, rows in multi:
            if (one.p[rows].sum(axis=0) > 1).any():
                side = "left" if swap else "right"
                raise QueryError(
                    "execution",
                    f"found duplicate series for the match group {dict(s) if not on else dict(zip(names, s))} on the {side} "
                    "hand-side of the operation; many-to-many matching not allowed: matching labels must be unique on one side",
                )
            r = np.asarray(rows)[np.argmax(one.p[rows], axis=0)]
            merged_v[k] = one.v[r, cols]
            merged_p[k] = one.p[rows].any(axis=0)
    drop = op in ARITH_FUNCS or return_bool
    pairs_m, pairs_o, labels = memo(("vv", drop, card, on, names, include), (many.labels, one.labels),
                                    lambda: _pairs(many.labels, one.labels, one_idx, drop, card, on, names, include))
    if not pairs_m:
        return Vec.empty(T)
    mi = np.asarray(pairs_m)
    ov = merged_v[pairs_o]
    op_ = merged_p[pairs_o]
    mv = many.v[mi]
    vl, vr = (ov, mv) if swap else (mv, ov)
    val, keep = _elem(op, vl, vr, return_bool)
    p = many.p[mi] & op_
    if keep is not None:
        p &= keep
    out = Vec(labels, np.asarray(val, dtype=np.float64), p)
    if card == "one-to-one":
        # two left series matching one right series at the same time
        for rows in memo(("dupgroups",), (labels,), lambda: _dup_groups(labels)):
            if (p[rows].sum(axis=0) > 1).any():
                raise QueryError("execution", "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)")
    try:
        return dedupe(out)
    except QueryError:
        raise QueryError("execution", "multiple matches for labels: grouping labels must ensure unique matches") from None


def _dup_groups(labels: list[Labels]) -> list[list[int]]:
    seen: dict[Labels, list[int]] = {}
    for k, lb in enumerate(labels):
        seen.setdefault(lb, []).append(k)
    return [rows for rows in seen.values() if len(rows) > 1]


def _groups(vec: Vec, without: bool, grouping: tuple[str, ...]):
    return groups_of(vec.labels, without, grouping)


def groups_of(labels: list, without: bool, grouping: tuple[str, ...]):
    """(group keys in order of first appearance, group index of each label set) of an aggregation, memoised
    per label list. A long list made from an earlier one (``values.note_grown``) whose groups are known edits
    that index (``_groups_edited``)."""
    tag = ("groups", without, grouping)

    def build():
        out = _groups_edited(labels, without, grouping, tag) if len(labels) >= GROUPS_EDIT_MIN else None
        return out if out is not None else _groups_uncached(Vec(labels, None, None), without, grouping)  # type: ignore[arg-type]
    return memo(tag, (labels,), build)


#: lists at least this long take their group index by editing the index of the list they were made from
#: (shorter ones: the loop over the rows is cheaper than the edit's numpy calls, ~20 us, and ~45 us where the groups
#: are numbered again; measured in Train Ticket rebuilds: edit 51 / 47 / 20 us against the loop's 14 / 25 / 36 us
#: for lists of 48-99 / 100-199 / 200-399 rows)
GROUPS_EDIT_MIN = 200


def group_key(without: bool, grouping: tuple[str, ...]):
    """The function giving a label set's group key in an aggregation ``by`` / ``without`` ``grouping``.

    >>> group_key(False, ("svc",))((("pod", "p1"), ("svc", "a")))
    (('svc', 'a'),)
    >>> group_key(True, ("pod",))((("__name__", "m"), ("pod", "p1"), ("svc", "a")))
    (('svc', 'a'),)
    """
    gset = set(grouping)
    if without:
        def key(lb):
            return tuple(x for x in lb if x[0] != "__name__" and x[0] not in gset)
    else:
        def key(lb):
            return tuple(x for x in lb if x[0] in gset)
    return key


def _group_keys(labels: list, without: bool, grouping: tuple[str, ...]) -> list:
    """The group key of each label set (memoised per list; a list made from an earlier one looks up only its new
    label sets, ``map_labels``)."""
    key = group_key(without, grouping)
    tag = ("group", without, grouping)
    return memo(("groupkeys", without, grouping), (labels,), lambda: map_labels(("groupkeys", without, grouping), tag, labels, key))


def _groups_edited(labels: list, without: bool, grouping: tuple[str, ...], tag: tuple):
    """``_groups_uncached`` of a list recorded as made from an earlier list whose groups are memoised: the earlier
    group index with the removed rows dropped and the inserted rows' groups looked up (a key not seen before takes
    the next number); where the numbers are then no longer in order of first appearance (a removed first member, a
    new key before an old one), they are renumbered by first appearance. None where there is no such earlier list.

    The result is the definition's: the keys in order of first appearance and each row's key's number."""
    g = edited_from(labels)
    if g is None:
        return None
    old, pos, keep = g
    prev = memo_get(tag, (old,))
    if prev is _NONE or len(prev[1]) != len(old):
        return None
    keys0, gid0 = prev
    ks = _group_keys(labels, without, grouping)
    n = len(ks)
    index0 = memo_get(("groupindex",) + tag, (keys0,))
    if index0 is _NONE:
        index0 = memo(("groupindex",) + tag, (keys0,), lambda: dict(zip(keys0, range(len(keys0)))))
    G0 = len(keys0)
    added: dict = {}
    vals = []
    for p in pos:
        k = ks[p]
        v = index0.get(k)
        if v is None:
            v = added.get(k)
            if v is None:
                v = added[k] = G0 + len(added)
        vals.append(v)
    kept = gid0 if keep is None else gid0[np.fromiter(keep, dtype=bool, count=len(keep))]
    if pos:
        gid = np.empty(n, dtype=np.intp)
        at = np.ones(n, bool)
        at[pos] = False
        gid[at] = kept
        gid[pos] = vals
    else:
        gid = np.array(kept, dtype=np.intp)
    cand = keys0 + list(added) if added else keys0
    G = len(cand)
    if not n:
        return [], gid
    # numbers in order of first appearance, every one present: each row's number is at most one more than the
    # largest before it, and the largest is the last candidate's
    top = np.maximum.accumulate(gid)
    if gid[0] == 0 and top[-1] == G - 1 and bool((gid[1:] <= top[:-1] + 1).all()):
        return cand, gid
    uniq, first = np.unique(gid, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    remap = np.zeros(G, dtype=np.intp)
    remap[order] = np.arange(len(order), dtype=np.intp)
    return [cand[j] for j in order.tolist()], remap[gid]


def _groups_uncached(vec: Vec, without: bool, grouping: tuple[str, ...]):
    return number_keys(_group_keys(vec.labels, without, grouping))


def number_keys(ks: list) -> tuple[list, np.ndarray]:
    """(the distinct group keys in order of first appearance, each key's group number): a new key gets the number
    of keys seen before it.

    >>> keys, gid = number_keys(["b", "a", "b", "c"])
    >>> keys, gid.tolist()
    (['b', 'a', 'c'], [0, 1, 0, 2])
    """
    index: dict = {}
    put = index.setdefault
    gid = np.array([put(k, len(index)) for k in ks], dtype=np.intp)
    return list(index), gid


def _members(gid: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_groups, max_size) row indices per group in input order, -1 padded."""
    order = np.argsort(gid, kind="stable")
    sizes = np.bincount(gid, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    m = int(sizes.max()) if n_groups else 0
    out = np.full((n_groups, m), -1, dtype=np.intp)
    rank = np.arange(len(order)) - np.repeat(starts, sizes)
    out[gid[order], rank] = order
    return out


def _seqsum(V: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per-segment sums added row after row, as Prometheus 2.x's ``sum`` (``reduceat`` is pairwise)."""
    out = V[starts].copy()
    for r in range(1, int(sizes.max())):
        has = sizes > r
        out[has] += V[starts[has] + r]
    return out


def aggregate(op: str, vec: Vec, param, without: bool, grouping: tuple[str, ...]) -> Vec:
    T = vec.v.shape[1]
    if not vec.labels:
        return Vec.empty(T)
    if op in ("topk", "bottomk"):
        return _topk(op, vec, param, without, grouping)
    keys, gid = _groups(vec, without, grouping)
    G = len(keys)
    order = np.argsort(gid, kind="stable")
    sizes = np.bincount(gid, minlength=G)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    V = vec.v[order]
    P = vec.p[order]
    anyp = np.logical_or.reduceat(P, starts, axis=0)
    with np.errstate(all="ignore"):
        if op == "sum":
            out = _seqsum(np.where(P, V, 0.0), starts, sizes)
        elif op == "count":
            out = np.add.reduceat(P.astype(np.float64), starts, axis=0)
        elif op == "group":
            out = np.ones((G, T))
        elif op == "min":
            out = np.fmin.reduceat(np.where(P, V, np.nan), starts, axis=0)
        elif op == "max":
            out = np.fmax.reduceat(np.where(P, V, np.nan), starts, axis=0)
        elif op in ("avg", "stddev", "stdvar"):
            mem = _members(gid, G)
            count = np.zeros((G, T))
            mean = np.zeros((G, T))
            acc = np.zeros((G, T))
            for r in range(mem.shape[1]):
                rows = mem[:, r]
                valid = rows >= 0
                x = vec.v[np.maximum(rows, 0)]
                pr = vec.p[np.maximum(rows, 0)] & valid[:, None]
                c2 = count + 1
                if op == "avg":
                    inf_mean = np.isinf(mean)
                    skip = inf_mean & ((np.isinf(x) & ((mean > 0) == (x > 0))) | (~np.isinf(x) & ~np.isnan(x)))
                    m2 = mean + (x / c2 - mean / c2)
                    mean = np.where(pr & ~skip, m2, mean)
                else:
                    delta = x - mean
                    m2 = mean + delta / c2
                    a2 = acc + delta * (x - m2)
                    mean = np.where(pr, m2, mean)
                    acc = np.where(pr, a2, acc)
                count = np.where(pr, c2, count)
            if op == "avg":
                out = mean
            elif op == "stdvar":
                out = acc / count
            else:
                out = np.sqrt(acc / count)
        elif op == "quantile":
            q = param.v
            out = np.empty((G, T))
            mem = _members(gid, G)
            for g in range(G):
                rows = mem[g][mem[g] >= 0]
                S = np.sort(np.where(vec.p[rows], vec.v[rows], np.nan), axis=0)
                n = vec.p[rows].sum(axis=0).astype(np.float64)
                rank = q * (n - 1)
                lower = np.maximum(0, np.floor(rank))
                upper = np.minimum(n - 1, lower + 1)
                weight = rank - np.floor(rank)
                li = np.clip(np.nan_to_num(lower), 0, len(rows) - 1).astype(np.intp)
                ui = np.clip(np.nan_to_num(upper), 0, len(rows) - 1).astype(np.intp)
                cols = np.arange(T)
                res = S[li, cols] * (1 - weight) + S[ui, cols] * weight
                out[g] = np.where(q < 0, -np.inf, np.where(q > 1, np.inf, res))
        else:  # pragma: no cover - compile rejects others
            raise QueryError("bad_data", f"unsupported aggregation {op}")
    return Vec(keys, np.asarray(out, dtype=np.float64), anyp)


def _topk(op: str, vec: Vec, param: Scal, without: bool, grouping) -> Vec:
    T = vec.v.shape[1]
    keys, gid = _groups(vec, without, grouping)
    k = param.v
    with np.errstate(all="ignore"):
        kk = np.where(np.isnan(k), 0, np.trunc(np.clip(k, -1e18, 1e18)))
    p_out = np.zeros_like(vec.p)
    mem = _members(gid, len(keys))
    for g in range(len(keys)):
        rows = mem[g][mem[g] >= 0]
        x = vec.v[rows]
        key = np.where(vec.p[rows] & ~np.isnan(x), x if op == "topk" else -x, -np.inf)
        key = np.where(vec.p[rows], key, np.nan)  # absent last
        order = np.argsort(-key, axis=0, kind="stable")  # NaN sorts last
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(len(rows))[:, None].repeat(T, 1), axis=0)
        p_out[rows] = vec.p[rows] & (rank < kk[None, :])
    return Vec(vec.labels, vec.v, p_out)

"""Functions over range vectors, vectorised over series and evaluation times at once.

Each follows the arithmetic of Prometheus 2.x step for step (same operation order, the same
Kahan-Neumaier compensation where Prometheus uses it), so results agree bit for bit with
``promtool``. Windows include both ends (``[t - range - offset, t - offset]``).

>>> import numpy as np
>>> from .values import Win
>>> gt = np.arange(0, 600_001, 60_000, dtype=np.int64)          # samples every minute
>>> w = Win([(("__name__", "c"),)], np.arange(11.0)[None, :] * 60, np.ones((1, 11), bool),
...         gt, np.array([5]), np.array([10]), 300_000, 0)
>>> v, p = RANGE_FUNCS["rate"](w, np.array([600_000]), None)
>>> float(v[0, 0]), bool(p[0, 0])
(1.0, True)
"""

from __future__ import annotations

import numpy as np

from .values import Win


class _Prep:
    """Per-window first/last present sample and counts."""

    def __init__(self, w: Win):
        n, G = w.v.shape
        self.n, self.G = n, G
        T = len(w.lo)
        idx = np.arange(G)
        self.pv = np.maximum.accumulate(np.where(w.p, idx, -1), axis=1) if G else np.zeros((n, 0), np.intp)
        nxt = np.where(w.p, idx, G)
        self.nv = np.minimum.accumulate(nxt[:, ::-1], axis=1)[:, ::-1] if G else np.zeros((n, 0), np.intp)
        csum = np.zeros((n, G + 1), dtype=np.int64)
        np.cumsum(w.p, axis=1, out=csum[:, 1:])
        lo = np.minimum(np.maximum(w.lo, 0), G)
        hi = np.minimum(np.maximum(w.hi, -1), G - 1)
        self.ridx = np.arange(n)[:, None]
        nonempty = (hi >= lo)[None, :] & (G > 0)
        self.cnt = np.where(nonempty, csum[:, hi + 1] - csum[:, lo], 0) if G else np.zeros((n, T), np.int64)
        if G:
            first = self.nv[:, np.minimum(lo, G - 1)]
            last = self.pv[:, np.maximum(hi, 0)]
        else:
            first = last = np.zeros((n, T), np.intp)
        has = self.cnt > 0
        self.first = np.where(has, first, 0)
        self.last = np.where(has, last, 0)
        self.lo, self.hi = lo, hi

    def gather(self, arr: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``arr[i, cols[i, t]]`` for every row i (a plain fancy index: take_along_axis is slower)."""
        return arr[self.ridx, cols]

    def prev_present(self) -> np.ndarray:
        """For each grid cell, the index of the previous present sample (-1 if none)."""
        pp = np.full_like(self.pv, -1)
        pp[:, 1:] = self.pv[:, :-1]
        return pp


def _range_seconds(ms: int) -> float:
    return float(ms // 1000) + float((ms % 1000) * 1_000_000) / 1e9


def _extrapolated(w: Win, times: np.ndarray, is_counter: bool, is_rate: bool):
    pr = _Prep(w)
    ok = pr.cnt >= 2
    if not ok.any():
        return np.zeros(pr.cnt.shape), ok
    fv = pr.gather(w.v, pr.first)
    lv = pr.gather(w.v, pr.last)
    result = lv - fv
    if is_counter:
        pp = pr.prev_present()
        prevval = pr.gather(w.v, np.maximum(pp, 0))
        reset = w.p & (pp >= 0) & (w.v < prevval)
        if reset.any():
            rc = np.cumsum(reset, axis=1)
            nres = np.where(ok, pr.gather(rc, pr.last) - pr.gather(rc, pr.first), 0)
            lastreset = np.maximum.accumulate(np.where(reset, np.arange(pr.G), 0), axis=1)
            one = nres == 1
            if one.any():
                pos = pr.gather(lastreset, pr.last)
                result = np.where(one, result + pr.gather(prevval, pos), result)
            many = np.argwhere(nres >= 2)
            for r, t in many:
                a, b = pr.first[r, t], pr.last[r, t]
                rv = w.v[r, b] - w.v[r, a]
                prev = w.v[r, a]
                for j in range(a + 1, b + 1):
                    if not w.p[r, j]:
                        continue
                    if w.v[r, j] < prev:
                        rv += prev
                    prev = w.v[r, j]
                result[r, t] = rv
    ft = w.gt[pr.first]
    lt = w.gt[pr.last]
    range_start = times - (w.range_ms + w.offset_ms)
    range_end = times - w.offset_ms
    with np.errstate(all="ignore"):
        d_start = (ft - range_start[None, :]).astype(np.float64) / 1000
        d_end = (range_end[None, :] - lt).astype(np.float64) / 1000
        sampled = (lt - ft).astype(np.float64) / 1000
        avg = sampled / (pr.cnt - 1).astype(np.float64)
        if is_counter:
            cond = (result > 0) & (fv >= 0)
            d_zero = sampled * (fv / result)
            d_start = np.where(cond & (d_zero < d_start), d_zero, d_start)
        thr = avg * 1.1
        ext = sampled + np.where(d_start < thr, d_start, avg / 2)
        ext = ext + np.where(d_end < thr, d_end, avg / 2)
        factor = ext / sampled
        if is_rate:
            factor = factor / _range_seconds(w.range_ms)
        result = result * factor
    return result, ok


def _instant(w: Win, is_rate: bool):
    pr = _Prep(w)
    ok = pr.cnt >= 2
    last = pr.last
    prev = pr.gather(pr.pv, np.maximum(last - 1, 0))
    ok &= prev >= 0
    prev = np.maximum(prev, 0)
    lv = pr.gather(w.v, last)
    pv = pr.gather(w.v, prev)
    with np.errstate(all="ignore"):
        if is_rate:
            res = np.where(lv < pv, lv, lv - pv)
            interval = w.gt[last] - w.gt[prev]
            ok &= interval != 0
            res = res / (interval.astype(np.float64) / 1000)
        else:
            res = lv - pv
    return res, ok


def _changes(w: Win, resets: bool):
    pr = _Prep(w)
    pp = pr.prev_present()
    prevval = pr.gather(w.v, np.maximum(pp, 0))
    if resets:
        flag = w.p & (pp >= 0) & (w.v < prevval)
    else:
        flag = w.p & (pp >= 0) & (w.v != prevval) & ~(np.isnan(w.v) & np.isnan(prevval))
    c = np.cumsum(flag, axis=1)
    ok = pr.cnt >= 1
    res = (pr.gather(c, pr.last) - pr.gather(c, pr.first)).astype(np.float64)
    return res, ok


def _windows(w: Win):
    """(L, n, T) gathered window samples and presence (absent cells hold NaN)."""
    pr = _Prep(w)
    G = pr.G
    width = pr.hi - pr.lo + 1
    L = int(width.max()) if len(width) and G else 0
    n, T = pr.cnt.shape
    if L <= 0:
        return np.full((0, n, T), np.nan), np.zeros((0, n, T), bool), pr
    idx = pr.lo[None, :] + np.arange(L)[:, None]  # (L, T)
    valid = idx <= pr.hi[None, :]
    idx = np.minimum(idx, G - 1)
    W = w.v[:, idx].transpose(1, 0, 2)  # (L, n, T)
    P = w.p[:, idx].transpose(1, 0, 2) & valid[:, None, :]
    W = np.where(P, W, np.nan)
    return W, P, pr


def _kahan_inc(inc, s, c):
    t = s + inc
    big = np.abs(s) >= np.abs(inc)
    c = c + np.where(big, (s - t) + inc, (inc - t) + s)
    return t, c


def _sum_over_time(w, times, q):
    W, P, pr = _windows(w)
    s = np.zeros(pr.cnt.shape)
    c = np.zeros(pr.cnt.shape)
    with np.errstate(all="ignore"):
        for j in range(W.shape[0]):
            a, b = _kahan_inc(W[j], s, c)
            s = np.where(P[j], a, s)
            c = np.where(P[j], b, c)
        return np.where(np.isinf(s), s, s + c), pr.cnt > 0


def _avg_over_time(w, times, q):
    W, P, pr = _windows(w)
    mean = np.zeros(pr.cnt.shape)
    comp = np.zeros(pr.cnt.shape)
    count = np.zeros(pr.cnt.shape)
    with np.errstate(all="ignore"):
        for j in range(W.shape[0]):
            pj = P[j]
            count = np.where(pj, count + 1, count)
            x = W[j]
            inf_mean = np.isinf(mean)
            skip = inf_mean & ((np.isinf(x) & ((mean > 0) == (x > 0))) | (~np.isinf(x) & ~np.isnan(x)))
            a, b = _kahan_inc(x / count - mean / count, mean, comp)
            upd = pj & ~skip
            mean = np.where(upd, a, mean)
            comp = np.where(upd, b, comp)
        return np.where(np.isinf(mean), mean, mean + comp), pr.cnt > 0


def _var_over_time(w, times, q, sqrt: bool):
    W, P, pr = _windows(w)
    shape = pr.cnt.shape
    count = np.zeros(shape)
    mean = np.zeros(shape)
    cmean = np.zeros(shape)
    aux = np.zeros(shape)
    caux = np.zeros(shape)
    with np.errstate(all="ignore"):
        for j in range(W.shape[0]):
            pj = P[j]
            x = W[j]
            cnt2 = count + 1
            delta = x - (mean + cmean)
            m2, cm2 = _kahan_inc(delta / cnt2, mean, cmean)
            a2, ca2 = _kahan_inc(delta * (x - (m2 + cm2)), aux, caux)
            count = np.where(pj, cnt2, count)
            mean = np.where(pj, m2, mean)
            cmean = np.where(pj, cm2, cmean)
            aux = np.where(pj, a2, aux)
            caux = np.where(pj, ca2, caux)
        res = (aux + caux) / count
        if sqrt:
            res = np.sqrt(res)
    return res, pr.cnt > 0


def _minmax_over_time(w, times, q, is_max: bool):
    W, P, pr = _windows(w)
    ok = pr.cnt > 0
    if W.shape[0] == 0:
        return np.zeros(ok.shape), ok
    with np.errstate(all="ignore"):
        # Prometheus: start with the first sample, replace when greater/smaller or when current is NaN.
        first = pr.gather(w.v, pr.first) if pr.G else np.zeros(ok.shape)
        acc = first
        for j in range(W.shape[0]):
            x = W[j]
            better = (x > acc) if is_max else (x < acc)
            acc = np.where(P[j] & (better | np.isnan(acc)), x, acc)
    return acc, ok


def _count_over_time(w, times, q):
    pr = _Prep(w)
    return pr.cnt.astype(np.float64), pr.cnt > 0


def _last_over_time(w, times, q):
    pr = _Prep(w)
    return pr.gather(w.v, pr.last) if pr.G else np.zeros(pr.cnt.shape), pr.cnt > 0


def _present_over_time(w, times, q):
    pr = _Prep(w)
    return np.ones(pr.cnt.shape), pr.cnt > 0


def _quantile_over_time(w, times, q):
    W, P, pr = _windows(w)
    ok = pr.cnt > 0
    if W.shape[0] == 0:
        return np.zeros(ok.shape), ok
    S = np.sort(W, axis=0)  # absent (NaN) cells sort last
    n = pr.cnt.astype(np.float64)
    qq = np.broadcast_to(q[None, :], n.shape)
    with np.errstate(all="ignore"):
        rank = qq * (n - 1)
        lower = np.maximum(0, np.floor(rank))
        upper = np.minimum(n - 1, lower + 1)
        weight = rank - np.floor(rank)
        li = np.clip(np.nan_to_num(lower), 0, S.shape[0] - 1).astype(np.intp)
        ui = np.clip(np.nan_to_num(upper), 0, S.shape[0] - 1).astype(np.intp)
        lv = np.take_along_axis(S, li[None], axis=0)[0]
        uv = np.take_along_axis(S, ui[None], axis=0)[0]
        res = lv * (1 - weight) + uv * weight
        res = np.where(qq < 0, -np.inf, np.where(qq > 1, np.inf, res))
    return res, ok


def _linreg(w, times, intercept_at_first: bool):
    W, P, pr = _windows(w)
    shape = pr.cnt.shape
    ok = pr.cnt >= 2
    if W.shape[0] == 0:
        return np.zeros(shape), np.zeros(shape), ok
    L = W.shape[0]
    idx = np.minimum(pr.lo[None, :] + np.arange(L)[:, None], max(pr.G - 1, 0))  # (L, T)
    if intercept_at_first:
        icpt = w.gt[pr.first]  # (n, T)
    else:
        icpt = np.broadcast_to(times[None, :], shape)
    n = np.zeros(shape)
    sx = np.zeros(shape); cx = np.zeros(shape)
    sy = np.zeros(shape); cy = np.zeros(shape)
    sxy = np.zeros(shape); cxy = np.zeros(shape)
    sx2 = np.zeros(shape); cx2 = np.zeros(shape)
    inity = pr.gather(w.v, pr.first) if pr.G else np.zeros(shape)
    consty = np.ones(shape, bool)
    with np.errstate(all="ignore"):
        for j in range(L):
            pj = P[j]
            y = W[j]
            x = (w.gt[idx[j]][None, :] - icpt).astype(np.float64) / 1e3
            consty &= ~(pj & (y != inity))
            n = np.where(pj, n + 1.0, n)
            a, b = _kahan_inc(x, sx, cx); sx = np.where(pj, a, sx); cx = np.where(pj, b, cx)
            a, b = _kahan_inc(y, sy, cy); sy = np.where(pj, a, sy); cy = np.where(pj, b, cy)
            a, b = _kahan_inc(x * y, sxy, cxy); sxy = np.where(pj, a, sxy); cxy = np.where(pj, b, cxy)
            a, b = _kahan_inc(x * x, sx2, cx2); sx2 = np.where(pj, a, sx2); cx2 = np.where(pj, b, cx2)
        sx = sx + cx
        sy = sy + cy
        sxy = sxy + cxy
        sx2 = sx2 + cx2
        cov = sxy - sx * sy / n
        var = sx2 - sx * sx / n
        slope = cov / var
        intercept = sy / n - slope * sx / n
        inf_y = np.isinf(inity)
        slope = np.where(consty, np.where(inf_y, np.nan, 0.0), slope)
        intercept = np.where(consty, np.where(inf_y, np.nan, inity), intercept)
    return slope, intercept, ok


def _deriv(w, times, q):
    slope, _, ok = _linreg(w, times, True)
    return slope, ok


def _predict_linear(w, times, q):
    slope, intercept, ok = _linreg(w, times, False)
    with np.errstate(all="ignore"):
        return slope * q[None, :] + intercept, ok


#: name -> fn(win, eval_times_ms, scalar_param_or_None) -> (values (n,T), present (n,T))
RANGE_FUNCS = {
    "rate": lambda w, t, q: _extrapolated(w, t, True, True),
    "increase": lambda w, t, q: _extrapolated(w, t, True, False),
    "delta": lambda w, t, q: _extrapolated(w, t, False, False),
    "irate": lambda w, t, q: _instant(w, True),
    "idelta": lambda w, t, q: _instant(w, False),
    "changes": lambda w, t, q: _changes(w, False),
    "resets": lambda w, t, q: _changes(w, True),
    "sum_over_time": _sum_over_time,
    "avg_over_time": _avg_over_time,
    "min_over_time": lambda w, t, q: _minmax_over_time(w, t, q, False),
    "max_over_time": lambda w, t, q: _minmax_over_time(w, t, q, True),
    "count_over_time": _count_over_time,
    "last_over_time": _last_over_time,
    "present_over_time": _present_over_time,
    "stddev_over_time": lambda w, t, q: _var_over_time(w, t, q, True),
    "stdvar_over_time": lambda w, t, q: _var_over_time(w, t, q, False),
    "quantile_over_time": _quantile_over_time,
    "deriv": _deriv,
    "predict_linear": _predict_linear,
}

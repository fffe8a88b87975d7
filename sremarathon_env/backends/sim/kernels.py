"""Optional compiled (numba) kernels of the scored twin's metric path: a cAdvisor block (the counters' running totals
and their four store families' cells), the per-service memory utilisation of a block, the traffic counters' running
totals and their cells, a state run's cells, and a block's per-service state fields (history rows).

The numpy code is the reference (`MetricWriter._pods_block` and `SimBackend._mem_util`); each of those spends ~25 (or
~8) numpy calls on arrays of a few ticks by a few dozen pods, so its cost is numpy's per-call overhead, paid a few hundred
times per marathon. These kernels do the same arithmetic one (pod, tick) cell at a time, with the numpy formulas'
operations in the same order and numpy's minimum/maximum rules (no fast-math, no reassociation): the same bits (see
tests/backends/sim/test_twin_kernels.py). They run where the alert kernels run (`sremarathon_env.alerts.compiled`:
numba installed, ``SREMARATHON_NUMBA`` not ``0``, and in ``auto`` mode once those are loaded), so a process loads
numba once for both; ``kernels()`` gives them or None (the numpy code runs).

>>> from sremarathon_env.alerts import compiled
>>> (kernels() is None) == (compiled.kernels() is None)   # one switch for both
True
"""

from __future__ import annotations

import warnings

import numpy as np

from sremarathon_env.alerts import compiled as _switch

_LOADED: list = []   # [namespace or None] once loading was tried
#: a block without CPU burn passes this as its burn rows (none: `pods_block` adds nothing)
NO_BURN = np.zeros((0, 0))


def kernels():
    """The twin's compiled kernels (a namespace with ``pods_block``, ``mem_util``, ``cum_rows``, ``fill_rows``,
    ``fill_live``, ``state_rows``, ``req_cum`` and ``take_rows``), or None: wherever the alert
    kernels are off (`sremarathon_env.alerts.compiled.kernels`), or numba could not compile these."""
    if _switch.kernels() is None:
        return None
    if not _LOADED:
        try:
            ns = _load()
        except Exception as exc:   # noqa: BLE001 - a numba that cannot compile them here: the numpy code (same results)
            warnings.warn(f"sremarathon: compiled twin kernels unavailable ({type(exc).__name__}: {exc}); "
                          "using numpy", RuntimeWarning, stacklevel=2)
            ns = None
        _LOADED.append(ns)
    return _LOADED[0]


class _Namespace:
    pass


def _load():
    import numba

    ns = _Namespace()
    (ns.pods_block, ns.mem_util, ns.cum_rows, ns.fill_rows, ns.fill_live, ns.state_rows, ns.req_cum,
     ns.take_rows) = _define(numba)
    # one call of each on tiny arrays of the types the twin passes: numba loads (or compiles) them now
    one = np.ones((1, 1))
    f1, b1, i1 = np.ones(1), np.ones(1, np.bool_), np.zeros(1, np.intp)
    ns.pods_block(0, 15.0, 150.0, 0.002, 1.0, i1, i1, f1, b1, f1, one, NO_BURN, np.ones((1, 1), np.bool_), one,
                  np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1)),
                  np.zeros((1, 1)), np.zeros((1, 1)))
    ns.mem_util(one, b1, f1, i1, 1)
    ns.cum_rows(np.zeros((1, 1)), 0, f1, one)
    ns.fill_rows(np.zeros((1, 1)), 0, 1, 0, 1, f1)
    ns.fill_live(np.zeros((1, 1)), 0, 1, 0, 1, f1, b1)
    ns.state_rows(np.zeros((1, 10, 1)), one, b1, f1, i1, np.zeros((1, 0)), np.zeros(0, np.intp), f1, f1, f1)
    ns.req_cum(f1, one, np.ones(1, np.intp), b1, b1, np.zeros(1, np.intp))
    ns.take_rows(np.zeros((1, 1)), i1, i1, 0, one)
    return ns


def _define(numba):
    """The kernels, compiled by numba at their first call (cached on disk next to this module)."""
    njit = numba.njit

    @njit(cache=True, error_model="numpy")
    def pods_block(k0, dt, cfs_per_tick, idle, mi, sl, rows, cpu_ms, has_lim, lim_f, ppr, burn, running, mem,
                   cpu_cum, per_cum, thr_cum, pod_util, d_cpu, d_per, d_thr, d_mem):
        # `MetricWriter._pods_block` + `write_pods` (cAdvisor only) for the K ticks k0.. of the pod slots ``sl``
        # (rows ``rows`` of the four families' arrays d_*): ``ppr``/``mem`` (K, n); ``running`` (1 or K, n);
        # ``burn`` (0: none, 1 or K, n); ``cfs_per_tick`` = dt / CFS period. Per cell, in the numpy formulas' order:
        # x = idle + ppr * cpu_ms * 1e-3 (+ burn); demand = running * x; usage = where(has_lim, minimum(demand,
        # lim_f), demand); util = demand / lim_f; thr = minimum(maximum((util - 0.6) / 0.6, 0), 1) * has_lim;
        # periods = running * cfs_per_tick; running totals (seqsum: one tick at a time) of usage * dt, periods and
        # periods * thr; cells NaN where the container does not run; the totals and the last util kept per slot.
        K = ppr.shape[0]
        n = ppr.shape[1]
        kr = running.shape[0]
        kb = burn.shape[0]
        nan = np.nan
        # (no cell outside the arrays: -1, nothing written, where one would be - numpy would raise there)
        if k0 < 0 or k0 + K > min(d_cpu.shape[1], d_per.shape[1], d_thr.shape[1], d_mem.shape[1]) \
                or mem.shape[0] != K or mem.shape[1] != n or (kr != 1 and kr != K) or (kb > 1 and kb != K) \
                or sl.shape[0] != n or rows.shape[0] != n:
            return -1
        R = min(d_cpu.shape[0], d_per.shape[0], d_thr.shape[0], d_mem.shape[0])
        S = min(cpu_cum.shape[0], per_cum.shape[0], thr_cum.shape[0], pod_util.shape[0])
        for j in range(n):
            if rows[j] < 0 or rows[j] >= R or sl[j] < 0 or sl[j] >= S:
                return -1
        for j in range(n):
            s = sl[j]
            r = rows[j]
            c4 = cpu_ms[j]
            hl = has_lim[j]
            lf = lim_f[j]
            hf = 1.0 if hl else 0.0
            cpu = cpu_cum[s]
            per = per_cum[s]
            thr = thr_cum[s]
            util = 0.0
            for k in range(K):
                run = running[k if kr > 1 else 0, j]
                fr = 1.0 if run else 0.0
                x = idle + ppr[k, j] * c4 * 1e-3
                if kb > 0:
                    x = x + burn[k if kb > 1 else 0, j]
                demand = fr * x
                usage = demand
                if hl:   # np.minimum: the first unless the second is smaller (NaN first: the first)
                    usage = demand if (demand <= lf or demand != demand) else lf
                util = demand / lf
                a = (util - 0.6) / 0.6
                a = a if (a >= 0.0 or a != a) else 0.0   # np.maximum(a, 0.0)
                a = a if (a <= 1.0 or a != a) else 1.0   # np.minimum(a, 1.0)
                tf = a * hf
                periods = fr * cfs_per_tick
                cpu = cpu + usage * dt
                per = per + periods
                thr = thr + periods * tf
                c = k0 + k
                if run:
                    d_cpu[r, c] = cpu
                    d_per[r, c] = per
                    d_thr[r, c] = thr
                    d_mem[r, c] = mem[k, j] * mi
                else:
                    d_cpu[r, c] = nan
                    d_per[r, c] = nan
                    d_thr[r, c] = nan
                    d_mem[r, c] = nan
            cpu_cum[s] = cpu
            per_cum[s] = per
            thr_cum[s] = thr
            pod_util[s] = util
        return 0

    @njit(cache=True, error_model="numpy")
    def mem_util(mem, running, lim, svc, S):
        # `SimBackend._mem_util`: (K, S), per service the running maximum of mem / lim over its pods in slot order
        # (np.maximum.reduceat's order over the stable sort by service, and its rule: the first unless the next is
        # larger, NaN kept), 0 for a pod that does not run (``running`` per pod) and for a service without pods
        K = mem.shape[0]
        n = svc.shape[0]
        if mem.shape[1] != n or lim.shape[0] != n or running.shape[0] != n:
            raise ValueError("mem_util: shapes do not match")
        for j in range(n):
            if svc[j] < 0 or svc[j] >= S:
                raise ValueError("mem_util: service out of range")
        out = np.zeros((K, S))
        seen = np.zeros(S, np.bool_)
        for k in range(K):
            seen[:] = False
            for j in range(n):
                s = svc[j]
                v = mem[k, j] / lim[j] if running[j] else 0.0
                if not seen[s]:
                    out[k, s] = v
                    seen[s] = True
                else:
                    m = out[k, s]
                    out[k, s] = m if (m >= v or m != m) else v
        return out

    @njit(cache=True, error_model="numpy")
    def cum_rows(data, k0, start, inc):
        # `seqsum(start, inc)` (running totals one tick at a time: start + inc[0], + inc[1], ...) of the n = len(start)
        # counters written into rows 0..n-1 of ``data`` at columns k0..k0+K-1 (the traffic families' layout, see
        # `MetricWriter.write_traffic`); returns the last totals (a new array)
        K = inc.shape[0]
        n = start.shape[0]
        if inc.shape[1] != n or n > data.shape[0] or k0 < 0 or k0 + K > data.shape[1]:
            raise ValueError("cum_rows: shapes do not match")
        last = np.empty(n)
        for j in range(n):
            x = start[j]
            for k in range(K):
                x = x + inc[k, j]
                data[j, k0 + k] = x
            last[j] = x
        return last

    @njit(cache=True, error_model="numpy")
    def fill_rows(data, r0, r1, a, b, vals):
        # data[r0:r1, a:b] = vals[r0:r1, None] (a state run's constant values, `MetricWriter._write_run`); -1, nothing
        # written, where a bound lies outside the arrays (numpy's slices clip there)
        if r0 < 0 or a < 0 or r1 > data.shape[0] or b > data.shape[1] or r1 > vals.shape[0]:
            return -1
        for r in range(r0, r1):
            v = vals[r]
            for c in range(a, b):
                data[r, c] = v
        return 0

    @njit(cache=True, error_model="numpy")
    def fill_live(data, r0, r1, a, b, vals, live):
        # `fill_rows` for the rows with a live series (``live``) alone: the others' cells are left as they are (NaN
        # where a state run never wrote them: see `MetricWriter._write_run`); -1, nothing written, where a bound lies
        # outside the arrays
        if r0 < 0 or a < 0 or r1 > data.shape[0] or b > data.shape[1] or r1 > vals.shape[0] or r1 > live.shape[0]:
            return -1
        for r in range(r0, r1):
            if live[r]:
                v = vals[r]
                for c in range(a, b):
                    data[r, c] = v
        return 0

    @njit(cache=True, error_model="numpy")
    def state_rows(rows, mem, running, lim, svc, lag, lag_callee, ready, desired, restarts):
        # `SimBackend._state_rows`: a block's per-service state fields in its history rows (K, fields, S): 5 the
        # memory utilisation (`mem_util`'s numbers), 6 the consumer lag summed into each callee (0.0, then += each
        # async edge's lag in edge order), 7 ready, 8 desired, 9 restarts (copied)
        K = mem.shape[0]
        n = svc.shape[0]
        S = rows.shape[2]
        L = lag_callee.shape[0]
        if rows.shape[0] != K or rows.shape[1] < 10 or mem.shape[1] != n or lim.shape[0] != n \
                or running.shape[0] != n or lag.shape[0] != K or lag.shape[1] != L or ready.shape[0] != S \
                or desired.shape[0] != S or restarts.shape[0] != S:
            raise ValueError("state_rows: shapes do not match")
        for j in range(n):
            if svc[j] < 0 or svc[j] >= S:
                raise ValueError("state_rows: service out of range")
        for i in range(L):
            if lag_callee[i] < 0 or lag_callee[i] >= S:
                raise ValueError("state_rows: service out of range")
        seen = np.zeros(S, np.bool_)
        for k in range(K):
            for s in range(S):
                rows[k, 5, s] = 0.0
                rows[k, 6, s] = 0.0
                rows[k, 7, s] = ready[s]
                rows[k, 8, s] = desired[s]
                rows[k, 9, s] = restarts[s]
            seen[:] = False
            for j in range(n):
                s = svc[j]
                v = mem[k, j] / lim[j] if running[j] else 0.0
                if not seen[s]:
                    rows[k, 5, s] = v
                    seen[s] = True
                else:
                    m = rows[k, 5, s]
                    rows[k, 5, s] = m if (m >= v or m != m) else v
            for i in range(L):
                rows[k, 6, lag_callee[i]] += lag[k, i]
        return 0

    @njit(cache=True, error_model="numpy")
    def req_cum(start, inc, ends, on, allowed, first):
        # the request counters of `MetricWriter.write_traffic`: their running totals (K, n) one tick at a time from
        # ``start`` (seqsum), and per counter the first run (index into ``ends``, the runs' end offsets) at whose last
        # tick a counter not yet on (``on``) but ``allowed`` reaches half a request, -1 where none (into ``first``);
        # returns (the totals, how many counters reach it)
        K = inc.shape[0]
        n = start.shape[0]
        B = ends.shape[0]
        if inc.shape[1] != n or on.shape[0] != n or allowed.shape[0] != n or first.shape[0] != n:
            raise ValueError("req_cum: shapes do not match")
        for b in range(B):
            if ends[b] < 1 or ends[b] > K:
                raise ValueError("req_cum: run end out of range")
        cum = np.empty((K, n))
        hits = 0
        for j in range(n):
            x = start[j]
            for k in range(K):
                x = x + inc[k, j]
                cum[k, j] = x
            first[j] = -1
            if allowed[j] and not on[j]:
                for b in range(B):
                    if cum[ends[b] - 1, j] >= 0.5:
                        first[j] = b
                        hits += 1
                        break
        return cum, hits

    @njit(cache=True, error_model="numpy")
    def take_rows(data, rows, flat, k0, cum):
        # data[rows, k0:k0+K] = cum.take(flat, axis=1).T (the enabled request series' cells); -1, nothing written,
        # where a cell would lie outside the arrays
        K = cum.shape[0]
        m = rows.shape[0]
        if flat.shape[0] != m or k0 < 0 or k0 + K > data.shape[1]:
            return -1
        for j in range(m):
            if rows[j] < 0 or rows[j] >= data.shape[0] or flat[j] < 0 or flat[j] >= cum.shape[1]:
                return -1
        for j in range(m):
            r = rows[j]
            f = flat[j]
            for k in range(K):
                data[r, k0 + k] = cum[k, f]
        return 0

    return pods_block, mem_util, cum_rows, fill_rows, fill_live, state_rows, req_cum, take_rows

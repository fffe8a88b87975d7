"""Optional compiled (numba) versions of the tape's two hot loops: the window kernel and the tape extension.

The numpy code in ``tape`` is the reference. These kernels do the same arithmetic one (time, row) or one
(column, slot) cell at a time, fused in one pass (the extension reads each family's store rows directly), with
the operations of the numpy formulas in the same order (no fast-math, no reassociation, no parallel reductions),
so their results are the same bits (see tests/alerts/test_compiled.py). ``kernels()`` says whether they run
(None: the numpy path runs). The environment variable ``SREMARATHON_NUMBA`` chooses:

* ``0``: never (the numpy kernels only);
* ``1``: from the first call (numba imported then);
* unset or ``auto``: once the numpy kernels have spent ``AUTO_AFTER_S`` CPU seconds in this process. Loading
  costs about 0.4 s of CPU even from numba's cache (its import and LLVM's set-up), which a short process (one
  CLI marathon: ~0.05 s in these kernels) would never earn back; a long one (an RL worker, a bench, many
  marathons) switches after a few marathons. Results are the same bits either way.

Compiled with ``cache=True``: the first load in a fresh install compiles (a few seconds) and writes the machine
code next to this module (numba's cache); later processes load it.

>>> import os
>>> old = os.environ.get("SREMARATHON_NUMBA")
>>> os.environ["SREMARATHON_NUMBA"] = "0"
>>> kernels() is None
True
>>> _ = os.environ.pop("SREMARATHON_NUMBA") if old is None else os.environ.update(SREMARATHON_NUMBA=old)
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

_LOADED: list = []   # [namespace or None] once numba's import was tried
#: in ``auto`` mode, the numpy kernels' CPU seconds after which the compiled ones are loaded
AUTO_AFTER_S = 0.3
_SPENT = [0.0]   # CPU seconds the numpy kernels spent in this process (see `note_numpy`)
_OFF = ["numba not installed"]   # why the kernels are off once loading them gave None


def _mode() -> str:
    m = os.environ.get("SREMARATHON_NUMBA", "auto")
    return m if m in ("0", "1") else "auto"


def kernels():
    """The compiled kernels (a namespace with ``window`` and ``extend``), or None: numba absent,
    ``SREMARATHON_NUMBA=0``, or (``auto``) the numpy kernels have not yet spent ``AUTO_AFTER_S`` here."""
    if _LOADED:
        return _LOADED[0] if _mode() != "0" else None
    mode = _mode()
    if mode == "0" or (mode == "auto" and _SPENT[0] < AUTO_AFTER_S):
        return None
    return warm()


def note_numpy(seconds: float) -> None:
    """The numpy kernels ran for ``seconds`` of CPU (counts towards ``auto``'s switch)."""
    _SPENT[0] += seconds


def warm():
    """Load the compiled kernels now (unless ``SREMARATHON_NUMBA=0``; numba absent: None), whatever the mode:
    imports numba and loads (or compiles) both kernels. The bench calls it before it measures."""
    if _mode() == "0":
        return None
    if not _LOADED:
        t0 = time.process_time()
        try:
            ns = _load()
            if ns is not None:
                ns.warm_up()
                ns.load_cpu_s = time.process_time() - t0
        except Exception as exc:   # noqa: BLE001 - a numba that cannot compile here: the numpy kernels (same results)
            warnings.warn(f"sremarathon: compiled alert kernels unavailable ({type(exc).__name__}: {exc}); "
                          "using the numpy kernels", RuntimeWarning, stacklevel=2)
            _OFF[0] = f"numba failed: {type(exc).__name__}"
            ns = None
        _LOADED.append(ns)
    return _LOADED[0]


def status() -> str:
    """One line for the bench: whether the compiled kernels are on (and what loading them cost)."""
    mode = _mode()
    if mode == "0":
        return "compiled kernels: off (SREMARATHON_NUMBA=0)"
    if _LOADED and _LOADED[0] is None:
        return f"compiled kernels: off ({_OFF[0]})"
    if not _LOADED:
        return f"compiled kernels: not loaded yet (auto: after {AUTO_AFTER_S} s of numpy kernels)"
    k = _LOADED[0]
    return f"compiled kernels: on (numba {k.version}, loaded in {k.load_cpu_s * 1e3:.0f} ms CPU)"


class _Namespace:
    pass


def _load():
    try:
        import numba
    except ImportError:
        return None
    ns = _Namespace()
    ns.version = numba.__version__
    ns.window, ns.extend = _define(numba)
    ns.load_cpu_s = 0.0

    def warm_up():
        # one call of each on tiny arrays of the tape's types: numba loads (or compiles) them now
        i64 = np.zeros(1, np.int64)
        cells = np.zeros((3, 2, 4))
        ints = cells.view(np.int32)
        data = np.zeros((1, 2))
        ns.extend(np.array([data.ctypes.data], np.intp), np.array([[1, 2]], np.intp), np.array([0, 1], np.intp),
                  np.zeros(1, np.intp), np.zeros(1, np.intp), 0, 1, False, cells, ints, 2)
        ns.window(cells, ints, 2, i64, i64, i64, np.zeros(1, np.int8), np.ones(1), i64, 0, 15000, 1, 2, False, False)

    ns.warm_up = warm_up
    return ns


#: set by `_define` (numba imported then): the kernels read them as globals, not closure variables, which would
#: enter numba's cache key (pickled per process: a cache miss, a compile, in every process)
_f64_at = None
_carray = None


def _define(numba):
    """The kernels, compiled lazily by numba at their first call (cached on disk)."""
    global _f64_at, _carray
    from numba import types
    from numba.extending import intrinsic

    njit = numba.njit

    def f64_at(typingctx, addr):
        # a float64 pointer to the integer address ``addr`` (the data of a C-contiguous float64 array, see ``extend``)
        if not isinstance(addr, types.Integer):
            return None
        ptr = types.CPointer(types.float64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(addr), codegen

    _f64_at = intrinsic(f64_at)
    _carray = numba.carray

    @njit(cache=True, error_model="numpy")
    def window(cells, ints, f0, slots, range_ms, offset_ms, codes, rs, times, t0_ms, st, N, cap, has_counter,
               has_rate):
        # the tape's cell records, (columns + 1, slots, fields): the value (cells[..., 0]) and the integer summaries
        # (ints[..., f0 + k], k in tape.FIELDS' order); see tape.window_kernel for the formulas, which this follows
        # operation by operation
        V = cells[:, :, 0]
        CS = ints[:, :, f0]
        PV = ints[:, :, f0 + 1]
        POS = ints[:, :, f0 + 2]
        RC = ints[:, :, f0 + 3]
        CC = ints[:, :, f0 + 4]
        LR = ints[:, :, f0 + 5]
        R = slots.shape[0]
        T = times.shape[0]
        out_v = np.empty((R, T))
        out_p = np.empty((R, T), dtype=np.bool_)
        # times outer, rows inner: a plan lists a range call's rows together, mostly consecutive slots, whose
        # cells at one column lie side by side in the (columns, slots) arrays
        # (integer divisions are slow: the window bounds are computed again only where the window changes)
        for t in range(T):
            tm = times[t]
            rng = -1
            off = -1
            ref = lo = hi = hi_c = 0
            # the window's float quantities for the last (first, last, count) seen in this window, and its factors
            mf = ml = mc = -1
            d_start0 = d_end = sampled = avg = thr = half = f0 = f_rs = f_r = 0.0
            f0_ok = f_r_ok = False
            for r in range(R):
                s = slots[r]
                code = codes[r]
                ext = code <= 2
                counter = code <= 1
                if range_ms[r] != rng or offset_ms[r] != off:
                    rng = range_ms[r]
                    off = offset_ms[r]
                    ref = tm - off
                    lo = -((rng + t0_ms - ref) // st)
                    if lo < 0:
                        lo = 0
                    hi = (ref - t0_ms) // st
                    if hi > N - 1:
                        hi = N - 1
                    hi_c = hi if hi > 0 else 0
                    mf = ml = mc = -1
                before = CS[lo if lo < N else N, s]
                cnt = CS[hi_c + 1, s] - before if hi >= lo else 0
                has = cnt > 0
                last = 0
                first = 0
                if has:
                    last = PV[hi_c, s]
                    first = POS[before if before < cap - 1 else cap - 1, s]
                if ext:
                    ok = cnt >= 2
                    fv = V[first, s]
                    lv = V[last, s]
                    result = lv - fv
                    if ok and counter:
                        nres = RC[last, s] - RC[first, s]
                        if nres == 1:
                            result = result + V[PV[LR[last, s] - 1, s], s]
                        elif nres >= 2:
                            rv = V[last, s] - V[first, s]
                            prev = V[first, s]
                            for j in range(first + 1, last + 1):
                                x = V[j, s]
                                if x != x:
                                    continue
                                if x < prev:
                                    rv += prev
                                prev = x
                            result = rv
                    # divisions are slow: what depends only on the window, first, last and count is computed once
                    # for a run of rows that share them (the same operations, so the same values)
                    if first != mf or last != ml or cnt != mc:
                        mf = first
                        ml = last
                        mc = cnt
                        ft = t0_ms + first * st
                        lt = t0_ms + last * st
                        d_start0 = np.float64(ft - (tm - (rng + off))) / 1000
                        d_end = np.float64(ref - lt) / 1000
                        sampled = np.float64(lt - ft) / 1000
                        avg = sampled / np.float64(cnt - 1)
                        thr = avg * 1.1
                        half = avg / 2
                        f0_ok = False
                        f_r_ok = False
                    d_start = d_start0
                    zeroed = False
                    # (fv >= result > 0 makes fv / result >= 1 and d_zero >= sampled, both roundings being monotonic:
                    # with d_start <= sampled, d_zero < d_start cannot hold and its division is skipped - the usual
                    # case, a counter's value exceeding its increase over the window)
                    if has_counter and counter and result > 0 and fv >= 0 and not (fv >= result and d_start <= sampled):
                        d_zero = sampled * (fv / result)
                        if d_zero < d_start:
                            d_start = d_zero
                            zeroed = True
                    if zeroed or not f0_ok:
                        e = sampled + (d_start if d_start < thr else half)
                        e = e + (d_end if d_end < thr else half)
                        factor = e / sampled
                        if not zeroed:
                            f0 = factor
                            f0_ok = True
                    else:
                        factor = f0
                    if has_rate:
                        rr = rs[r]
                        if zeroed:
                            factor = factor / rr
                        elif f_r_ok and rr == f_rs:
                            factor = f_r
                        else:
                            factor = factor / rr
                            f_rs = rr
                            f_r = factor
                            f_r_ok = True
                    out_v[r, t] = result * factor
                    out_p[r, t] = ok
                else:
                    if code == 3:
                        out_v[r, t] = np.float64(CC[last, s] - CC[first, s])
                    elif code == 4:
                        out_v[r, t] = np.float64(RC[last, s] - RC[first, s])
                    elif code == 5:
                        out_v[r, t] = np.float64(cnt)
                    elif code == 6:
                        out_v[r, t] = V[last, s]
                    else:
                        out_v[r, t] = 1.0
                    out_p[r, t] = has
        return out_v, out_p

    @njit(cache=True, error_model="numpy")
    def extend(addrs, shapes, starts, rows, slots, c0, c1, check, cells, ints, f0):
        # columns [c0, c1) of store rows into the tape's slots, for every family of the sync in one call: family f's
        # ``_data`` is the C-contiguous float64 array at address addrs[f] of shape shapes[f] (the caller holds it),
        # its rows are rows[starts[f]:starts[f + 1]], going to the slots at the same positions of ``slots``. The
        # tape's cells are (columns, slots) records, as in ``window``. When ``check``, column c0 - 1 is compared with
        # the tape first: 0 if it changed (nothing written). -1 (nothing read or written) if a row or a column lies
        # outside its family's array. 1: done. See tape.Tape._extend for the definitions; slot by slot, the last
        # present column and value, the counts and the last reset are carried along the columns.
        V = cells[:, :, 0]
        CS = ints[:, :, f0]
        PV = ints[:, :, f0 + 1]
        POS = ints[:, :, f0 + 2]
        RC = ints[:, :, f0 + 3]
        CC = ints[:, :, f0 + 4]
        LR = ints[:, :, f0 + 5]
        nf = addrs.shape[0]
        lo_col = c0 - 1 if check else c0
        for f in range(nf):
            if lo_col < 0 or c1 > shapes[f, 1]:
                return -1
            for i in range(starts[f], starts[f + 1]):
                if rows[i] < 0 or rows[i] >= shapes[f, 0]:
                    return -1
        if check:
            for f in range(nf):
                data = _carray(_f64_at(addrs[f]), (shapes[f, 0], shapes[f, 1]))
                for i in range(starts[f], starts[f + 1]):
                    a = data[rows[i], c0 - 1]
                    b = V[c0 - 1, slots[i]]
                    if not (a == b or (a != a and b != b)):
                        return 0
        for f in range(nf):
            data = _carray(_f64_at(addrs[f]), (shapes[f, 0], shapes[f, 1]))
            for i in range(starts[f], starts[f + 1]):
                s = slots[i]
                r = rows[i]
                if c0 == 0:
                    CS[0, s] = 0
                    pp = -1
                    rc = 0
                    cc = 0
                    lr = 0
                else:
                    pp = PV[c0 - 1, s]
                    rc = RC[c0 - 1, s]
                    cc = CC[c0 - 1, s]
                    lr = LR[c0 - 1, s]
                prev = V[pp, s] if pp >= 0 else 0.0
                cs = CS[c0, s]
                for c in range(c0, c1):
                    x = data[r, c]
                    V[c, s] = x
                    if x == x:
                        POS[cs, s] = c
                        cs += 1
                        if pp >= 0:
                            if x < prev:
                                rc += 1
                                lr = c
                            if x != prev:
                                cc += 1
                        pp = c
                        prev = x
                    CS[c + 1, s] = cs
                    PV[c, s] = pp
                    RC[c, s] = rc
                    CC[c, s] = cc
                    LR[c, s] = lr
        return 1

    return window, extend


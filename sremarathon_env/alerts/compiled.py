"""Optional compiled (numba) versions of the tape's two hot loops (the window kernel and the tape extension) and of
the plan's node evaluation (``program``: a lowered plan, see ``program.py``).

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
    """The compiled kernels (a namespace with ``window``, ``extend``, ``program``, ``all_nan`` and ``prunable``), or
    None: numba absent, ``SREMARATHON_NUMBA=0``, or (``auto``) the numpy kernels have not yet spent ``AUTO_AFTER_S``
    here."""
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
    imports numba and loads (or compiles) the kernels. The bench calls it before it measures."""
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
    ns.window, ns.extend, ns.program, ns.all_nan, ns.prunable = _define(numba)
    ns.load_cpu_s = 0.0

    def warm_up():
        # one call of each on tiny arrays of the tape's types: numba loads (or compiles) them now
        i64 = np.zeros(1, np.int64)
        cells = np.zeros((3, 2, 4))
        ints = cells.view(np.int32)
        data = np.zeros((1, 2))
        ns.extend(np.array([data.ctypes.data], np.intp), np.array([[1, 2]], np.intp), np.zeros(1, np.intp),
                  np.zeros(1, np.intp), np.zeros(1, np.intp), 0, 1, False, cells, ints, 2)
        ns.window(cells, ints, 2, i64, i64, i64, np.zeros(1, np.int8), np.ones(1), i64, 0, 15000, 1, 2, False, False,
                  np.empty((1, 1)), np.empty((1, 1), np.bool_))
        # the plan program (program.py): one constant into a one-row arena
        ins = np.zeros((1, PROGRAM_FIELDS), np.int64)
        ns.program(ins, np.zeros(0, np.int64), np.ones(1), 0, 1, np.zeros((1, 2)), np.zeros((0, 2), np.bool_),
                   np.zeros(0, np.intp), np.zeros((0, 2), np.intp), np.zeros((0, 2), np.int64), np.zeros((0, 2), np.bool_),
                   np.zeros((0, 2)), np.zeros((0, 2), np.bool_))
        ns.all_nan(np.zeros((1, 2)), np.zeros(1, np.intp), 0, 2)
        ns.prunable(np.zeros((1, 2)), 1, np.zeros(0, np.bool_), 0, 2, np.zeros(1, np.intp))

    ns.warm_up = warm_up
    return ns


#: set by `_define` (numba imported then): the kernels read them as globals, not closure variables, which would
#: enter numba's cache key (pickled per process: a cache miss, a compile, in every process)
_f64_at = None
_carray = None
_binop = None
_maxmin = None

#: columns of a plan program's instruction rows (see ``program``)
PROGRAM_FIELDS = 16


def _define(numba):
    """The kernels, compiled lazily by numba at their first call (cached on disk)."""
    global _f64_at, _carray, _binop, _maxmin
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
               has_rate, out_v, out_p):
        # the tape's cell records, (columns + 1, slots, fields): the value (cells[..., 0]) and the integer summaries
        # (ints[..., f0 + k], k in tape.FIELDS' order); see tape.window_kernel for the formulas, which this follows
        # operation by operation. Every cell of out_v and out_p ((rows, times), the caller's) is written.
        V = cells[:, :, 0]
        CS = ints[:, :, f0]
        PV = ints[:, :, f0 + 1]
        POS = ints[:, :, f0 + 2]
        RC = ints[:, :, f0 + 3]
        CC = ints[:, :, f0 + 4]
        LR = ints[:, :, f0 + 5]
        R = slots.shape[0]
        T = times.shape[0]
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
                    elif code == 8 or code == 9:
                        # max / min_over_time: the first present sample, replaced by a strictly greater (smaller)
                        # one, over the present samples first .. last (0.0 where the window has none)
                        if has:
                            m = V[first, s]
                            for j in range(first + 1, last + 1):
                                x = V[j, s]
                                if (x > m) if code == 8 else (x < m):
                                    m = x
                            out_v[r, t] = m
                        else:
                            out_v[r, t] = 0.0
                    else:
                        out_v[r, t] = 1.0
                    out_p[r, t] = has
        return 0

    @njit(cache=True, error_model="numpy")
    def extend(addrs, shapes, fams, rows, slots, c0, c1, check, cells, ints, f0):
        # columns [c0, c1) of store rows into the tape's slots, every slot of the sync in one call: slot slots[i]
        # takes row rows[i] of family fams[i], whose ``_data`` is the C-contiguous float64 array at address
        # addrs[fams[i]] of shape shapes[fams[i]] (the caller holds it). The tape's cells are (columns, slots)
        # records, as in ``window``. When ``check``, column c0 - 1 is compared with the tape first: 0 if it changed
        # (nothing written). -1 (nothing read or written) if a row or a column lies outside its family's array.
        # 1: done. See tape.Tape._extend for the definitions; slot by slot, the last present column and value, the
        # counts and the last reset are carried along the columns.
        V = cells[:, :, 0]
        CS = ints[:, :, f0]
        PV = ints[:, :, f0 + 1]
        POS = ints[:, :, f0 + 2]
        RC = ints[:, :, f0 + 3]
        CC = ints[:, :, f0 + 4]
        LR = ints[:, :, f0 + 5]
        n = slots.shape[0]
        lo_col = c0 - 1 if check else c0
        for i in range(n):
            f = fams[i]
            if lo_col < 0 or c1 > shapes[f, 1] or rows[i] < 0 or rows[i] >= shapes[f, 0]:
                return -1
        if check:
            for i in range(n):
                f = fams[i]
                data = _carray(_f64_at(addrs[f]), (shapes[f, 0], shapes[f, 1]))
                a = data[rows[i], c0 - 1]
                b = V[c0 - 1, slots[i]]
                if not (a == b or (a != a and b != b)):
                    return 0
        for i in range(n):
            f = fams[i]
            data = _carray(_f64_at(addrs[f]), (shapes[f, 0], shapes[f, 1]))
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

    @njit(cache=True, error_model="numpy")
    def binop(code, a, b):
        # one arithmetic (0 + 1 - 2 * 3 / 4 %) or comparison (10 == 11 != 12 > 13 < 14 >= 15 <=, as 1.0 / 0.0) of
        # two float64: the ufuncs of vectorops.ARITH_FUNCS / CMP_FUNCS on one element (% is fmod, exact)
        if code == 0:
            return a + b
        if code == 1:
            return a - b
        if code == 2:
            return a * b
        if code == 3:
            return a / b
        if code == 4:
            return np.fmod(a, b)
        if code == 10:
            c = a == b
        elif code == 11:
            c = a != b
        elif code == 12:
            c = a > b
        elif code == 13:
            c = a < b
        elif code == 14:
            c = a >= b
        else:
            c = a <= b
        return 1.0 if c else 0.0

    _binop = binop

    @njit(cache=True, error_model="numpy")
    def maxmin(acc, w, first, is_max):
        # one step of a max (is_max) or min over a group's rows in order, fmax / fmin as numpy's reduceat gives
        # them: (the running value, whether the step met 0.0 against -0.0, where numpy's loops keep either)
        if first or acc != acc:
            return w, False
        if w == w:
            if (w > acc) if is_max else (w < acc):
                return w, False
            if w == acc and acc == 0.0 and np.signbit(w) != np.signbit(acc):
                return acc, True
        return acc, False

    _maxmin = maxmin

    @njit(cache=True, error_model="numpy")
    def program(ins, ipool, fpool, i0, i1, V, P, addrs, shapes, jcols, okm, KV, KP):
        # instructions i0 .. i1 - 1 of a plan program (program.py documents the fields and each operation's numpy
        # definition, which this follows operation by operation). V / P: the arena of values and presence, one row
        # per series, a column per evaluation time; KV / KP: the kernel group's output (window_kernel). Returns -1 when done, else the index of the instruction that
        # stopped it (nothing after it ran): a max / min met 0.0 against -0.0 (numpy's loops differ in which they
        # keep), or a selector row / column outside its family's store array.
        T = V.shape[1]
        for i in range(i0, i1):
            op = ins[i, 0]
            sub = ins[i, 1]
            n = ins[i, 2]
            vo = ins[i, 3]
            po = ins[i, 4]
            av = ins[i, 5]
            ap = ins[i, 6]
            an = ins[i, 7]
            bv = ins[i, 8]
            bp = ins[i, 9]
            x0 = ins[i, 11]
            x1 = ins[i, 12]
            x2 = ins[i, 13]
            fl = ins[i, 14]
            if op == 0:     # constant
                c = fpool[x0]
                for t in range(T):
                    V[vo, t] = c
            elif op == 1:   # selector: row r is (family ipool[x0 + 2r], store row ipool[x0 + 2r + 1]) at columns jcols[x1]
                # (sub 1: family x2, store row ipool[x0 + r])
                for t in range(T):
                    if jcols[x1, t] < 0:
                        return i
                for r in range(n):
                    if sub == 1:   # one family (x2), its rows
                        f = x2
                        row = ipool[x0 + r]
                    else:
                        f = ipool[x0 + 2 * r]
                        row = ipool[x0 + 2 * r + 1]
                    if f < 0 or f >= addrs.shape[0]:
                        return i
                    if row < 0 or row >= shapes[f, 0]:
                        return i
                    data = _carray(_f64_at(addrs[f]), (shapes[f, 0], shapes[f, 1]))
                    for t in range(T):
                        j = jcols[x1, t]
                        if j >= shapes[f, 1]:
                            return i
                        x = data[row, j]
                        V[vo + r, t] = x
                        P[po + r, t] = x == x and okm[x1, t]
            elif op == 2:   # aggregation: sub = op (0 sum 1 count 2 group 3 max 4 min) + 8 * mode
                agg = sub % 8
                mode = sub // 8
                if mode == 0:   # one row per group: group g is row ipool[x0 + g] (x0 < 0: row g); P aliases
                    for g in range(n):
                        r = ipool[x0 + g] if x0 >= 0 else g
                        for t in range(T):
                            pr = P[ap + r, t]
                            if agg == 0:
                                V[vo + g, t] = V[av + r, t] if pr else 0.0
                            elif agg == 1:
                                V[vo + g, t] = 1.0 if pr else 0.0
                            elif agg == 2:
                                V[vo + g, t] = 1.0
                            else:
                                V[vo + g, t] = V[av + r, t] if pr else np.nan
                            P[po + g, t] = pr
                elif mode == 1:   # one group of all rows
                    for t in range(T):
                        anyp = False
                        k = 0
                        acc = 0.0
                        for r in range(an):
                            pr = P[ap + r, t]
                            if pr:
                                anyp = True
                                k += 1
                            if agg == 0:
                                w = V[av + r, t] if pr else 0.0
                                acc = w if r == 0 else acc + w
                            elif agg >= 3:
                                acc, tie = _maxmin(acc, V[av + r, t] if pr else np.nan, r == 0, agg == 3)
                                if tie:
                                    return i
                        if agg == 1:
                            acc = np.float64(k)
                        elif agg == 2:
                            acc = 1.0
                        V[vo, t] = acc
                        P[po, t] = anyp
                elif agg <= 2:   # groups: row r adds to group ipool[x0 + r], rows in input order, from -0.0
                    for g in range(n):
                        for t in range(T):
                            V[vo + g, t] = -0.0 if agg == 0 else (0.0 if agg == 1 else 1.0)
                            P[po + g, t] = False
                    for r in range(an):
                        g = ipool[x0 + r]
                        for t in range(T):
                            pr = P[ap + r, t]
                            if pr:
                                P[po + g, t] = True
                            if agg == 0:
                                V[vo + g, t] = V[vo + g, t] + (V[av + r, t] if pr else 0.0)
                            elif agg == 1 and pr:
                                V[vo + g, t] = V[vo + g, t] + 1.0
                else:   # max / min of groups: group g's rows are ipool[x1 + starts[g] ...] (x1 < 0: in order),
                    # starts at ipool[x2 + g]
                    for g in range(n):
                        s0 = ipool[x2 + g]
                        s1 = ipool[x2 + g + 1] if g + 1 < n else an
                        for t in range(T):
                            anyp = False
                            acc = 0.0
                            for k in range(s0, s1):
                                r = ipool[x1 + k] if x1 >= 0 else k
                                pr = P[ap + r, t]
                                if pr:
                                    anyp = True
                                acc, tie = _maxmin(acc, V[av + r, t] if pr else np.nan, k == s0, agg == 3)
                                if tie:
                                    return i
                            V[vo + g, t] = acc
                            P[po + g, t] = anyp
            elif op == 3:   # vector and scalar: fl bit 0 scalar on the left, bit 1 bool, bit 2 constant fpool[x0]
                # (else the scalar row at bv); arithmetic: P aliases; a filter: V aliases; bool: P aliases
                left = (fl & 1) != 0
                rb = (fl & 2) != 0
                for t in range(T):
                    s = fpool[x0] if (fl & 4) != 0 else V[bv, t]
                    for r in range(n):
                        x = V[av + r, t]
                        res = _binop(sub, s, x) if left else _binop(sub, x, s)
                        if sub < 10 or rb:
                            V[vo + r, t] = res
                        else:
                            P[po + r, t] = P[ap + r, t] and res != 0.0
            elif op == 4:   # vector and vector: a the many side (rows ipool[x0 + k], x0 < 0: row k), b the one side
                # (rows ipool[x1 + k]); fl bit 0: b is the left operand (one-to-many), bit 1 bool
                swap = (fl & 1) != 0
                rb = (fl & 2) != 0
                for k in range(n):
                    mr = ipool[x0 + k] if x0 >= 0 else k
                    orow = ipool[x1 + k] if x1 >= 0 else k
                    for t in range(T):
                        mv = V[av + mr, t]
                        ov = V[bv + orow, t]
                        pr = P[ap + mr, t] and P[bp + orow, t]
                        vl = ov if swap else mv
                        vr = mv if swap else ov
                        res = _binop(sub, vl, vr)
                        if sub < 10 or rb:
                            V[vo + k, t] = res
                        else:
                            V[vo + k, t] = vl
                            pr = pr and res != 0.0
                        P[po + k, t] = pr
            elif op == 6:   # kernel range: rows av .. av + n - 1 of the kernel group's output
                if av < 0 or av + n > KV.shape[0]:
                    return i
                for r in range(n):
                    for t in range(T):
                        V[vo + r, t] = KV[av + r, t]
                        P[po + r, t] = KP[av + r, t]
            elif op == 8:   # histogram_quantile of a constant q (fpool[x1]) in [0, 1]: group g's buckets are child
                # rows ipool[ro ...] (m of them, ascending distinct upper bounds fpool[uo ...], the last +Inf, m >= 2)
                # with (ro, m, uo) at ipool[x0 + 3g ...]; stops where a group is partly present (the numpy path's
                # per-cell fallback) or a cumulative fmax meets 0.0 against -0.0
                q = fpool[x1]
                Cc = np.empty(64)
                for g in range(n):
                    ro = ipool[x0 + 3 * g]
                    m = ipool[x0 + 3 * g + 1]
                    uo = ipool[x0 + 3 * g + 2]
                    if m > Cc.shape[0]:
                        Cc = np.empty(m)
                    for t in range(T):
                        anyp = False
                        allp = True
                        for k in range(m):
                            if P[ap + ipool[ro + k], t]:
                                anyp = True
                            else:
                                allp = False
                        P[po + g, t] = anyp
                        if not (allp and anyp):
                            if anyp:
                                return i
                            V[vo + g, t] = np.nan
                            continue
                        # the cumulative counts: fmax.accumulate over the buckets, NaN counts kept
                        acc = 0.0
                        for k in range(m):
                            c = V[av + ipool[ro + k], t]
                            if k == 0:
                                acc = c
                            elif acc != acc:
                                acc = c
                            elif c == c:
                                if c > acc:
                                    acc = c
                                elif c == acc and acc == 0.0 and np.signbit(c) != np.signbit(acc):
                                    return i
                            Cc[k] = c if c != c else acc
                        obs = Cc[m - 1]
                        rank = q * obs
                        b = m - 1
                        for k in range(m - 1):
                            if Cc[k] >= rank:
                                b = k
                                break
                        prevc = Cc[b - 1] if b > 0 else 0.0
                        cnt = Cc[b] - prevc
                        rk = rank - prevc
                        start = fpool[uo + b - 1] if b > 0 else 0.0
                        val = start + (fpool[uo + b] - start) * (rk / cnt)
                        if b == 0 and fpool[uo] <= 0:
                            val = fpool[uo]
                        if b == m - 1:
                            val = fpool[uo + m - 2]
                        if obs == 0:
                            val = np.nan
                        V[vo + g, t] = val
            elif op == 5:   # and / unless (sub 0 / 1): left row r against the right rows of signature ipool[x2 + r]
                # (x2 + r == x2 + G: none): ipool[x0 + starts[g] ...] (x0 < 0: in order), starts at ipool[x1 + g];
                # fl: G (-1: no right rows). V aliases
                G = fl
                if G < 0:
                    for r in range(n):
                        for t in range(T):
                            P[po + r, t] = False if sub == 0 else P[ap + r, t]
                else:
                    union = np.zeros((G + 1, T), dtype=np.bool_)
                    nr = ins[i, 10]
                    for g in range(G):
                        s1 = ipool[x1 + g + 1] if g + 1 < G else nr
                        for k in range(ipool[x1 + g], s1):
                            r = ipool[x0 + k] if x0 >= 0 else k
                            for t in range(T):
                                if P[bp + r, t]:
                                    union[g, t] = True
                    for r in range(n):
                        g = ipool[x2 + r]
                        for t in range(T):
                            m = union[g, t]
                            lp = P[ap + r, t]
                            P[po + r, t] = (lp and m) if sub == 0 else (lp and not m)
        return -1

    @njit(cache=True, error_model="numpy")
    def all_nan(data, rows, c0, c1):
        # whether every cell of data[rows, c0:c1] is NaN (1) or one is not (0): plan.PackPlan._check_excluded's
        # ``np.isnan(data[rows, c0:c1]).all()`` without the gather, stopping at the first sample. Columns past data's
        # are none, as the slice clips them; -1 (nothing decided: the numpy gather wraps or raises) where a row lies
        # outside data or c0 is negative.
        R = data.shape[0]
        if c1 > data.shape[1]:
            c1 = data.shape[1]
        if c0 < 0:
            return -1
        n = rows.shape[0]
        for i in range(n):
            if rows[i] < 0 or rows[i] >= R:
                return -1
        for i in range(n):
            r = rows[i]
            for c in range(c0, c1):
                x = data[r, c]
                if x == x:
                    return 0
        return 1

    @njit(cache=True, error_model="numpy")
    def prunable(data, rows, mask, c0, n, out):
        # plan._prunable's counts and rows in one pass over data[:rows] (no gathers): (the rows with no sample (NaN)
        # in column n - 1, those of them not set in ``mask`` (the rows left out already; rows past its end are not),
        # k): out[:k] are the latter rows, ascending, with no sample in any column c0 .. n - 1 either. The caller
        # keeps 0 <= c0 < n <= data.shape[1] and rows <= data.shape[0].
        M = mask.shape[0]
        nan_all = 0
        live = 0
        k = 0
        for r in range(rows):
            x = data[r, n - 1]
            if x == x:
                continue
            nan_all += 1
            if r < M and mask[r]:
                continue
            live += 1
            empty = True
            for c in range(c0, n - 1):
                y = data[r, c]
                if y == y:
                    empty = False
                    break
            if empty:
                out[k] = r
                k += 1
        return nan_all, live, k

    return window, extend, program, all_nan, prunable

